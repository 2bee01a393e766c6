"""Demand and saturation context of a comparison, and the demand-bound rule.

Throughput measures capacity only while work waits for the service; on a class that
serves everything that arrives, tokens/s is the arrival rate, and a demand rise of 20 %
reads as a 20 % "improvement" (while cost per token falls and utilization rises: the
guards cannot catch it). So:

* the **demand** of each period is the class's offered load (arrivals per second,
  rejected ones included: :data:`obsctl.rules.canonical.REQUESTS_OFFERED`, or the spec's
  ``demand`` signal), and the outputs show its change;
* the **saturation state** of each period comes from the one definition in
  :mod:`obsctl.rules.saturation` (:func:`~obsctl.rules.saturation.classify_inputs` over the
  period's raw inputs); a period is **capacity-bound** when at least
  :data:`CAPACITY_BOUND_SHARE` of its classified samples have a building queue
  (``saturated``: accelerators busy, or ``constrained``: a configuration limit; either
  way the service, not the arrivals, sets the throughput);
* a primary that **follows demand** (:func:`follows_demand`: a
  throughput, a cost per unit of work, work per allocated accelerator-second or per
  joule, a busy share: any value demand alone moves while the class serves what
  arrives) is **demand-bound** when the class was not capacity-bound in *either* period
  of an inference class: the verdict is INCONCLUSIVE, with the demand change in the
  reason and the advice to judge a signal demand does not move (work per busy
  accelerator-second, a latency, a queue wait). Unknown saturation (no busy-time series)
  leaves the verdict alone and says so. A training class has no arrivals (the job pulls
  its work), so the rule does not apply to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from obsctl.rules import saturation
from obsctl.rules.canonical import DEMAND_SCALED
from obsctl.spec import Signal

#: Categories of spec-query signals that demand alone moves on an unsaturated class
#: (:func:`follows_demand`): throughput is the arrival rate there, and a cost per unit of
#: work is a fixed price spread over whatever arrived. A utilization goes either way: a
#: ``ratio`` (busy share of the capacity) follows demand; work per resource-second follows
#: it when the resource is allocated (GPU-seconds held) and not when it is used (busy
#: GPU-seconds, CPU-seconds), which only the catalogue can tell apart.
DEMAND_SCALED_CATEGORIES: tuple[str, ...] = ("throughput", "cost")

#: Share of a period's classified samples with a building queue that makes it capacity-bound.
CAPACITY_BOUND_SHARE = 0.5
_QUEUED = ("saturated", "constrained")


@dataclass(frozen=True)
class PeriodLoad:
    """Demand and saturation of one period (baseline, window, or one canary group).

    Attributes:
        name: ``baseline`` | ``window`` | ``treatment`` | ``control``.
        demand: mean offered load, requests/s (None: no demand series).
        state: the period's most frequent saturation state (None: not classified).
        queued_share: share of classified samples with a building queue (None: none classified).
        note: why the period could not be read, if so.
    """

    name: str
    demand: float | None
    state: str | None
    queued_share: float | None
    note: str = ""

    @property
    def capacity_bound(self) -> bool | None:
        """True when the queue built in most of the period; None when unknown."""
        return None if self.queued_share is None else self.queued_share >= CAPACITY_BOUND_SHARE


def follows_demand(signal: Signal) -> bool:
    """True when demand alone moves ``signal``'s value on a class that is not saturated, so
    that it is demand-bound there (module doc; docs/verification-designs.md lists them).

    A catalogue signal: whether its key is in :data:`obsctl.rules.canonical.DEMAND_SCALED`.
    A spec query: by category and unit: :data:`DEMAND_SCALED_CATEGORIES`, or a utilization
    whose unit is ``ratio`` (a share of the capacity in use).
    """
    if signal.catalogue is not None:
        return signal.catalogue in DEMAND_SCALED
    return signal.category in DEMAND_SCALED_CATEGORIES or (signal.category == "utilization" and signal.unit == "ratio")


def _finite_mean(values: np.ndarray) -> float | None:
    """Mean of finite samples without overflow near the float limit (sum of ``v/n``); None if empty."""
    if not values.size:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        m = float(np.sum(values / values.size))
    return m if math.isfinite(m) else None


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def period_load(name: str, demand: Sequence[float] | None, states: Sequence[str | None]) -> PeriodLoad:
    """Summarize one period from its demand samples and its per-sample saturation states.

    Non-finite demand samples are dropped; a mean that is still not finite reads as no demand
    (``demand=None`` with a note), never as NaN/Inf in a report or JSON.
    """
    d = np.asarray([v for v in (demand if demand is not None else []) if v is not None and np.isfinite(v)], float)
    classified = [s for s in states if s is not None]
    shares = saturation.state_shares(classified)
    queued = sum(shares[s] for s in _QUEUED) if classified else None
    mean = _finite_mean(d)
    note = "demand mean not finite" if d.size and mean is None else ""
    return PeriodLoad(name, mean, saturation.dominant_state(classified), queued, note)


def states_of(inputs: Mapping[str, Sequence[float | None]], thresholds: saturation.Thresholds) -> list[str | None]:
    """Per-sample states by the saturation module's own definition (aligned inputs)."""
    return saturation.classify_inputs(inputs, thresholds)


