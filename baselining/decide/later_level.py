"""A verdict checked against the level the baseline ended at, when its stationarity test
could not rule a move out.

The stationarity test (:mod:`obsctl.baselining.statistics.stationarity`) flags a baseline
that moved inside its window, and a flagged baseline caps the verdict
(:func:`obsctl.baselining.decide.caps.stationarity_cap`). It cannot flag every moved one:
half of a 2 h window of a signal with a 10-minute memory holds a handful of independent
samples, and the moved baselines it misses are the ones whose halves happen to look
alike, which are exactly the ones a window at the later level reads as a gain. So when the
test is *suggestive* (its smaller p-value below :data:`SUGGESTIVE`, not below the level),
the window is judged a second time, against an estimate of the level the baseline ended
at, with the same memory model, look and placebo widening; the verdict stands only when
both comparisons give it. Otherwise it is INCONCLUSIVE, with the reason
:func:`later_level_cap` words. Which estimate (:func:`reference`):

- the step test's p-value the smaller: the baseline's samples after the test's most
  likely split (``Stationarity.step_at``, :func:`later_part`): after a step,
  the later level itself;
- the trend test's p-value the smaller or equal: the value the baseline's least-squares line
  reaches at its last sample (:func:`line_end`), with that value's own variance under the
  memory model. After a ramp the part after a split is itself a ramp, its mean about a
  quarter of the ramp below the level it ended at, so a window at that level still read
  a gain against it; the line's end is that level, unbiased under a ramp, at the price of
  a larger variance (about four times the whole baseline mean's). After a step the line's
  end lies beyond the later level (by a quarter of a step at the middle), on the side
  that only withholds more.

A directional verdict is judged again only when the baseline moved the way the window did
(:func:`applies`: the split's ``step_ratio``, or the line's ``trend_ratio``, of the
change's sign): one that moved the other way would only read the change larger.

Why this is sound: it is an intersection-union test (Berger, Technometrics 24(4), 1982;
Berger & Hsu, Statistical Science 11(4), 1996): a decided verdict needs both tests to
decide it, so its error under either null is at most the larger of the two tests' own
errors, with no adjustment. Against a steady baseline the first test holds its level
as before (the second can only withhold verdicts: the price is power, measured); against
a baseline that moved, the second compares with the level the baseline ended at, which
is what the window continues. The estimate is chosen on the baseline alone, before the
window is seen, so the second test's interval is the usual one for its side (a contiguous
stretch, or a linear form of the samples; the memory model is the signal's, fitted on
history).

Assumptions: one move (a step, or a ramp to the baseline's end); the memory model
describes the baseline's fluctuations around its levels. What it does not do: it does not
find a move the test is not suggestive about (p above :data:`SUGGESTIVE`): a moved
baseline whose samples look steady is, from the baseline alone, a steady one, and a
window above it reads a gain (after a ramp this is most of what is left, measured); a
baseline with a cycle is the cycle detector's concern. Applied to the before-after
comparison of the primary signal only (guards keep the flagged-baseline cap alone).

Calibration: bench/bench_stationarity.py (``--suggestive`` moves the threshold,
``--no-line-end`` compares with the later part alone), docs/verification.md ("Baselines
that moved inside their window").
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from obsctl.baselining.statistics.lrv import Side, side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, grid_index
from obsctl.baselining.text.present_stationarity import remedy
from obsctl.formatting import format_percent
from obsctl.records import Baseline, Stationarity
from obsctl.timeutil import rfc3339

#: A stationarity test whose smaller p-value is below this (and not below its level) is
#: suggestive: the window is judged against the level the baseline ended at too. Calibrated in
#: bench/bench_stationarity.py: false IMPROVED after a step or a ramp inside the baseline
#: against the power lost on steady baselines.
SUGGESTIVE = 0.5

DECIDED = ("IMPROVED", "REGRESSED", "NO_CHANGE")


def suggestive(st: Stationarity | None, threshold: float = SUGGESTIVE) -> bool:
    """True when the stored test did not flag the baseline but did not rule a move out:
    ``min(step p, trend p) < threshold``. False for an untested or a flagged baseline
    (the latter is capped whole, :func:`obsctl.baselining.decide.caps.stationarity_cap`)."""
    return st is not None and not st.moved and min(st.step_p_value, st.trend_p_value) < threshold


def reference(st: Stationarity, line: bool = True) -> str:
    """What a suggestive baseline's window is judged against again: ``"line"`` (the
    least-squares line's end, :func:`line_end`) when the trend test's p-value is not the
    larger, else ``"part"`` (the samples after the split, :func:`later_part`); always
    ``"part"`` with ``line`` False (the check as it was before the line's end)."""
    return "line" if line and st.trend_p_value <= st.step_p_value else "part"


def applies(verdict: str, change: float | None, st: Stationarity | None, threshold: float = SUGGESTIVE, line: bool = True) -> bool:
    """True when the second comparison is needed: the test was :func:`suggestive`, the
    verdict decided, and (for IMPROVED / REGRESSED) the baseline moved the way the window
    did: ``change`` and the :func:`reference`'s move (``step_ratio`` for the later part,
    ``trend_ratio`` for the line) of one sign, or either unknown. A baseline that moved
    the other way ended further from the window than its mean, so against that level the
    change would only read larger: the whole baseline's verdict is already the cautious
    one and is not judged again."""
    if verdict not in DECIDED or not suggestive(st, threshold):
        return False
    moved = st.trend_ratio if reference(st, line) == "line" else st.step_ratio
    if verdict == "NO_CHANGE" or change is None or moved is None:
        return True
    return change * moved > 0


def later_part(times: np.ndarray, values: np.ndarray, st: Stationarity) -> tuple[np.ndarray, np.ndarray]:
    """The baseline's samples at and after the split (``st.step_at``): ``(times s, values)``."""
    keep = np.asarray(times, dtype=float) >= st.step_at.timestamp() - 1e-6
    return np.asarray(times, dtype=float)[keep], np.asarray(values, dtype=float)[keep]


def later_level_cap(verdict: str, later_verdict: str, later: tuple[float | None, float | None, float | None], st: Stationarity,
                    samples: int, remedy_text: str = "", line: bool = False) -> tuple[str | None, str]:
    """``("INCONCLUSIVE", reason)`` when the whole-baseline verdict was decided and the
    second one differs; ``(None, "")`` otherwise (nothing decided, or both agree).

    Args:
        verdict: the verdict against the whole baseline (before any cap).
        later_verdict, later: the verdict against the level the baseline ended at and
            ``(change, low, high)``, its estimate and interval (ratios; None where there is none).
        st: the baseline's stored test; samples: how many samples the later part (or the
            line) holds; remedy_text: what to do (:func:`later_remedy`).
        line: the level was the least-squares line's end (:func:`line_end`), not the
            later part.
    """
    later_change, later_low, later_high = later
    if verdict not in DECIDED or later_verdict == verdict:
        return None, ""
    said = f"{later_verdict}"
    if later_change is not None:
        said += f", {format_percent(later_change)}"
        if later_low is not None and later_high is not None:
            said += f" ({format_percent(later_low)} .. {format_percent(later_high)})"
    against = (f"against the level its straight-line trend reached at its end ({format_percent(st.trend_ratio)} over the window, "
               f"fitted on {samples} samples)" if line else
               f"against its part from {rfc3339(st.step_at)} on ({samples} samples, {format_percent(st.step_ratio)} from the part before)")
    return "INCONCLUSIVE", (
        f"the baseline may have moved inside its window, and {against} the window reads {said}, not {verdict}: "
        f"the change is not shown against the level the baseline ended at" + (f"; to judge against that level, {remedy_text}" if remedy_text else ""))


def later_detail(st: Stationarity, line: bool = False) -> str:
    """The test behind a later-level cap, in full (the cap's reason is plain words): its
    p-values, its level, the threshold that made it suggestive and what the window was
    judged against (``line``: the line's end, else the later part; :func:`reference`)."""
    against = ("the value the baseline's least-squares line reaches at its end (the trend test's p-value not the larger; the value's "
               "variance under the memory model)" if line else
               f"the part after the most likely split ({rfc3339(st.step_at)})")
    return (f"its stationarity test did not flag the baseline at level {st.level:g}, but step test p = {st.step_p_value:.2g}, "
            f"trend test p = {st.trend_p_value:.2g}, the smaller below {SUGGESTIVE:g}: the window was judged again against {against}")


def later_remedy(baseline: Baseline, line: bool = False) -> str:
    """The flagged move's remedy for a suggestive baseline, then a rebase
    (:func:`obsctl.baselining.text.present_stationarity.remedy`): after a split, a baseline
    of the period after it (against it both comparisons are one); after a trend (``line``:
    the window was judged against the line's end), a shorter steady window or a control
    design."""
    st = baseline.stationarity
    if st is None:
        return ""
    kind = "trend" if line else "step"
    return remedy(baseline.model_copy(update={"stationarity": st.model_copy(update={"kind": kind})}))


def line_end(times: np.ndarray, values: np.ndarray, step_seconds: float, memory: MemoryModel) -> Side:
    """The level a baseline's least-squares line reaches at its last sample, as a comparison
    side: its mean is the fitted value ``a + b t_n``, its variance that value's own under the
    memory model.

    The fitted end is a linear form of the samples, ``w' x`` with
    ``w_i = 1/n + (t_n - tbar)(t_i - tbar) / S_tt``; under stationary errors with the
    model's autocorrelation ``R`` its variance is ``sigma^2 w' R w`` exactly, for any
    pattern of holes (the variance of a linear form, as for a mean, :mod:`.lrv`; for a
    line this is the sandwich ``c' (X'X)^-1 X' Sigma X (X'X)^-1 c`` of least squares
    under autocorrelated errors; Fuller, *Introduction to Statistical Time Series*, 2nd
    ed., 1996, ch. 9). Least squares rather than generalised least squares: for a
    polynomial trend under stationary errors it is asymptotically as efficient
    (Grenander, Annals of Mathematical Statistics 25(2), 1954), and it needs no inversion
    of the model's covariance. On a full grid of ``n`` samples with white errors the
    variance is ``4 sigma^2 / n``, four times the mean's; with memory about as much more
    as the mean's.

    The scale ``sigma`` is :func:`.lrv.side_estimate`'s on the samples moved along the
    line to its end (``x_i - b (t_i - t_n)``, whose mean is the fitted end): the history's
    when consistent, else their own; ``n_eff`` stays the baseline's (the independent
    samples the line was fitted on, which the too-short rule asks about), ``var_mean`` is
    the end's own.

    Returns:
        A :class:`.lrv.Side` (signal unit).

    Raises:
        ValueError: fewer than 3 samples (a line and a scale need them).
    """
    t = np.asarray(times, dtype=float)
    x = np.asarray(values, dtype=float)
    if x.size < 3:
        raise ValueError("a line's end needs at least 3 samples")
    tc = t - t.mean()
    stt = float(tc @ tc)
    slope = float(tc @ (x - x.mean())) / stt
    moved = x - slope * (t - t[-1])
    side = side_estimate(t, moved, step_seconds, memory)
    w = 1.0 / x.size + (t[-1] - t.mean()) * tc / stt
    idx = grid_index(t, step_seconds)
    grid = np.zeros(int(idx[-1]) + 1)
    grid[idx] = w
    from scipy.signal import correlate  # here, not at import: scipy.signal loads scipy.special (verify's import path stays light)

    pairs = correlate(grid, grid, mode="full", method="fft")[grid.size - 1:]  # sum_i w_i w_{i+k}, k = 0..G-1
    rho = memory.acf_at(grid.size, step_seconds)
    form = float(pairs[0] + 2.0 * (pairs[1:] @ rho[1:]))
    return replace(side, var_mean=side.sd ** 2 * form if math.isfinite(side.var_mean) else math.nan)
