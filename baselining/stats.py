"""Summaries, batch means and the exact (constant-series) rule; the former batch-means verdict.

Verdicts now come from :mod:`obsctl.baselining.statistics` (issue 7: memory from
history, long-run variance, repeated looks; docs/verification.md). This module keeps
what is not superseded: :func:`summarize` (the stored summary and the batch means the
report draws), :func:`non_finite_fields`, :func:`is_constant` and the exact rule for two
constant sides (:func:`relative_change` / :func:`decide`, used by
``statistics.verdict.judge``), and :func:`assess`, the batch-means rule, which is only
used for baselines stored without samples (older stores). The text below describes that
batch-means rule; with a fixed number of batches it is too narrow under memory longer
than a batch (calibration in docs/verification.md).

Scrape samples of a signal are autocorrelated (a rate over 1m evaluated every 15s
shares most of its input with its neighbours), so their plain standard error is far
too small. The interval therefore comes from the **method of non-overlapping batch
means**: the window's sample series is cut into ``k`` contiguous batches of equal size
and the batch means are treated as approximately independent, normal observations
(Law & Kelton, *Simulation Modeling and Analysis*, 5th ed., 2015, sec. 9.5.3;
Schmeiser, "Batch size effects in the analysis of simulation output", Operations
Research 30(3), 1982: 10-30 batches).

The relative change ``window_mean / baseline_mean - 1`` is a ratio of two means; its
confidence interval is **Fieller's** (Fieller, "Some problems in interval estimation",
JRSS B 16(2), 1954), with the two sets of batch means independent and Welch-
Satterthwaite degrees of freedom (Welch, Biometrika 34, 1947) for the linear form
``ybar - rho * xbar`` evaluated at the point estimate. Unlike the delta method it stays
valid when the baseline mean is imprecise, and it says so (an unbounded interval)
when the baseline mean cannot be told from zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal

import numpy as np
from obsctl.baselining.statistics import distributions as special

from obsctl.baselining.models import Statistics, Verdict

Direction = Literal["higher_is_better", "lower_is_better"]

#: Relative spread below which a set of batch means counts as constant (zero variance):
#: ``max - min <= CONSTANT_RTOL * max(|values|)``. Averaging identical floats can leave
#: differences of a few ulps (~1e-16 relative); any real measurement spread is far
#: above 1e-9. The same tolerance decides whether two constants are equal.
CONSTANT_RTOL = 1e-9


def is_constant(values: Iterable[float]) -> bool:
    """True when the values are all equal up to :data:`CONSTANT_RTOL` (relative to the largest |value|)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return False
    scale = float(np.max(np.abs(arr)))
    return float(np.ptp(arr)) <= CONSTANT_RTOL * scale


def finite(values: Iterable[float]) -> np.ndarray:
    """The finite values as a float array (NaN and +-Inf dropped: PromQL gives NaN for 0/0)."""
    arr = np.asarray(list(values), dtype=float)
    return arr[np.isfinite(arr)]


def batch_means(values: Iterable[float], batches: int) -> list[float]:
    """Means of ``batches`` contiguous, non-overlapping, equal-size batches of ``values``.

    With ``n`` values the batch size is ``b = n // batches``; the first ``n - batches*b``
    (oldest) values are dropped so every batch has the same size (Law & Kelton 2015,
    sec. 9.5.3 use equal batches; dropping the oldest is the usual warm-up deletion).

    Args:
        values: samples in time order (signal's unit).
        batches: ``k >= 1``.

    Returns:
        ``k`` batch means, oldest batch first; ``[]`` when fewer than ``k`` values.
    """
    arr = finite(values)
    size = len(arr) // batches
    if size == 0:
        return []
    kept = arr[len(arr) - size * batches :]
    return [float(m) for m in kept.reshape(batches, size).mean(axis=1)]


