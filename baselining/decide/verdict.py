"""The verdict of an initiative, read top to bottom like docs/verification.md: one pure function.

:func:`decide` turns the gathered :class:`~obsctl.baselining.evidence.Evidence` into a
frozen :class:`Verdict`, with no I/O (``verify`` gathered everything first,
:mod:`obsctl.baselining.evidence`):

1. **estimate and decide**: the two sides under the baseline's memory model, the look's
   boundary on the change's confidence sequence (:mod:`obsctl.baselining.looks`) and Fieller's interval (:func:`obsctl.baselining.statistics.comparison.judge`),
   decided by the one rule (:func:`obsctl.baselining.statistics.comparison.decide`);
2. **caps**: coverage, partial answers and a partial baseline cap the verdict
   (:func:`obsctl.baselining.decide.caps.caps_for`, :func:`obsctl.baselining.decide.caps.apply_caps`): NO_DATA replaces it, INCONCLUSIVE tempers it;
   a baseline that aged is replaced by the period right before the start (:func:`before_start`);
3. **design**: control / canary / seasonal / profile replace the before-after effect, judged
   at the look's boundary on the change's sequence (``designs.branch.Look.at``), and record their
   own assessment of it (memory, effective samples, dof, boundary:
   :func:`obsctl.baselining.designs.assessment.of`); every design adds its confound checks
   (:func:`obsctl.baselining.designs.run.primary`), capped again;
4. **guards**: each guard signal as a non-inferiority test with its own margin, the
   family's error shared by Holm's step-down (:func:`judge_measured_guard`, :func:`holm`);
5. **overall**: :func:`overall_verdict`.

Every cap, the aged baseline's replacement, the design's verdict and the guards that
decided are kept as data on the :class:`Verdict` (:class:`Reason`), never read back from text.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from obsctl.baselining.decide import later_level
from obsctl.baselining.decide.caps import apply_caps, cap_verdict, caps_for, missing_guard_caps, stationarity_cap
from obsctl.baselining.decide.location import location_for
from obsctl.baselining.decide.sides import columns, memory_of
from obsctl.baselining.designs import run as designs
from obsctl.baselining.designs.branch import Look
from obsctl.baselining.designs.run import Outcome
from obsctl.baselining.statistics import comparison, placebo
from obsctl.baselining.statistics.assumptions import Finding
from obsctl.baselining.statistics.decision import Estimate
from obsctl.baselining.statistics.lrv import Side
from obsctl.baselining.text.notes import note_of, plain_text
from obsctl.baselining.text.present import guard_regressions
from obsctl.baselining.text.present_stationarity import stationarity_line
from obsctl.durations import format_duration
from obsctl.formatting import format_percent
from obsctl.records import Assessment, Baseline, BaselineSide, GuardResult, Initiative, Note
from obsctl.records import Verdict as VerdictName
from obsctl.spec import Spec
from obsctl.timeutil import rfc3339

if TYPE_CHECKING:  # the types of the evidence only: the verdict reads, it never measures
    from obsctl.baselining.evidence import Evidence
    from obsctl.baselining.measure.window import Measurement


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
    location, memory = location_for(spec, baseline, memory_of(baseline))  # the mean, or a trimmed mean (statistics.robust)
    usable = (side is not None and memory is not None and math.isclose(side.step_seconds, m.window.step_seconds)
              and not location.robust)
    step = m.window.step_seconds
    base = comparison.BaselineSide(Side(**side.model_dump(exclude={"baseline_id", "step_seconds", "constant"})), side.constant,
                                 side.step_seconds) if usable else columns(baseline.samples)
    level = look.confidence if look is not None and look.confidence else cfg.confidence
    span = (m.window.end - m.window.start).total_seconds()
    check = placebo.for_window([placebo.Placebo(**c.model_dump()) for c in baseline.placebo], span)
    criterion = comparison.Criterion(level, baseline.direction, cfg.min_effect_ratio, guard_tolerance, guard_alpha)
    j = comparison.judge(base, columns(m.samples), step, memory, criterion, look, widen=check.widen if check else None,
                         location=location if location.robust or location.why else None)  # the default mean is not named
    j.placebo = placebo_text(check, (baseline.window.end - baseline.window.start).total_seconds(), span)
    j.extra_findings.append(placebo_finding(check, (baseline.window.end - baseline.window.start).total_seconds(), span, j.placebo))
    if j.location:  # a trimmed mean, or the mean the spec asked for on a heavy-tailed baseline
        j.extra_findings.append(Finding("location-trimmed" if location.robust else "location-mean", j.location, location.trim))
    plain_failure(j)
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


def plain_failure(j: comparison.Judgement) -> comparison.Judgement:
    """A judgement a window check refused (``j.failure``), in place: its reason in plain words
    (:func:`obsctl.baselining.text.notes.plain_text`), the diagnostic kept as its first note."""
    if j.failure is not None and j.failure not in j.findings:
        j.findings.insert(0, j.failure)
        j.reason = plain_text(j.failure.kind, j.failure.value)
    return j


def placebo_finding(check: placebo.Placebo | None, baseline_seconds: float, window_seconds: float, text: str) -> Finding:
    """The placebo line as data: ``placebo-unchecked`` (value: the history it needs, s),
    ``placebo-widened`` (value: the variance ratio) or ``placebo-held``; ``text``: its diagnostic."""
    if check is None:
        return Finding("placebo-unchecked", text, placebo.MIN_PLACEBOS * (baseline_seconds + window_seconds))
    if check.contradicted:
        return Finding("placebo-widened", text, check.variance_ratio)
    return Finding("placebo-held", text)


def moved_notes(baseline: Baseline, subject: str = "") -> list[Note]:
    """The tests behind a baseline-moved cap (:func:`obsctl.baselining.decide.caps.stationarity_cap`,
    whose reason is plain words) as a note; [] for a steady or untested baseline."""
    if stationarity_cap(baseline)[0] is None:
        return []
    return [note_of("baseline-moved", f"baseline {baseline.id}: {stationarity_line(baseline.stationarity)}", subject=subject)]


def notes_of(j: comparison.Judgement | None, subject: str = "") -> list[Note]:
    """The typed notes of a judgement (its findings, then, for the primary, its placebo
    check and location), each worded plainly and in full (:mod:`obsctl.baselining.text.notes`);
    ``subject``: a guard's signal (a guard's placebo and location stay in its assessment)."""
    if j is None:
        return []
    found = [*j.findings, *(j.extra_findings if not subject else [])]
    return [note_of(f.kind, f.detail, f.value, subject) for f in found]


def assessment_of(j) -> Assessment | None:
    return Assessment(**j.details()) if j is not None else None


def _window_reason(m, min_samples: int, verdict: VerdictName, reason: str) -> str:
    # A NO_DATA window says why in the measurement's words ("240 samples, all NaN/Inf").
    if verdict == "NO_DATA" and m.no_data_reason(min_samples):
        return f"window: {m.no_data_reason(min_samples)}"
    return reason


def guard_margin(spec: Spec, signal: str) -> float:
    """A guard's non-inferiority margin (ratio): the signal's ``guard_margin_ratio``, else
    ``verification.guard_margin_ratio``; a verdict's margin, never the alerting tolerance."""
    sig = next((s for s in spec.signals if s.name == signal), None)
    return sig.guard_margin_ratio if sig is not None and sig.guard_margin_ratio is not None else spec.verification.guard_margin_ratio


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
        notes=moved_notes(baseline, baseline.signal) + notes_of(j, baseline.signal),
    )


