"""The caps on a verdict: what the data's coverage and Prometheus' answers allow it to say.

A cap is ``(verdict, reason)``: NO_DATA replaces any verdict, INCONCLUSIVE tempers a
decided one (:func:`apply_caps`). ``snapshot`` refuses a baseline on the same rules
(:func:`coverage_cap`, :func:`partial_cap`); ``verify`` caps each judged signal
(:func:`cap_verdict`). No I/O: the caps read a measurement that was already taken.
"""

from __future__ import annotations

from obsctl.baselining.text.present import describe
from obsctl.baselining.text.present_stationarity import moved_text, remedy
from obsctl.promwarnings import is_partial_warning
from obsctl.records import Baseline, Coverage, Verdict
from obsctl.timeutil import rfc3339


def coverage_cap(c: Coverage | None, min_ratio: float, side: str = "window") -> tuple[Verdict | None, str]:
    """The cap coverage puts on a verdict: ``(NO_DATA | INCONCLUSIVE | None, reason)``.

    NO_DATA when no grid point is fresh, or coverage is below ``min_ratio`` and the
    signal stopped before the window end ("no fresh samples after 05:00:00Z: the
    signal stopped"); INCONCLUSIVE when coverage is below ``min_ratio`` otherwise;
    None (no cap) at or above it and when coverage was not measured (a query without a selector).
    """
    if c is None or c.grid_points == 0:
        return None, ""
    if c.fresh_points == 0 or (c.stopped and c.ratio < min_ratio):
        if c.last_real_sample is not None:
            return "NO_DATA", f"{side}: no fresh samples after {rfc3339(c.last_real_sample)}: the signal stopped ({describe(c)})"
        return "NO_DATA", f"{side}: no real samples of the signal's inputs in the window ({describe(c)})"
    if c.ratio < min_ratio:
        return "INCONCLUSIVE", f"{side}: {describe(c)}, below the {min_ratio * 100:.0f} % minimum (verification.min_coverage_ratio)"
    return None, ""


def partial_cap(warnings: list[str], partial: bool, side: str = "window") -> tuple[Verdict | None, str]:
    """INCONCLUSIVE when Prometheus said the answer is partial (``partial``), naming the first warning."""
    if not partial:
        return None, ""
    shown = next((w for w in warnings if is_partial_warning(w)), warnings[0] if warnings else "partial answer")
    return "INCONCLUSIVE", f"{side}: Prometheus answered partially ({shown})"


def stationarity_cap(baseline: Baseline | None) -> tuple[Verdict | None, str]:
    """INCONCLUSIVE when the baseline moved inside its own window (a step or a trend found
    at snapshot, :mod:`obsctl.baselining.statistics.stationarity`): its mean mixes two
    levels, and a window that continues the later one would read as a change. The reason
    says what moved, when, how much, and how to re-snapshot. None for a steady or untested
    baseline, and for one replaced by the period before the start (an aged baseline:
    the replacement carries no test)."""
    st = baseline.stationarity if baseline is not None else None
    if st is None or not st.moved:
        return None, ""
    # Plain words: the tests behind it are a note of the verdict (decide.verdict.decide, kind baseline-moved).
    return "INCONCLUSIVE", f"baseline {baseline.id} moved inside its window: {moved_text(st)}; {remedy(baseline)}"


def caps_for(measurement, baseline: Baseline | None, min_ratio: float) -> list[tuple[Verdict, str]]:
    """Every cap on a verdict of ``measurement`` (a :class:`obsctl.baselining.measure.window.Measurement`)
    against ``baseline``: window coverage, window partial, baseline partial, baseline moved inside its window."""
    caps = [coverage_cap(measurement.coverage, min_ratio), partial_cap(measurement.warnings, measurement.partial)]
    if baseline is not None and baseline.partial:
        caps.append(("INCONCLUSIVE", f"baseline {baseline.id} is partial (stored with --allow-partial: {'; '.join(baseline.warnings) or 'partial answer'})"))
    caps.append(stationarity_cap(baseline))
    return [(v, r) for v, r in caps if v is not None]


def missing_guard_caps(missing: tuple[str, ...] | list[str], optional: tuple[str, ...] | list[str] = ()) -> list[tuple[Verdict, str]]:
    """The cap each chosen guard without a baseline (``missing``: signal names) puts on an
    overall verdict: ``("INCONCLUSIVE", "guard gpu_cost not evaluated (no baseline)")``,
    none for a guard in ``optional`` (``verification.optional_guards``)."""
    return [("INCONCLUSIVE", f"guard {name} not evaluated (no baseline)") for name in missing if name not in optional]


def apply_caps(verdict: Verdict, reason: str, caps: list[tuple[Verdict, str]]) -> tuple[Verdict, str]:
    """``(verdict, reason)`` after the caps: NO_DATA replaces any verdict; INCONCLUSIVE turns
    IMPROVED, REGRESSED and NO_CHANGE into INCONCLUSIVE (a NO_DATA stays). The cap's reason
    leads; the statistics' own verdict follows it."""
    for cap, why in caps:
        if cap == "NO_DATA":
            return "NO_DATA", why
    inconclusive = [why for cap, why in caps if cap == "INCONCLUSIVE"]
    if not inconclusive or verdict == "NO_DATA":
        return verdict, reason
    said = f"; the statistics alone said {verdict} ({reason})" if verdict != "INCONCLUSIVE" else f"; {reason}"
    return "INCONCLUSIVE", "; ".join(inconclusive) + said


def cap_verdict(verdict: Verdict, reason: str, measurement, baseline: Baseline | None, min_ratio: float) -> tuple[Verdict, str]:
    """The one call ``verify`` makes per judged signal: :func:`apply_caps` of :func:`caps_for`."""
    return apply_caps(verdict, reason, caps_for(measurement, baseline, min_ratio))