def summarize(values: Iterable[float], batches: int) -> Statistics:
    """Summary statistics of a sample series (finite values only).

    Every statistic is computed over the samples the batch means use: when there are at
    least ``batches`` samples, the oldest ``n mod batches`` are dropped first (the same
    warm-up deletion as :func:`batch_means`), so ``mean`` equals the mean of the batch
    means and the headline, the report and a promoted baseline show one number.
    Percentiles use linear interpolation between order statistics (numpy's default,
    Hyndman & Fan type 7); ``stddev`` is the sample standard deviation (ddof=1, 0 for a
    single value). Raises ValueError when there is no finite value.
    """
    arr = finite(values)
    if arr.size == 0:
        raise ValueError("no finite samples to summarize")
    if arr.size >= batches:
        arr = arr[arr.size % batches :]
    # Finite samples near the float limit (1e308) can still overflow a sum: the result is
    # then +-Inf/NaN, which non_finite_fields() reports; numpy's warning is not for users.
    with np.errstate(over="ignore", invalid="ignore"):
        return Statistics(
            sample_count=int(arr.size),
            mean=float(arr.mean()),
            median=float(np.median(arr)),
            p5=float(np.percentile(arr, 5)),
            p95=float(np.percentile(arr, 95)),
            stddev=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
            batch_means=batch_means(arr, batches),
        )


def non_finite_fields(summary: Statistics) -> list[str]:
    """Names of the summary's fields that are NaN or +-Inf (``[]`` when all are finite).

    A summary with such a field cannot be a baseline or a window: its mean, interval and
    gap would be Inf/NaN (values that overflow the float range when summed, e.g. 1e308).
    """
    bad = [name for name in ("mean", "median", "p5", "p95", "stddev") if not math.isfinite(getattr(summary, name))]
    if not all(math.isfinite(m) for m in summary.batch_means):
        bad.append("batch_means")
    return bad


@dataclass(frozen=True)
class ChangeEstimate:
    """Relative change of the window mean vs the baseline mean, with its interval.

    Attributes:
        change_ratio: ``window_mean / baseline_mean - 1`` (0.30 = +30 %); None if undefined.
        ci_low, ci_high: two-sided Fieller interval of ``change_ratio``; None if unbounded.
        confidence: the interval's confidence level (0-1).
        dof: Welch-Satterthwaite degrees of freedom used for the t quantile.
        reason: why the change or the interval is undefined, or why it is exact.
        exact: both sides' batch means are constant (zero variance): the change has no
            sampling error, ``ci_low == ci_high == change_ratio`` (or all None when the
            baseline is 0 and the window is not), and :func:`decide` judges the change
            itself instead of an interval.
    """

    baseline_mean: float
    window_mean: float
    change_ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    dof: float | None
    reason: str = ""
    exact: bool = False


def relative_change(baseline_batch_means: Iterable[float], window_batch_means: Iterable[float], confidence: float) -> ChangeEstimate:
    """Fieller interval for ``mean(window) / mean(baseline) - 1`` from two sets of batch means.

    With ``xbar, ybar`` the means of the baseline (``k_x``) and window (``k_y``) batch
    means, ``v_x = s_x^2/k_x``, ``v_y = s_y^2/k_y``, ``R = ybar/xbar``, ``t`` the
    ``(1+confidence)/2`` quantile of Student's t with Welch-Satterthwaite dof
    ``(v_y + R^2 v_x)^2 / (v_y^2/(k_y-1) + R^4 v_x^2/(k_x-1))`` and
    ``g = t^2 v_x / xbar^2``, the set ``{rho : (ybar - rho xbar)^2 <= t^2 (v_y + rho^2 v_x)}``
    is, for ``g < 1``, the interval (Fieller 1954)::

        [R -+ (t/|xbar|) * sqrt((1-g) v_y + R^2 v_x)] / (1 - g)

    and the change interval is that minus 1. For ``g >= 1`` the set is unbounded: the
    interval is reported as undefined.

    Zero variance (a side's batch means constant, :func:`is_constant`): that side's
    variance is taken as exactly 0. When **both** sides are constant the ratio is known
    exactly and the estimate is ``exact``: equal constants (``0`` and ``0`` included) give
    change 0 with interval ``[0, 0]``; different constants give ``ybar/xbar - 1`` with a
    zero-width interval, or an undefined ratio when ``xbar = 0``. (Without this rule
    Fieller's formula gives a zero-width interval around the float-rounded ratio, so
    rounding noise could be judged significant with ``min_effect_ratio = 0``, and a
    baseline constant at 0 would be INCONCLUSIVE even when the window is also 0.)

    Args:
        baseline_batch_means, window_batch_means: at least 2 values each.
        confidence: two-sided level, e.g. 0.95.

    Raises:
        ValueError: fewer than 2 batch means on a side.
    """
    x = np.asarray(list(baseline_batch_means), dtype=float)
    y = np.asarray(list(window_batch_means), dtype=float)
    if x.size < 2 or y.size < 2:
        raise ValueError("need at least 2 batch means on each side")
    xbar, ybar = float(x.mean()), float(y.mean())
    const_x, const_y = is_constant(x), is_constant(y)
    if const_x and const_y:
        return _exact_change(xbar, ybar, confidence)
    if xbar == 0:
        return ChangeEstimate(xbar, ybar, None, None, None, confidence, None, "baseline mean is 0: a relative change is undefined")
    vx = 0.0 if const_x else float(x.var(ddof=1)) / x.size
    vy = 0.0 if const_y else float(y.var(ddof=1)) / y.size
    ratio = ybar / xbar
    den = vy**2 / (y.size - 1) + ratio**4 * vx**2 / (x.size - 1)
    dof = (vy + ratio**2 * vx) ** 2 / den if den > 0 else float(x.size + y.size - 2)
    t = float(special.stdtrit(dof, (1 + confidence) / 2))
    g = t**2 * vx / xbar**2
    change = ratio - 1
    if g >= 1:
        return ChangeEstimate(
            xbar, ybar, change, None, None, confidence, dof,
            "the baseline's batch means vary too much to tell its mean from 0 (Fieller interval unbounded)",
        )
    half = t / abs(xbar) * math.sqrt((1 - g) * vy + ratio**2 * vx)
    low, high = (ratio - half) / (1 - g) - 1, (ratio + half) / (1 - g) - 1
    return ChangeEstimate(xbar, ybar, change, low, high, confidence, dof)