def judge_guard(spec: Spec, baseline: Baseline, m: Measurement, look: comparison.LookContext | None = None, guards: int = 1,
                side: BaselineSide | None = None) -> tuple[GuardResult, Callable[[float], GuardResult]]:
    """:func:`judge_measured_guard` of a measured guard at the first Holm level, the
    Bonferroni share ``(1 - confidence) / guards`` of the family's two-sided error. ``side``: the
    baseline's stored side (:func:`obsctl.baselining.decide.sides.stored_side`), which spares its samples.

    Returns:
        ``(the guard at that level, its judgement at another level)``: the pair :func:`holm` takes.
    """
    level = look.confidence if look is not None and look.confidence else spec.verification.confidence
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


def overall_verdict(primary: VerdictName, primary_reason: str, guards: list[GuardResult], confidence: float,
                    optional: tuple[str, ...] | list[str] = (), missing: tuple[str, ...] | list[str] = ()) -> tuple[VerdictName, str]:
    """The overall verdict from the primary's and the guards' verdicts.

    Precedence: a primary NO_DATA or REGRESSED stands (no data is never a pass; a
    regression is already the worst verdict). Otherwise any REGRESSED guard makes the
    overall verdict REGRESSED, with a reason naming each such guard, e.g. ``quality
    guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %)``.
    Otherwise any guard that is NO_DATA or INCONCLUSIVE (not in ``optional``) turns
    IMPROVED or NO_CHANGE into INCONCLUSIVE: a guard that was not shown to hold is not a
    pass, whatever its category. So does a guard in ``missing`` (chosen by
    ``verification.guards`` but without a baseline: it could not be evaluated), named as
    ``guard gpu_cost not evaluated (no baseline)`` (:func:`obsctl.baselining.decide.caps.missing_guard_caps`).

    Returns:
        ``(verdict, reason)``: the primary's own when it stands, else the override's
        (the primary's verdict and reason are recorded beside it).
    """
    if primary in ("NO_DATA", "REGRESSED"):
        return primary, primary_reason
    regressed = [g for g in guards if g.verdict == "REGRESSED"]
    if regressed:
        return "REGRESSED", guard_regressions(regressed, confidence)
    # No data is never a pass: an undecided guard keeps the verdict at most INCONCLUSIVE.
    open_ = [f"{g.category} guard {g.signal} {g.verdict}" for g in guards if g.signal not in optional and g.verdict in ("NO_DATA", "INCONCLUSIVE")]
    open_ += [why for _, why in missing_guard_caps(missing, optional)]
    if open_ and primary in ("IMPROVED", "NO_CHANGE"):
        names = ", ".join(open_)
        return "INCONCLUSIVE", f"{names} (not shown within its margin; optional_guards lifts this)"
    return primary, primary_reason


