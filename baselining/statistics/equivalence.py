"""The decision rules on an interval of the gain: superiority, equivalence, non-inferiority.

``[L, U]`` is the interval of the *gain* (the change for ``higher_is_better``, its
negation for ``lower_is_better``), at the look's repeated-confidence level
(:mod:`.sequential`; the spec's confidence at a single look), ``g`` the point gain and
``d`` the equivalence margin ``verification.min_effect_ratio``.

- IMPROVED: ``L > 0`` and ``g >= d``: better at the confidence level (one-sided test at
  ``(1 - confidence)/2``) and by a practically relevant amount.
- REGRESSED: ``U < 0`` and ``g <= -d``.
- NO_CHANGE: ``-d < L`` and ``U < d``: equivalence by two one-sided tests (Schuirmann,
  J. Pharmacokinet. Biopharm. 15(6), 1987), each at ``(1 - confidence)/2`` since the
  interval is two-sided at ``confidence`` (the conservative TOST; never with ``d = 0``).
- INCONCLUSIVE otherwise.

Guards (:func:`non_inferiority`) test "not worse than the baseline by more than the
signal's tolerance ``delta``" (Wellek, *Testing Statistical Hypotheses of Equivalence and
Noninferiority*, 2nd ed., 2010, ch. 2): PASS when ``L > -delta``; REGRESSED when the
guard is worse than the baseline (``U < 0``) and non-inferiority is not shown
(``L <= -delta``); UNDECIDED otherwise. Under no change, REGRESSED needs ``U < 0``, an
event of probability at most the one-sided level, so with ``m`` guards each at one-sided
``alpha / m`` (Bonferroni) the family-wise chance that noise alone calls any guard
REGRESSED is at most ``alpha`` over all looks.
"""

from __future__ import annotations

from typing import Literal

GuardOutcome = Literal["pass", "regressed", "undecided"]


def superiority_equivalence(low: float, high: float, gain: float, d: float, confidence: float) -> tuple[str, str]:
    """``(verdict, reason)`` by the rules above for a gain interval ``[low, high]``."""
    if low > 0 and gain >= d:
        return "IMPROVED", f"better than baseline at {confidence:.1%} confidence and by at least {d:.1%}"
    if high < 0 and gain <= -d:
        return "REGRESSED", f"worse than baseline at {confidence:.1%} confidence and by at least {d:.1%}"
    if d > 0 and -d < low and high < d:
        return "NO_CHANGE", f"equivalent: the whole {confidence:.1%} interval lies within +-{d:.1%} of the baseline"
    if low <= 0 <= high:
        return "INCONCLUSIVE", f"the interval contains 0 but reaches past +-{d:.1%}: more data needed"
    return "INCONCLUSIVE", f"a significant change smaller than the {d:.1%} minimum effect, with an interval reaching past it"


def non_inferiority(low: float, high: float, delta: float) -> GuardOutcome:
    """The guard test above for a gain interval ``[low, high]`` and tolerance ``delta > 0``."""
    if low > -delta:
        return "pass"
    if high < 0:
        return "regressed"
    return "undecided"