def _exact_change(xbar: float, ybar: float, confidence: float) -> ChangeEstimate:
    # Both sides constant: no sampling error, the change is the change.
    if abs(ybar - xbar) <= CONSTANT_RTOL * max(abs(xbar), abs(ybar)):
        return ChangeEstimate(xbar, ybar, 0.0, 0.0, 0.0, confidence, None, f"both sides constant at {xbar:.6g}: no change (exact)", exact=True)
    if xbar == 0:
        return ChangeEstimate(xbar, ybar, None, None, None, confidence, None,
                              f"both sides constant, baseline 0 and window {ybar:.6g}: the relative change is undefined but the difference is exact",
                              exact=True)
    change = ybar / xbar - 1
    return ChangeEstimate(xbar, ybar, change, change, change, confidence, None,
                          f"both sides constant ({xbar:.6g} -> {ybar:.6g}): the change is exact", exact=True)


def _decide_exact(estimate: ChangeEstimate, sign: float, d: float) -> tuple[Verdict, str]:
    if estimate.change_ratio == 0.0:
        return "NO_CHANGE", estimate.reason
    if estimate.change_ratio is None:  # baseline 0, window not: infinitely large, sign known
        gain_sign = sign * (estimate.window_mean - estimate.baseline_mean)
        return ("IMPROVED" if gain_sign > 0 else "REGRESSED"), estimate.reason
    gain = sign * estimate.change_ratio
    if abs(gain) >= d:
        return ("IMPROVED" if gain > 0 else "REGRESSED"), f"{estimate.reason}, at least {d:.1%}"
    return "NO_CHANGE", f"{estimate.reason} but smaller than the {d:.1%} minimum effect"


