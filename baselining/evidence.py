"""The evidence of one verdict, gathered in one I/O step (``verify``'s only talk with Prometheus).

What a verdict needs, read before anything is decided: the primary's window (with the
baseline's PromQL, a canary's treatment group's), the baseline's samples or its stored
side, the period right before the start when the baseline aged, the queries the
initiative's design declares (``Design.plan``: reference series, history for the
memory, the demand and saturation of the periods, the mix segments), each guard's
window with its look, and the alerts that fired. The result is one frozen
:class:`Evidence`; :func:`obsctl.baselining.decide.verdict.decide` turns it into the verdict
with no I/O, so a test or a benchmark can build the same evidence from arrays.

Errors (Prometheus unavailable, a refused query, a store error) surface here, in the
order the evidence is read: the primary's, the aged baseline's, the design's, each
guard's, the alerts'.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from obsctl.baselining import looks
from obsctl.baselining.decide import later_level, verdict
from obsctl.baselining.decide.sides import side_for
from obsctl.baselining.designs import demand
from obsctl.baselining.designs import mix as mixing
from obsctl.baselining.designs import run as designs
from obsctl.baselining.designs.branch import Gathered, Plan, Query, Setting, with_labels
from obsctl.baselining.measure import transition as transitions
from obsctl.baselining.measure.window import Measurement, MeasureRequest, measure, population_of
from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.store import Store
from obsctl.baselining.workers import DaemonPool
from obsctl.errors import PrometheusUnavailable, StoreError, UsageError
from obsctl.promapi import MAX_RANGE_POINTS, PrometheusClient, TooManySeries
from obsctl.records import Baseline, BaselineSide, Initiative
from obsctl.rules import canonical, saturation
from obsctl.rules.lookback import Lookback, lookback, raw_selectors, recording_rules
from obsctl.spec import Spec, WorkloadClass, escape_label_value
from obsctl.timeutil import utcnow


@dataclass(frozen=True)
class GuardEvidence:
    """One guard signal's evidence: its baseline (samples only without a stored ``side``),
    its window over the verification window, and its look on its own sequence."""

    baseline: Baseline
    measurement: Measurement
    look: LookContext
    side: BaselineSide | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything :func:`obsctl.baselining.decide.verdict.decide` reads.

    Attributes:
        spec, initiative: the spec and the initiative being verified.
        baseline: the initiative's baseline as stored (for a canary started without one, its
            control group's window, stored by :func:`control_group_baseline`).
        measurement: the primary's window.
        side: the baseline's side stored at initiative start, when it is this baseline's (else None).
        before_start: the period right before the start, measured when the baseline aged
            (:func:`obsctl.baselining.decide.verdict.aged`); None otherwise.
        look, level_note: the look's place on the change's sequence (:func:`obsctl.baselining.looks.context`).
        setting: what the design planned from (its ``level`` is set by the verdict).
        gathered: the answers to the design's plan.
        guards: each guard's evidence, in the spec's order.
        alerts: the class's obsctl alerts that fired in the window.
        guards_evaluated: whether guards were asked for.
        guards_missing: the guards ``verification.guards`` chooses that have no baseline
            (not evaluated: each caps the verdict, :func:`obsctl.baselining.decide.caps.missing_guard_caps`).
        transition: the change's transition excluded from the window (:func:`transition_of`); None: not computed.
    """

    spec: Spec
    initiative: Initiative
    baseline: Baseline
    measurement: Measurement
    side: BaselineSide | None
    before_start: Measurement | None
    look: LookContext
    level_note: str
    setting: Setting
    gathered: Gathered
    guards: tuple[GuardEvidence, ...] = ()
    alerts: tuple[str, ...] = ()
    guards_evaluated: bool = True
    guards_missing: tuple[str, ...] = ()
    transition: transitions.Transition | None = None


# --- range queries -------------------------------------------------------------------------


def range_samples(client, query: str, start: float, end: float, step: float) -> list[tuple[float, float]]:
    """The finite samples of ``query`` in ``(start, end]`` at ``step``; ``[]`` when it is not exactly one series.

    Raises:
        PrometheusUnavailable, UsageError: as the client.
    """
    if end <= start:
        return []
    try:
        # Several series: their sum would be a guess, take none (read no further than the second).
        series = list(client.query_range(query, start + step, end, step, max_series=1))
    except TooManySeries:
        return []
    if len(series) != 1:
        return []
    return [(t, v) for t, v in series[0].values if math.isfinite(v)]


