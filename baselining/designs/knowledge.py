"""Cycle knowledge: what the signal's history says about its daily and weekly cycles.

Learnt once, at snapshot, from the days before the baseline window (and the window
itself), so the design of a change is chosen before its window is seen:

1. **Detection** (:func:`learn`). Logs of the positive samples; the harmonic Wald test of
   :func:`obsctl.baselining.designs.cycle.harmonic_test` (intercept, trend, two harmonics,
   the residuals' own memory) for the day on a history of at least
   :data:`MIN_DAILY_HISTORY` (two days), and for the week, with the daily harmonics as
   nuisance terms, on at least :data:`MIN_WEEKLY_HISTORY` (two weeks). A period counts as
   ``present`` when the test rejects at :data:`~obsctl.baselining.designs.cycle.ALPHA` and
   the fitted half range is at least
   :data:`~obsctl.baselining.designs.cycle.MIN_AMPLITUDE_SHARE` of the minimum effect;
   ``absent`` otherwise; ``unknown`` on a shorter history (one cycle cannot be told from
   a slow wander: fewer than two weeks cannot rule a weekly cycle out).
2. **Profile** (:func:`profile_of`). When a cycle is present: the mean log of each local
   hour of the week (168 bins, when the weekly cycle is present) or of the day (24 bins),
   averaged over the cycles the history holds, with the pooled variance of one cycle's
   hourly mean around it (what the profile design's interval adds for the profile's own
   error). The profile design (:mod:`.profile`) divides it out of both periods.
3. **Memory** (:func:`divide_out`). The signal's memory model for the profile design is
   fitted, at snapshot, to the memory history and the baseline window with the profile
   divided out (``CycleKnowledge.memory``): fitted to the raw history the cycle reads as
   long memory, and fitted to the compared periods alone (a one-hour baseline and a
   one-hour first look) it is a lower bound that makes the interval too narrow.
4. **Phases** (:func:`phase_check`). When a cycle is ``unknown`` and the window holds
   phases the baseline does not (its share of weekend instants differs from the
   baseline's by more than :data:`PHASE_SHARE_TOLERANCE`; more than that share of it lies
   :data:`DAILY_TOLERANCE_HOURS` or more from every baseline hour), any difference may
   be the cycle: the verdict refuses, naming the history needed, the designs that need
   no history (control, canary) and the last look whose window still matches.

Hours are counted in the spec's time zone (``comparison.timezone``): the same wall-clock
hour across a daylight-saving change. Sources: harmonic regression for periodicity,
Brockwell & Davis, *Time Series: Theory and Methods*, 2nd ed. (1991), sec. 10.1;
seasonal indices by period-hour means, Hyndman & Athanasopoulos, *Forecasting:
Principles and Practice*, 3rd ed. (2021), sec. 3.4 (classical decomposition).
Calibrated in bench/bench_cycles.py (docs/verification.md, "Cycles known before the window").
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import numpy as np

from obsctl.baselining.designs import cycle as harmonic
from obsctl.baselining.designs.cycle import DAY, WEEK, CycleCheck
from obsctl.durations import format_duration
from obsctl.records import CycleKnowledge

#: Least history (s) that can show a daily / weekly cycle (two whole periods).
MIN_DAILY_HISTORY = 2 * DAY
MIN_WEEKLY_HISTORY = 2 * WEEK
#: How far back the snapshot reads for the cycles (s): two weeks and two days, so a
#: weekly cycle can be known with its hours seen at least twice.
CYCLE_HISTORY_SECONDS = 16 * DAY
#: The step of that read (s, at least the verification step): 4,608 points for 16 days.
CYCLE_STEP_SECONDS = 300.0
#: An hour of the day this far (circular) from every baseline hour is another phase of an
#: unknown daily cycle.
DAILY_TOLERANCE_HOURS = 3
#: A window whose share of a phase (weekend instants; hours far from the baseline's)
#: differs from the baseline's by more than this holds phases the baseline does not.
PHASE_SHARE_TOLERANCE = 0.10
#: Fewest samples for the tests.
MIN_SAMPLES = 48
WEEKEND = (5, 6)  # Saturday, Sunday (Monday = 0)
_MONDAY_EPOCH = 3 * DAY  # 1970-01-01 was a Thursday: +3 days puts Monday 00:00 at 0


def local_offsets(seconds: np.ndarray, timezone: str) -> np.ndarray:
    """UTC offset (s) of ``timezone`` at each instant (unix s); zeros for UTC."""
    t = np.asarray(seconds, float)
    if timezone == "UTC" or t.size == 0:
        return np.zeros_like(t)
    tz = ZoneInfo(timezone)
    hours, inverse = np.unique(np.floor(t / 3600.0), return_inverse=True)
    offs = np.array([dt.datetime.fromtimestamp(h * 3600.0, tz).utcoffset().total_seconds() for h in hours])
    return offs[inverse]


def week_phase(seconds: np.ndarray, timezone: str = "UTC") -> np.ndarray:
    """Seconds since local Monday 00:00 of each instant (0 .. 1 week)."""
    t = np.asarray(seconds, float)
    return np.mod(t + local_offsets(t, timezone) + _MONDAY_EPOCH, WEEK)


def hour_bins(seconds: np.ndarray, cycle: str, timezone: str = "UTC") -> np.ndarray:
    """The local hour of the week (0-167) or of the day (0-23) of each instant."""
    phase = week_phase(seconds, timezone)
    if cycle == "day":
        phase = np.mod(phase, DAY)
    return (phase // 3600).astype(np.int64)


def _positive(t, v) -> tuple[np.ndarray, np.ndarray]:
    t, v = np.asarray(t, float), np.asarray(v, float)
    ok = np.isfinite(t) & np.isfinite(v) & (v > 0)
    order = np.argsort(t[ok], kind="stable")
    return t[ok][order], np.log(v[ok][order])


def profile_of(t: np.ndarray, y: np.ndarray, cycle: str, timezone: str = "UTC") -> tuple[list[float], list[float], float | None, float | None]:
    """``(profile, effective cycles per hour, residual variance, its dof)`` of the log series
    ``y`` at times ``t`` (module doc, step 2).

    Each clock hour of the history gives one mean log ``m``. The day's profile is the mean
    of ``m`` per hour of the day; the week's is additive, ``p(d, h) = a(type(d), h) + c(d)``:
    a daily shape for weekdays and one for the weekend, plus a level per day of the week
    (least squares; 55 parameters instead of 168 hour-of-week means, so two weeks of
    history give each hour the precision of several). The profile is centred over the hours
    seen; hour ``b``'s effective cycles are ``1 / leverage_b`` (its estimate's variance is
    ``s^2 / n_b``, ``s^2`` the residual variance of one hour's mean around the fit); hours
    the history never saw (on either factor) get 0."""
    bins = 24 if cycle == "day" else 168
    local = t + local_offsets(t, timezone) + _MONDAY_EPOCH
    hour_key = np.floor(local / 3600).astype(np.int64)
    keys, inverse = np.unique(hour_key, return_inverse=True)
    means = np.bincount(inverse, weights=y) / np.bincount(inverse)
    how = np.mod(keys, 168)
    x_all = _profile_rows(np.arange(bins), cycle)
    x = x_all[how % bins]
    xtx_inv = np.linalg.pinv(x.T @ x)
    beta = xtx_inv @ x.T @ means
    rank = int(np.linalg.matrix_rank(x))
    dof = means.size - rank
    resid = means - x @ beta
    variance = float(resid @ resid / dof) if dof > 0 else None
    seen_cols = x.sum(axis=0) > 0
    seen = np.all(~((x_all > 0) & ~seen_cols[None, :]), axis=1)
    prof = x_all @ beta
    leverage = np.einsum("ij,jk,ik->i", x_all, xtx_inv, x_all)
    counts = np.where(seen & (leverage > 0), 1.0 / np.maximum(leverage, 1e-12), 0.0)
    if seen.any():
        prof = np.where(seen, prof - prof[seen].mean(), 0.0)
    return [float(p) for p in prof], [float(c) for c in counts], variance, float(dof) if dof > 0 else None


def _profile_rows(hours: np.ndarray, cycle: str) -> np.ndarray:
    """The profile's design rows for hours of the day (``day``) or of the week (``week``)."""
    if cycle == "day":
        return np.eye(24)[hours % 24]
    day, hour = hours // 24, hours % 24
    weekend = np.isin(day, WEEKEND).astype(int)
    return np.hstack([np.eye(48)[weekend * 24 + hour], np.eye(7)[day]])


