"""``seasonal``: before-after at the same hours of earlier cycles of the stored baseline.

Each window sample at instant ``t`` is compared with the baseline's samples at the same
hour of day (``t - k * 1 day``) or of week (``t - k * 7 days``) for every whole cycle
``k >= 1`` the stored baseline holds, averaged: ``B*_t = mean_k B(t - k P)``. The effect
is the mean of ``log W_t - log B*_t`` over the window, exponentiated: a cycle of any
shape that repeats from one period to the next cancels. Cycles are counted in the
spec's time zone (``verification.timezone``, UTC by default): across a daylight-saving
change "the same hour" is the same wall-clock hour.

The baseline must span at least one whole cycle (a day, or a week: Prometheus' default
retention of 15 days holds two), or the design is refused with a message saying so.

Assumption: the cycle repeats (same shape and level) from one period to the next; a
trend between cycles is not removed (use ``control`` for that). Source: seasonal
naive forecasting as the reference point, Hyndman & Athanasopoulos, *Forecasting:
Principles and Practice*, 3rd ed. (2021), sec. 5.2.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from zoneinfo import ZoneInfo

import numpy as np

from obsctl.baselining.designs import align
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Setting, baseline_and_window
from obsctl.durations import format_duration
from obsctl.errors import UsageError

NAME = "seasonal"

#: How the effect's interval is reached, as the design's recorded assessment names it.
METHOD = ("seasonal: the mean of log W_t - log B*_t (the baseline's same hours) under the memory of the baseline around its cycle "
          "and long-run variance, t interval at the look's boundary")

#: Cycle name -> length in days.
CYCLES: dict[str, int] = {"day": 1, "week": 7}

#: Least share of the window's samples that must find a same-hour baseline sample.
MIN_MATCHED_SHARE = 0.8


def check_span(baseline_start: dt.datetime, baseline_end: dt.datetime, cycle: str) -> None:
    """Refuse a baseline shorter than one whole cycle.

    Raises:
        UsageError: naming the baseline's span, the cycle and what to do.
    """
    days = CYCLES[cycle]
    span = (baseline_end - baseline_start).total_seconds()
    if span < days * 86400:
        hint = " (Prometheus keeps 15 days by default: --storage.tsdb.retention.time)" if cycle == "week" else ""
        raise UsageError(
            f"--design seasonal compares with the same hours of the {cycle} in the stored baseline, but the baseline spans "
            f"{format_duration(span)}, less than one whole {cycle} ({format_duration(days * 86400)}){hint}; snapshot a baseline of at least "
            f"--window {days * 24}h, or use --design control or canary"
        )


def check_start(spec, baseline) -> None:
    """``initiative start``'s check: :func:`check_span` of the baseline against the spec's cycle."""
    check_span(baseline.window.start, baseline.window.end, spec.comparison.seasonal_cycle)


def matched_instants(window_ms: np.ndarray, cycle: str, cycles: int, timezone: str = "UTC") -> np.ndarray:
    """The instants ``t - k * P`` in wall-clock time of ``timezone``, shape ``(cycles, n)`` (ms)."""
    days = CYCLES[cycle]
    if timezone == "UTC":
        shifts = np.arange(1, cycles + 1, dtype=np.int64)[:, None] * days * 86_400_000
        return window_ms[None, :] - shifts
    tz = ZoneInfo(timezone)
    out = np.empty((cycles, window_ms.size), dtype=np.int64)
    for i, ms in enumerate(window_ms.tolist()):
        local = dt.datetime.fromtimestamp(ms / 1000, tz)
        for k in range(1, cycles + 1):
            # Aware-datetime arithmetic is wall-clock arithmetic: the same local hour k days back.
            out[k - 1, i] = round((local - dt.timedelta(days=days * k)).timestamp() * 1000)
    return out


def effect(baseline: Iterable[tuple[float, float]], window: Iterable[tuple[float, float]], cycle: str, confidence: float,
           timezone: str = "UTC") -> fx.Effect:
    """The seasonal effect: window vs the same hours of the baseline's earlier cycles.

    Args:
        baseline: the stored baseline's samples (spanning whole cycles: :func:`check_span`).
        window: the verification window's samples (same step, so instants match).
        cycle: ``day`` or ``week``.
        timezone: IANA name for "the same hour" (default UTC).

    Returns:
        :class:`~obsctl.baselining.designs.effect.Effect` with ``context`` ``cycles``
        (baseline cycles matched at most) and ``matched_share``; undefined when fewer than
        :data:`MIN_MATCHED_SHARE` of the window's samples find a same-hour baseline sample.
    """
    tb, vb = align.as_arrays(baseline)
    tw, vw = align.as_arrays(window)
    if tw.size == 0 or tb.size == 0:
        return fx.undefined(NAME, confidence, "no samples in the window or the baseline", empty=True)
    span_days = (tw[-1] - tb[0]) / 86_400_000
    cycles = max(1, int(span_days // CYCLES[cycle]))
    wanted = matched_instants(tw, cycle, cycles, timezone)
    pos = np.searchsorted(tb, wanted)
    pos_c = np.clip(pos, 0, tb.size - 1)
    hit = (tb[pos_c] == wanted) & (vb[pos_c] > 0)
    values = np.where(hit, vb[pos_c], 0.0)
    count = hit.sum(axis=0)
    ok = (count > 0) & (vw > 0)
    share = float(ok.mean())
    context = {"cycle": cycle, "cycles": int(count.max()) if count.size else 0, "matched_share": share, "timezone": timezone}
    if share < MIN_MATCHED_SHARE or ok.sum() < fx.MIN_SAMPLES:
        return fx.undefined(NAME, confidence, f"only {share:.0%} of the window's samples have a baseline sample at the same hour of the "
                            f"{cycle} (needs {MIN_MATCHED_SHARE:.0%}): the baseline's step or span does not match the window", **context)
    reference = values.sum(axis=0)[ok] / count[ok]
    d = (tw[ok] / 1000.0, np.log(vw[ok]) - np.log(reference))
    est = fx.paired_log(d, deseasonalized(tb, vb, cycle), same_series=False)
    return fx.from_log(NAME, est, confidence, {"window": int(d[1].size)}, tau_seconds=est.tau_seconds, **context)


def deseasonalized(ms: np.ndarray, values: np.ndarray, cycle: str) -> fx.Series | None:
    """The baseline's log minus its fitted cycle (harmonics and trend, :mod:`.cycle`), for the memory model.

    The paired difference ``log W_t - log B*_t`` has the memory of the signal's
    fluctuations around its cycle; the baseline holds many hours of them.
    """
    from obsctl.baselining.designs.cycle import residuals

    ok = values > 0
    if ok.sum() < 20:
        return None
    t = ms[ok] / 1000.0
    return t, residuals(t, np.log(values[ok]), CYCLES[cycle] * 86400.0)


def plan(ctx: Setting) -> Plan:
    """``verify``'s seasonal comparison asks for the demand of both periods; the baseline
    must span a whole cycle.

    Raises:
        UsageError: the baseline is shorter than one cycle.
    """
    check_span(ctx.baseline.window.start, ctx.baseline.window.end, ctx.spec.comparison.seasonal_cycle)
    return Plan(loads=baseline_and_window(ctx.baseline, ctx.start, ctx.end))


def branch(ctx: Setting, got: Gathered) -> Branch:
    """The window against the same hours of the stored baseline, with the demand of both periods."""
    cmp = ctx.spec.comparison
    found = effect(ctx.baseline.samples, ctx.window_samples, cmp.seasonal_cycle, ctx.level, cmp.timezone)
    return Branch(found, tuple(got.loads))


DESIGN = Design(NAME, plan, branch, effect, method=METHOD, check_start=check_start)
