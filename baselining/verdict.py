"""The verdict of an initiative, read top to bottom like docs/verification.md.

One pipeline from a measurement to the overall verdict, and the only one:

1. **measure**: the window of the primary (and of each guard) with its baseline's PromQL
   (:mod:`obsctl.baselining.measure`), the baseline's side stored at initiative start;
2. **estimate and decide**: the two sides under the baseline's memory model, the look's
   boundary on the change's confidence sequence (:mod:`obsctl.baselining.looks`) and Fieller's interval (:func:`obsctl.baselining.statistics.comparison.judge`),
   decided by the one rule (:func:`obsctl.baselining.statistics.comparison.decide`);
3. **caps**: coverage, partial answers and a partial baseline cap the verdict
   (:func:`caps_for`, :func:`apply_caps`): NO_DATA replaces it, INCONCLUSIVE tempers it;
   a baseline that aged is replaced by the period right before the start (:func:`before_start`);
4. **design**: control / canary / seasonal replace the before-after effect, and every design
   adds its confound checks (:func:`obsctl.baselining.designs.run.primary`), capped again;
5. **guards**: each guard signal as a non-inferiority test with its own margin, the
   family's error shared by Holm's step-down (:func:`judge_guard`, :func:`holm`);
6. **overall**: :func:`overall_verdict`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from obsctl.baselining.designs import run as designs
from obsctl.baselining.designs.run import Outcome
from obsctl.baselining.measure.window import Measurement, measure
from obsctl.baselining.present import describe, guard_regressions
from obsctl.baselining.statistics import comparison, placebo
from obsctl.baselining.statistics.decision import Estimate
from obsctl.baselining.statistics.lrv import Side
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.durations import format_duration, parse_duration
from obsctl.promapi import PrometheusClient, is_partial_warning
from obsctl.records import Assessment, Baseline, BaselineSide, Coverage, GuardResult, Initiative, Verdict
from obsctl.spec import Spec
from obsctl.timeutil import rfc3339


def columns(samples: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` float64 columns of ``(t, v)`` samples (fromiter: no Python loop per sample)."""
    return (np.fromiter(map(itemgetter(0), samples), float, len(samples)), np.fromiter(map(itemgetter(1), samples), float, len(samples)))


def stored_side(spec: Spec, baseline: Baseline) -> BaselineSide | None:
    """The baseline's side of every verdict at the spec's verification step, for
    ``initiative start`` to store (:class:`~obsctl.records.BaselineSide`); None
    without a memory model or with fewer than 2 samples (verify then reads the samples)."""
    memory = memory_of(baseline)
    if memory is None or len(baseline.samples) < 2:
        return None
    step = parse_duration(spec.verification.step, "verification.step")
    b = comparison.baseline_side(*columns(baseline.samples), step, memory)
    return BaselineSide(baseline_id=baseline.id, step_seconds=step, constant=b.constant, **dataclasses.asdict(b.side))


def side_for(initiative: Initiative, baseline_id: str) -> BaselineSide | None:
    """The side stored for ``baseline_id`` on the initiative, or None."""
    return next((s for s in initiative.baseline_sides if s.baseline_id == baseline_id), None)


def memory_of(baseline: Baseline) -> MemoryModel | None:
    """The baseline's stored memory model (None when its snapshot found no history to fit one)."""
    return MemoryModel.from_dict(baseline.memory.model_dump()) if baseline.memory is not None else None