def learn(history: tuple[np.ndarray, np.ndarray], baseline: tuple[np.ndarray, np.ndarray], min_effect_ratio: float,
          timezone: str = "UTC") -> CycleKnowledge:
    """The cycle knowledge of a signal (module doc, steps 1-2).

    Args:
        history: ``(unix seconds, values)`` before the baseline window, on a step grid
            (holes allowed); may be empty.
        baseline: the baseline window's ``(unix seconds, values)``.
        min_effect_ratio: the spec's minimum effect (a cycle smaller than half of it cannot
            move a verdict past the margin).
        timezone: IANA name the hours are counted in.

    Returns:
        :class:`~obsctl.records.CycleKnowledge` (``unknown`` for a period the history is too short for).
    """
    th, yh = _positive(*history)
    tb, yb = _positive(*baseline)
    # One step grid for the test: the history's when it holds any, else the baseline's
    # (a baseline of days read with no history before it); the baseline's hours lie
    # right after the history, whose span the knowledge reports.
    t, y = (th, yh) if th.size >= MIN_SAMPLES else (tb, yb)
    step = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    span = float(t[-1] - t[0]) + step if t.size > 1 else 0.0
    out: dict = {"history_seconds": span, "timezone": timezone}
    relevant = harmonic.MIN_AMPLITUDE_SHARE * min_effect_ratio
    for name, period, need, nuisance in (("daily", DAY, MIN_DAILY_HISTORY, ()), ("weekly", WEEK, MIN_WEEKLY_HISTORY, (DAY,))):
        if span < need or t.size < MIN_SAMPLES:
            continue
        p, amp, _ = harmonic.harmonic_test(t, y, period, nuisance, step)
        p, amp = min(max(float(p), 0.0), 1.0), min(max(float(amp), 0.0), 1.0)
        out[name] = "present" if p < harmonic.ALPHA and amp >= relevant else "absent"
        out[f"{name}_p"], out[f"{name}_amplitude"] = p, amp
    cyc = "week" if out.get("weekly") == "present" else "day" if out.get("daily") == "present" else None
    if cyc is not None:
        prof, counts, var, dof = profile_of(t, y, cyc, timezone)
        out.update(profile_cycle=cyc, profile=prof, profile_counts=counts, profile_variance=var, profile_dof=dof)
        if tb.size:
            ob = np.asarray(prof)[hour_bins(tb, cyc, timezone)]
            out["baseline_spread"] = float((math.exp(ob.max()) - math.exp(ob.min())) / (math.exp(ob.max()) + math.exp(ob.min())))
    return CycleKnowledge(**out)


