"""Self-calibration from placebos: the same comparison, many times, where nothing changed.

The history a baseline's memory is fitted on is a supply of A/A comparisons: at every
placebo start ``s`` in it, the mean of ``(s, s + W]`` against the mean of ``(s - B, s]``
(the baseline's length ``B``, a window's length ``W``, no gap: the comparison verify
makes) is a change that did not happen. If the memory model is right, those placebo
changes spread as the model says, ``Var(D) = sigma^2 / n_eff(W) + sigma^2 / n_eff(B)``
(:func:`.lrv.full_grid_n_eff`); where the model misses slow memory (a second, slower time
scale; long memory) they spread more, and the model's interval is too narrow.

Method: ``K = floor(span / (B + W))`` disjoint placebo comparisons tile the history
(no two share data); their centred mean square over the model's variance is the
**variance ratio** ``r`` with ``K - 1`` degrees of freedom (about ``chi^2_{K-1} / (K - 1)``
under the model, for Gaussian comparisons that are nearly independent). The model is
**contradicted** when ``(K - 1) r`` exceeds the 90 % point of ``chi^2_{K-1}``; then verify
widens both sides' variances by ``r`` and gives the interval at most ``K - 1`` degrees of
freedom (:func:`.comparison.judge`'s ``widen``), which accounts for the uncertainty of
``r``. Otherwise the model stands: a ratio within its own noise never narrows nor widens.
``held`` counts the placebos inside the model's fixed-level 95 % interval, for the
output ("on 36 placebo starts the model's interval held 35 times").

Needs :data:`MIN_PLACEBOS` disjoint comparisons, i.e. ``5 (B + W)`` of history: 10 h for
1 h against 1 h, 2.5 days for 6 h against 6 h (3 days of history give 6 placebos for
that, enough to widen, never a refusal for having too few). Source: the placebo (A/A)
tests of online experimentation (Kohavi, Tang & Xu, *Trustworthy Online Controlled
Experiments*, 2020, ch. 19) applied to time windows; the chi-square comparison of a
sample variance with a model's is the textbook one (e.g. Casella & Berger, 2002, 8.3).
Assumption: the history holds no change of its own (a step in it reads as spread and
widens: conservative).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from obsctl.baselining.statistics.distributions import chdtrc
from obsctl.baselining.statistics.lrv import full_grid_n_eff
from obsctl.baselining.statistics.memory import MemoryModel

#: Fewest disjoint placebo comparisons the check needs.
MIN_PLACEBOS = 5
#: The upper chi-square point above which the placebos contradict the model.
CONTRADICTION_LEVEL = 0.90
#: The z of the fixed-level interval the ``held`` count is taken at.
HELD_Z = 1.959963984540054


@dataclass(frozen=True)
class Placebo:
    """What the placebo comparisons of one window length showed.

    Attributes:
        window_seconds: the window length ``W`` (s); baseline_seconds: ``B`` (s).
        starts: disjoint placebo comparisons; held: those inside the model's 95 % interval.
        variance_ratio: their centred mean square over the model's variance.
        dof: ``starts - 1``.
        contradicted: the model's variance is too small at the 90 % chi-square point.
    """

    window_seconds: float
    baseline_seconds: float
    starts: int
    held: int
    variance_ratio: float
    dof: float
    contradicted: bool

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def widen(self) -> tuple[float, float] | None:
        """``(factor, dof)`` for :func:`.comparison.judge` when contradicted, else None."""
        return (self.variance_ratio, self.dof) if self.contradicted else None


def placebo_check(times: np.ndarray, values: np.ndarray, step_seconds: float, memory: MemoryModel, baseline_seconds: float,
                  window_seconds: float) -> Placebo | None:
    """The placebo comparisons of a ``baseline_seconds`` baseline against a ``window_seconds``
    window in the history ``(times, values)`` (s, signal unit; shapes ``(n,)``, on a
    ``step_seconds`` grid, holes allowed).

    Returns:
        The :class:`Placebo`; None with fewer than :data:`MIN_PLACEBOS` disjoint comparisons
        or without a finite model variance.
    """
    t = np.asarray(times, dtype=float)
    x = np.asarray(values, dtype=float)
    if t.size < 4 or not (memory.variance > 0 and math.isfinite(memory.variance)):
        return None
    b_steps = max(1, int(round(baseline_seconds / step_seconds)))
    w_steps = max(1, int(round(window_seconds / step_seconds)))
    grid = np.round((t - t[0]) / step_seconds).astype(np.int64)
    full = np.full(int(grid[-1]) + 1, np.nan)
    full[grid] = x
    k = full.size // (b_steps + w_steps)
    if k < MIN_PLACEBOS:
        return None
    blocks = full[: k * (b_steps + w_steps)].reshape(k, b_steps + w_steps)
    base, win = blocks[:, :b_steps], blocks[:, b_steps:]
    # A comparison missing more than half of either side is skipped.
    ok = (np.isfinite(base).sum(axis=1) >= 0.5 * b_steps) & (np.isfinite(win).sum(axis=1) >= 0.5 * w_steps)
    if ok.sum() < MIN_PLACEBOS:
        return None
    d = np.nanmean(win[ok], axis=1) - np.nanmean(base[ok], axis=1)
    model = memory.variance * (1 / full_grid_n_eff(memory, w_steps, step_seconds) + 1 / full_grid_n_eff(memory, b_steps, step_seconds))
    n = int(ok.sum())
    centred = d - d.mean()
    ratio = float((centred**2).sum() / (n - 1) / model)
    dof = float(n - 1)
    held = int((np.abs(centred) <= HELD_Z * math.sqrt(model)).sum())
    contradicted = bool(float(chdtrc(dof, dof * ratio)) < 1 - CONTRADICTION_LEVEL)
    return Placebo(float(w_steps * step_seconds), float(b_steps * step_seconds), n, held, ratio, dof, contradicted)


def window_lengths(default_window_seconds: float) -> tuple[float, ...]:
    """The window lengths a snapshot checks: the spec's default window times 1/2, 1, 2, 4, 8."""
    return tuple(default_window_seconds * f for f in (0.5, 1.0, 2.0, 4.0, 8.0))


def for_window(checks: list[Placebo], window_seconds: float) -> Placebo | None:
    """The check for the shortest length at least ``window_seconds``; None if none is that
    long (a shorter window's placebos miss the slow memory a longer window meets)."""
    longer = [c for c in checks if c.window_seconds >= window_seconds * 0.999]
    return min(longer, key=lambda c: c.window_seconds) if longer else None