def answer(client, q: Query) -> list[tuple[float, float]]:
    """The samples of one declared :class:`~obsctl.baselining.designs.branch.Query`; a history
    query is clipped to the range-point cap and best effort (none is a lower bound on the
    memory, not an error).

    Raises:
        PrometheusUnavailable, UsageError: as the client (not for a history query).
    """
    if not q.history:
        return range_samples(client, q.expr, q.start, q.end, q.step)
    start = max(q.start, q.end - (MAX_RANGE_POINTS - 1) * q.step)
    try:
        return range_samples(client, q.expr, start, q.end, q.step)
    except (PrometheusUnavailable, UsageError):
        return []


# --- the load context ----------------------------------------------------------------------

#: The load context reads each period on at most this many instants (a share of states
#: and a mean demand need no more; a 30-day baseline stays a few small queries).
LOAD_POINTS = 500
#: The load context's queries (8 per period, independent and small) run this many at a
#: time: a verify waits for the slowest, not for their sum (Prometheus itself runs up to
#: ``--query.max-concurrency``, default 20, and queues the rest).
LOAD_CONCURRENCY = 8
_DEMAND = "__demand__"


def demand_query(spec: Spec, wc: WorkloadClass) -> str:
    """The class's offered load: the spec's ``demand`` signal, else the canonical REQUESTS_OFFERED
    (else, where the rules did not record it, the source's offered-load expression over raw metrics)."""
    cc = spec.comparison.for_class(wc.name)
    if cc.demand:
        return spec.query_for(cc.demand, wc)
    return saturation.offered_query(wc, f'sum({canonical.REQUESTS_OFFERED}{{workload_class="{escape_label_value(wc.name)}"}})')


def period_load(spec: Spec, client, wc: WorkloadClass, name: str, start: float, end: float, step: float) -> demand.PeriodLoad:
    """Demand and saturation of one period, by the saturation module's own definition.

    The period is read at ``step`` or coarser (:data:`LOAD_POINTS` instants at most). The
    context is best effort: a query Prometheus refuses leaves that input out (unknown),
    it never costs the verdict (the error is kept in the context's notes)."""
    return period_loads(spec, client, wc, [(name, start, end)], step)[0]


def period_loads(spec: Spec, client, wc: WorkloadClass, periods: list[tuple[str, float, float]], step: float) -> list[demand.PeriodLoad]:
    """:func:`period_load` of each ``(name, start, end)`` period, all their queries issued
    concurrently (:data:`LOAD_CONCURRENCY` at a time) on the client's one session.

    A period with a failed query (Prometheus unavailable or refusing it) gets the first
    such error, in query order, as its note; the other periods are unaffected."""
    exprs = {**saturation.period_inputs(spec, wc), _DEMAND: demand_query(spec, wc)}  # the same for every period
    plans = [(name, start, end, max(step, math.ceil((end - start) / LOAD_POINTS / step) * step) if end > start else step)
             for name, start, end in periods]
    calls = [(i, key, expr) for i in range(len(plans)) for key, expr in exprs.items()]

    def fetch(call):
        i, _, expr = call
        _, start, end, p_step = plans[i]
        try:
            return range_samples(client, expr, start, end, p_step)
        except (PrometheusUnavailable, UsageError) as exc:
            return exc

    # Daemon workers (baselining.workers): Ctrl-C does not wait for the queries in flight.
    with DaemonPool(max_workers=min(LOAD_CONCURRENCY, len(calls)), thread_name_prefix="obsctl-load") as pool:
        got = list(pool.map(fetch, calls))
    answers: list[dict] = [{} for _ in plans]
    for (i, key, _), value in zip(calls, got, strict=True):
        answers[i][key] = value
    out = []
    for (name, *_), found in zip(plans, answers, strict=True):
        failed = next((v for v in found.values() if isinstance(v, Exception)), None)
        if failed is not None:
            out.append(demand.PeriodLoad(name, None, None, None, note=f"{name}: load context not read ({failed})"))
            continue
        offered = found.pop(_DEMAND)
        out.append(designs.period_of(spec, wc, name, found, offered))
    return out


