"""Where a signal's regression alert fires: past the baseline's own spread, its tolerance
and an absolute floor, whichever is farthest from the baseline.

``ObsctlSignalRegression`` compares the signal's current value (one instant of its
recording rule) with a threshold taken when the rules are generated, from the baseline
the store holds (:class:`obsctl.records.Statistics`, in the signal's unit):

* ``higher_is_better``: ``min(p5, mean x (1 - tolerance_ratio), mean - floor)``;
* ``lower_is_better``: ``max(p95, mean x (1 + tolerance_ratio), mean + floor)``.

So a value inside the baseline's own 5-95 % spread never fires (the baseline window held
such values 90 % of the time: they are the signal's ordinary noise), nor does a change
smaller than the spec's ``tolerance_ratio`` on a very steady signal, nor a change of a
tiny value that is large relative to it but small in absolute terms (a KV-cache usage
going 0.1 % -> 0.2 % is +100 % and 0.001 in absolute terms).

The floor (:func:`alert_floor`) is the signal's ``alert_floor`` in the spec, else one per
kind of unit (:data:`FLOORS`): shares of a capacity (a ``ratio``: 0.02, two percentage
points; a quality ratio such as an error ratio: 0.005, half a point), latencies in seconds
(0.005 s: under a typical latency histogram bucket's width), and counts per second of
something bad (errors, rejections, preemptions: 0.01/s, three events in a 5-minute rate
window); every other unit (throughput, cost) has none (0): its tolerance and spread suffice.
"""

from __future__ import annotations

import math

from obsctl.records import Statistics
from obsctl.spec import Signal

#: Default absolute floor by unit kind (in the signal's unit); see :func:`alert_floor`.
FLOORS: dict[str, float] = {"ratio": 0.02, "percent": 2.0, "quality_ratio": 0.005, "quality_percent": 0.5,
                            "seconds": 0.005, "milliseconds": 5.0, "bad_events_per_second": 0.01}

_RATIO_UNITS = {"ratio", "fraction", "1"}
_PERCENT_UNITS = {"%", "percent"}
_SECOND_UNITS = {"s", "seconds", "second"}
_MILLISECOND_UNITS = {"ms", "milliseconds"}


def unit_kind(sig: Signal) -> str | None:
    """The kind of ``sig``'s unit that has a default floor, or None.

    ``ratio`` (unit ``ratio``, ``fraction`` or ``1``), ``percent`` (``%``, ``percent``), each
    ``quality_`` prefixed in the quality category (an error ratio), ``seconds`` / ``milliseconds``, ``bad_events_per_second`` (a ``lower_is_better`` unit
    ending in ``/s``, outside the cost category: errors, rejections, preemptions per second).
    """
    unit = sig.unit.strip().lower()
    quality = "quality_" if sig.category == "quality" else ""
    if unit in _RATIO_UNITS:
        return f"{quality}ratio"
    if unit in _PERCENT_UNITS:
        return f"{quality}percent"
    if unit in _SECOND_UNITS:
        return "seconds"
    if unit in _MILLISECOND_UNITS:
        return "milliseconds"
    if sig.direction == "lower_is_better" and sig.category != "cost" and unit.endswith("/s"):
        return "bad_events_per_second"
    return None


def alert_floor(sig: Signal) -> float:
    """The smallest absolute change from the baseline mean that can fire ``sig``'s
    regression alert (the signal's unit): its ``alert_floor``, else :data:`FLOORS` by
    :func:`unit_kind`, else 0."""
    if sig.alert_floor is not None:
        return sig.alert_floor
    kind = unit_kind(sig)
    return FLOORS[kind] if kind is not None else 0.0


def regression_threshold(sig: Signal, stats: Statistics) -> float:
    """The value past which ``sig`` has regressed from a baseline with ``stats`` (module doc).

    A non-finite quantile (a baseline stored without one) leaves it out; the mean is finite
    (:func:`obsctl.rules.baselines.select_baselines` skips the others).
    """
    mean, tol, floor = stats.mean, sig.tolerance_ratio, alert_floor(sig)
    if sig.direction == "higher_is_better":
        candidates = [mean * (1 - tol) if mean >= 0 else mean * (1 + tol), mean - floor, stats.p5]
        return min(c for c in candidates if math.isfinite(c))
    candidates = [mean * (1 + tol) if mean >= 0 else mean * (1 - tol), mean + floor, stats.p95]
    return max(c for c in candidates if math.isfinite(c))