#: What decided a verdict or tempered it: the statistics, a cap (coverage, partial answer,
#: partial baseline), the aged baseline's period before the start, the design's effect, a
#: confound the design cannot remove, the guards.
ReasonKind = Literal["statistics", "window", "cap", "aged", "baseline-moved", "baseline-later-level", "design", "confound", "guards", "open-guards"]


@dataclass(frozen=True)
class Reason:
    """One typed reason on a :class:`Verdict`: its kind and its one-line text."""

    kind: ReasonKind
    text: str


@dataclass(frozen=True)
class PrimaryVerdict:
    """The primary signal's verdict after the caps and the design (steps 1-3 of the module doc).

    Attributes:
        verdict, reason: the primary's verdict and its one-line reason.
        estimate: the recorded effect (the design's, or the before-after one); None without one.
        judgement: the statistics behind the before-after comparison (look, memory, sides).
        design: what the comparison design said, with its context.
        caps: the caps that applied (kind ``cap``, ``aged``, ``baseline-moved``: the baseline moved inside its window, or
            ``baseline-later-level``: its test was suggestive and the window against its later part disagreed), in the order they were applied.
        decided_by: ``statistics`` (the before-after comparison) or ``design`` (the design's
            own verdict: its effect, or ``confound`` when a confound made it INCONCLUSIVE).
        note: the aged baseline's note (what was compared instead), or "".
    """

    verdict: VerdictName
    reason: str
    estimate: Estimate | None
    judgement: comparison.Judgement | None
    design: Outcome
    caps: tuple[Reason, ...] = ()
    decided_by: ReasonKind = "statistics"
    note: str = ""

    @property
    def assessment(self) -> Assessment | None:
        """How the recorded effect was reached, which the stored result and the outputs carry:
        the design's own (``Outcome.assessment``: its memory, effective samples, dof and the
        look's boundary) when it has an effect of its own, else the before-after comparison's
        (:func:`assessment_of`); a fresh copy each time (a result may add notes to it)."""
        own = self.design.assessment
        return own.model_copy(deep=True) if own is not None else assessment_of(self.judgement)


