"""A verdict checked against the level the baseline ended at, when its stationarity test
could not rule a move out.

The stationarity test (:mod:`obsctl.baselining.statistics.stationarity`) flags a baseline
that moved inside its window, and a flagged baseline caps the verdict
(:func:`obsctl.baselining.decide.caps.stationarity_cap`). It cannot flag every moved one:
half of a 2 h window of a signal with a 10-minute memory holds a handful of independent
samples, and the moved baselines it misses are the ones whose halves happen to look
alike, which are exactly the ones a window at the later level reads as a gain. So when the
test is *suggestive* (its smaller p-value below :data:`SUGGESTIVE`, not below the level),
the window is judged a second time, against the baseline's samples after the test's most
likely split (``Stationarity.step_at``), with the same memory model, look and placebo
widening; the verdict stands only when both comparisons give it. Otherwise it is
INCONCLUSIVE, with the reason :func:`later_level_cap` words. A directional verdict is
judged again only when the later part moved the way the window did (:func:`applies`):
one that moved the other way would only read the change larger.

Why this is sound: it is an intersection-union test (Berger, Technometrics 24(4), 1982;
Berger & Hsu, Statistical Science 11(4), 1996): a decided verdict needs both tests to
decide it, so its error under either null is at most the larger of the two tests' own
errors, with no adjustment. Against a steady baseline the first test holds its level
as before (the second can only withhold verdicts: the price is power, measured); against
a baseline that moved, the second compares with the level the baseline ended at, which
is what the window continues. The split is chosen on the baseline alone, before the
window is seen, so the second test's interval is the usual one for a shorter side
(its samples are a contiguous stretch; the memory model is the signal's, fitted on
history).

Assumptions: one move (a step, or a ramp whose later part the split keeps); the memory
model describes the baseline's fluctuations around its levels. What it does not do: it
does not find a move the test is not suggestive about (p above :data:`SUGGESTIVE`), and a
baseline with a cycle is the cycle detector's concern. Applied to the before-after
comparison of the primary signal only (guards keep the flagged-baseline cap alone).

Calibration: bench/bench_stationarity.py (``--suggestive`` moves the threshold),
docs/verification.md ("Baselines that moved inside their window").
"""

from __future__ import annotations

import numpy as np

from obsctl.baselining.text.present_stationarity import remedy
from obsctl.formatting import format_percent
from obsctl.records import Baseline, Stationarity
from obsctl.timeutil import rfc3339

#: A stationarity test whose smaller p-value is below this (and not below its level) is
#: suggestive: the window is judged against the baseline's later part too. Calibrated in
#: bench/bench_stationarity.py: false IMPROVED after a step or a ramp inside the baseline
#: against the power lost on steady baselines.
SUGGESTIVE = 0.5

DECIDED = ("IMPROVED", "REGRESSED", "NO_CHANGE")


def suggestive(st: Stationarity | None, threshold: float = SUGGESTIVE) -> bool:
    """True when the stored test did not flag the baseline but did not rule a move out:
    ``min(step p, trend p) < threshold``. False for an untested or a flagged baseline
    (the latter is capped whole, :func:`obsctl.baselining.decide.caps.stationarity_cap`)."""
    return st is not None and not st.moved and min(st.step_p_value, st.trend_p_value) < threshold


def applies(verdict: str, change: float | None, st: Stationarity | None, threshold: float = SUGGESTIVE) -> bool:
    """True when the later-part comparison is needed: the test was :func:`suggestive`, the
    verdict decided, and (for IMPROVED / REGRESSED) the baseline's later part moved the way
    the window did (``change`` and ``step_ratio`` of one sign, or either unknown). A later
    part that moved the other way lies further from the window than the whole baseline's
    mean, so against it the change would only read larger: the whole baseline's verdict is
    already the cautious one and is not judged again."""
    if verdict not in DECIDED or not suggestive(st, threshold):
        return False
    if verdict == "NO_CHANGE" or change is None or st.step_ratio is None:
        return True
    return change * st.step_ratio > 0


def later_part(times: np.ndarray, values: np.ndarray, st: Stationarity) -> tuple[np.ndarray, np.ndarray]:
    """The baseline's samples at and after the split (``st.step_at``): ``(times s, values)``."""
    keep = np.asarray(times, dtype=float) >= st.step_at.timestamp() - 1e-6
    return np.asarray(times, dtype=float)[keep], np.asarray(values, dtype=float)[keep]


def later_level_cap(verdict: str, later_verdict: str, later_change: float | None, later_low: float | None, later_high: float | None,
                    st: Stationarity, samples: int, remedy_text: str = "") -> tuple[str | None, str]:
    """``("INCONCLUSIVE", reason)`` when the whole-baseline verdict was decided and the
    later-part one differs; ``(None, "")`` otherwise (nothing decided, or both agree).

    Args:
        verdict: the verdict against the whole baseline (before any cap).
        later_verdict, later_change, later_low, later_high: the verdict against the later
            part and its estimate and interval (ratios; None where there is none).
        st: the baseline's stored test; samples: how many samples the later part holds;
        remedy_text: what to do (:func:`later_remedy`).
    """
    if verdict not in DECIDED or later_verdict == verdict:
        return None, ""
    said = f"{later_verdict}"
    if later_change is not None:
        said += f", {format_percent(later_change)}"
        if later_low is not None and later_high is not None:
            said += f" ({format_percent(later_low)} .. {format_percent(later_high)})"
    return "INCONCLUSIVE", (
        f"the baseline may have moved inside its window, and against its part from {rfc3339(st.step_at)} on "
        f"({samples} samples, {format_percent(st.step_ratio)} from the part before) the window reads {said}, not {verdict}: "
        f"the change is not shown against the level the baseline ended at" + (f"; to judge against that level, {remedy_text}" if remedy_text else ""))


def later_detail(st: Stationarity) -> str:
    """The test behind a later-level cap, in full (the cap's reason is plain words): its
    p-values, its level and the threshold that made it suggestive."""
    return (f"its stationarity test did not flag the baseline at level {st.level:g}, but step test p = {st.step_p_value:.2g}, "
            f"trend test p = {st.trend_p_value:.2g}, the smaller below {SUGGESTIVE:g}: the window was judged again against the part "
            f"after the most likely split ({rfc3339(st.step_at)})")


def later_remedy(baseline: Baseline) -> str:
    """The flagged step's remedy for a suggestive baseline: a baseline of the period after
    the split, then a rebase (:func:`obsctl.baselining.text.present_stationarity.remedy`);
    against it both comparisons are one."""
    st = baseline.stationarity
    return remedy(baseline.model_copy(update={"stationarity": st.model_copy(update={"kind": "step"})})) if st is not None else ""