@dataclass(frozen=True)
class LoadContext:
    """Demand and saturation of both periods, and whether a throughput primary is demand-bound.

    Attributes:
        before, after: the two periods (for canary: control and treatment groups).
        demand_change: ``after.demand / before.demand - 1`` (None when unknown).
        demand_bound: True/False for a primary that follows demand, None otherwise or when unknown.
        reason: the INCONCLUSIVE reason when demand-bound, else a note (``""`` when nothing to say).
    """

    before: PeriodLoad
    after: PeriodLoad
    demand_change: float | None
    demand_bound: bool | None
    reason: str

    def line(self) -> str:
        """``demand +20.0 % (12.1 -> 14.5 req/s); saturation: baseline healthy, window healthy``."""
        if self.before is self.after:  # one period (a canary's window): no change to show
            demand = f"demand {self.after.demand:.4g} req/s" if _finite(self.after.demand) else "demand: no offered-load series"
            return f"{demand}; saturation: {self.after.name} {self.after.state or 'unknown'}"
        if _finite(self.demand_change) and _finite(self.before.demand) and _finite(self.after.demand):
            demand = f"demand {self.demand_change * 100:+.1f} % ({self.before.demand:.4g} -> {self.after.demand:.4g} req/s)"
        elif self.before.demand is None and self.after.demand is None and not (self.before.note or self.after.note):
            demand = "demand: no offered-load series"
        else:
            demand = "demand change undefined"
        state = f"saturation: {self.before.name} {self.before.state or 'unknown'}, {self.after.name} {self.after.state or 'unknown'}"
        return f"{demand}; {state}"


def assess(before: PeriodLoad, after: PeriodLoad, category: str, signal: str, follows_demand: bool | None = None) -> LoadContext:
    """Apply the demand-bound rule (module doc) to primary ``signal`` of ``category``.

    Args:
        before, after: the two periods (the same object twice: one period, no change).
        category: the signal's category (its words in the reason).
        follows_demand: whether demand alone moves the signal on an unsaturated class
            (:func:`follows_demand`; False for a training class); None: by category
            alone (:data:`DEMAND_SCALED_CATEGORIES`).

    Returns:
        :class:`LoadContext`; ``demand_bound`` None when the rule does not apply or the
        saturation is unknown.
    """
    change = None
    if before is not after and _finite(before.demand) and _finite(after.demand) and before.demand > 0:
        with np.errstate(over="ignore", invalid="ignore"):
            change = after.demand / before.demand - 1
        change = change if math.isfinite(change) else None
    if follows_demand is None:
        follows_demand = category in DEMAND_SCALED_CATEGORIES
    bound, reason = None, ""
    if follows_demand:
        flags = (before.capacity_bound, after.capacity_bound)
        if False in flags:
            free = " and the ".join(p.name for p, f in zip((before, after), flags, strict=True) if f is False)
            bound, reason = True, _bound_reason(signal, category, free, change)
        elif None in flags:
            unknown = ", ".join(p.name for p, f in zip((before, after), flags, strict=True) if f is None)
            what = "throughput" if category == "throughput" else signal
            reason = f"saturation state unknown in {unknown}: {what} may measure demand"
        else:
            bound = False
    return LoadContext(before, after, change, bound, reason)


#: What the value measured on an unsaturated class, by category (the reason's words).
_MEASURED = {
    "throughput": "throughput measured the arrivals, not the capacity",
    "cost": "a cost per unit of work spread a fixed price over the work that arrived: it measured the arrivals, not the efficiency",
}
_MEASURED_OTHER = "its value moved with the arrivals (a fixed allocation, power floor or capacity over the work that arrived), not with the efficiency"


def _bound_reason(signal: str, category: str, free: str, change: float | None) -> str:
    """The INCONCLUSIVE reason of a demand-bound primary; ``free``: the unsaturated period(s)."""
    measured = _MEASURED.get(category, _MEASURED_OTHER)
    if category == "throughput":  # the wording verify has always given for throughput
        demand = f"; demand moved {change * 100:+.1f} %" if change is not None else ""
        return (f"{signal} is demand-bound: the class was not saturated in the {free} "
                f"(no queue built), so {measured}{demand}; judge an efficiency, latency or queue-wait signal instead")
    demand = f"demand moved {change * 100:+.1f} % while " if change is not None else ""
    return (f"{signal} is demand-bound: {demand}the class was not saturated in the {free} (no queue built), so {measured}; "
            "judge a signal demand does not move instead (work per busy accelerator-second, a latency or a queue wait)")