#: A baseline whose window ended at least this long before the start (and at least
#: 15 steps) has aged: verify compares with the period right before the start instead.
AGED_AFTER_SECONDS = 3600.0


def aged(initiative: Initiative, baseline: Baseline) -> bool:
    """True when ``baseline`` ended long enough before the start to be replaced by :func:`before_start`
    (only for a design that compares with the stored baseline period itself: before-after)."""
    gap = (initiative.started_at - baseline.window.end).total_seconds()
    return designs.design_of(initiative.design).own_baseline and gap >= max(AGED_AFTER_SECONDS, 15 * baseline.window.step_seconds)


def before_start_span(initiative: Initiative, baseline: Baseline) -> float:
    """Seconds of the period right before the start that replaces an aged baseline: as long
    as the baseline, at most the gap between its end and the start."""
    gap = (initiative.started_at - baseline.window.end).total_seconds()
    return min(gap, (baseline.window.end - baseline.window.start).total_seconds())


def before_start(spec: Spec, initiative: Initiative, baseline: Baseline,
                 m: Measurement | None) -> tuple[Baseline, tuple[VerdictName | None, str], str]:
    """The side an aged baseline is replaced by: the period right before the start (``m``,
    measured by :func:`obsctl.baselining.evidence.measure_before_start`; None: not aged).

    A before-after comparison against a baseline that ended hours or days before the
    start reads whatever moved in between (drift, demand, a release) as the change. So
    the verdict compares the window with the period right before ``started_at`` instead
    (:func:`before_start_span`), measured with the baseline's own PromQL at the
    verification step and judged under the baseline's memory model; the stored baseline
    stays the documented reference (its id, unit and query). Without usable data in that
    period the verdict is INCONCLUSIVE ("re-snapshot").

    Returns:
        ``(baseline to judge against, cap, note)``: the cap is ``(None, "")`` unless the
        period has no data; the note says what was compared and how far the signal moved.
    """
    if m is None:
        return baseline, (None, ""), ""
    cfg = spec.verification
    gap = (initiative.started_at - baseline.window.end).total_seconds()
    span = before_start_span(initiative, baseline)
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
                                           "coverage": m.coverage, "warnings": m.warnings, "partial": m.partial, "stationarity": None})
    note = (f"compared with the {format_duration(span)} right before the start: {aged_text} "
            f"(the signal moved {format_percent(moved)} in between)")
    return replaced, (None, ""), note