def judge_signal(spec: Spec, baseline: Baseline, m, look: comparison.LookContext | None, guard_tolerance: float | None = None,
                 guard_alpha: float | None = None, side: BaselineSide | None = None):
    """``(verdict, reason, estimate or None, judgement or None)`` of a measurement against its baseline.

    :func:`obsctl.baselining.statistics.comparison.judge` on the two sides' samples with the
    baseline's memory model; the baseline's side comes from ``side`` (stored at initiative
    start) when it was computed at the window's step, and then ``baseline`` may come
    without samples."""
    cfg = spec.verification
    if m.stats is None or len(m.samples) < 2:
        return "NO_DATA", f"the window has {len(m.samples)} sample(s), needs at least 2", None, None
    memory = memory_of(baseline)
    usable = side is not None and memory is not None and math.isclose(side.step_seconds, m.window.step_seconds)
    step = m.window.step_seconds
    base = comparison.BaselineSide(Side(**side.model_dump(exclude={"baseline_id", "step_seconds", "constant"})), side.constant,
                                 side.step_seconds) if usable else columns(baseline.samples)
    level = look.confidence if look is not None and look.confidence else cfg.confidence
    span = (m.window.end - m.window.start).total_seconds()
    check = placebo.for_window([placebo.Placebo(**c.model_dump()) for c in baseline.placebo], span)
    j = comparison.judge(base, columns(m.samples), step, memory, level, baseline.direction,
                         cfg.min_effect_ratio, look, guard_tolerance, guard_alpha, widen=check.widen if check else None)
    j.placebo = placebo_text(check, (baseline.window.end - baseline.window.start).total_seconds(), span)
    est = Estimate(j.change, j.low, j.high, level, j.dof, j.exact,
                   j.baseline_mean if j.baseline_mean is not None else baseline.stats.mean,
                   j.window_mean if j.window_mean is not None else m.stats.mean, j.reason)
    return j.verdict, j.reason, est, j


def placebo_text(check: placebo.Placebo | None, baseline_seconds: float, window_seconds: float) -> str:
    """The placebo line of a verdict (:mod:`obsctl.baselining.statistics.placebo`)."""
    if check is None:
        need = format_duration(placebo.MIN_PLACEBOS * (baseline_seconds + window_seconds))
        return f"not checked: the baseline's history holds fewer than {placebo.MIN_PLACEBOS} comparisons of this length (needs {need})"
    text = (f"on {check.starts} placebo starts in this signal's history ({format_duration(check.baseline_seconds)} against "
            f"{format_duration(check.window_seconds)}) the model's interval held {check.held} times (variance ratio {check.variance_ratio:.2f})")
    if check.contradicted:
        text += f": the model's variance is too small, the interval is widened {check.variance_ratio:.2f}x with {check.dof:.0f} dof"
    return text


def assessment_of(j) -> Assessment | None:
    return Assessment(**j.details()) if j is not None else None


def _window_reason(m, min_samples: int, verdict: Verdict, reason: str) -> str:
    # A NO_DATA window says why in the measurement's words ("240 samples, all NaN/Inf").
    if verdict == "NO_DATA" and m.no_data_reason(min_samples):
        return f"window: {m.no_data_reason(min_samples)}"
    return reason


def guard_margin(spec: Spec, signal: str) -> float:
    """A guard's non-inferiority margin (ratio): the signal's ``guard_margin_ratio``, else
    ``verification.guard_margin_ratio``; a verdict's margin, never the alerting tolerance."""
    sig = next((s for s in spec.signals if s.name == signal), None)
    return sig.guard_margin_ratio if sig is not None and sig.guard_margin_ratio is not None else spec.verification.guard_margin_ratio


def measure_guard(spec: Spec, client: PrometheusClient, baseline: Baseline, start_at: dt.datetime, end_at: dt.datetime,
                  step: float) -> Measurement:
    """One guard signal over ``(start_at, end_at]`` with its baseline's PromQL.

    Raises:
        PrometheusUnavailable: as :func:`obsctl.baselining.measure.window.measure`.
    """
    cfg = spec.verification
    return measure(client, baseline.query, start_at, end_at, step, cfg.min_samples, what=f"{baseline.workload_class}/{baseline.signal} (guard)",
                   on_change=baseline.signal in cfg.fresh_on_change)


