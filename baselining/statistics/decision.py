"""The one decision rule: a verdict from an interval of the relative change.

Every design's verdict (before-after, seasonal, control, canary) and every guard's comes
from :func:`decide` on an :class:`Estimate`; no other code turns an interval into a verdict.

``[L, U]`` is the interval of the *gain* (the change for ``higher_is_better``, its
negation for ``lower_is_better``) at the look's anytime-valid level
(:mod:`.sequential`; the spec's confidence at a single look), ``g`` the point gain and
``d`` the margin ``verification.min_effect_ratio``. In this order:

1. NO_DATA: no estimate.
2. Exact (both sides constant, no sampling error): NO_CHANGE when equal; otherwise
   IMPROVED / REGRESSED by the sign of the gain when ``|g| >= d`` (a baseline of 0 and a
   window that is not counts as an infinite change), else NO_CHANGE.
3. INCONCLUSIVE: the change or its interval is undefined (its reason says why).
4. Guards (``tolerance`` given) are non-inferiority tests (Wellek, *Testing Statistical
   Hypotheses of Equivalence and Noninferiority*, 2nd ed., 2010, ch. 2): REGRESSED when
   worse than the baseline (``U < 0``) and non-inferiority is not shown
   (``L <= -tolerance``); INCONCLUSIVE when neither is shown; otherwise IMPROVED when
   ``L > 0`` and ``g >= d``, else NO_CHANGE (non-inferior).
5. IMPROVED: ``L > 0`` and ``g >= d`` (better at the confidence level, by a relevant amount).
6. REGRESSED: ``U < 0`` and ``g <= -d``.
7. NO_CHANGE: ``-d < L`` and ``U < d``: equivalence by two one-sided tests (Schuirmann,
   J. Pharmacokinet. Biopharm. 15(6), 1987); a two-sided interval at ``confidence`` is the
   conservative TOST at ``(1 - confidence)/2`` each side. Never with ``d = 0``.
8. INCONCLUSIVE otherwise: the interval contains 0 but reaches past the margin (more data
   needed), or a significant change smaller than ``d`` whose interval reaches past it.

Under no change, a guard's REGRESSED needs ``U < 0``, an event of probability at most the
one-sided level, so ``m`` guards each at ``alpha / m`` (Bonferroni) keep the family-wise
chance that noise alone calls any guard REGRESSED at most ``alpha`` over all looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from obsctl.formatting import format_confidence, format_percent

Verdict = Literal["IMPROVED", "NO_CHANGE", "INCONCLUSIVE", "REGRESSED", "NO_DATA"]
Direction = Literal["higher_is_better", "lower_is_better"]

#: Relative spread below which values count as constant (zero variance), and within
#: which two constants are equal: ``max - min <= CONSTANT_RTOL * max(|values|)``. Averaging
#: identical floats leaves differences of a few ulps (~1e-16 relative); any measured
#: spread is far above 1e-9.
CONSTANT_RTOL = 1e-9


@dataclass(frozen=True)
class Estimate:
    """The relative change of one comparison with its interval: what :func:`decide` reads.

    Attributes:
        change: the point estimate of the relative change (0.30 = +30 %); None if undefined.
        low, high: its two-sided interval at ``confidence``; None if undefined.
        confidence: the interval's level (0-1): the look's anytime-valid level (:mod:`.anytime`).
        dof: degrees of freedom of the interval's t quantile (None: exact or normal).
        exact: both sides constant: no sampling error, ``low == high == change``.
        baseline_mean, window_mean: the two sides' means in the signal's unit, where the
            design has them (None for a canary's log-ratio effect without means).
        reason: why the change or its interval is undefined, or why it is exact.
    """

    change: float | None
    low: float | None
    high: float | None
    confidence: float
    dof: float | None = None
    exact: bool = False
    baseline_mean: float | None = None
    window_mean: float | None = None
    reason: str = ""


def exact_change(xbar: float, ybar: float, confidence: float) -> Estimate:
    """The :class:`Estimate` of two constant sides at ``xbar`` (baseline) and ``ybar`` (window)."""
    if abs(ybar - xbar) <= CONSTANT_RTOL * max(abs(xbar), abs(ybar)):
        return Estimate(0.0, 0.0, 0.0, confidence, exact=True, baseline_mean=xbar, window_mean=ybar,
                        reason=f"both sides constant at {xbar:.6g}: no change (exact)")
    if xbar == 0:
        return Estimate(None, None, None, confidence, exact=True, baseline_mean=xbar, window_mean=ybar,
                        reason=f"both sides constant, baseline 0 and window {ybar:.6g}: the relative change is undefined "
                               "but the difference is exact")
    change = ybar / xbar - 1
    return Estimate(change, change, change, confidence, exact=True, baseline_mean=xbar, window_mean=ybar,
                    reason=f"both sides constant ({xbar:.6g} -> {ybar:.6g}): the change is exact")


def decide(estimate: Estimate | None, direction: Direction, min_effect: float, tolerance: float | None = None) -> tuple[Verdict, str]:
    """``(verdict, reason)`` by the rules of the module doc.

    Args:
        estimate: the comparison's estimate; None: no data.
        direction: ``higher_is_better`` | ``lower_is_better``.
        min_effect: the margin ``d`` (ratio, >= 0).
        tolerance: a guard's non-inferiority margin (ratio, > 0); None: the primary's rules.
    """
    if estimate is None:
        return "NO_DATA", "no estimate: a side has too few samples"
    sign = 1.0 if direction == "higher_is_better" else -1.0
    d = min_effect
    if estimate.exact:
        return _decide_exact(estimate, sign, d)
    if estimate.change is None or estimate.low is None or estimate.high is None:
        return "INCONCLUSIVE", estimate.reason or "the change or its interval is undefined"
    gain = sign * estimate.change
    low, high = sorted((sign * estimate.low, sign * estimate.high))
    level = format_confidence(estimate.confidence)
    if tolerance is not None:
        return _decide_guard(low, high, gain, d, tolerance, level)
    if low > 0 and gain >= d:
        return "IMPROVED", f"better than baseline at {level} confidence and by at least {format_percent(d, sign=False)}"
    if high < 0 and gain <= -d:
        return "REGRESSED", f"worse than baseline at {level} confidence and by at least {format_percent(d, sign=False)}"
    if d > 0 and -d < low and high < d:
        return "NO_CHANGE", f"equivalent: the whole {level} interval lies within ±{format_percent(d, sign=False)} of the baseline"
    if low <= 0 <= high:
        return "INCONCLUSIVE", f"the interval contains 0 but reaches past ±{format_percent(d, sign=False)}: more data needed"
    return "INCONCLUSIVE", (f"a significant change smaller than the {format_percent(d, sign=False)} minimum effect, "
                            "with an interval reaching past it")


def _decide_exact(estimate: Estimate, sign: float, d: float) -> tuple[Verdict, str]:
    if estimate.change == 0.0:
        return "NO_CHANGE", estimate.reason
    if estimate.change is None:  # baseline 0, window not: an infinite change of known sign
        gain_sign = sign * ((estimate.window_mean or 0.0) - (estimate.baseline_mean or 0.0))
        return ("IMPROVED" if gain_sign > 0 else "REGRESSED"), estimate.reason
    gain = sign * estimate.change
    if abs(gain) >= d:
        return ("IMPROVED" if gain > 0 else "REGRESSED"), f"{estimate.reason}, at least {format_percent(d, sign=False)}"
    return "NO_CHANGE", f"{estimate.reason} but smaller than the {format_percent(d, sign=False)} minimum effect"


def _decide_guard(low: float, high: float, gain: float, d: float, tolerance: float, level: str) -> tuple[Verdict, str]:
    tol = format_percent(tolerance, sign=False)
    if low > -tolerance:
        if low > 0 and gain >= d:
            return "IMPROVED", f"better than baseline at {level} confidence (non-inferior within {tol})"
        return "NO_CHANGE", f"non-inferior: not worse than -{tol} at {level} confidence (lower bound {format_percent(low)})"
    if high < 0:
        return "REGRESSED", (f"worse than baseline at {level} confidence and not shown within the {tol} margin "
                             f"(lower bound {format_percent(low)})")
    return "INCONCLUSIVE", f"not shown within the {tol} margin (lower bound {format_percent(low)}) nor worse than baseline"