def judge_primary(ev: Evidence, baseline: Baseline, aged_cap: tuple[VerdictName | None, str] = (None, ""),
                  note: str = "") -> PrimaryVerdict:
    """Steps 1-3 for the primary signal: its window against ``baseline`` (the stored one, or
    the period before the start that replaced it), capped, then the design on the
    gathered answers to its plan.

    Args:
        ev: the evidence (its measurement, stored side, look, the design's setting and answers).
        aged_cap, note: the cap and the note of :func:`before_start` when the baseline aged.
    """
    spec, m, look = ev.spec, ev.measurement, ev.look
    cfg = spec.verification
    side = ev.side if ev.before_start is None else None  # an aged baseline's stored side is not the one compared
    verdict, reason, estimate, judgement = judge_signal(spec, baseline, m, look, side=side)
    reason = _window_reason(m, cfg.min_samples, verdict, reason)
    caps = caps_for(m, baseline, cfg.min_coverage_ratio) + ([aged_cap] if aged_cap[0] else [])
    later = (later_level_check(spec, baseline, m, look, verdict, estimate.change if estimate else None)
             if designs.design_of(ev.initiative.design).own_baseline else (None, ""))
    if later[0]:
        caps.append(later)
    if ev.transition is not None and ev.transition.too_short:  # the window after the change's transition is too short to judge
        caps.append(("INCONCLUSIVE", ev.transition.text()))
    verdict, reason = apply_caps(verdict, reason, caps)
    sig = next((x for x in spec.signals if x.name == baseline.signal), None)
    own = designs.min_fraction(ev.setting)  # a design judging another series than before-after's (profile) has its own t_min
    at = Look.at(look, own if own is not None else judgement.min_fraction if judgement is not None else None, cfg.confidence)
    design = designs.primary(ev.setting, ev.gathered, sig.category if sig else "unknown", baseline.direction, at)
    decided_by: ReasonKind = "statistics"
    if design.verdict and verdict != "NO_DATA":
        verdict, reason = apply_caps(design.verdict, design.reason, caps)
        decided_by = "design" if design.change_ratio is not None or design.context.get("effect") else "confound"
    if note:
        reason = f"{reason}; {note}"
    moved = stationarity_cap(baseline)
    typed = tuple(Reason("aged" if (v, r) == aged_cap else "baseline-moved" if (v, r) == moved else "baseline-later-level" if (v, r) == later
                         else "window" if ev.transition is not None and r == ev.transition.text() else "cap", r)
                  for v, r in caps)
    return PrimaryVerdict(verdict, reason, design.as_estimate(estimate), judgement, design, typed, decided_by, note)


def later_level_check(spec: Spec, baseline: Baseline, m, look: comparison.LookContext | None,
                      verdict: VerdictName, change: float | None) -> tuple[VerdictName | None, str]:
    """The cap of :mod:`obsctl.baselining.decide.later_level`: when the baseline's stationarity
    test was suggestive and the window's verdict (its estimate ``change``) decided
    (:func:`obsctl.baselining.decide.later_level.applies`), the window judged again against the
    level the baseline ended at (:func:`judge_signal`, same look and memory): the baseline's
    samples from the test's split on, or, when the trend test was the likelier move, the end
    of the baseline's least-squares line as a precomputed side
    (:func:`obsctl.baselining.decide.later_level.line_end`; the later part where there is no
    memory model or the location is a trimmed mean); INCONCLUSIVE when the two disagree.
    ``(None, "")`` otherwise, and for a baseline loaded without its samples
    (``evidence.gather`` loads them when the test was suggestive)."""
    st = baseline.stationarity
    if not later_level.applies(verdict, change, st) or len(baseline.samples) < 3:
        return None, ""
    tb, vb = columns(baseline.samples)
    line = later_reference(spec, baseline) == "line"
    if line:
        step = m.window.step_seconds
        end = later_level.line_end(tb, vb, step, memory_of(baseline))
        side = BaselineSide(baseline_id=baseline.id, step_seconds=step, constant=False, **dataclasses.asdict(end))
        later_verdict, _, est, _ = judge_signal(spec, baseline, m, look, side=side)
        size = int(tb.size)
    else:
        t, v = later_level.later_part(tb, vb, st)
        part = baseline.model_copy(update={"samples": list(zip(t.tolist(), v.tolist(), strict=True))})
        later_verdict, _, est, _ = judge_signal(spec, part, m, look)
        size = int(t.size)
    later = (est.change, est.low, est.high) if est else (None, None, None)
    return later_level.later_level_cap(verdict, later_verdict, later, st, size, later_level.later_remedy(baseline, line), line=line)


def later_reference(spec: Spec, baseline: Baseline) -> str:
    """What :func:`later_level_check` judges a suggestive baseline's window against:
    :func:`obsctl.baselining.decide.later_level.reference`, except ``"part"`` where the
    line's end has no variance to carry (no memory model) or the location judged is a
    trimmed mean (a line's end is a mean's)."""
    if baseline.stationarity is None:
        return "part"
    location, memory = location_for(spec, baseline, memory_of(baseline))
    usable = memory is not None and not location.robust
    return later_level.reference(baseline.stationarity) if usable else "part"