def judge_measured_guard(spec: Spec, baseline: Baseline, m: Measurement, look: comparison.LookContext | None, alpha: float,
                         side: BaselineSide | None = None) -> GuardResult:
    """A measured guard judged as a non-inferiority test (margin :func:`guard_margin`) at the
    two-sided level ``alpha`` (its share of the family's error, :func:`holm`), capped by
    coverage and partial answers."""
    cfg = spec.verification
    verdict, reason, est, j = judge_signal(spec, baseline, m, look, guard_tolerance=guard_margin(spec, baseline.signal), guard_alpha=alpha,
                                           side=side)
    reason = _window_reason(m, cfg.min_samples, verdict, reason)
    # Coverage, partial answers and a partial baseline cap the verdict (measure.coverage).
    verdict, reason = cap_verdict(verdict, reason, m, baseline, cfg.min_coverage_ratio)
    category = next((s.category for s in spec.signals if s.name == baseline.signal), "unknown")
    return GuardResult(
        signal=baseline.signal, category=category, unit=baseline.unit, direction=baseline.direction,
        baseline_id=baseline.id, query=baseline.query, verdict=verdict, reason=reason,
        baseline_mean=est.baseline_mean if est else baseline.stats.mean,
        window_mean=est.window_mean if est else (m.stats.mean if m.stats else None),
        change_ratio=est.change if est else None, ci_low=est.low if est else None, ci_high=est.high if est else None,
        exact=bool(est and est.exact), window_stats=m.stats, population=m.population, samples=m.samples,
        coverage=m.coverage, warnings=m.warnings, partial=m.partial, assessment=assessment_of(j),
    )


def judge_guard(spec: Spec, client: PrometheusClient, baseline: Baseline, start_at: dt.datetime, end_at: dt.datetime, step: float,
                look: comparison.LookContext | None = None, guards: int = 1,
                side: BaselineSide | None = None) -> tuple[GuardResult, Callable[[float], GuardResult]]:
    """:func:`measure_guard` then :func:`judge_measured_guard` at the first Holm level, the
    Bonferroni share ``(1 - confidence) / guards`` of the family's two-sided error. ``side``: the
    baseline's stored side (:func:`stored_side`), which spares its samples.

    Returns:
        ``(the guard at that level, its judgement at another level)``: the pair :func:`holm` takes.

    Raises:
        PrometheusUnavailable: as :func:`obsctl.baselining.measure.window.measure`.
    """
    level = look.confidence if look is not None and look.confidence else spec.verification.confidence
    m = measure_guard(spec, client, baseline, start_at, end_at, step)
    again = functools.partial(judge_measured_guard, spec, baseline, m, look, side=side)
    return again((1 - level) / max(guards, 1)), again


def holm(results: list[GuardResult], rejudge: list[Callable[[float], GuardResult]], alpha: float) -> list[GuardResult]:
    """Holm's step-down over the guards' tests of "worse than the baseline" (Holm, Scand. J.
    Statist. 6(2), 1979), in place of Bonferroni.

    The guards are ordered by their anytime p-value of being worse (``Assessment.p_worse``,
    the crossing probability of their statistic, :mod:`.statistics.anytime`); the k-th
    (0-based) is judged at ``alpha / (m - k)`` as long as every earlier one was below its
    own level, and the first that is not ends the walk. Each guard was already judged at
    ``alpha / m`` (Bonferroni: the walk's first level), so only the guards after the first
    are judged again, at their larger level. With p-values that hold at every look at once,
    Holm's argument holds at every look: a false REGRESSED needs one of the ``m0`` unchanged
    guards below ``alpha / m0``, which happens with probability at most ``alpha``.

    Args:
        results: the guards at ``alpha / m``; rejudge: per guard, its judgement at a level.
        alpha: the family's two-sided error, ``1 - confidence``: its worse side, the only one
            REGRESSED reads, holds ``(1 - confidence) / 2``, as the primary's does, so the
            overall false REGRESSED stays within ``1 - confidence``.

    Returns:
        The guards in their original order, re-judged where Holm allows a larger level.
    """
    m = len(results)
    p = [g.assessment.p_worse if g.assessment is not None and g.assessment.p_worse is not None else 1.0 for g in results]
    out = list(results)
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        level = alpha / (m - k)
        if p[i] > level:
            break
        if k > 0:
            out[i] = rejudge[i](level)
    return out


