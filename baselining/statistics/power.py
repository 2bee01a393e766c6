"""Planning: how long a window must be, and what it can detect.

From the baseline's memory model and scale (:mod:`.memory`, :mod:`.lrv`) the variance
of a full window of ``L`` steps is ``sigma^2 Q(L) / L^2`` with
``Q(L) = L + 2 sum_{k<L} (L - k) rho_k``; the change estimate's variance is
``(1 + effect)^2 (sigma^2 Q(L)/L^2 + v_x) / xbar^2`` (noise assumed to scale with the
level, the conservative side for gains). Then:

- **window for an effect**: the shortest ``L`` whose power to call IMPROVED (or
  REGRESSED for a loss) at a look at ``L`` reaches ``power`` under the boundary ``c`` of
  :mod:`.anytime` (one constant for every look, fixed by the baseline's ``t_min``):
  ``Phi(|e| / se(L) - c)``. Earlier looks can only add power, so the figure is a lower
  bound; windows with fewer than ``N_EFF_MIN`` effective samples cannot decide. Normal approximation (the history
  scale has hundreds of dof).
- **smallest detectable effect** with the default window (same boundary, same power).
- **NO_CHANGE window**: a null is NO_CHANGE when the interval lies within ``+-d``, which
  has probability ``2 Phi(d/se - c) - 1``; so ``d / se >= c + z_{(1+power)/2}``, with
  the same ``c`` (Chow,
  Shao & Wang, *Sample Size Calculations in Clinical Research*, 2008, sec. 3.2.3, for
  the two one-sided tests). Given with the current baseline, and for a baseline and
  window of equal length (a 1 h baseline is often too short on its own) at the boundary
  that a baseline of that length fixes (a longer baseline, a smaller ``t_min``, a higher ``c``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from obsctl.baselining.statistics import anytime
from obsctl.baselining.statistics.distributions import ndtr, ndtri
from obsctl.baselining.statistics.lrv import Side
from obsctl.baselining.statistics.memory import MemoryModel

#: Fewest effective samples a window needs before it can decide.
N_EFF_MIN = 5.0

#: Longest window the planner proposes (s): 173 days, the range-query limit at 15 s.
MAX_PLAN_SECONDS = 1_000_000 * 15.0


@dataclass(frozen=True)
class Plan:
    """What :func:`plan` found (lengths in seconds; None: not reachable within the limit).

    Attributes:
        effect: the relative effect planned for (0.05 = +5 %).
        window_seconds: window length for ``power`` at ``effect`` (a look at that length).
        mde: smallest effect detectable with ``default_window_seconds``.
        boundary_z: the boundary every look is judged at (:mod:`.anytime`).
        no_change_window_seconds: window length that reaches NO_CHANGE at margin ``d``
            with ``power`` against the current baseline; None when the baseline alone
            is too short (then see ``no_change_equal_seconds``).
        no_change_equal_seconds: baseline and window of this length each.
        min_window_seconds: the shortest window that can decide at all (``N_EFF_MIN``).
        tau_seconds: the memory used; memory_source: ``history`` or ``windows``.
    """

    effect: float
    power: float
    confidence: float
    boundary_z: float
    margin: float
    window_seconds: float | None
    default_window_seconds: float
    mde: float | None
    no_change_window_seconds: float | None
    no_change_equal_seconds: float | None
    min_window_seconds: float | None
    tau_seconds: float
    memory_source: str

    def as_dict(self) -> dict:
        """JSON-ready fields."""
        return asdict(self)


class _Curve:
    """``Q(L)`` and the window's relative variance for every length up to a limit."""

    def __init__(self, memory: MemoryModel, step: float, max_steps: int, rel_var: float):
        rho = memory.acf_at(max_steps + 1, step)
        k = np.arange(rho.size, dtype=float)
        self.s1 = np.concatenate(([0.0], np.cumsum(rho[1:])))
        self.s2 = np.concatenate(([0.0], np.cumsum(k[1:] * rho[1:])))
        self.rel_var = rel_var  # sigma^2 / xbar^2
        self.max_steps = max_steps

    def q(self, steps: int) -> float:
        return steps + 2.0 * (steps * self.s1[steps - 1] - self.s2[steps - 1]) if steps > 1 else float(steps)

    def var(self, steps: int) -> float:
        """Relative variance of a full window's mean."""
        return self.rel_var * self.q(steps) / steps**2

    def n_eff(self, steps: int) -> float:
        return steps * steps / self.q(steps)

    def shortest(self, ok, guess: int | None = None) -> int | None:
        """Smallest steps in [2, max] with ok(steps) True (ok monotone), None if none.

        ``guess``: a length near the answer; the search brackets it first (fewer costly
        evaluations of ``ok``)."""
        lo, hi = 2, self.max_steps
        if guess is not None:
            g = min(max(2, int(guess)), self.max_steps)
            if ok(g):
                hi, lo = g, max(2, g // 2)
                while lo > 2 and ok(lo):
                    hi, lo = lo, max(2, lo // 2)
            else:
                lo = g + 1
                while lo <= self.max_steps and not ok(min(2 * lo, self.max_steps)):
                    lo = min(2 * lo, self.max_steps) + 1
                    if lo > self.max_steps:
                        return None
                hi = min(2 * lo, self.max_steps)
        if not ok(hi):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo


def shortest_window_seconds(memory: MemoryModel, step_seconds: float, max_seconds: float = MAX_PLAN_SECONDS) -> float | None:
    """The shortest full window with ``N_EFF_MIN`` effective samples under ``memory`` (s); None past ``max_seconds``."""
    steps = max(4, int(max_seconds // step_seconds))
    # n_eff(L) >= L / tau for positive correlation, so 2 * N_EFF_MIN * tau steps bound the search.
    steps = min(steps, max(64, int(2 * N_EFF_MIN * memory.tau_steps * memory.step_seconds / step_seconds) + 64))
    curve = _Curve(memory, step_seconds, steps, 1.0)
    found = curve.shortest(lambda s: curve.n_eff(s) >= N_EFF_MIN)
    return None if found is None else found * step_seconds


def power_of(curve: _Curve, steps: int, v_x: float, effect: float, crit: float) -> float:
    """Power to call the direction of ``effect`` at a look at ``steps`` with boundary ``crit`` (z)."""
    if curve.n_eff(steps) < N_EFF_MIN:
        return 0.0
    se = math.sqrt((1 + effect) ** 2 * (curve.var(steps) + v_x))
    return float(1 - ndtr(crit - abs(effect) / se))


def _equal_lengths(curve: _Curve, margin: float, z: float, c: float, confidence: float) -> int | None:
    """Steps of a baseline and a window of equal length that reach NO_CHANGE at ``margin``.

    A longer baseline lowers ``t_min`` and so raises the boundary (:mod:`.anytime`): the
    length is the fixed point of "the length for boundary ``c``" and "the boundary a
    baseline of that length fixes", reached from below in a few rounds (both grow together).
    """
    steps = None
    for _ in range(8):
        found = curve.shortest(lambda s, c=c: 2 * curve.var(s) <= (margin / (c + z)) ** 2)
        if found is None or found == steps:
            return found
        steps = found
        c = anytime.boundary(anytime.min_fraction(curve.var(steps), curve.rel_var / N_EFF_MIN), 1 - confidence)
    return steps


@dataclass(frozen=True)
class PlanRequest:
    """What :func:`plan` is asked to plan for.

    Attributes:
        effect: expected relative change (+0.05 = +5 %; its sign does not matter).
        confidence: two-sided level over all looks (spec ``verification.confidence``).
        margin: the minimum effect, ``verification.min_effect_ratio`` (NO_CHANGE within it).
        default_window_seconds: the spec's default window (s; for the smallest effect).
        power: target power (default 0.9, ``verification.power``).
        max_seconds: the longest window searched (s).
    """

    effect: float
    confidence: float
    margin: float
    default_window_seconds: float
    power: float = 0.9
    max_seconds: float = MAX_PLAN_SECONDS


def plan(memory: MemoryModel, baseline: Side, step_seconds: float, request: PlanRequest) -> Plan:
    """Window lengths for ``request.effect`` and for NO_CHANGE, and the smallest detectable effect.

    Args:
        memory: the baseline's memory model; baseline: its side estimate (mean, v_x).
        step_seconds: the verification step (s).
        request: the effect, level, margin, default window and power (:class:`PlanRequest`).

    Raises:
        ValueError: baseline mean 0 or effect 0.
    """
    effect, confidence, margin, power = request.effect, request.confidence, request.margin, request.power
    default_window_seconds, max_seconds = request.default_window_seconds, request.max_seconds
    if baseline.mean == 0:
        raise ValueError("the baseline mean is 0: a relative effect has no scale")
    if effect == 0:
        raise ValueError("the effect must not be 0")
    max_steps = max(4, int(max_seconds // step_seconds))
    rel_var = baseline.sd**2 / baseline.mean**2
    v_x = baseline.var_mean / baseline.mean**2
    curve = _Curve(memory, step_seconds, max_steps, rel_var)
    minimum = curve.shortest(lambda s: curve.n_eff(s) >= N_EFF_MIN)
    z = float(ndtri((1 + power) / 2))
    try:
        c = anytime.boundary(anytime.min_fraction(baseline.var_mean, baseline.sd**2 / N_EFF_MIN), 1 - confidence)
    except ValueError:  # a constant baseline: no sampling error on its side, one look's boundary
        c = float(ndtri((1 + confidence) / 2))
    # The normal formula for the window brackets the search.
    budget1 = (abs(effect) / ((c + float(ndtri(power))) * (1 + effect))) ** 2 - v_x
    guess = curve.shortest(lambda s: curve.var(s) <= budget1) if budget1 > 0 else None
    window = curve.shortest(lambda s: power_of(curve, s, v_x, effect, c) >= power, guess)
    budget = (margin / (c + z)) ** 2 if margin > 0 else 0.0
    no_change = curve.shortest(lambda s: curve.var(s) + v_x <= budget) if budget > v_x else None
    equal = _equal_lengths(curve, margin, z, c, confidence) if budget > 0 else None
    default_steps = min(max_steps, max(2, int(default_window_seconds // step_seconds)))
    mde = None
    if curve.n_eff(default_steps) >= N_EFF_MIN:
        zb = float(ndtri(power))
        mde = (c + zb) * math.sqrt(curve.var(default_steps) + v_x)
        mde = mde / max(1 - mde, 1e-9) if mde < 1 else None  # (1+e)^2 scaling of the variance, solved for e
    sec = lambda s: None if s is None else s * step_seconds
    return Plan(effect, power, confidence, c, margin, sec(window), default_window_seconds, mde, sec(no_change), sec(equal), sec(minimum),
                memory.tau_seconds, memory.source)