@dataclass(frozen=True)
class Verdict:
    """The verdict of one verify, with its reasons as data.

    Attributes:
        verdict, reason: the overall verdict and its one-line reason.
        decided_by: what decided it: the primary's own (``statistics``, ``design``,
            ``confound``), ``guards`` (a REGRESSED guard) or ``open-guards`` (a guard not
            shown within its margin kept it INCONCLUSIVE).
        primary: the primary signal's verdict (:class:`PrimaryVerdict`).
        baseline: the baseline the window was judged against (the period before the start
            when the stored one aged).
        guards: each guard's result after Holm's step-down, in the evidence's order.
        regressed, open_guards: the guards' signals that made it REGRESSED / kept it INCONCLUSIVE
            (a chosen guard without a baseline, ``Evidence.guards_missing``, among the latter).
        notes: the primary's statistical notes, typed, each in plain words and in full
            (:func:`notes_of`), then the sequence's level kept; each guard carries its own
            (``GuardResult.notes``).
    """

    verdict: VerdictName
    reason: str
    decided_by: ReasonKind
    primary: PrimaryVerdict
    baseline: Baseline
    guards: tuple[GuardResult, ...] = ()
    regressed: tuple[str, ...] = ()
    open_guards: tuple[str, ...] = ()
    notes: tuple[Note, ...] = ()


def decide(ev: Evidence) -> Verdict:
    """The verdict of the gathered evidence: the module doc's steps, no I/O.

    Each guard is judged at its Bonferroni share (:func:`judge_guard`) on its own look, then
    Holm's step-down re-judges where it allows (:func:`holm`) at the primary look's level;
    the overall verdict by :func:`overall_verdict`.
    """
    cfg = ev.spec.verification
    baseline, aged_cap, note = before_start(ev.spec, ev.initiative, ev.baseline, ev.before_start)
    primary = judge_primary(ev, baseline, aged_cap, note)
    judged = [judge_guard(ev.spec, g.baseline, g.measurement, g.look, len(ev.guards), g.side) for g in ev.guards]
    guards = holm([g for g, _ in judged], [again for _, again in judged], 1 - ev.look.confidence)
    overall, reason = overall_verdict(primary.verdict, primary.reason, guards, cfg.confidence, cfg.optional_guards, ev.guards_missing)
    regressed = tuple(g.signal for g in guards if g.verdict == "REGRESSED")
    open_ = tuple(g.signal for g in guards if g.signal not in cfg.optional_guards and g.verdict in ("NO_DATA", "INCONCLUSIVE"))
    open_ += tuple(name for name in ev.guards_missing if name not in cfg.optional_guards)
    if primary.verdict in ("NO_DATA", "REGRESSED") or overall == primary.verdict and reason == primary.reason:
        decided_by = primary.decided_by
    else:
        decided_by = "guards" if overall == "REGRESSED" else "open-guards"
    # A design that judged its own effect speaks for itself: the before-after checks' notes are not its.
    own = primary.design.assessment is not None
    notes = (notes_of(primary.judgement) if not own else []) + ([note_of("level", ev.level_note)] if ev.level_note else [])
    if any(c.kind == "baseline-moved" for c in primary.caps):
        notes = moved_notes(baseline) + notes
    if any(c.kind == "baseline-later-level" for c in primary.caps) and baseline.stationarity is not None:
        line = later_reference(ev.spec, baseline) == "line"
        notes = [note_of("baseline-later-level", f"baseline {baseline.id}: {later_level.later_detail(baseline.stationarity, line)}")] + notes
    return Verdict(overall, reason, decided_by, primary, baseline, tuple(guards), regressed if decided_by == "guards" else (),
                   open_ if decided_by == "open-guards" else (), tuple(notes))