# --- the mix segments ----------------------------------------------------------------------


def measure_mix(client, ctx: Setting, dimension: str) -> tuple[mixing.MixDecomposition | None, str]:
    """The rate/mix decomposition of the class's signal over one mix label between the
    baseline period and the window (``None, reason`` when it cannot be measured).

    Segments: the label's values on the signal's input series in either period (series
    API); weights: each segment's demand (the spec's ``demand`` signal with the label
    added to the selector); rates: the signal with the label added to the selector; the
    decomposition: :func:`obsctl.baselining.designs.mix.from_means`.

    Raises:
        PrometheusUnavailable, UsageError: as the client.
    """
    spec, wc = ctx.spec, ctx.wc
    cc = spec.comparison.for_class(wc.name)
    if not cc.demand:
        return None, f"mix by {dimension}: needs comparison.classes.{wc.name}.demand (a signal) to weigh the segments"
    (_, bs, be), (_, s, e) = ctx.periods()
    periods = ((bs, be), (s, e))
    query = spec.query_for(ctx.signal, wc)
    values: set[str] = set()
    for a, b in periods:
        pop = population_of(client, query, ctx.instant(a), ctx.instant(b))
        values |= {ls[dimension] for ls in pop.label_sets if dimension in ls}
    if len(values) < 2:
        return None, f"mix by {dimension}: fewer than 2 segments in the signal's series"
    rows = []
    for v in sorted(values):
        seg = with_labels(wc, **{dimension: v})
        with np.errstate(over="ignore", invalid="ignore"):  # overflowing means are dropped by from_means, not warned
            w = [np.mean([x for _, x in range_samples(client, spec.query_for(cc.demand, seg), a, b, ctx.step)] or [np.nan]) for a, b in periods]
            r = [np.mean([x for _, x in range_samples(client, spec.query_for(ctx.signal, seg), a, b, ctx.step)] or [np.nan]) for a, b in periods]
        rows.append((v, w, r))
    return mixing.from_means(dimension, rows)


# --- the design's plan ---------------------------------------------------------------------


def gather_design(client, ctx: Setting, plan: Plan, prefetched: tuple[list, Callable[[], list]] | None = None) -> Gathered:
    """The answers to a design's :class:`~obsctl.baselining.designs.branch.Plan`: its queries
    in their order, the loads of its periods (``prefetched``: ``(periods, result)`` already
    asked for by ``verify``, used when they are the plan's), the mix decomposition.

    Raises:
        PrometheusUnavailable, UsageError: a (non-history) query's; the loads and the mix are best effort.
    """
    series = {q.key: answer(client, q) for q in plan.queries}
    if prefetched is not None and list(prefetched[0]) == list(plan.loads):
        loads = prefetched[1]()
    else:
        loads = period_loads(ctx.spec, client, ctx.wc, list(plan.loads), ctx.step)
    dec, why = None, ""
    if plan.mix:
        try:
            dec, why = measure_mix(client, ctx, plan.mix)
        except (PrometheusUnavailable, UsageError) as exc:
            dec, why = None, f"mix by {plan.mix}: not measured ({exc})"
    return Gathered(series, tuple(loads), dec, why)


# --- the windows ---------------------------------------------------------------------------


def measure_primary(spec: Spec, client: PrometheusClient, initiative: Initiative, baseline: Baseline, start_at: dt.datetime,
                    end_at: dt.datetime, step: float) -> Measurement:
    """The primary's window, with the design's window query (a canary's: its treatment group's, which promote makes the baseline).

    Raises:
        PrometheusUnavailable, UsageError: as :func:`obsctl.baselining.measure.window.measure`.
    """
    return measure(client, MeasureRequest(designs.window_query(spec, initiative, baseline), start_at, end_at, step, spec.verification.min_samples,
                                          what=f"{initiative.workload_class}/{initiative.primary_signal}",
                                          on_change=baseline.signal in spec.verification.fresh_on_change))


