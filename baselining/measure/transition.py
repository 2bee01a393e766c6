"""The change's transition: the stretch after the start a verdict does not judge.

A window that starts at the change holds a ramp, not the effect: every sample of
``rate(x[5m])`` up to five minutes after the change still averages the state before it
(the signal's look-back, :mod:`obsctl.rules.lookback`, through the recording rules), and
a replica that restarted with the change makes every range holding the restart
under-read (the increments between its last scrape and the restart are lost: measured
-9.9 % two minutes after a restart on a real vLLM server). So the judged window starts
after the transition has left every input series:

    judged start = max(change + look-back, last population event in the rollout + look-back)

where the **population events** are, on the raw input series of the primary and the guard
signals, in the first :data:`ROLLOUT_SECONDS` after the change: a counter reset
(a restart; a counter's value fell), a series that appeared (a new replica, a new
instance/pod label set) or disappeared (a replica gone), and a process start
(``process_start_time_seconds`` of a target the signal reads). Later events are the
workload's own life, not the change's rollout, and are judged as data.

A judged window shorter than :func:`min_judged_seconds` (the look-back, and
``verification.min_samples`` steps) is too short: the verdict is INCONCLUSIVE and says
when the window will be long enough (:attr:`Transition.ready_at`).

:func:`detect_events` and :func:`trim` are pure (the benchmark calls them on simulated
series); :func:`read_events` is the I/O (range queries of the raw series, an instant
query of their targets' process start times), called by
:func:`obsctl.baselining.evidence.transition_of`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from obsctl.durations import format_duration
from obsctl.errors import PrometheusUnavailable, UsageError
from obsctl.promapi import TooManySeries
from obsctl.records import TransitionEvent, TransitionRecord
from obsctl.rules.lookback import Lookback
from obsctl.timeutil import rfc3339

#: Population events up to this long after the change belong to its rollout (a rolling restart of a
#: fleet takes minutes); the transition ends at the last of them plus the look-back.
ROLLOUT_SECONDS = 900.0
#: At most this many raw series are read per selector for events (a histogram's buckets are summed first).
MAX_EVENT_SERIES = 200
#: A process start this close before a counter reset (plus two steps) is the same restart.
PROCESS_START_SLACK_SECONDS = 60.0
#: Counter names: a fall of their value is a reset (a restart of the process that exports them).
COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")

EventKind = Literal["restart", "appeared", "disappeared"]


@dataclass(frozen=True)
class Event:
    """One population event: when (unix s), what, and the series or target (its labels as text)."""

    at: float
    kind: EventKind
    series: str


@dataclass(frozen=True)
class Transition:
    """Where the judged window starts, and why.

    Attributes:
        change_at: the change (the initiative's start, unix s).
        lookback_seconds, lookback_source: the longest look-back of the signals' PromQL and what gives it.
        events: the population events in the rollout (time order).
        start: the judged window's start (unix s): ``change_at`` when nothing is trimmed.
        end: the window's end (unix s).
        min_seconds: the shortest judged window (:func:`min_judged_seconds`).
        trimmed: False when asked not to trim (``verify --no-trim``): ``start`` is then what
            would have been trimmed, the window judged is the whole one.
        notes: what could not be read (events unknown for that input).
    """

    change_at: float
    lookback_seconds: float
    lookback_source: str
    events: tuple[Event, ...]
    start: float
    end: float
    min_seconds: float
    trimmed: bool = True
    notes: tuple[str, ...] = field(default=())

    @property
    def excluded_seconds(self) -> float:
        return max(0.0, self.start - self.change_at)

    @property
    def ready_at(self) -> float:
        """When the judged window is long enough (unix s)."""
        return self.start + self.min_seconds

    @property
    def too_short(self) -> bool:
        """True when trimming leaves less than ``min_seconds`` of window."""
        return self.trimmed and self.excluded_seconds > 0 and self.end < self.ready_at

    @property
    def judged_start(self) -> float:
        """The start of the window the verdict judges: trimmed unless asked not to or too short."""
        return self.start if self.trimmed and not self.too_short else self.change_at

    def why(self) -> str:
        """The exclusion in words: ``15:00:00–15:07:30: the 5m range of x and 2 replica restarts (15:02:15, 15:02:30)``; "" when none."""
        if self.excluded_seconds <= 0:
            return ""
        causes = []
        if self.lookback_seconds:
            causes.append(self.lookback_source or f"a look-back of {format_duration(self.lookback_seconds)}")
        by_kind: dict[str, list[float]] = {}
        for e in self.events:
            by_kind.setdefault(e.kind, []).append(e.at)
        words = {"restart": ("replica restart", "replica restarts"), "appeared": ("new series", "new series"),
                 "disappeared": ("series gone", "series gone")}
        for kind, times in by_kind.items():
            one, many = words[kind]
            shown = ", ".join(_clock(t) for t in times[:4]) + (", ..." if len(times) > 4 else "")
            causes.append(f"{len(times)} {one if len(times) == 1 else many} ({shown})")
        span = f"{_clock(self.change_at)}–{_clock(self.start)}"
        return f"{span} ({format_duration(self.excluded_seconds)}): " + " and ".join(causes)

    def text(self) -> str:
        """One line for the verdict's output; "" when nothing would be excluded."""
        why = self.why()
        if not why:
            return ""
        if not self.trimmed:
            return f"not trimmed (--no-trim): the transition {why} is judged with the window"
        if self.too_short:
            return (f"the window after the transition is {format_duration(max(0.0, self.end - self.start))}, shorter than the "
                    f"{format_duration(self.min_seconds)} needed to judge it (excluded {why}): verify again at "
                    f"{rfc3339_of(self.ready_at)} or later")
        return f"excluded {why}"


def rfc3339_of(t: float) -> str:
    """Unix seconds as RFC 3339 UTC."""
    return rfc3339(dt.datetime.fromtimestamp(t, dt.UTC))


def _clock(t: float) -> str:
    return rfc3339_of(t)[11:19]


def min_judged_seconds(lookback_seconds: float, step_seconds: float, min_samples: int) -> float:
    """The shortest judged window (s): at least one look-back and ``min_samples`` steps."""
    return max(lookback_seconds, min_samples * step_seconds)


def detect_events(series: Iterable[tuple[str, Sequence[tuple[float, float]]]], counter: Iterable[bool] | bool, since: float, until: float,
                  step_seconds: float) -> list[Event]:
    """The population events of raw series in ``(since, until]`` (module doc).

    Args:
        series: ``(label text, [(unix s, value)...])`` per series, as a range query at ``step_seconds``
            gives them (read from at least one step before ``since``).
        counter: per series (or for all), whether it is a counter (a fall is a reset).
        since, until: the span events are looked for in (unix s).

    Returns:
        A reset at the first sample after the fall; an appearance at a series' first sample
        when that is after ``since + step``; a disappearance at its last sample when that is
        before ``until - 2 steps`` (two steps: an answer's last point may lag one scrape),
        unless every series is gone (the signal stopped: not a rollout, the window's
        NO_DATA names it). Time order.
    """
    out: list[Event] = []
    items = list(series)
    flags = [counter] * len(items) if isinstance(counter, bool) else list(counter)
    gone: list[Event] = []
    kept = 0
    for (labels, points), is_counter in zip(items, flags, strict=True):
        pts = [(t, v) for t, v in points if math.isfinite(v)]
        if not pts:
            continue
        kept += 1
        if pts[0][0] > since + step_seconds and pts[0][0] <= until:
            out.append(Event(pts[0][0], "appeared", labels))
        if since < pts[-1][0] < until - 2 * step_seconds:
            gone.append(Event(pts[-1][0], "disappeared", labels))
            kept -= 1
        if is_counter:
            for (_, a), (t, b) in pairwise(pts):
                if b < a and since < t <= until:
                    out.append(Event(t, "restart", labels))
    if kept > 0:  # every series gone is the signal stopping (NO_DATA says so), not a rollout
        out += gone
    return sorted(out, key=lambda e: (e.at, e.kind, e.series))


def trim(change_at: float, end: float, lookback: Lookback, events: Iterable[Event], step_seconds: float, min_samples: int,
         trimmed: bool = True, notes: Iterable[str] = ()) -> Transition:
    """The transition of a change at ``change_at`` (unix s) for a window ending at ``end``:
    the judged start is the change plus the look-back, or the last event in the rollout
    (:data:`ROLLOUT_SECONDS`) plus the look-back when later, aligned up to the step."""
    lookback_seconds = lookback.seconds
    rollout = sorted((e for e in events if change_at < e.at <= change_at + ROLLOUT_SECONDS), key=lambda e: e.at)
    last = max([change_at, *(e.at for e in rollout)])
    start = last + lookback_seconds if (lookback_seconds or rollout) else change_at
    if start > change_at:
        start = change_at + math.ceil((start - change_at) / step_seconds - 1e-9) * step_seconds
    return Transition(change_at, lookback_seconds, lookback.source, tuple(rollout), start, end,
                      min_judged_seconds(lookback_seconds, step_seconds, min_samples), trimmed, tuple(notes))


# --- the I/O -------------------------------------------------------------------------------


def is_counter(selector: str) -> bool:
    """True when the selector's metric name ends like a counter's (:data:`COUNTER_SUFFIXES`)."""
    return selector.partition("{")[0].strip().endswith(COUNTER_SUFFIXES)


def _labels(metric: dict) -> str:
    """A series' replica as text: its labels without the metric name (a replica's counters restart together)."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__") + "}"


def read_events(client, selectors: Iterable[str], change_at: float, end: float, step_seconds: float) -> tuple[list[Event], list[str]]:
    """The population events of the raw ``selectors`` in the rollout after ``change_at`` (up to ``end``).

    Per selector, one range query over ``[change_at - step, min(end, change_at + ROLLOUT_SECONDS)]``
    (a histogram's ``_bucket`` series summed over ``le``: one series per replica), and one
    instant query of ``process_start_time_seconds`` of the targets (``job``, ``instance``)
    that export it. Best effort: a query refused or too wide leaves a note, never an error.

    Returns:
        ``(events in time order, notes)``.
    """
    until = min(end, change_at + ROLLOUT_SECONDS)
    events: list[Event] = []
    starts: list[Event] = []
    notes: list[str] = []
    if until <= change_at:
        return events, notes
    for selector in selectors:
        name = selector.partition("{")[0].strip()
        expr = f"sum without (le) ({selector})" if name.endswith("_bucket") else selector
        try:
            got = client.query_range(expr, change_at - step_seconds, until, step_seconds, max_series=MAX_EVENT_SERIES)
        except TooManySeries:
            notes.append(f"{selector}: more than {MAX_EVENT_SERIES} series, restarts not read")
            continue
        except (PrometheusUnavailable, UsageError) as exc:
            notes.append(f"{selector}: restarts not read ({exc})")
            continue
        events += detect_events(((_labels(s.metric), s.values) for s in got), is_counter(selector), change_at, until, step_seconds)
        try:
            started = client.query(f"max by (job, instance) (process_start_time_seconds) and on (job, instance) group by (job, instance) "
                                   f"({expr})", until)
        except (PrometheusUnavailable, UsageError):
            continue
        for s in started:
            if math.isfinite(s.value) and change_at < s.value <= until:
                starts.append(Event(float(s.value), "restart", _labels(s.metric)))
    return merge_process_starts(events, starts, step_seconds), notes


def merge_process_starts(events: list[Event], starts: list[Event], step_seconds: float) -> list[Event]:
    """``events`` with the process starts that no counter reset shows: a process start is the
    restart its counters' reset shows a scrape or two later (within
    :data:`PROCESS_START_SLACK_SECONDS` plus two steps), counted once, at the reset. Time order, each once."""
    resets = [e.at for e in events if e.kind == "restart"]
    alone = [e for e in starts if not any(e.at <= t <= e.at + PROCESS_START_SLACK_SECONDS + 2 * step_seconds for t in resets)]
    return _unique([*events, *alone])


def _unique(events: list[Event]) -> list[Event]:
    """Events in time order, each once: a replica's counters (and its process start) seen at the same instant are one event."""
    out: list[Event] = []
    for e in sorted(events, key=lambda e: (e.at, e.kind, e.series)):
        if e not in out:
            out.append(e)
    return out


def record_of(tr: Transition) -> TransitionRecord:
    """The stored form of a transition (:class:`obsctl.records.TransitionRecord`)."""
    at = lambda t: dt.datetime.fromtimestamp(t, dt.UTC)  # noqa: E731
    return TransitionRecord(change_at=at(tr.change_at), judged_start=at(tr.judged_start), excluded_until=at(max(tr.start, tr.change_at)),
                            lookback_seconds=tr.lookback_seconds, lookback_source=tr.lookback_source,
                            events=[TransitionEvent(at=at(e.at), kind=e.kind, series=e.series) for e in tr.events], trimmed=tr.trimmed,
                            too_short=tr.too_short, ready_at=at(tr.ready_at) if tr.too_short else None, text=tr.text(), notes=list(tr.notes))
