"""The designs inside the loop: choose one at ``initiative start``, run it inside ``verify``.

``initiative start``: :func:`choose` (the ``--design`` / ``--control`` flags over the spec's
``comparison`` block), :func:`check_start` (a seasonal baseline spans a whole cycle),
:func:`obsctl.baselining.initiative.check_ledger` (a class that is another active initiative's control cannot start
its own, and a control class must not be changing itself).

``verify``: :func:`primary` is the one call. It measures what the initiative's design
compares (the control class over both periods; the canary's two groups in the window;
the baseline's same hours), adds the demand and saturation of both periods and, for
before-after, the cycle check and the mix decomposition, and returns an
:class:`Outcome`: the verdict with its reason and effect, and a JSON-ready ``context``
that outputs and reports show.

Queries: the class's own signal PromQL with the selector extended (canary: the variant
label; mix: the mix label) or the control class's selector, so every series keeps its
identity labels and no new PromQL is invented. Each design's own queries and effect live
in its module behind :mod:`.branch` (``branch(ctx) -> Branch``); history for the memory
model: the same log series over :data:`.branch.HISTORY_WINDOWS` window lengths before the
compared periods.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from obsctl.baselining.designs import (
    DESIGNS,
    align,
    before_after,
    canary,
    control,
    cycle,
    demand,
    judge,
    mix,
    seasonal,
)
from obsctl.baselining.designs.branch import Branch, Context, range_samples, with_labels
from obsctl.baselining.designs.effect import Effect
from obsctl.baselining.statistics.decision import Estimate
from obsctl.baselining.workers import DaemonPool
from obsctl.errors import PrometheusUnavailable, StoreError, UsageError
from obsctl.rules import canonical, saturation
from obsctl.spec import Spec, WorkloadClass, escape_label_value


@dataclass(frozen=True)
class Choice:
    """The comparison design of one initiative, as recorded on it."""

    design: str
    control_class: str | None = None
    variant: dict[str, str] = field(default_factory=dict)


def choose(spec: Spec, workload_class: str, design: str | None = None, control_class: str | None = None) -> Choice:
    """The design of a new initiative: flags over the spec's ``comparison`` block.

    Raises:
        UsageError: an unknown design; ``control`` without a control class (or naming the
            class itself, or an unknown class); ``canary`` without the spec's ``variant``.
    """
    cc = spec.comparison.for_class(workload_class)
    chosen = design or cc.design or "before-after"
    if chosen not in DESIGNS:
        raise UsageError(f"--design {chosen!r} is not one of: {', '.join(DESIGNS)}")
    if chosen == "control":
        name = control_class or cc.control
        if not name:
            raise UsageError(f"--design control needs --control CLASS (or comparison.classes.{workload_class}.control in the spec)")
        if name == workload_class:
            raise UsageError(f"--control {name!r} is the class being changed; name a class the change does not touch")
        spec.workload_class(name)
        return Choice("control", name)
    if control_class:
        raise UsageError(f"--control is only for --design control (this initiative's design is {chosen})")
    if chosen == "canary":
        if cc.variant is None:
            raise UsageError(f"--design canary needs comparison.classes.{workload_class}.variant: {{label, control, treatment}} in the spec")
        return Choice("canary", None, cc.variant.model_dump(exclude={"traffic_share"}))
    return Choice(chosen)


def check_start(spec: Spec, store, workload_class: str, choice: Choice, baseline) -> None:
    """Refuse a design that cannot run from the start: a seasonal baseline shorter than one cycle.

    Raises:
        UsageError: as :func:`obsctl.baselining.designs.seasonal.check_span`.
    """
    if choice.design == "seasonal" and baseline is not None:
        seasonal.check_span(baseline.window.start, baseline.window.end, spec.comparison.seasonal_cycle)


def start_checks(choice: Choice, baseline) -> list | None:
    """What ``initiative start`` stores for ``verify`` about the baseline: before-after's
    cycle tests (:func:`obsctl.baselining.designs.cycle.fit`; ``[]`` for a baseline shorter
    than a day, which cannot be tested; None for other designs or no baseline)."""
    if choice.design != "before-after" or baseline is None:
        return None
    try:
        fits = cycle.fit(baseline.samples)
    except ValueError:  # a test without a finite p-value or profile (pydantic's ValidationError): verify refits as before
        return None
    return [] if fits is None else fits


def planned_window(spec: Spec, workload_class: str, choice: Choice, baseline, expected_impact: float | None, store=None) -> float | None:
    """The design's planned window (s) for the expected impact (:mod:`.plan`), or None
    (before-after and seasonal: the statistics planner's own; no baseline or no impact)."""
    if choice.design not in ("control", "canary") or baseline is None or not expected_impact:
        return None
    from obsctl.baselining.designs.plan import design_plan
    from obsctl.durations import parse_duration

    cc = spec.comparison.for_class(workload_class)
    control_baseline = store.current_baseline(choice.control_class, baseline.signal) if store is not None and choice.control_class else None
    try:
        p = design_plan(spec, baseline, expected_impact, choice.design, cc.variant.traffic_share if cc.variant else 0.5, control_baseline)
    except UsageError:
        return None
    default = parse_duration(spec.verification.window, "verification.window")
    return max(default, p.window_seconds) if p.window_seconds else None


# --- verify ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the design says about the primary signal.

    Attributes:
        design: the design.
        verdict, reason: the verdict (None: keep the before-after verdict unchanged).
        change_ratio, ci_low, ci_high: the design's effect (None for before-after: the
            statistics package's own estimate stands).
        context: JSON-ready context for outputs and reports (``notes`` lines, ``control``,
            ``load``, ``mix``, ``cycle``, ``effect``).
        treatment: the canary's treatment-window samples (promote makes them the baseline).
        level: the level the interval claims over all looks (None: the effect's own).
    """

    design: str
    verdict: str | None = None
    reason: str = ""
    change_ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    context: dict = field(default_factory=dict)
    treatment: list[tuple[float, float]] = field(default_factory=list)
    level: float | None = None

    def as_estimate(self, before_after: Estimate | None) -> Estimate | None:
        """The estimate ``verify`` records: the design's effect, or ``before_after``'s (kept for before-after)."""
        if self.design == "before-after" or self.change_ratio is None and before_after is not None and self.verdict is None:
            return before_after
        eff = self.context.get("effect", {})
        base = eff.get("control_mean") if self.design == "canary" else (before_after.baseline_mean if before_after else None)
        win = eff.get("treatment_mean") if self.design == "canary" else (before_after.window_mean if before_after else None)
        level = self.level or eff.get("confidence") or (before_after.confidence if before_after else 0.0)
        return Estimate(self.change_ratio, self.ci_low, self.ci_high, level,
                        baseline_mean=base, window_mean=win)


def window_query(spec: Spec, initiative, baseline) -> str:
    """The PromQL ``verify`` measures the window with: the baseline's, or for a canary the
    treatment group's (the class's signal with the variant label added to the selector)."""
    if initiative.design == "canary" and initiative.variant:
        v = initiative.variant
        return spec.query_for(initiative.primary_signal, with_labels(spec.workload_class(initiative.workload_class), **{v["label"]: v["treatment"]}))
    return baseline.query


def demand_query(spec: Spec, wc: WorkloadClass) -> str:
    """The class's offered load: the spec's ``demand`` signal, else the canonical REQUESTS_OFFERED."""
    cc = spec.comparison.for_class(wc.name)
    if cc.demand:
        return spec.query_for(cc.demand, wc)
    return f'sum({canonical.REQUESTS_OFFERED}{{workload_class="{escape_label_value(wc.name)}"}})'


#: The load context reads each period on at most this many instants (a share of states
#: and a mean demand need no more; a 30-day baseline stays a few small queries).
LOAD_POINTS = 500
#: The load context's queries (8 per period, independent and small) run this many at a
#: time: a verify waits for the slowest, not for their sum (Prometheus itself runs up to
#: ``--query.max-concurrency``, default 20, and queues the rest).
LOAD_CONCURRENCY = 8
_DEMAND = "__demand__"


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
    exprs = {**saturation.inputs(spec, wc), _DEMAND: demand_query(spec, wc)}  # the same for every period
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
    for (i, key, _), value in zip(calls, got):
        answers[i][key] = value
    out = []
    for (name, *_), answer in zip(plans, answers):
        failed = next((v for v in answer.values() if isinstance(v, Exception)), None)
        if failed is not None:
            out.append(demand.PeriodLoad(name, None, None, None, note=f"{name}: load context not read ({failed})"))
            continue
        offered = answer.pop(_DEMAND)
        out.append(_period_of(spec, wc, name, answer, offered))
    return out


def _period_of(spec: Spec, wc: WorkloadClass, name: str, inputs: dict[str, list[tuple[float, float]]],
               offered: list[tuple[float, float]]) -> demand.PeriodLoad:
    values = {}
    grid_ms = None
    for key, got in inputs.items():
        if got:
            ms, v = align.as_arrays(got)
            values[key] = dict(zip(ms.tolist(), v.tolist()))
            grid_ms = ms if grid_ms is None else np.union1d(grid_ms, ms)
    states: list = []
    if grid_ms is not None:
        aligned = {k: [d.get(int(t)) for t in grid_ms] for k, d in values.items()}
        states = demand.states_of(aligned, saturation.Thresholds.for_class(spec, wc.name))
    return demand.period_load(name, [v for _, v in offered] or None, states)


def _effect_context(e: Effect) -> dict:
    return {"design": e.design, "ratio": e.ratio, "ci_low": e.ci_low, "ci_high": e.ci_high, "confidence": e.confidence,
            "log_se": e.log_se, "dof": e.dof if e.dof is None or math.isfinite(e.dof) else None, "samples": e.samples,
            "reason": e.reason, **{k: v for k, v in e.context.items() if not isinstance(v, float) or math.isfinite(v)}}


def _load_context(ctx: demand.LoadContext | None) -> dict | None:
    if ctx is None:
        return None
    side = lambda p: {"name": p.name, "demand": p.demand, "state": p.state, "queued_share": p.queued_share}
    return {"before": side(ctx.before), "after": side(ctx.after), "demand_change": ctx.demand_change,
            "demand_bound": ctx.demand_bound, "reason": ctx.reason, "line": ctx.line()}


def _mix_context(dec: mix.MixDecomposition | None) -> dict | None:
    if dec is None:
        return None
    return {"dimension": dec.dimension, "segments": list(dec.segments), "share_before": list(dec.share_before),
            "share_after": list(dec.share_after), "total_change": dec.total_change, "mix_change": dec.mix_change,
            "rate_change": dec.rate_change, "mix_share": dec.mix_share, "line": dec.line()}


def context_periods(initiative, baseline, start_at: dt.datetime, end_at: dt.datetime) -> list[tuple[str, float, float]] | None:
    """The ``(name, start, end)`` periods whose demand and saturation :func:`primary` reads
    (:func:`period_loads`): the baseline period and the window; None for a canary (its
    whole class over the window, after its groups) or without a baseline."""
    if initiative.design == "canary" or baseline is None:
        return None
    return [("baseline", baseline.window.start.timestamp(), baseline.window.end.timestamp()),
            ("window", start_at.timestamp(), end_at.timestamp())]


#: Each design's branch (:mod:`.branch`): what it queries and its effect.
BRANCHES: dict[str, Callable[[Context], Branch]] = {
    "before-after": before_after.branch, "seasonal": seasonal.branch, "control": control.branch, "canary": canary.branch,
}


def primary(spec: Spec, client, initiative, baseline, window_samples: list[tuple[float, float]], start_at: dt.datetime,
            end_at: dt.datetime, step: float, category: str, direction: str, confidence: float | None = None,
            loads: Callable[[], list[demand.PeriodLoad]] | None = None, level: float | None = None) -> Outcome:
    """Run the initiative's design on its primary signal over the verification window.

    The design's branch (:data:`BRANCHES`) measures what it compares and its effect; then,
    for every design alike, the demand and saturation of the two periods
    (:func:`~obsctl.baselining.designs.demand.assess`), the decision on the effect and the
    confounds the design cannot remove (:mod:`.judge`).

    Args:
        baseline: the initiative's baseline (for a canary started without one, its control group's window).
        window_samples: the primary's window samples as ``verify`` measured them
            (:func:`window_query`: for a canary, the treatment group's).
        category, direction: the primary signal's (spec).
        confidence: the look's interval level (the anytime-valid boundary's, so repeated
            verifies stay safe); default the spec's.
        loads: the :func:`period_loads` of :func:`context_periods`, already asked for
            (``verify`` issues them with its other calls); None: read here.
        level: the level the interval claims, over all looks of the change (the
            sequence's); default ``confidence``.

    Returns:
        :class:`Outcome`. For before-after the verdict is None unless a confound makes it
        INCONCLUSIVE (cycle, demand-bound signal, mix).

    Raises:
        UsageError: a seasonal baseline shorter than one cycle.
        PrometheusUnavailable: as the client.
    """
    cfg = spec.verification
    wc = spec.workload_class(initiative.workload_class)
    design = initiative.design
    ctx = Context(spec, client, initiative, baseline, window_samples, start_at.timestamp(), end_at.timestamp(), step,
                  confidence or cfg.confidence, wc, lambda periods: period_loads(spec, client, wc, periods, step), loads)
    found = BRANCHES[design](ctx)
    load = demand.assess(*found.loads, category, initiative.primary_signal, _follows_demand(spec, wc, initiative.primary_signal, category))
    out = Outcome(design, treatment=found.treatment)
    notes = list(found.notes)
    cyc, dec = found.cycle, found.mix
    if found.effect is not None:
        j = judge.judge(found.effect, direction, cfg.min_effect_ratio, load=load, level=level)
        out.level = level
        out.verdict, out.reason = j.verdict, j.reason
        out.change_ratio, out.ci_low, out.ci_high = found.effect.ratio, found.effect.ci_low, found.effect.ci_high
        notes += j.notes
        out.context["effect"] = _effect_context(found.effect)
    else:
        out.verdict, out.reason = judge.confounds("before-after", cyc, load, dec, cfg.min_effect_ratio)
        notes += [n for n in (cyc.reason if cyc else "", load.line() if load else "", dec.line() if dec else "") if n]
        if load is not None and load.reason and not load.demand_bound:
            notes.append(load.reason)
    if load is not None:
        notes += [p.note for p in {id(p): p for p in (load.before, load.after)}.values() if p.note]
    out.context.update({"design": design, "notes": notes, "load": _load_context(load), "mix": _mix_context(dec),
                        "cycle": None if cyc is None else {"checked": cyc.checked, "detected": cyc.detected, "cycle": cyc.cycle,
                                                           "amplitude": cyc.amplitude, "p_value": cyc.p_value, "reason": cyc.reason}})
    if design == "control":
        out.context["control"] = {"class": initiative.control_class, "change": found.effect.context.get("control_change"),
                                  "treated_change": found.effect.context.get("treated_change")}
    if design == "canary":
        out.context["variant"] = initiative.variant
    return out


def _follows_demand(spec: Spec, wc: WorkloadClass, signal: str, category: str) -> bool:
    """Whether demand alone moves the primary on this class (the demand-bound rule, :mod:`.demand`):
    never on a training class (no arrivals), else the signal's own property
    (:func:`.demand.follows_demand`; by category for a signal no longer in the spec)."""
    if wc.kind == "training":
        return False
    sig = next((s for s in spec.signals if s.name == signal), None)
    return demand.follows_demand(sig) if sig is not None else category in demand.DEMAND_SCALED_CATEGORIES


def control_group_baseline(spec: Spec, client, store, initiative, start_at: dt.datetime, end_at: dt.datetime, step: float):
    """For a canary started without a baseline: its control group's window, stored (not
    current) as the baseline the verdict, the guards, promote and report refer to.

    The control group runs the unchanged configuration in the same window, so it is the
    state before the change; the record keeps the class's identity query.

    Raises:
        StoreError: the control group has no data in the window, or the store refuses the write.
    """
    from obsctl.baselining.measure.window import measure
    from obsctl.records import Baseline
    from obsctl.timeutil import utcnow

    wc = spec.workload_class(initiative.workload_class)
    sig = spec.signal(initiative.primary_signal)
    v = initiative.variant
    m = measure(client, spec.query_for(sig, with_labels(wc, **{v["label"]: v["control"]})), start_at, end_at, step, spec.verification.min_samples,
                what=f"{wc.name}/{sig.name} (canary control group)")
    if m.stats is None or not m.samples:
        raise StoreError(f"initiative {initiative.id}: the canary's control group {v['label']}={v['control']} has no data in the window "
                         f"({m.no_data_reason(spec.verification.min_samples) or 'no samples'})")
    created = utcnow()
    record = Baseline(id=f"{wc.name}.{sig.name}.{created.strftime('%Y%m%dT%H%M%SZ')}-canary-control", workload_class=wc.name,
                      signal=sig.name, unit=sig.unit, direction=sig.direction, query=spec.query_for(sig, wc), window=m.window,
                      population=m.population, stats=m.stats, created_at=created, source="snapshot", initiative=initiative.id,
                      samples=m.samples, coverage=m.coverage, warnings=m.warnings, partial=m.partial)
    return store.save_baseline(record, make_current=False)
