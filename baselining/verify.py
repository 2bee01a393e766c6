"""``obsctl verify`` and ``obsctl baseline promote``: judge an initiative against its baseline.

The initiative's primary signal is measured over the verification window with the
baseline's PromQL (so both sides are the same expression) and judged against the
baseline's samples by :func:`obsctl.baselining.statistics.comparison.judge`
(docs/verification.md): the baseline's memory model (estimated at snapshot time from
the days before it), the long-run variance of each side's mean, Fieller's interval of
the relative change at the look's repeated-confidence level (Lan-DeMets alpha spending
over the saved looks, up to the planned window), then superiority / equivalence rules.
The regression alerts of the class that fired in the window are read from Prometheus'
``ALERTS`` series. The result is appended to the initiative (status ``verified``).

Default window: cumulative from the initiative's start to now, capped at the planned
length (:func:`obsctl.baselining.plan.planned_seconds`).

Guard signals (``verification.guards``: categories or names, default quality and cost):
each is measured over the same window with its own baseline's PromQL and judged as a
non-inferiority test with margin ``tolerance_ratio`` at a Bonferroni share of the
error. A REGRESSED guard turns the overall verdict into REGRESSED (an "optimization"
that degrades quality or cost is a regression, DESIGN.md); a quality guard that is
NO_DATA / INCONCLUSIVE keeps it at most INCONCLUSIVE unless in
``verification.optional_guards`` (:func:`overall_verdict`).

Exit codes of ``obsctl verify`` (one per verdict, for pipelines):
IMPROVED 0, NO_CHANGE 10, INCONCLUSIVE 11, REGRESSED 12, NO_DATA 13.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from concurrent.futures import Future
from operator import itemgetter

import numpy as np
from obsctl.baselining.measure import coverage
from obsctl.baselining.designs import run as designs
from obsctl.baselining.plan import planned_seconds
from obsctl.records import Assessment, Baseline, BaselineSide, GuardResult, Initiative, Verdict, VerificationResult
from obsctl.baselining.statistics import comparison as decision
from obsctl.baselining.statistics.decision import Estimate
from obsctl.baselining.statistics.lrv import Side
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.promapi import PrometheusClient
from obsctl.baselining.snapshot import measure
from obsctl.baselining.store import Store
from obsctl.timeutil import align_down, check_window_points, minus_seconds, rfc3339, utcnow
from obsctl.durations import format_duration, parse_duration
from obsctl.baselining.workers import DaemonPool
from obsctl.errors import StoreError, UsageError
from obsctl.spec import Spec, escape_label_value

#: ``obsctl verify`` exit code per verdict.
#: Worker threads of one verify for the primary's window, its load context, the guards and the alerts query
#: (the calling thread loads the baseline and judges; the load context has its own pool,
#: designs.run.LOAD_CONCURRENCY).
VERIFY_CONCURRENCY = 4

VERDICT_EXIT_CODES: dict[str, int] = {"IMPROVED": 0, "NO_CHANGE": 10, "INCONCLUSIVE": 11, "REGRESSED": 12, "NO_DATA": 13}


def resolve_initiative(store: Store, initiative_id: str | None, workload_class: str | None) -> Initiative:
    """The initiative named by ``--initiative``, or the active one of ``--class``.

    Raises:
        UsageError: neither given. StoreError: unknown id or no active initiative on the class.
    """
    if initiative_id:
        return store.initiative(initiative_id)
    if workload_class:
        active = store.open_initiative(workload_class)
        if active is None:
            raise StoreError(f"workload class {workload_class!r} has no open initiative (start one: obsctl initiative start)")
        return active
    raise UsageError("give --initiative ID or --class NAME")


def verification_window(
    initiative: Initiative, step_seconds: float, window: str, start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime | None = None,
    allow_before_start: bool = False,
) -> tuple[dt.datetime, dt.datetime]:
    """``(start, end)`` of the verification window.

    ``end`` defaults to now and is aligned down to the step. ``start`` defaults to the
    initiative's start, capped so the window is at most ``window`` long (the most recent
    part is kept); an explicit ``start`` is used as given.

    A window that begins before the initiative's ``started_at`` would measure the state
    before the change as its effect, so it is refused unless ``allow_before_start``.

    Raises:
        UsageError: the window is empty (start not before end), begins before the
            initiative started (naming ``--start``/``--end`` and ``started_at``), or has
            more than ``promapi.MAX_RANGE_POINTS`` points at the step.
    """
    end_at = align_down(end or now or utcnow(), step_seconds)
    started = initiative.started_at
    if start is None:
        length = parse_duration(window, "--window")
        # Compare in seconds: end_at - a very long --window may not be a datetime.
        capped = end_at.timestamp() - length > started.timestamp()
        start_at = minus_seconds(end_at, length, "--window") if capped else started
        flag = "--window"
    else:
        start_at, flag = start, "--start"
    if not allow_before_start:
        if end_at <= started:
            raise UsageError(
                f"--end {rfc3339(end_at)} is not after the initiative's start {rfc3339(started)} ({initiative.id}): "
                "the window holds nothing measured after the change; use a later --end, or --allow-before-start"
            )
        if start is not None and start_at < started:
            raise UsageError(
                f"--start {rfc3339(start_at)} is before the initiative's start {rfc3339(started)} ({initiative.id}): "
                "that window measures the state before the change; use a later --start, or --allow-before-start"
            )
    if start_at >= end_at:
        raise UsageError(f"verification window is empty: start {start_at.isoformat()} is not before end {end_at.isoformat()}")
    check_window_points(start_at, end_at, step_seconds, flag)
    return start_at, end_at


def alerts_fired(client: PrometheusClient, workload_class: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    """Obsctl alerts of the class that were firing at any evaluation in ``(start, end]``.

    Queries ``count_over_time(ALERTS{alertname=~"Obsctl.*", workload_class="C",
    alertstate="firing"}[<window>s])`` at ``end``: every ``ALERTS`` sample Prometheus wrote
    in the window counts, however short the firing.

    Returns:
        Sorted names, ``Alertname{signal="s"}`` when the alert has a ``signal`` label.
    """
    seconds = max(1, int(round((end - start).total_seconds())))
    query = (
        f'count_over_time(ALERTS{{alertname=~"Obsctl.*",workload_class="{escape_label_value(workload_class)}",'
        f'alertstate="firing"}}[{seconds}s])'
    )
    names = set()
    for sample in client.query(query, end):
        name = sample.metric.get("alertname", "?")
        signal = sample.metric.get("signal")
        names.add(f'{name}{{signal="{signal}"}}' if signal else name)
    return sorted(names)


def guard_ids(spec: Spec, store: Store, initiative: Initiative) -> list[str]:
    """The guard signals' baseline ids: every signal chosen by ``verification.guards``
    (categories or names; default quality and cost) other than the primary that has a
    baseline for the initiative's class, sorted by signal name.

    A baseline recorded when the initiative started (``guard_baseline_ids``) is used
    when present, so a snapshot taken during the initiative cannot absorb its effect;
    otherwise the class x signal's current baseline (initiatives started before guards
    were recorded, or signals first baselined later). Signals no longer in the spec
    are skipped.
    """
    current = store.current_index().get(initiative.workload_class, {})
    chosen = set(spec.verification.guards)
    out = []
    for sig in sorted(s.name for s in spec.signals if s.name in chosen or s.category in chosen):
        if sig == initiative.primary_signal:
            continue
        baseline_id = initiative.guard_baseline_ids.get(sig) or current.get(sig)
        if baseline_id:
            out.append(baseline_id)
    return out


def guard_baselines(spec: Spec, store: Store, initiative: Initiative) -> list[Baseline]:
    """The baselines of :func:`guard_ids`, in its order."""
    return [store.baseline(baseline_id) for baseline_id in guard_ids(spec, store, initiative)]


def evaluate_guard(spec: Spec, client: PrometheusClient, baseline: Baseline, start_at: dt.datetime, end_at: dt.datetime, step: float,
                   look: decision.LookContext | None = None, guards: int = 1, side: BaselineSide | None = None) -> GuardResult:
    """Measure one guard signal over ``(start_at, end_at]`` with its baseline's PromQL and
    judge it as a non-inferiority test (margin: the signal's ``tolerance_ratio``) at its
    Bonferroni share ``2 (1 - confidence) / guards`` of the two-sided error. ``side``: the
    baseline's stored side (:func:`stored_side`), which spares its samples.

    Raises:
        PrometheusUnavailable: as :func:`obsctl.baselining.snapshot.measure`.
    """
    cfg = spec.verification
    m = measure(client, baseline.query, start_at, end_at, step, cfg.min_samples, what=f"{baseline.workload_class}/{baseline.signal} (guard)",
                on_change=baseline.signal in cfg.fresh_on_change)
    sig = next((s for s in spec.signals if s.name == baseline.signal), None)
    tolerance = sig.tolerance_ratio if sig is not None else 0.10
    verdict, reason, est, j = judge_signal(spec, baseline, m, look, guard_tolerance=tolerance, guard_alpha=2 * (1 - cfg.confidence) / max(guards, 1),
                                           side=side)
    reason = _window_reason(m, cfg.min_samples, verdict, reason)
    # Coverage, partial answers and a partial baseline cap the verdict (measure.coverage).
    verdict, reason = coverage.cap_verdict(verdict, reason, m, baseline, cfg.min_coverage_ratio)
    category = next((s.category for s in spec.signals if s.name == baseline.signal), "unknown")
    return GuardResult(
        signal=baseline.signal, category=category, unit=baseline.unit, direction=baseline.direction,
        baseline_id=baseline.id, query=baseline.query, verdict=verdict, reason=reason,
        baseline_mean=est.baseline_mean if est else baseline.stats.mean,
        window_mean=est.window_mean if est else (m.stats.mean if m.stats else None),
        change_ratio=est.change if est else None, ci_low=est.low if est else None, ci_high=est.high if est else None,
        exact=bool(est and est.exact), window_stats=m.stats, population=m.population, samples=m.samples,
        coverage=m.coverage, warnings=m.warnings, partial=m.partial, assessment=_assessment(j),
    )


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
    b = decision.baseline_side(*columns(baseline.samples), step, memory)
    return BaselineSide(baseline_id=baseline.id, step_seconds=step, constant=b.constant, **dataclasses.asdict(b.side))


def side_for(initiative: Initiative, baseline_id: str) -> BaselineSide | None:
    """The side stored for ``baseline_id`` on the initiative, or None."""
    return next((s for s in getattr(initiative, "baseline_sides", ()) if s.baseline_id == baseline_id), None)


def memory_of(baseline: Baseline) -> MemoryModel | None:
    """The baseline's stored memory model (None for baselines stored before it existed)."""
    return MemoryModel.from_dict(baseline.memory.model_dump()) if baseline.memory is not None else None


def look_context(spec: Spec, initiative: Initiative, guard: str | None = None, planned: float | None = None) -> decision.LookContext:
    """This verify's place among the initiative's saved looks (docs/verification.md, Repeated looks).

    The look number is one more than the saved verifications; the earlier looks'
    information fractions (of the primary, or of guard ``guard``) fix the boundary."""
    fractions = []
    for v in initiative.verifications:
        a = v.assessment if guard is None else next((g.assessment for g in v.guards if g.signal == guard), None)
        if a is not None and a.information_fraction is not None:
            fractions.append(a.information_fraction)
    default = parse_duration(spec.verification.window, "verification.window")
    return decision.LookContext(len(initiative.verifications) + 1, tuple(fractions), planned or default)


def judge_signal(spec: Spec, baseline: Baseline, m, look: decision.LookContext | None, guard_tolerance: float | None = None,
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
    base = decision.BaselineSide(Side(**side.model_dump(exclude={"baseline_id", "step_seconds", "constant"})), side.constant,
                                 side.step_seconds) if usable else columns(baseline.samples)
    j = decision.judge(base, columns(m.samples), step, memory, cfg.confidence, baseline.direction,
                       cfg.min_effect_ratio, look, guard_tolerance, guard_alpha)
    est = Estimate(j.change, j.low, j.high, j.confidence or cfg.confidence, j.dof, j.exact,
                   j.baseline_mean if j.baseline_mean is not None else baseline.stats.mean,
                   j.window_mean if j.window_mean is not None else m.stats.mean, j.reason)
    return j.verdict, j.reason, est, j


def _assessment(j) -> Assessment | None:
    return Assessment(**j.details()) if j is not None else None


def _window_reason(m, min_samples: int, verdict: Verdict, reason: str) -> str:
    # A NO_DATA window says why in the measurement's words ("240 samples, all NaN/Inf").
    if verdict == "NO_DATA" and m.no_data_reason(min_samples):
        return f"window: {m.no_data_reason(min_samples)}"
    return reason


def overall_verdict(primary: Verdict, primary_reason: str, guards: list[GuardResult], confidence: float,
                    optional: tuple[str, ...] | list[str] = ()) -> tuple[Verdict, str]:
    """The overall verdict from the primary's and the guards' verdicts.

    Precedence: a primary NO_DATA or REGRESSED stands (no data is never a pass; a
    regression is already the worst verdict). Otherwise any REGRESSED guard makes the
    overall verdict REGRESSED, with a reason naming each such guard, e.g. ``quality
    guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %)``.
    Otherwise a quality guard that is NO_DATA or INCONCLUSIVE (not in ``optional``)
    turns IMPROVED or NO_CHANGE into INCONCLUSIVE. Other guards never change it.

    Returns:
        ``(verdict, reason)``.
    """
    text = guard_regressions(guards, confidence)
    if primary in ("NO_DATA", "REGRESSED"):
        return primary, primary_reason
    if text:
        return "REGRESSED", f"{text}; primary was {primary} ({primary_reason})"
    # No data is never a pass: an undecided quality guard keeps the verdict at most INCONCLUSIVE.
    open_ = [g for g in guards if g.category == "quality" and g.signal not in optional and g.verdict in ("NO_DATA", "INCONCLUSIVE")]
    if open_ and primary in ("IMPROVED", "NO_CHANGE"):
        names = ", ".join(f"{g.signal} {g.verdict}" for g in open_)
        return "INCONCLUSIVE", f"quality guard {names} (not shown within its tolerance; optional_guards lifts this); primary was {primary} ({primary_reason})"
    return primary, primary_reason


def guard_regressions(guards: list[GuardResult], confidence: float) -> str:
    """``quality guard q regressed -10.0 % (95 % CI -11.2 % .. -8.8 %)`` for each REGRESSED guard, ``; ``-joined ("" if none)."""
    return "; ".join(
        f"{g.category} guard {g.signal} regressed {format_percent(g.change_ratio) if g.change_ratio is not None else f'from {format_number(g.baseline_mean)} to {format_number(g.window_mean)}'} "
        f"({_interval(g.ci_low, g.ci_high, (g.assessment.interval_confidence if g.assessment and g.assessment.interval_confidence else confidence), g.exact)})"
        for g in guards if g.verdict == "REGRESSED"
    )


def confidence_text(confidence: float) -> str:
    """``0.95`` -> ``95 %``; a look's repeated-confidence level ``0.99873`` -> ``99.87 %``."""
    return f"{confidence * 100:.2f}".rstrip("0").rstrip(".") + " %"


def _interval(low: float | None, high: float | None, confidence: float, exact: bool = False) -> str:
    if exact:
        return "exact: both sides constant"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{confidence_text(confidence)} CI undefined"
    return f"{confidence_text(confidence)} CI {format_percent(low)} .. {format_percent(high)}"


def statistics_line(result: VerificationResult) -> str:
    """``statistics: look 2, boundary z = 2.96 (99.7 % interval), window 30 min of planned 1 h; memory 9.8 min
    (3.0 d of history), 7.3 / 3.6 effective samples (baseline / window), 880 dof; <reason>`` ("" without an assessment)."""
    a = result.assessment
    if a is None:
        return ""
    dur = format_duration
    parts = []
    if a.look is not None:
        bound = f", boundary z = {a.boundary_z:.2f}" if a.boundary_z is not None else ""
        conf = f" ({confidence_text(a.interval_confidence)} interval)" if a.interval_confidence else ""
        span = (result.window.end - result.window.start).total_seconds()
        planned = f", window {dur(span)} of planned {dur(a.planned_seconds)}" if a.planned_seconds else ""
        parts.append(f"look {a.look}{bound}{conf}{planned}")
    if a.tau_seconds is not None:
        src = "from the windows only: a lower bound" if a.memory_source == "windows" else "from history"
        eff = (f", {a.n_eff_baseline:.1f} / {a.n_eff_window:.1f} effective samples (baseline / window)"
               if a.n_eff_baseline is not None and a.n_eff_window is not None else "")
        dof = f", {a.dof:.0f} dof" if a.dof is not None else ""
        parts.append(f"memory {dur(a.tau_seconds)} ({src}){eff}{dof}")
    return "statistics: " + "; ".join(parts + [result.reason]) if parts else ""


def verify(
    spec: Spec,
    client: PrometheusClient,
    store: Store,
    initiative_id: str | None = None,
    workload_class: str | None = None,
    window: str | None = None,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    now: dt.datetime | None = None,
    save: bool = True,
    guards: bool = True,
    allow_before_start: bool = False,
) -> tuple[Initiative, VerificationResult]:
    """Verify an initiative: measure its window, compare with its baseline, record the result.

    The baseline is the one current when the initiative started (``baseline_id``), so
    a snapshot taken during the initiative cannot absorb its effect. With ``guards``
    every other signal of the class with a baseline (:func:`guard_baselines`) is
    judged over the same window and can turn the verdict into REGRESSED
    (:func:`overall_verdict`).

    Returns:
        ``(initiative as saved, result)``; ``VERDICT_EXIT_CODES[result.verdict]`` is the
        exit code.

    Raises:
        UsageError, StoreError, PrometheusUnavailable: as the helpers above.
        VerdictNotSaved: the verdict was reached but could not be stored (it carries
            the initiative and the result, so the caller can still report the verdict).
    """
    if workload_class and not initiative_id:
        spec.workload_class(workload_class)  # a class the spec does not define: SpecError (exit 2) naming the valid ones
    initiative = resolve_initiative(store, initiative_id, workload_class)
    if initiative.status not in ("open", "verified"):
        raise StoreError(f"initiative {initiative.id!r} is {initiative.status}; only open or verified initiatives can be verified")
    cfg = spec.verification
    step = parse_duration(cfg.step, "verification.step")
    # The planned length was fixed at start; older initiatives re-plan from the baseline.
    baseline = None
    if initiative.planned_window_seconds:
        planned = initiative.planned_window_seconds
    else:
        baseline = store.baseline(initiative.baseline_id) if initiative.baseline_id else None
        planned = planned_seconds(spec, initiative, baseline)
    if window is None and start is None:
        # A look is the cumulative window from the initiative's start, up to the planned length.
        cap = initiative.started_at + dt.timedelta(seconds=planned)
        end = min(end or now or utcnow(), cap) if end is None or end > initiative.started_at else end
        start_at, end_at = verification_window(initiative, step, f"{planned:.0f}s", None, end, now, allow_before_start)
    else:
        start_at, end_at = verification_window(initiative, step, window or cfg.window, start, end, now, allow_before_start)
    # The Prometheus calls run on worker threads (the client's one session): the primary's
    # window (when its query is known from the baseline's record alone: not a canary without
    # a baseline) while its baseline's samples load here, the guards, the alerts query.
    # Errors surface in the sequential order: the primary's, then each guard's, then the alerts'.
    chosen = guard_ids(spec, store, initiative) if guards else []
    head = baseline or (store.baseline(initiative.baseline_id, samples=False) if initiative.baseline_id else None)
    # Daemon workers (baselining.workers): an error or Ctrl-C here ends the command without
    # waiting for the calls still in flight.
    with DaemonPool(max_workers=VERIFY_CONCURRENCY, thread_name_prefix="obsctl-verify") as pool:
        measured = None if head is None else pool.submit(_measure_primary, spec, client, initiative, head, start_at, end_at, step)
        periods = designs.context_periods(initiative, head, start_at, end_at)
        loads = None if periods is None else pool.submit(designs.period_loads, spec, client, spec.workload_class(initiative.workload_class),
                                                         periods, step)
        pending = [pool.submit(_guard, spec, client, store, gid, start_at, end_at, step, initiative, planned, len(chosen)) for gid in chosen]
        pending.append(pool.submit(alerts_fired, client, initiative.workload_class, start_at, end_at))
        try:
            return _verify_primary(spec, client, store, initiative, baseline, start_at, end_at, step, planned, guards, save, measured, pending,
                                   loads)
        finally:
            for future in [measured, loads, *pending]:
                if future is not None:
                    future.cancel()


def _measure_primary(spec: Spec, client: PrometheusClient, initiative: Initiative, baseline: Baseline, start_at: dt.datetime,
                     end_at: dt.datetime, step: float):
    # A canary's window is its treatment group's (designs.run.window_query): promote makes it the baseline.
    return measure(client, designs.window_query(spec, initiative, baseline), start_at, end_at, step, spec.verification.min_samples,
                   what=f"{initiative.workload_class}/{initiative.primary_signal}",
                   on_change=baseline.signal in spec.verification.fresh_on_change)


def _guard(spec: Spec, client: PrometheusClient, store: Store, baseline_id: str, start_at: dt.datetime, end_at: dt.datetime, step: float,
           initiative: Initiative, planned: float, guards: int) -> GuardResult:
    side = side_for(initiative, baseline_id)
    b = store.baseline(baseline_id, samples=side is None)  # the stored side spares the samples
    return evaluate_guard(spec, client, b, start_at, end_at, step, look_context(spec, initiative, b.signal, planned), guards, side)


def _verify_primary(spec: Spec, client: PrometheusClient, store: Store, initiative: Initiative, baseline: Baseline | None,
                    start_at: dt.datetime, end_at: dt.datetime, step: float, planned: float, guards: bool, save: bool,
                    measured: Future | None, pending: list[Future], loads: Future | None = None) -> tuple[Initiative, VerificationResult]:
    # verify()'s primary signal (``measured``: its window's measurement under way, or None; ``loads``:
    # the design's load context under way, or None), its verdict with the guards' (``pending``:
    # guard results, then the alerts), and the save.
    cfg = spec.verification
    side = side_for(initiative, initiative.baseline_id) if initiative.baseline_id else None
    if baseline is None and initiative.baseline_id:
        # Before-after with the baseline's side and cycle fit stored at start needs no samples.
        needs_samples = side is None or initiative.design != "before-after" or initiative.baseline_cycle is None
        baseline = store.baseline(initiative.baseline_id, samples=needs_samples)
    if baseline is None:  # a canary started without a baseline: its control group's window stands in (designs.run)
        baseline = designs.control_group_baseline(spec, client, store, initiative, start_at, end_at, step)
    m = measured.result() if measured is not None else _measure_primary(spec, client, initiative, baseline, start_at, end_at, step)
    verdict, reason, estimate, judgement = judge_signal(spec, baseline, m, look_context(spec, initiative, planned=planned),
                                                        side=side if side is not None and side.baseline_id == baseline.id else None)
    reason = _window_reason(m, cfg.min_samples, verdict, reason)
    # Coverage, partial answers and a partial baseline cap the verdict (measure.coverage).
    verdict, reason = coverage.cap_verdict(verdict, reason, m, baseline, cfg.min_coverage_ratio)
    # The comparison design (designs.run): control / canary / seasonal replace the
    # before-after effect; every design adds the demand, saturation, cycle and mix context.
    sig = next((x for x in spec.signals if x.name == baseline.signal), None)
    design = designs.primary(spec, client, initiative, baseline, m.samples, start_at, end_at, step,
                             sig.category if sig else "unknown", baseline.direction,
                             confidence=judgement.confidence if judgement is not None and judgement.confidence else None,
                             loads=loads.result if loads is not None and baseline is not None and baseline.id == initiative.baseline_id else None)
    if design.verdict and verdict != "NO_DATA":
        verdict, reason = coverage.cap_verdict(design.verdict, design.reason, m, baseline, cfg.min_coverage_ratio)
    estimate = design.as_estimate(estimate)
    *guard_results, fired = [future.result() for future in pending]
    overall, overall_reason = overall_verdict(verdict, reason, guard_results, cfg.confidence, cfg.optional_guards)
    result = VerificationResult(
        verdict=overall,
        primary_verdict=verdict,
        guards=guard_results,
        guards_evaluated=guards,
        baseline_id=baseline.id,
        signal=baseline.signal,
        window=m.window,
        baseline_mean=estimate.baseline_mean if estimate else baseline.stats.mean,
        window_mean=estimate.window_mean if estimate else (m.stats.mean if m.stats else None),
        change_ratio=estimate.change if estimate else None,
        ci_low=estimate.low if estimate else None,
        ci_high=estimate.high if estimate else None,
        confidence=judgement.confidence if judgement is not None and judgement.confidence else cfg.confidence,
        alerts_fired=fired,
        window_stats=m.stats,
        population=m.population,
        query=baseline.query,
        samples=m.samples,
        reason=overall_reason,
        verified_at=utcnow(),
        coverage=m.coverage, warnings=m.warnings, partial=m.partial, assessment=_assessment(judgement),
        design=design.design, design_context=design.context,
    )
    if save:
        try:
            with store.locked():
                current = store.initiative(initiative.id)
                saved = current.model_copy(update={"status": "verified", "verifications": [*current.verifications, result]})
                store.save_initiative(saved)
        except StoreError as exc:
            raise VerdictNotSaved(str(exc), initiative, result) from None
        initiative = saved
    return initiative, result


class VerdictNotSaved(StoreError):
    """``verify`` reached a verdict but could not store it on the initiative (exit 1).

    Attributes:
        initiative: the initiative as it was (unchanged in the store).
        result: the verdict that was not stored; ``obsctl verify`` still prints it.
    """

    def __init__(self, message: str, initiative: Initiative, result: VerificationResult):
        super().__init__(f"verdict {result.verdict} not saved: {message}")
        self.initiative = initiative
        self.result = result


def promote(spec: Spec, store: Store, initiative_id: str) -> tuple[Initiative, list[Baseline]]:
    """Make an IMPROVED initiative's verification window the current baseline(s).

    Only after an overall IMPROVED (so no guard regressed). The primary signal's window
    becomes its class x signal's current baseline (``source=promoted``), and so does
    every guard signal's window that has data (its verdict is not NO_DATA), each with
    its own baseline's PromQL, unit and direction. The old baselines stay in the
    history. The initiative becomes ``promoted`` (its class is free for the next one).

    Returns:
        ``(initiative, [primary baseline, guard baselines...])`` as stored.

    Raises:
        StoreError: unknown initiative, not verified, or latest verdict not IMPROVED.
    """
    with store.locked():
        initiative = store.initiative(initiative_id)
        if initiative.status != "verified" or not initiative.verifications:
            raise StoreError(f"initiative {initiative_id!r} is {initiative.status}; promote needs a verified initiative (run obsctl verify first)")
        result = initiative.verifications[-1]
        if result.verdict != "IMPROVED" or result.window_stats is None:
            raise StoreError(f"initiative {initiative_id!r}: latest verdict is {result.verdict}; only an IMPROVED window can become the baseline")
        created = utcnow()
        sides = [(store.baseline(result.baseline_id), result.query, result.window_stats, result.population, result.samples)]
        for g in result.guards:
            if g.verdict != "NO_DATA" and g.window_stats is not None:
                sides.append((store.baseline(g.baseline_id), g.query, g.window_stats, g.population, g.samples))
        stored = []
        for old, query, window_stats, population, samples in sides:
            baseline = Baseline(
                id=f"{old.workload_class}.{old.signal}.{created.strftime('%Y%m%dT%H%M%SZ')}",
                workload_class=old.workload_class, signal=old.signal, unit=old.unit, direction=old.direction,
                query=query or old.query, window=result.window,
                population=population or old.population, stats=window_stats,
                created_at=created, source="promoted", initiative=initiative.id, samples=samples,
                memory=old.memory,  # the memory is the signal's, estimated from the history before the old baseline
            )
            stored.append(store.save_baseline(baseline, make_current=True))
        promoted = initiative.model_copy(update={"status": "promoted"})
        store.save_initiative(promoted)
    return promoted, stored


def format_number(value: float | None) -> str:
    """``2410.3`` -> ``2,410``; ``0.8312`` -> ``0.8312``; None -> ``n/a``."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def format_percent(ratio: float | None) -> str:
    """``2.184`` -> ``+218.4 %``; None, NaN or Inf -> ``n/a``."""
    return "n/a" if ratio is None or not math.isfinite(ratio) else f"{ratio * 100:+.1f} %"


def guards_line(result: VerificationResult) -> str:
    """``guards: usd_per_million_tokens IMPROVED -48.0 %, probe_cosine_similarity NO_CHANGE, gpu_utilization NO_DATA``.

    The change is shown for IMPROVED, REGRESSED and INCONCLUSIVE guards when defined.
    """
    if not result.guards_evaluated:
        return "guards: not evaluated"
    if not result.guards:
        return "guards: none (no signal chosen by verification.guards, other than the primary, has a baseline for this class)"
    parts = []
    for g in result.guards:
        show = g.verdict in ("IMPROVED", "REGRESSED", "INCONCLUSIVE") and g.change_ratio is not None
        parts.append(f"{g.signal} {g.verdict}" + (f" {format_percent(g.change_ratio)}" if show else ""))
    return "guards: " + ", ".join(parts)


def verdict_line(result: VerificationResult, unit: str) -> str:
    """One readable line, e.g. ``IMPROVED: tokens_per_second +218.4 % (95 % CI +205.1 % .. +231.9 %),
    baseline 2,410 -> window 7,673 tokens/s; alerts fired: none``.

    When a guard overrode the primary's verdict the line starts with the overall
    verdict and its reason, then the primary: ``REGRESSED: quality guard q regressed
    -10.0 % (95 % CI ..); primary tokens_per_second IMPROVED +30.0 % (..), baseline ..``."""
    alerts = ", ".join(result.alerts_fired) or "none"
    primary = result.primary_verdict or result.verdict
    if primary != result.verdict:
        lead = guard_regressions(result.guards, result.confidence) or result.reason.split("; primary was")[0]
        return (
            f"{result.verdict}: {lead}; primary {result.signal} {primary} {format_percent(result.change_ratio)} "
            f"({_interval(result.ci_low, result.ci_high, result.confidence)}), "
            f"baseline {format_number(result.baseline_mean)} -> window {format_number(result.window_mean)} {unit}; alerts fired: {alerts}"
        )
    if result.verdict == "NO_DATA":
        return f"NO_DATA: {result.signal}: {result.reason}; alerts fired: {alerts}"
    if result.ci_low is None or result.ci_high is None or not (math.isfinite(result.ci_low) and math.isfinite(result.ci_high)):
        interval = f"{confidence_text(result.confidence)} CI undefined: {result.reason}"
    else:
        interval = f"{confidence_text(result.confidence)} CI {format_percent(result.ci_low)} .. {format_percent(result.ci_high)}"
    return (
        f"{result.verdict}: {result.signal} {format_percent(result.change_ratio)} ({interval}), "
        f"baseline {format_number(result.baseline_mean)} -> window {format_number(result.window_mean)} {unit}; alerts fired: {alerts}"
    )