def overall_verdict(primary: Verdict, primary_reason: str, guards: list[GuardResult], confidence: float,
                    optional: tuple[str, ...] | list[str] = (), missing: tuple[str, ...] | list[str] = ()) -> tuple[Verdict, str]:
    """The overall verdict from the primary's and the guards' verdicts.

    Precedence: a primary NO_DATA or REGRESSED stands (no data is never a pass; a
    regression is already the worst verdict). Otherwise any REGRESSED guard makes the
    overall verdict REGRESSED, with a reason naming each such guard, e.g. ``quality
    guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %)``.
    Otherwise any guard that is NO_DATA or INCONCLUSIVE (not in ``optional``) turns
    IMPROVED or NO_CHANGE into INCONCLUSIVE: a guard that was not shown to hold is not a
    pass, whatever its category. So does a guard in ``missing`` (chosen by
    ``verification.guards`` but without a baseline: it could not be evaluated), named as
    ``cost guard gpu_cost not evaluated (no baseline)``.

    Returns:
        ``(verdict, reason)``: the primary's own when it stands, else the override's
        (the primary's verdict and reason are recorded beside it).
    """
    text = guard_regressions(guards, confidence)
    if primary in ("NO_DATA", "REGRESSED"):
        return primary, primary_reason
    if text:
        return "REGRESSED", text
    # No data is never a pass: an undecided guard keeps the verdict at most INCONCLUSIVE.
    open_ = [f"{g.category} guard {g.signal} {g.verdict}" for g in guards if g.signal not in optional and g.verdict in ("NO_DATA", "INCONCLUSIVE")]
    open_ += [f"guard {name} not evaluated (no baseline)" for name in missing if name not in optional]
    if open_ and primary in ("IMPROVED", "NO_CHANGE"):
        names = ", ".join(open_)
        return "INCONCLUSIVE", f"{names} (not shown within its margin; optional_guards lifts this)"
    return primary, primary_reason


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
    shown = next((w for w in warnings if _is_partial(w)), warnings[0] if warnings else "partial answer")
    return "INCONCLUSIVE", f"{side}: Prometheus answered partially ({shown})"


def _is_partial(text: str) -> bool:
    return is_partial_warning(text)


def caps_for(measurement, baseline: Baseline | None, min_ratio: float) -> list[tuple[Verdict, str]]:
    """Every cap on a verdict of ``measurement`` (a :class:`obsctl.baselining.measure.window.Measurement`)
    against ``baseline``: window coverage, window partial, baseline partial."""
    caps = [coverage_cap(measurement.coverage, min_ratio), partial_cap(measurement.warnings, measurement.partial)]
    if baseline is not None and baseline.partial:
        caps.append(("INCONCLUSIVE", f"baseline {baseline.id} is partial (stored with --allow-partial: {'; '.join(baseline.warnings) or 'partial answer'})"))
    return [(v, r) for v, r in caps if v is not None]


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


@dataclass(frozen=True)
class PrimaryVerdict:
    """The primary signal's verdict after the caps and the design (steps 2-4 of the module doc).

    Attributes:
        verdict, reason: the primary's verdict and its one-line reason.
        estimate: the recorded effect (the design's, or the before-after one); None without one.
        judgement: the statistics behind the before-after comparison (look, memory, sides).
        design: what the comparison design said, with its context.
    """

    verdict: Verdict
    reason: str
    estimate: Estimate | None
    judgement: comparison.Judgement | None
    design: Outcome


#: A baseline whose window ended at least this long before the start (and at least
#: 15 steps) has aged: verify compares with the period right before the start instead.
AGED_AFTER_SECONDS = 3600.0


def aged(initiative: Initiative, baseline: Baseline) -> bool:
    """True when a before-after ``baseline`` ended long enough before the start to be replaced by :func:`before_start`."""
    gap = (initiative.started_at - baseline.window.end).total_seconds()
    return initiative.design == "before-after" and gap >= max(AGED_AFTER_SECONDS, 15 * baseline.window.step_seconds)


