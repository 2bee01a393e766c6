"""The designs inside the loop: choose one at ``initiative start``, run it inside ``verify``.

``initiative start``: :func:`choose` (the ``--design`` / ``--control`` flags over the spec's
``comparison`` block), :func:`check_start` (a seasonal baseline spans a whole cycle),
:func:`obsctl.baselining.initiative.check_ledger` (a class that is another active initiative's control cannot start
its own, and a control class must not be changing itself).

``verify``: each design declares what it compares (:data:`BY_NAME`, one
:class:`~obsctl.baselining.designs.branch.Design` per module: the control class over both
periods; the canary's two groups in the window; the baseline's same hours), ``verify``
gathers it with the demand and saturation of the periods
(:func:`obsctl.baselining.evidence.gather_design`), and :func:`primary`, which does no I/O,
turns the answers into an :class:`Outcome`: the verdict with its reason and effect, the
before-after cycle check and mix decomposition, and a JSON-ready ``context`` that outputs
and reports show.

Queries: the class's own signal PromQL with the selector extended (canary: the variant
label; mix: the mix label) or the control class's selector, so every series keeps its
identity labels and no new PromQL is invented. Each design's own queries and effect live
in its module behind :mod:`.branch` (``DESIGN.plan``, ``DESIGN.branch``); history for the memory
model: the same log series over :data:`.branch.HISTORY_WINDOWS` window lengths before the
compared periods.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass, field

import numpy as np

from obsctl.baselining.designs import (
    DESIGNS,
    align,
    assessment,
    before_after,
    canary,
    control,
    cycle,
    demand,
    judge,
    knowledge,
    mix,
    profile,
    seasonal,
)
from obsctl.baselining.designs.branch import Design, Gathered, Look, Setting
from obsctl.baselining.designs.effect import Effect
from obsctl.baselining.statistics.decision import Estimate
from obsctl.errors import UsageError
from obsctl.records import Assessment
from obsctl.rules import saturation
from obsctl.spec import DESIGN_NEEDS, Spec, WorkloadClass

#: Each design's object (:class:`~obsctl.baselining.designs.branch.Design`), by name.
BY_NAME: dict[str, Design] = {d.name: d for d in (before_after.DESIGN, control.DESIGN, canary.DESIGN, seasonal.DESIGN,
                                                  profile.DESIGN)}
assert tuple(BY_NAME) == DESIGNS  # noqa: S101  (one registry: the spec's names are the objects' names)


def needs(d: Design) -> str | None:
    """The ``comparison`` field a design needs of its class (``control``, ``variant``), or None."""
    return "control" if d.needs_control else "variant" if d.needs_variant else None


# The spec checks a design's needs at load without loading the designs: its table and the objects agree.
assert {d.name: needs(d) for d in BY_NAME.values() if needs(d)} == {n: f for n, (f, _) in DESIGN_NEEDS.items()}  # noqa: S101


def design_of(name: str) -> Design:
    """The :class:`~obsctl.baselining.designs.branch.Design` named ``name`` (one of :data:`obsctl.baselining.designs.DESIGNS`)."""
    return BY_NAME[name]


@dataclass(frozen=True)
class Choice:
    """The comparison design of one initiative, as recorded on it."""

    design: str
    control_class: str | None = None
    variant: dict[str, str] = field(default_factory=dict)
    #: Why this design was chosen when no flag or spec named it ("" otherwise).
    why: str = ""


def choose(spec: Spec, workload_class: str, design: str | None = None, control_class: str | None = None,
           baseline=None) -> Choice:
    """The design of a new initiative: flags over the spec's ``comparison`` block; with
    neither, ``profile`` when the baseline's history shows a cycle
    (:func:`obsctl.baselining.designs.knowledge.present`), else ``before-after``.

    Raises:
        UsageError: an unknown design; ``control`` without a control class (or naming the
            class itself, or an unknown class); ``canary`` without the spec's ``variant``.
    """
    cc = spec.comparison.for_class(workload_class)
    own = spec.comparison.classes.get(workload_class)
    named = design or (own.design if own is not None and own.design else None) or (
        spec.comparison.design if "design" in spec.comparison.model_fields_set else None)
    chosen = named or cc.design
    if named is None and not control_class and knowledge.present(getattr(baseline, "cycles", None)):
        return Choice(profile.NAME, why=f"chosen by default: {knowledge.describe(baseline.cycles)}")
    chosen = chosen or before_after.NAME
    if chosen not in DESIGNS:
        raise UsageError(f"--design {chosen!r} is not one of: {', '.join(DESIGNS)}")
    d = BY_NAME[chosen]
    if d.needs_control:
        name = control_class or cc.control
        if not name:
            raise UsageError(f"--design control needs --control CLASS (or comparison.classes.{workload_class}.control in the spec)")
        if name == workload_class:
            raise UsageError(f"--control {name!r} is the class being changed; name a class the change does not touch")
        spec.workload_class(name)
        return Choice(d.name, name)
    if control_class:
        raise UsageError(f"--control is only for --design control (this initiative's design is {chosen})")
    if d.needs_variant:
        if cc.variant is None:
            raise UsageError(f"--design {d.name} needs comparison.classes.{workload_class}.variant: {{label, control, treatment}} in the spec")
        return Choice(d.name, None, cc.variant.model_dump(exclude={"traffic_share"}))
    return Choice(chosen)


def check_start(spec: Spec, store, workload_class: str, choice: Choice, baseline) -> None:
    """Refuse a design that cannot run from the start (its ``Design.check_start``): a seasonal
    baseline shorter than one cycle; a profile design on a baseline whose history showed no cycle.

    Raises:
        UsageError: as :func:`obsctl.baselining.designs.seasonal.check_span`, :func:`obsctl.baselining.designs.profile.check_start`.
    """
    start = BY_NAME[choice.design].check_start
    if start is not None and baseline is not None:
        start(spec, baseline)


def start_checks(choice: Choice, baseline) -> list | None:
    """What ``initiative start`` stores for ``verify`` about the baseline: before-after's
    cycle tests (:func:`obsctl.baselining.designs.cycle.fit`; ``[]`` for a baseline shorter
    than a day, which cannot be tested; None for other designs or no baseline)."""
    if not BY_NAME[choice.design].cycle_checked or baseline is None:
        return None
    try:
        fits = cycle.fit(baseline.samples)
    except ValueError:  # a test without a finite p-value or profile (pydantic's ValidationError): verify refits as before
        return None
    return [] if fits is None else fits


def planned_window(spec: Spec, workload_class: str, choice: Choice, baseline, expected_impact: float | None, store=None) -> float | None:
    """The design's planned window (s) for the expected impact (:mod:`.plan`), or None
    (before-after and seasonal: the statistics planner's own; no baseline or no impact)."""
    if not BY_NAME[choice.design].planned or baseline is None or not expected_impact:
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
        assessment: how the design's own effect was reached (:func:`.assessment.of`: its
            memory, effective samples, dof and the look's boundary); None for a design
            without an effect of its own (before-after: the statistics package's stands).
        means: ``(reference, treated)`` means in the signal's unit when the effect compares
            two groups (the canary's control and treatment); None: the two periods' means.
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
    assessment: Assessment | None = None
    means: tuple[float | None, float | None] | None = None

    def as_estimate(self, before_after: Estimate | None) -> Estimate | None:
        """The estimate ``verify`` records: the design's effect, or ``before_after``'s for a
        design without an effect of its own (before-after)."""
        if self.assessment is None:
            return before_after
        eff = self.context.get("effect", {})
        base, win = self.means or ((before_after.baseline_mean, before_after.window_mean) if before_after else (None, None))
        level = self.level or eff.get("confidence") or (before_after.confidence if before_after else 0.0)
        return Estimate(self.change_ratio, self.ci_low, self.ci_high, level, baseline_mean=base, window_mean=win)


def min_fraction(ctx: Setting) -> float | None:
    """The design's own ``t_min`` for the look's boundary (``Design.min_fraction``), or None:
    the before-after comparison's stands."""
    own = BY_NAME[ctx.initiative.design].min_fraction
    return own(ctx) if own is not None else None


def window_query(spec: Spec, initiative, baseline) -> str:
    """The PromQL ``verify`` measures the window with: the baseline's, or for a canary the
    treatment group's (the class's signal with the variant label added to the selector)."""
    return BY_NAME[initiative.design].window_query(spec, initiative, baseline)


def period_of(spec: Spec, wc: WorkloadClass, name: str, inputs: dict[str, list[tuple[float, float]]],
              offered: list[tuple[float, float]]) -> demand.PeriodLoad:
    """One period's :class:`~obsctl.baselining.designs.demand.PeriodLoad` from its saturation
    inputs and offered load (``(t, v)`` samples by input key), by the saturation module's definition."""
    values = {}
    grid_ms = None
    for key, got in inputs.items():
        if got:
            ms, v = align.as_arrays(got)
            values[key] = dict(zip(ms.tolist(), v.tolist(), strict=True))
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
    """The ``(name, start, end)`` periods whose demand and saturation :func:`primary` reads,
    known before the window is measured (``Design.load_periods``): the baseline period and
    the window; None for a canary (its whole class over the window) or without a baseline."""
    periods = BY_NAME[initiative.design].load_periods
    if periods is None or baseline is None:
        return None
    return list(periods(baseline, start_at.timestamp(), end_at.timestamp()))


def primary(ctx: Setting, got: Gathered, category: str, direction: str, look: Look) -> Outcome:
    """Run the initiative's design on its primary signal over the verification window, from
    what ``verify`` gathered for it (no I/O).

    The design's branch (``Design.branch``) computes its effect and checks from ``got`` at
    the look's per-look level; then, for every design alike, the demand and saturation of
    the two periods (:func:`~obsctl.baselining.designs.demand.assess`), the decision on the
    effect and the confounds the design cannot remove (:mod:`.judge`), and the design's own
    assessment of its effect (:func:`.assessment.of`).

    Args:
        ctx: the design's setting (its ``level`` is replaced by ``look.level``).
        got: the answers to the design's plan (:func:`obsctl.baselining.evidence.gather_design`).
        category, direction: the primary signal's (spec).
        look: the look the effect is judged at: the per-look level its interval is computed
            at (the anytime-valid boundary's, so repeated verifies stay safe) and the level
            it claims over all looks of the change.

    Returns:
        :class:`Outcome`. For before-after the verdict is None unless a confound makes it
        INCONCLUSIVE (cycle, demand-bound signal, mix).
    """
    ctx = dataclasses.replace(ctx, level=look.level)
    cfg = ctx.spec.verification
    wc, initiative = ctx.wc, ctx.initiative
    d = BY_NAME[initiative.design]
    found = d.branch(ctx, got)
    load = demand.assess(*found.loads, category, initiative.primary_signal, _follows_demand(ctx.spec, wc, initiative.primary_signal, category))
    out = Outcome(d.name, treatment=found.treatment)
    notes = list(found.notes)
    cyc, dec = found.cycle, found.mix
    if found.effect is not None:
        j = judge.judge(found.effect, direction, cfg.min_effect_ratio, cycle=cyc, load=load, level=look.over_all)
        out.level = look.over_all
        out.verdict, out.reason = j.verdict, j.reason
        out.change_ratio, out.ci_low, out.ci_high = found.effect.ratio, found.effect.ci_low, found.effect.ci_high
        out.assessment, out.means = assessment.of(found.effect, d.method, look), found.means
        notes += j.notes
        out.context["effect"] = _effect_context(found.effect)
    else:
        out.verdict, out.reason = judge.confounds(d.name, cyc, load, dec, cfg.min_effect_ratio)
        notes += [n for n in (cyc.reason if cyc else "", load.line() if load else "", dec.line() if dec else "") if n]
        if load is not None and load.reason and not load.demand_bound:
            notes.append(load.reason)
    if load is not None:
        notes += [p.note for p in {id(p): p for p in (load.before, load.after)}.values() if p.note]
    out.context.update({"design": d.name, "notes": notes, "load": _load_context(load), "mix": _mix_context(dec),
                        "cycle": None if cyc is None else {"checked": cyc.checked, "detected": cyc.detected, "cycle": cyc.cycle,
                                                           "amplitude": cyc.amplitude, "p_value": cyc.p_value, "reason": cyc.reason,
                                                           "refusal": cyc.refusal or None}})
    out.context.update(found.context)
    return out


def _follows_demand(spec: Spec, wc: WorkloadClass, signal: str, category: str) -> bool:
    """Whether demand alone moves the primary on this class (the demand-bound rule, :mod:`.demand`):
    never on a training class (no arrivals), else the signal's own property
    (:func:`.demand.follows_demand`; by category for a signal no longer in the spec)."""
    if wc.kind == "training":
        return False
    sig = next((s for s in spec.signals if s.name == signal), None)
    return demand.follows_demand(sig) if sig is not None else category in demand.DEMAND_SCALED_CATEGORIES