def divide_out(k: CycleKnowledge, seconds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values / exp(p_h)``: each sample divided by the profile at its local hour (the
    profile design's series; what the snapshot fits the cycle's memory model to, step 3 of
    the module doc). Hours the history never saw keep their value.

    Raises:
        ValueError: ``k`` holds no profile (:func:`present`).
    """
    if not present(k):
        raise ValueError("no cycle profile to divide out")
    t, v = np.asarray(seconds, float), np.asarray(values, float)
    prof = np.asarray(k.profile, float)
    return v * np.exp(-prof[hour_bins(t, k.profile_cycle, k.timezone)])


def present(k: CycleKnowledge | None) -> bool:
    """Whether the knowledge holds a cycle and its profile (the profile design can run)."""
    return k is not None and k.profile_cycle is not None and bool(k.profile)


def describe(k: CycleKnowledge | None) -> str:
    """One line: what the history says about the cycles."""
    if k is None:
        return "cycles not learnt (a baseline stored before cycle knowledge)"
    parts = []
    for name, state, amp in (("daily", k.daily, k.daily_amplitude), ("weekly", k.weekly, k.weekly_amplitude)):
        if state == "present":
            parts.append(f"a {name} cycle of +-{amp:.1%}")
        elif state == "absent":
            parts.append(f"no {name} cycle (fitted +-{amp:.1%})")
        else:
            need = MIN_DAILY_HISTORY if name == "daily" else MIN_WEEKLY_HISTORY
            parts.append(f"{name} cycle unknown (needs {format_duration(need)} of history)")
    line = f"the {format_duration(k.history_seconds)} of history show " + ", ".join(parts)
    if k.baseline_spread is not None and k.baseline_spread > 0:
        line += f"; the baseline's hours span +-{k.baseline_spread:.1%} of the profile"
    return line


@dataclass(frozen=True)
class Phases:
    """Phases of an unknown cycle the window holds and the baseline does not."""

    cycle: str  # day | week
    unmatched_share: float  # week: the window's weekend share; day: its share of far hours
    first_unmatched: float  # unix s: the first look end whose window is past the tolerance
    baseline_share: float  # week: the baseline's weekend share


def _first_past(bad_share: np.ndarray, tw: np.ndarray) -> float:
    """The first window instant whose cumulative window (from the start) is past the tolerance."""
    cum = np.cumsum(bad_share) / np.arange(1, bad_share.size + 1)
    return float(tw[int(np.argmax(np.abs(cum) > PHASE_SHARE_TOLERANCE))])


def unmatched(k: CycleKnowledge, baseline_seconds: np.ndarray, window_seconds: np.ndarray) -> Phases | None:
    """The first unknown cycle (week, then day) whose phases the window holds beyond the baseline's, or None.

    Week: the window's share of weekend instants differs from the baseline's by more than
    :data:`PHASE_SHARE_TOLERANCE`. Day: more than that share of the window lies more than
    :data:`DAILY_TOLERANCE_HOURS` from every hour of the day the baseline holds."""
    tb, tw = np.asarray(baseline_seconds, float), np.asarray(window_seconds, float)
    if tb.size == 0 or tw.size == 0:
        return None
    tz = k.timezone
    if k.weekly == "unknown":
        share_b = float(np.isin((week_phase(tb, tz) // DAY).astype(int), WEEKEND).mean())
        weekend = np.isin((week_phase(tw, tz) // DAY).astype(int), WEEKEND).astype(float)
        if abs(weekend.mean() - share_b) > PHASE_SHARE_TOLERANCE:
            return Phases("week", float(weekend.mean()), _first_past(weekend - share_b, tw), share_b)
    if k.daily == "unknown":
        hb = np.unique(hour_bins(tb, "day", tz))
        hw = hour_bins(tw, "day", tz)
        dist = np.abs(hw[:, None] - hb[None, :])
        miss = (np.minimum(dist, 24 - dist).min(axis=1) > DAILY_TOLERANCE_HOURS).astype(float)
        if miss.mean() > PHASE_SHARE_TOLERANCE:
            return Phases("day", float(miss.mean()), _first_past(miss, tw), 0.0)
    return None


def baseline_instants(baseline) -> np.ndarray:
    """The instants (unix s) a baseline record's window covers, at its step (at most 10,000:
    coarser for a long window); they need no samples (a stored side spares them)."""
    w = baseline.window
    start, end = w.start.timestamp(), w.end.timestamp()
    step = max(w.step_seconds, (end - start) / 10_000)
    return np.arange(start + step, end + step / 2, step)


def _at(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def phase_check(k: CycleKnowledge | None, baseline_seconds: np.ndarray, window_seconds: np.ndarray, window_start: float,
                baseline_end: float) -> CycleCheck | None:
    """A refusal (``CycleCheck`` with ``refusal="cycle-unknown"``) when a cycle is unknown and
    the window holds phases the baseline does not (module doc, step 4); None otherwise."""
    if k is None:
        return None
    ph = unmatched(k, baseline_seconds, window_seconds)
    if ph is None:
        return None
    need = MIN_WEEKLY_HISTORY if ph.cycle == "week" else MIN_DAILY_HISTORY
    known_after = baseline_end + max(need - k.history_seconds, 0.0)
    what = (f"weekend hours (the baseline: {ph.baseline_share:.0%})" if ph.cycle == "week"
            else f"hours of the day more than {DAILY_TOLERANCE_HOURS} h from the baseline's")
    last_look = ph.first_unmatched - window_start
    look = (f"a look whose window ends before {_at(ph.first_unmatched)} ({format_duration(last_look)} after the start) holds at most "
            f"{PHASE_SHARE_TOLERANCE:.0%} of phases the baseline lacks and is judged" if last_look >= 60
            else "no look of this window holds the baseline's phases")
    reason = (f"the {'weekly' if ph.cycle == 'week' else 'daily'} cycle is unknown (the signal's history spans "
              f"{format_duration(k.history_seconds)}, fewer than the {format_duration(need)} that can rule it out) and "
              f"{ph.unmatched_share:.0%} of the window falls on {what}: the difference may be the cycle. To decide: {look}; or "
              f"snapshot the baseline again once the history spans {format_duration(need)} (from {_at(known_after)}) and start the "
              f"change then, when the default design compares like with like; or use --design control (an untouched class) or "
              f"--design canary")
    return CycleCheck(False, True, ph.cycle, None, None, None, reason, refusal="cycle-unknown")


def cycle_check(k: CycleKnowledge | None, removes_cycle: bool, profile_design: str) -> CycleCheck | None:
    """For a design that does not remove a cycle: a detected ``CycleCheck`` when the history
    shows one (the verdict refuses and names ``profile_design``); None otherwise."""
    if removes_cycle or not present(k):
        return None
    amp = k.weekly_amplitude if k.profile_cycle == "week" else k.daily_amplitude
    p = k.weekly_p if k.profile_cycle == "week" else k.daily_p
    unit = "week" if k.profile_cycle == "week" else "day"
    return CycleCheck(True, True, k.profile_cycle, amp, p, None,
                      f"the signal's history shows it varies +-{amp:.0%} over the {unit}; a before-after "
                      f"comparison reads the hour as the change: use --design {profile_design} (the default when a cycle is known)",
                      refusal="cycle-known")