def measure_guard(spec: Spec, client: PrometheusClient, baseline: Baseline, start_at: dt.datetime, end_at: dt.datetime,
                  step: float) -> Measurement:
    """One guard signal over ``(start_at, end_at]`` with its baseline's PromQL.

    Raises:
        PrometheusUnavailable: as :func:`obsctl.baselining.measure.window.measure`.
    """
    cfg = spec.verification
    return measure(client, MeasureRequest(baseline.query, start_at, end_at, step, cfg.min_samples, what=f"{baseline.workload_class}/{baseline.signal} (guard)",
                                          on_change=baseline.signal in cfg.fresh_on_change))


def measure_before_start(spec: Spec, client: PrometheusClient, initiative: Initiative, baseline: Baseline, step: float) -> Measurement:
    """The period right before the start that replaces an aged baseline (its span:
    :func:`obsctl.baselining.decide.verdict.before_start_span`), with the baseline's own PromQL.

    Raises:
        PrometheusUnavailable, UsageError: as :func:`~obsctl.baselining.measure.window.measure`.
    """
    cfg = spec.verification
    start = initiative.started_at - dt.timedelta(seconds=verdict.before_start_span(initiative, baseline))
    return measure(client, MeasureRequest(baseline.query, start, initiative.started_at, step, cfg.min_samples,
                                          what=f"{baseline.workload_class}/{baseline.signal} (before the start)",
                                          on_change=baseline.signal in cfg.fresh_on_change))


def guard(req: Request, client: PrometheusClient, store: Store, baseline_id: str) -> GuardEvidence:
    """One guard's evidence over the request's window: its baseline (the stored side spares
    the samples), its look on its own sequence, its window.

    Raises:
        StoreError, PrometheusUnavailable: as the store and :func:`measure_guard`.
    """
    side = side_for(req.initiative, baseline_id)
    b = store.baseline(baseline_id, samples=side is None)
    look, _ = looks.context(store, req.initiative, b.signal, req.spec.verification.confidence, req.planned, baseline_id, b.query)
    return GuardEvidence(b, measure_guard(req.spec, client, b, req.start, req.end, req.step), look, side)


def control_group_baseline(spec: Spec, client, store, initiative, start_at: dt.datetime, end_at: dt.datetime, step: float):
    """For a canary started without a baseline: its control group's window, stored (not
    current) as the baseline the verdict, the guards, promote and report refer to.

    The control group runs the unchanged configuration in the same window, so it is the
    state before the change; the record keeps the class's identity query.

    Raises:
        StoreError: the control group has no data in the window, or the store refuses the write.
    """
    wc = spec.workload_class(initiative.workload_class)
    sig = spec.signal(initiative.primary_signal)
    v = initiative.variant
    m = measure(client, MeasureRequest(spec.query_for(sig, with_labels(wc, **{v["label"]: v["control"]})), start_at, end_at, step,
                                       spec.verification.min_samples, what=f"{wc.name}/{sig.name} (canary control group)"))
    if m.stats is None or not m.samples:
        raise StoreError(f"initiative {initiative.id}: the canary's control group {v['label']}={v['control']} has no data in the window "
                         f"({m.no_data_reason(spec.verification.min_samples) or 'no samples'})")
    created = utcnow()
    record = Baseline(id=f"{wc.name}.{sig.name}.{created.strftime('%Y%m%dT%H%M%SZ')}-canary-control", workload_class=wc.name,
                      signal=sig.name, unit=sig.unit, direction=sig.direction, query=spec.query_for(sig, wc), window=m.window,
                      population=m.population, stats=m.stats, created_at=created, source="snapshot", initiative=initiative.id,
                      samples=m.samples, coverage=m.coverage, warnings=m.warnings, partial=m.partial)
    return store.save_baseline(record, make_current=False)


# --- the transition ------------------------------------------------------------------------