def before_start(spec: Spec, client: PrometheusClient, initiative: Initiative, baseline: Baseline,
                 step: float) -> tuple[Baseline, tuple[Verdict | None, str], str]:
    """The side an aged baseline is replaced by: the period right before the start.

    A before-after comparison against a baseline that ended hours or days before the
    start reads whatever moved in between (drift, demand, a release) as the change. So
    the verdict compares the window with the period right before ``started_at`` instead,
    as long as the baseline (at most the gap), measured with the baseline's own PromQL at
    the verification step and judged under the baseline's memory model; the stored
    baseline stays the documented reference (its id, unit and query). Without usable data
    in that period the verdict is INCONCLUSIVE ("re-snapshot").

    Returns:
        ``(baseline to judge against, cap, note)``: the cap is ``(None, "")`` unless the
        period has no data; the note says what was compared and how far the signal moved.

    Raises:
        PrometheusUnavailable, UsageError: as :func:`~obsctl.baselining.measure.window.measure`.
    """
    from obsctl.formatting import format_percent

    cfg = spec.verification
    gap = (initiative.started_at - baseline.window.end).total_seconds()
    span = min(gap, (baseline.window.end - baseline.window.start).total_seconds())
    start = initiative.started_at - dt.timedelta(seconds=span)
    m = measure(client, baseline.query, start, initiative.started_at, step, cfg.min_samples,
                what=f"{baseline.workload_class}/{baseline.signal} (before the start)", on_change=baseline.signal in cfg.fresh_on_change)
    aged_text = f"the baseline of {rfc3339(baseline.window.end)} ended {format_duration(gap)} before the start"
    if m.stats is None or len(m.samples) < max(2, cfg.min_samples):
        why = m.no_data_reason(cfg.min_samples) or f"{len(m.samples)} sample(s)"
        return baseline, ("INCONCLUSIVE", f"{aged_text} and the {format_duration(span)} before the start has no data to compare with "
                                          f"({why}): before the first look, bind the initiative to a baseline ending at the start "
                                          f"(obsctl snapshot-baseline --class {initiative.workload_class} --signal {baseline.signal} "
                                          f"--end {rfc3339(initiative.started_at)}, then obsctl initiative rebase --initiative "
                                          f"{initiative.id}); after it, close it and start a new change"), ""
    moved = m.stats.mean / baseline.stats.mean - 1 if baseline.stats.mean else None
    replaced = baseline.model_copy(update={"window": m.window, "stats": m.stats, "samples": m.samples, "population": m.population,
                                           "coverage": m.coverage, "warnings": m.warnings, "partial": m.partial})
    note = (f"compared with the {format_duration(span)} right before the start: {aged_text} "
            f"(the signal moved {format_percent(moved)} in between)")
    return replaced, (None, ""), note


def judge_primary(spec: Spec, client: PrometheusClient, initiative: Initiative, baseline: Baseline, m: Measurement,
                  start_at: dt.datetime, end_at: dt.datetime, step: float, look: comparison.LookContext, side: BaselineSide | None,
                  loads: Callable[[], list] | None = None, aged: tuple[Verdict | None, str] = (None, ""), note: str = "") -> PrimaryVerdict:
    """Steps 2-4 for the primary signal: its window ``m`` against ``baseline``, capped, then the design.

    Args:
        look: the look's place on the change's sequence (:func:`obsctl.baselining.looks.context`).
        side: the baseline's side stored at initiative start (None: from the samples).
        loads: the design's load context already asked for (None: read here).
        aged, note: the cap and the note of :func:`before_start` when the baseline aged.

    Raises:
        PrometheusUnavailable, UsageError: as :func:`obsctl.baselining.designs.run.primary`.
    """
    cfg = spec.verification
    verdict, reason, estimate, judgement = judge_signal(spec, baseline, m, look, side=side)
    reason = _window_reason(m, cfg.min_samples, verdict, reason)
    caps = caps_for(m, baseline, cfg.min_coverage_ratio) + ([aged] if aged[0] else [])
    verdict, reason = apply_caps(verdict, reason, caps)
    sig = next((x for x in spec.signals if x.name == baseline.signal), None)
    design = designs.primary(spec, client, initiative, baseline, m.samples, start_at, end_at, step,
                             sig.category if sig else "unknown", baseline.direction,
                             confidence=judgement.confidence if judgement is not None and judgement.confidence else None, loads=loads,
                             level=look.confidence or cfg.confidence)
    if design.verdict and verdict != "NO_DATA":
        verdict, reason = apply_caps(design.verdict, design.reason, caps)
    if note:
        reason = f"{reason}; {note}"
    return PrimaryVerdict(verdict, reason, design.as_estimate(estimate), judgement, design)
