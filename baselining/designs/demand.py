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
* a **throughput**-category primary is **demand-bound** when the class was not
  capacity-bound in *either* period: the verdict is INCONCLUSIVE, with the advice to
  judge an efficiency, latency or queue-wait signal instead. Unknown saturation (no
  busy-time series) leaves the verdict alone and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from obsctl.rules import saturation

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
        demand_bound: True/False for a throughput primary, None otherwise or when unknown.
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


def assess(before: PeriodLoad, after: PeriodLoad, category: str, signal: str) -> LoadContext:
    """Apply the demand-bound rule (module doc) to a primary signal of ``category``."""
    change = None
    if before is not after and _finite(before.demand) and _finite(after.demand) and before.demand > 0:
        with np.errstate(over="ignore", invalid="ignore"):
            change = after.demand / before.demand - 1
        change = change if math.isfinite(change) else None
    bound, reason = None, ""
    if category == "throughput":
        flags = (before.capacity_bound, after.capacity_bound)
        if False in flags:
            free = [p.name for p, f in zip((before, after), flags) if f is False]
            demand = f"; demand moved {change * 100:+.1f} %" if change is not None else ""
            bound = True
            reason = (f"{signal} is demand-bound: the class was not saturated in the {' and the '.join(free)} "
                      f"(no queue built), so throughput measured the arrivals, not the capacity{demand}; "
                      "judge an efficiency, latency or queue-wait signal instead")
        elif None in flags:
            reason = f"saturation state unknown in {', '.join(p.name for p, f in zip((before, after), flags) if f is None)}: throughput may measure demand"
        else:
            bound = False
    return LoadContext(before, after, change, bound, reason)
