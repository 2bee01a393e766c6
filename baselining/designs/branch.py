"""The interface every comparison design implements: declared queries, then a pure branch.

A design module (:mod:`.before_after`, :mod:`.seasonal`, :mod:`.control`, :mod:`.canary`)
exports one :class:`Design` as ``DESIGN``: the queries it needs (:attr:`Design.plan`:
a :class:`Plan` of :class:`Query` objects, the load periods and an optional mix label),
the PromQL of the window ``verify`` measures (:attr:`Design.window_query`), and its
branch (:attr:`Design.branch`): the effect and the checks, from the gathered answers
(:class:`Gathered`) alone. ``verify`` gathers every declared query in one I/O step
(:mod:`obsctl.baselining.evidence`); nothing here talks to Prometheus. What every design
shares (the demand and saturation context, the decision, the confound checks) is done
once by :func:`obsctl.baselining.designs.run.primary` on the returned :class:`Branch`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from obsctl.baselining.designs.cycle import CycleCheck
from obsctl.baselining.designs.demand import PeriodLoad
from obsctl.baselining.designs.effect import Effect
from obsctl.baselining.designs.mix import MixDecomposition
from obsctl.baselining.statistics import anytime
from obsctl.baselining.statistics.comparison import LookContext
from obsctl.spec import Spec, WorkloadClass

#: History read before a window for a design's memory model: this many window lengths.
HISTORY_WINDOWS = 6


def with_labels(wc: WorkloadClass, **labels: str) -> WorkloadClass:
    """``wc`` with ``labels`` added to its selector (a canary group, a mix segment)."""
    return wc.model_copy(update={"selector": {**wc.selector, **labels}})


@dataclass(frozen=True)
class Setting:
    """What a design plans its queries from and judges with. Times are unix seconds;
    ``level`` is the look's per-look interval level.

    Attributes:
        initiative, baseline: the records (:class:`obsctl.records.Initiative`, :class:`obsctl.records.Baseline`).
        window_samples: the primary's window as ``verify`` measured it (a canary's: the treatment group's).
    """

    spec: Spec
    initiative: object
    baseline: object
    window_samples: list[tuple[float, float]]
    start: float
    end: float
    step: float
    level: float
    wc: WorkloadClass

    @property
    def signal(self) -> str:
        return self.initiative.primary_signal

    def periods(self) -> list[tuple[str, float, float]]:
        """The baseline period and the window."""
        b = self.baseline.window
        return [("baseline", b.start.timestamp(), b.end.timestamp()), ("window", self.start, self.end)]

    def instant(self, seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass(frozen=True)
class Look:
    """The look a design judges its effect at: its place on the change's sequence of looks
    (:mod:`obsctl.baselining.statistics.anytime`), fixed by the look, not by the design.

    Attributes:
        level: the per-look two-sided level the effect's interval is computed at (the look
            boundary's nominal level; the spec's confidence when the look has no boundary).
        over_all: the level the interval claims over every look of the change (the sequence's).
        number: the look's number on the sequence (1 = first).
        min_fraction: the sequence's ``t_min`` the boundary rests on; None without a boundary.
        boundary_z: the look's z boundary; None without one.
        planned_seconds: the planned window length (s); None: not planned.
    """

    level: float
    over_all: float
    number: int = 1
    min_fraction: float | None = None
    boundary_z: float | None = None
    planned_seconds: float | None = None

    @classmethod
    def at(cls, look: LookContext, judged_min_fraction: float | None, confidence: float) -> Look:
        """The look a design judges at: the boundary of ``look`` on the change's sequence
        (:func:`obsctl.baselining.statistics.anytime.boundary` at the sequence's ``t_min`` and its
        level over all looks), the one every look of the change uses, so a design's repeated
        verifies stay safe as the before-after ones do.

        Args:
            look: the look's place on the sequence (its ``t_min``, fixed at the first look).
            judged_min_fraction: on a first look, the ``t_min`` the window's comparison with
                the baseline computed (:func:`obsctl.baselining.statistics.comparison.judge`).
            confidence: the spec's level, for a sequence without its own.

        Without a ``t_min`` (a first look whose comparison stopped before its boundary: no
        data, both sides constant, a broken assumption) the interval is at the sequence's level.
        A design with its own information time (``Design.min_fraction``) passes it as
        ``judged_min_fraction``; the first look records it and later looks keep it.
        """
        over_all = look.confidence or confidence
        t_min = look.min_fraction or judged_min_fraction
        if t_min is None:
            return cls(over_all, over_all, look.number, None, None, look.planned_seconds)
        z = anytime.boundary(t_min, 1 - over_all)
        return cls(anytime.confidence_of(z), over_all, look.number, t_min, z, look.planned_seconds)


@dataclass(frozen=True)
class Query:
    """One range query a design declares: ``expr`` over ``(start, end]`` at ``step``.

    ``history``: best effort (an error or a refusal reads as no samples: the history only
    lends the memory model), and ``start`` is clipped to the range-point cap.
    The answer is the finite samples when ``expr`` returns exactly one series, else ``[]``.
    """

    key: str
    expr: str
    start: float
    end: float
    step: float
    history: bool = False


def history(key: str, expr: str, ctx: Setting, before: float, step: float | None = None) -> Query:
    """The stretch of :data:`HISTORY_WINDOWS` window lengths before ``before`` (a best-effort :class:`Query`)."""
    return Query(key, expr, before - HISTORY_WINDOWS * (ctx.end - ctx.start), before, step or ctx.step, history=True)


@dataclass(frozen=True)
class Plan:
    """What a design asks ``verify`` to gather.

    Attributes:
        queries: the range queries, gathered in this order (the first error raised stands).
        loads: the ``(name, start, end)`` periods whose demand and saturation the design reads.
        mix: the mix label to decompose the change on (:mod:`.mix`), or None.
    """

    queries: tuple[Query, ...] = ()
    loads: tuple[tuple[str, float, float], ...] = ()
    mix: str | None = None


@dataclass(frozen=True)
class Gathered:
    """The answers to a :class:`Plan`: ``series`` by query key, the loads in the plan's
    order, the mix decomposition (or None) and its note."""

    series: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    loads: tuple[PeriodLoad, ...] = ()
    mix: MixDecomposition | None = None
    mix_note: str = ""


@dataclass
class Branch:
    """What a design found: its effect (None for before-after, whose effect is the
    statistics package's), the two load periods the demand check compares, notes, and
    the before-after checks (cycle, mix).

    Attributes:
        treatment: the canary's treatment-window samples (promote makes them the baseline).
        means: ``(reference, treated)`` means in the signal's unit when the effect compares
            two groups in the window (the canary's control and treatment); None: the periods' means.
        context: the design's own JSON-ready entries for outputs (``control``, ``variant``).
    """

    effect: Effect | None
    loads: tuple[PeriodLoad, PeriodLoad]
    notes: list[str] = field(default_factory=list)
    cycle: CycleCheck | None = None
    mix: MixDecomposition | None = None
    treatment: list[tuple[float, float]] = field(default_factory=list)
    means: tuple[float | None, float | None] | None = None
    context: dict = field(default_factory=dict)


def baseline_query(spec: Spec, initiative, baseline) -> str:
    """The window's PromQL for every design but the canary: the baseline's own."""
    return baseline.query


def baseline_and_window(baseline, start: float, end: float) -> tuple[tuple[str, float, float], ...]:
    """The load periods of a design that compares with the baseline period: it, then the window."""
    return (("baseline", baseline.window.start.timestamp(), baseline.window.end.timestamp()), ("window", start, end))


@dataclass(frozen=True)
class Design:
    """One comparison design, as its module exports it (``DESIGN``).

    Attributes:
        name: as the spec and ``initiative start --design`` spell it.
        plan: ``plan(setting) -> Plan``: the queries it needs (raises UsageError to refuse,
            e.g. a seasonal baseline shorter than a cycle).
        branch: ``branch(setting, gathered) -> Branch``: its effect and checks, no I/O.
        effect: the module's effect function (the calibration benchmarks call it on arrays).
        window_query: ``window_query(spec, initiative, baseline) -> PromQL`` of the window ``verify`` measures.
        load_periods: ``load_periods(baseline, start, end)``: the periods :attr:`plan` declares for
            the load context, known before the window is measured (``verify`` asks for them early);
            None when they depend on more (the canary's whole class).
        own_baseline: the design compares with the stored baseline period itself (before-after:
            an aged baseline is replaced by the period right before the start).
        cycle_checked: ``initiative start`` stores the baseline's cycle tests for it.
        needs_samples: ``verify`` reads the baseline's samples even with a stored side.
        planned: the window is planned by :mod:`.plan` (control, canary) rather than the statistics planner.
        needs_control: ``initiative start`` needs a control class (``--control``).
        needs_variant: ``initiative start`` needs the spec's ``variant`` (canary groups).
        needs_baseline: ``initiative start`` needs a current baseline (a canary may start
            without one: its control group's window stands in).
        method: how its effect's interval is reached, as its recorded assessment names it
            (:func:`obsctl.baselining.designs.assessment.of`).
        check_start: ``check_start(spec, baseline)``: ``initiative start`` refuses a baseline the
            design cannot run from (raises UsageError); None: any baseline.
        min_fraction: ``min_fraction(setting) -> t_min | None``: the information time of the
            design's own comparison (:func:`obsctl.baselining.statistics.anytime.min_fraction`)
            when it differs from the before-after comparison's (the profile design judges the
            series with the cycle divided out); None: the before-after comparison's.
    """

    name: str
    plan: Callable[[Setting], Plan]
    branch: Callable[[Setting, Gathered], Branch]
    effect: Callable[..., Effect]
    window_query: Callable[..., str] = baseline_query
    load_periods: Callable[..., tuple[tuple[str, float, float], ...]] | None = baseline_and_window
    own_baseline: bool = False
    cycle_checked: bool = False
    needs_samples: bool = True
    planned: bool = False
    needs_control: bool = False
    needs_variant: bool = False
    needs_baseline: bool = True
    method: str = ""
    check_start: Callable[..., None] | None = None
    min_fraction: Callable[[Setting], float | None] | None = None
