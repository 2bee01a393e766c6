"""The small interface every comparison design implements inside ``verify``.

A design module (:mod:`.before_after`, :mod:`.seasonal`, :mod:`.control`, :mod:`.canary`)
exposes ``branch(ctx: Context) -> Branch``: what it queries (through the context's
helpers), which history it lends its memory model, and its effect. What every design
shares (the demand and saturation context, the decision, the confound checks) is done
once by :func:`obsctl.baselining.designs.run.primary` on the returned :class:`Branch`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from obsctl.baselining.designs.cycle import CycleCheck
from obsctl.baselining.designs.demand import PeriodLoad
from obsctl.baselining.designs.effect import Effect
from obsctl.baselining.designs.mix import MixDecomposition
from obsctl.errors import PrometheusUnavailable, UsageError
from obsctl.spec import Spec, WorkloadClass

#: History read before a window for a design's memory model: this many window lengths.
HISTORY_WINDOWS = 6


def with_labels(wc: WorkloadClass, **labels: str) -> WorkloadClass:
    """``wc`` with ``labels`` added to its selector (a canary group, a mix segment)."""
    return wc.model_copy(update={"selector": {**wc.selector, **labels}})


def range_samples(client, query: str, start: float, end: float, step: float) -> list[tuple[float, float]]:
    """The finite samples of ``query`` in ``(start, end]`` at ``step``; ``[]`` when it is not exactly one series.

    Raises:
        PrometheusUnavailable, UsageError: as the client.
    """
    if end <= start:
        return []
    series = list(client.query_range(query, start + step, end, step))
    if len(series) != 1:  # several: their sum would be a guess, take none
        return []
    return [(t, v) for t, v in series[0].values if math.isfinite(v)]


@dataclass
class Context:
    """What a design's branch reads. Times are unix seconds; ``level`` is the look's interval level.

    Attributes:
        window_samples: the primary's window as ``verify`` measured it (a canary's: the treatment group's).
        loads: the demand/saturation of the baseline period and the window, already asked
            for by ``verify`` (None: read here by :meth:`period_loads`).
        read_loads: reads ``[(name, start, end)]`` periods' loads (``designs.run.period_loads``).
    """

    spec: Spec
    client: object
    initiative: object
    baseline: object
    window_samples: list[tuple[float, float]]
    start: float
    end: float
    step: float
    level: float
    wc: WorkloadClass
    read_loads: Callable[[list[tuple[str, float, float]]], list[PeriodLoad]]
    loads: Callable[[], list[PeriodLoad]] | None = None

    @property
    def signal(self) -> str:
        return self.initiative.primary_signal

    def range(self, query: str, start: float, end: float, step: float | None = None) -> list[tuple[float, float]]:
        """:func:`range_samples` at the window's step unless ``step`` is given."""
        return range_samples(self.client, query, start, end, step or self.step)

    def history(self, query: str, before: float, step: float | None = None) -> list[tuple[float, float]]:
        """The stretch of :data:`HISTORY_WINDOWS` window lengths before ``before`` (within the
        point cap), best effort: none is a lower bound on the memory, not an error."""
        from obsctl.promapi import MAX_RANGE_POINTS

        step = step or self.step
        span = min(HISTORY_WINDOWS * (self.end - self.start), (MAX_RANGE_POINTS - 1) * step)
        try:
            return self.range(query, before - span, before, step)
        except (PrometheusUnavailable, UsageError):
            return []

    def periods(self) -> list[tuple[str, float, float]]:
        """The baseline period and the window."""
        b = self.baseline.window
        return [("baseline", b.start.timestamp(), b.end.timestamp()), ("window", self.start, self.end)]

    def period_loads(self) -> list[PeriodLoad]:
        """The demand and saturation of :meth:`periods` (``loads`` when ``verify`` asked already)."""
        return self.loads() if self.loads else self.read_loads(self.periods())

    def instant(self, seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass
class Branch:
    """What a design found: its effect (None for before-after, whose effect is the
    statistics package's), the two load periods the demand check compares, notes, and
    the before-after checks (cycle, mix)."""

    effect: Effect | None
    loads: tuple[PeriodLoad, PeriodLoad]
    notes: list[str] = field(default_factory=list)
    cycle: CycleCheck | None = None
    mix: MixDecomposition | None = None
    treatment: list[tuple[float, float]] = field(default_factory=list)