def decide(estimate: ChangeEstimate | None, direction: Direction, min_effect_ratio: float) -> tuple[Verdict, str]:
    """The verdict for a change estimate (``None``: not enough samples -> NO_DATA).

    Rules, in this order, with ``[L, U]`` the interval expressed as a *gain* (the change
    for ``higher_is_better``, its negation ``[-U, -L]`` for ``lower_is_better``) and
    ``d = min_effect_ratio``:

    1. NO_DATA: no estimate (a side has fewer samples than batches).
    1b. Exact estimate (both sides constant, see :func:`relative_change`): NO_CHANGE
       when equal; otherwise IMPROVED / REGRESSED by the sign of the gain when
       ``|gain| >= d`` (a baseline of 0 counts as an infinite change), else NO_CHANGE.
       There is no sampling error to test against.
    2. INCONCLUSIVE: the change or its interval is undefined (baseline mean 0 or not
       distinguishable from 0).
    3. NO_CHANGE: ``-d < L`` and ``U < d``: the whole interval lies inside the
       equivalence margin (two one-sided tests, Schuirmann 1987, J. Pharmacokinet.
       Biopharm. 15(6); a 1-a interval is a conservative TOST at level a/2). Never with
       ``d = 0``.
    4. IMPROVED: ``L > 0`` (better than baseline at the confidence level) and the point
       gain ``>= d`` (practically relevant).
    5. REGRESSED: ``U < 0`` and the point gain ``<= -d``.
    6. INCONCLUSIVE otherwise: the interval contains 0 but reaches past the margin (too
       little data to decide), or the effect is significant but smaller than ``d``
       while the interval still reaches past it.
    """
    if estimate is None:
        return "NO_DATA", "fewer samples than batches on at least one side"
    if estimate.exact:
        return _decide_exact(estimate, 1.0 if direction == "higher_is_better" else -1.0, min_effect_ratio)
    if estimate.change_ratio is None or estimate.ci_low is None or estimate.ci_high is None:
        return "INCONCLUSIVE", estimate.reason
    sign = 1.0 if direction == "higher_is_better" else -1.0
    gain = sign * estimate.change_ratio
    low, high = sorted((sign * estimate.ci_low, sign * estimate.ci_high))
    d = min_effect_ratio
    if -d < low and high < d:
        return "NO_CHANGE", f"the whole interval lies within +-{d:.1%} of the baseline"
    if low > 0 and gain >= d:
        return "IMPROVED", f"better than baseline at {estimate.confidence:.0%} confidence and by at least {d:.1%}"
    if high < 0 and gain <= -d:
        return "REGRESSED", f"worse than baseline at {estimate.confidence:.0%} confidence and by at least {d:.1%}"
    if low <= 0 <= high:
        return "INCONCLUSIVE", f"the interval contains 0 but reaches past +-{d:.1%}: more data needed"
    return "INCONCLUSIVE", f"a significant change smaller than the {d:.1%} minimum effect, with an interval reaching past it"


def assess(
    baseline: Statistics,
    window: Statistics | None,
    batches: int,
    confidence: float,
    direction: Direction,
    min_effect_ratio: float,
) -> tuple[Verdict, str, ChangeEstimate | None]:
    """Verdict of a window against a baseline.

    NO_DATA when the window has no statistics or either side has fewer samples than
    ``batches`` (so fewer than 2 batch means); otherwise :func:`relative_change` on the
    two sets of batch means and :func:`decide`.

    Returns:
        ``(verdict, reason, estimate or None)``.
    """
    if window is None or window.sample_count < batches or len(window.batch_means) < 2:
        verdict, reason = decide(None, direction, min_effect_ratio)
        have = 0 if window is None else window.sample_count
        return verdict, f"window has {have} sample(s), needs at least {batches} (one per batch)", None
    if baseline.sample_count < batches or len(baseline.batch_means) < 2:
        return "NO_DATA", f"baseline has {baseline.sample_count} sample(s) and {len(baseline.batch_means)} batch mean(s)", None
    for side, summary in (("baseline", baseline), ("window", window)):
        bad = non_finite_fields(summary)
        if bad:
            return "NO_DATA", f"the {side}'s {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not finite (values overflow the float range)", None
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            estimate = relative_change(baseline.batch_means, window.batch_means, confidence)
        numbers = (estimate.change_ratio, estimate.ci_low, estimate.ci_high)
        overflow = any(v is not None and not math.isfinite(v) for v in numbers)
    except OverflowError:  # Python float ** raises instead of returning inf
        estimate = ChangeEstimate(float(np.mean(baseline.batch_means)), float(np.mean(window.batch_means)), None, None, None, confidence, None)
        overflow = True
    if overflow:
        # Finite means whose ratio or variance overflows: no usable interval.
        estimate = ChangeEstimate(estimate.baseline_mean, estimate.window_mean, None, None, None, confidence, estimate.dof,
                                  "the change or its interval overflows the float range")
    verdict, reason = decide(estimate, direction, min_effect_ratio)
    return verdict, reason, estimate