def transition_of(spec: Spec, client: PrometheusClient, queries: list[str], change_at: dt.datetime, end_at: dt.datetime, step: float,
                  trim: bool = True) -> transitions.Transition:
    """The change's transition over the signals' ``queries`` (the primary's first, then the
    guards'): their longest look-back through the spec's recording rules
    (:mod:`obsctl.rules.lookback`) and the population events of the primary's raw input
    series in the rollout (:func:`obsctl.baselining.measure.transition.read_events`; best
    effort: the replicas that restart are the primary's, and a guard's own queries are not
    waited for before the primary's window), trimmed by
    :func:`obsctl.baselining.measure.transition.trim`. Read before the window is measured:
    the window ``verify`` measures starts at its ``judged_start``."""
    rules = recording_rules(spec)
    longest = max((lookback(q, rules) for q in queries), key=lambda lb: lb.seconds, default=Lookback(0.0))
    selectors = raw_selectors(queries[0], rules) if queries else []
    events, notes = transitions.read_events(client, selectors, change_at.timestamp(), end_at.timestamp(), step)
    return transitions.trim(change_at.timestamp(), end_at.timestamp(), longest, events, step, spec.verification.min_samples, trim, notes)


# --- one verdict's evidence ----------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What ``verify`` asks evidence for: the initiative, its window and step, its planned
    length (the judged part: after the change's ``transition``, which it carries), (when
    already loaded) its baseline with samples, and the chosen guards without a baseline
    (``guards_missing``: :func:`obsctl.baselining.guards.missing_guards`)."""

    spec: Spec
    initiative: Initiative
    baseline: Baseline | None
    start: dt.datetime
    end: dt.datetime
    step: float
    planned: float
    guards: bool
    guards_missing: tuple[str, ...] = ()
    transition: transitions.Transition | None = None


@dataclass(frozen=True)
class Pending:
    """The calls ``verify`` issued on worker threads before :func:`gather` reads them:
    the primary's window (None: read here), the design's load periods and their answer
    (None: read here), the guards' evidence and the alerts."""

    measured: Future | None
    loads: tuple[list, Future] | None
    guards: tuple[Future, ...]
    alerts: Future


def gather(req: Request, client: PrometheusClient, store: Store, pending: Pending) -> Evidence:
    """The evidence of one verdict (module doc): the baseline and its side, the primary's
    window, the before-start period when the baseline aged, the look, the design's plan
    answered, then the guards and the alerts.

    Raises:
        UsageError, StoreError, PrometheusUnavailable: as the reads above, in that order.
    """
    spec, initiative, baseline = req.spec, req.initiative, req.baseline
    cfg = spec.verification
    design = designs.design_of(initiative.design)
    side = side_for(initiative, initiative.baseline_id) if initiative.baseline_id else None
    if baseline is None and initiative.baseline_id:
        # A design with the baseline's side and cycle fit stored at start needs no samples.
        needs_samples = side is None or design.needs_samples or initiative.baseline_cycle is None
        baseline = store.baseline(initiative.baseline_id, samples=needs_samples)
        if not needs_samples and design.own_baseline and later_level.suggestive(baseline.stationarity):
            baseline = store.baseline(initiative.baseline_id, samples=True)  # judged against its later part too (decide.later_level)
    if baseline is None:  # a canary started without a baseline: its control group's window stands in
        baseline = control_group_baseline(spec, client, store, initiative, req.start, req.end, req.step)
    m = pending.measured.result() if pending.measured is not None else measure_primary(spec, client, initiative, baseline, req.start,
                                                                                       req.end, req.step)
    own_side = side if side is not None and side.baseline_id == baseline.id else None
    before = None
    if baseline.id == initiative.baseline_id and verdict.aged(initiative, baseline):
        before = measure_before_start(spec, client, initiative, baseline, req.step)
    compared, _, _ = verdict.before_start(spec, initiative, baseline, before)
    look, level_note = looks.context(store, initiative, initiative.primary_signal, cfg.confidence, req.planned, initiative.baseline_id or None,
                                     compared.query)
    setting = Setting(spec, initiative, compared, m.samples, req.start.timestamp(), req.end.timestamp(), req.step, cfg.confidence,
                      spec.workload_class(initiative.workload_class))
    prefetched = None
    if pending.loads is not None and baseline.id == initiative.baseline_id and before is None:
        prefetched = (pending.loads[0], pending.loads[1].result)
    gathered = gather_design(client, setting, design.plan(setting), prefetched)
    guards = tuple(f.result() for f in pending.guards)
    alerts = tuple(pending.alerts.result())
    return Evidence(spec, initiative, baseline, m, own_side, before, look, level_note, setting, gathered, guards, alerts, req.guards,
                    req.guards_missing, req.transition)
