"""Real-sample coverage of a signal over a window, and the verdict cap it implies.

Why: Prometheus' lookback repeats a series' last sample for 5 minutes at every
evaluation instant, and backfilled, remote-written or pushed data has no staleness
markers, so a range query of a signal that stopped still returns values. Judging those
copies as data gives directions to a signal that stopped. This module counts
what Prometheus really has for the signal's *input* series.

Method (two extra requests per signal, each batching every vector selector ``s`` of
the signal's PromQL (:func:`obsctl.baselining.measure.window.selectors_of`) with ``or``, the
legs told apart by the label ``obsctl_leg="<selector index>:<leg>"``):

1. an instant query at the window end: ``real`` = ``sum(count_over_time(s[window]))`` of
   the scraped inputs (the real samples), ``first`` / ``last`` = ``count(s)`` at the
   window start and end, and ``max`` / ``min`` its extremes over the window (one subquery
   at the step of ``count(s)`` times ``+1`` and ``-1``, so the selector is read once for
   both): the population, which a rolling restart changes. One more leg,
   ``pushgroups``, counts the Pushgateway groups (``push_time_seconds``) that any
   point of the coverage grid can see (its lookback included);

2. a range query on the signal's own step grid, started :data:`LEAD_SECONDS` early so
   samples just before the window are seen:

   - ``gap``: the grid points at which no scraped input has a stored sample in
     ``(t - step, t]`` (``count_over_time`` sees stored samples only, never lookback
     copies). Every other point is an *arrival*, its time known to one step (the
     point's time is used). Only gaps are sent, so a complete window answers almost
     nothing. The count in ``(t - step, t]`` is read as a difference of two windows that
     overlap from one step to the next (:func:`gap_expr`):
     ``count(t - W, t] - count(t - W, t - step]`` with ``W = 2 * step + 300 s``.
     Prometheus 2.42 re-seeks every series in every block when a range window does not
     overlap the previous step's (a window of exactly one step), which made this leg
     cost 10-20x the signal on a TSDB of 2-hour blocks; overlapping windows read each
     sample once, like the signal's own ``rate(...[5m])``. The sample sets are the same,
     so the gaps are the same;
   - ``push`` (only when ``pushgroups`` found a group: otherwise it answers nothing at
     every point): ``max(max by (job, instance) (push_time_seconds) and on(job, instance) s)``,
     the latest push time of the Pushgateway groups that serve ``s`` (a Pushgateway
     re-serves the last push at every scrape; only a new push time is a new sample), exact.
     Without a Pushgateway group the ``unless on(job, instance) push_time_seconds`` of the
     scraped legs is left out too (it removes nothing then).

(``timestamp(s)`` would give exact sample times, but Prometheus 2.42 evaluates it about
25x slower than the signal itself; ``count_over_time`` costs about what the signal does.)

For the signals listed in ``verification.fresh_on_change`` ("latest score" gauges that
re-serve their last value) a third query replaces the scrape leg by value changes:
``max(changes(s[step + interval]))`` is > 0 at exactly one grid point per change.

Judgement, at the signal level: a selector's own interval is the median gap between
its arrivals, ``own = max(interval, step)`` (so a 30 s scrape read at a 15 s step is
full coverage). A grid point ``t`` of the window is fresh for a selector when its
latest arrival is younger than ``1.5 * own`` and lies inside the window, or at most
``own - step`` before it (the first point's current sample at a 30 s scrape and 15 s
step; never a sample of the previous window when ``own == step``). A signal is fresh at
``t`` when every selector that has an arrival in the window is fresh there (any of its
inputs will do: a rolling restart replaces series, which shows in the ``series``
counts, not as a hole). Selectors with no arrival in the window are left out, so an
absent error counter behind ``... or vector(0)`` does not empty the window; when no
selector has one, coverage is 0.

Verdict cap (:func:`cap_verdict`, applied by ``verify`` to the primary and every guard):
NO_DATA when nothing fresh is in the window or the signal stopped (no fresh sample from
some instant to the window end) while coverage is below ``min_coverage_ratio``;
INCONCLUSIVE when coverage is below it otherwise, when a Prometheus warning says the
answer is partial, or when the baseline was stored partial (``--allow-partial``).
Limits: selectors inside subqueries or with ``offset`` are read without the offset;
Pushgateway groups are matched on ``job`` and ``instance`` (its default grouping key).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from obsctl.promapi import PrometheusClient, QueryResult
from obsctl.records import Coverage, Hole

#: A grid point is fresh when its latest real sample is younger than this many own intervals.
FRESH_INTERVALS = 1.5
#: The coverage query starts this much before the window (Prometheus' default lookback),
#: so the last sample before the window is known ("no fresh samples after ...").
LEAD_SECONDS = 300.0
#: Holes kept in a Coverage record.
MAX_HOLES = 5
LEG_LABEL = "obsctl_leg"


def _range(seconds: float) -> str:
    # (t - seconds, t]: Prometheus 2.x range selectors include their left end, 3.x do not;
    # one millisecond less (the TSDB's resolution) gives the half-open range on both.
    # PromQL durations are integers of a unit: milliseconds keep sub-second steps exact.
    return f"{max(1, round(seconds * 1000) - 1)}ms"


SCRAPED = "unless on(job, instance) push_time_seconds"
#: How far the gap leg's windows reach back past the step (:func:`gap_expr`): a scrape
#: interval up to this long keeps consecutive windows overlapping (each sample read once).
OVERLAP_SECONDS = 300.0


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def gap_expr(selector: str, step: float, pushed: bool = True) -> str:
    """The ``gap`` leg of one selector: ``1`` at the grid points where no scraped input
    has a stored sample in ``(t - step, t]``, nothing elsewhere.

    The count in ``(t - step, t]`` is ``count(t - W, t] - count(t - W, t - step]``
    (``W = 2 * step +`` :data:`OVERLAP_SECONDS`), summed over the scraped inputs; both
    windows overlap their previous step's, which Prometheus reads without re-seeking
    (module doc). A missing second sum (no sample in ``(t - W, t - step]``) counts 0; a
    missing first sum (none in ``(t - W, t]``) is a gap. ``pushed=False`` leaves out the
    Pushgateway exclusion (right only when no ``push_time_seconds`` series is in reach).
    """
    reach = 2 * step + OVERLAP_SECONDS
    scraped = f" {SCRAPED}" if pushed else ""
    recent = f"sum(count_over_time({selector}[{_range(reach)}]){scraped})"
    before = f"sum(count_over_time({selector}[{_range(reach - step)}] offset {_ms(step)}){scraped})"
    return f"vector(1) unless ({recent} - ({before} or vector(0)) > 0)"


def coverage_query(selectors: list[str], step: float, pushed: bool = True) -> str:
    """The batched range query of a signal's selectors at ``step`` seconds (module doc, 2);
    ``pushed=False`` (no Pushgateway group in reach) leaves out the push legs."""
    legs = []
    for i, sel in enumerate(selectors):
        legs.append(_leg(gap_expr(sel, step, pushed), i, "gap"))
        if pushed:
            legs.append(_leg(f"max(max by (job, instance) (push_time_seconds) and on(job, instance) {sel})", i, "push"))
    return " or ".join(legs)


def summary_query(selectors: list[str], window: float, step: float) -> str:
    """The batched instant query at the window end: real samples, population and the
    Pushgateway groups in reach of the coverage grid (module doc, 1)."""
    w, legs = _range(window), []
    for i, sel in enumerate(selectors):
        # count(s) once per step, as +count and -count: the max over time of each is the
        # maximum and minus the minimum.
        signs = f'label_replace(vector(1), "{LEG_LABEL}", "{i}:max", "", "") or label_replace(vector(-1), "{LEG_LABEL}", "{i}:min", "", "")'
        legs += [
            _leg(f"sum(count_over_time({sel}[{w}]) {SCRAPED})", i, "real"),
            _leg(f"count({sel} offset {_range(window + 0.001)})", i, "first"),
            _leg(f"count({sel})", i, "last"),
            f"max_over_time((count({sel}) * on() group_right() ({signs}))[{w}:{_range(step + 0.001)}])",
        ]
    # Every point of the coverage grid looks back 5 minutes (Prometheus' default
    # lookback) for push_time_seconds: one step more than that is in reach.
    reach = window + lead(step) + LEAD_SECONDS + step
    legs.append(_leg(f"count(last_over_time(push_time_seconds[{_range(reach)}]))", 0, "pushgroups"))
    return " or ".join(legs)


def change_query(selectors: list[str], range_seconds: float) -> str:
    """The value-change query of a ``fresh_on_change`` signal: one leg per selector."""
    return " or ".join(_leg(f"max(changes({sel}[{_range(range_seconds)}]))", i, "change") for i, sel in enumerate(selectors))


def _leg(expr: str, index: int, leg: str) -> str:
    return f'label_replace({expr}, "{LEG_LABEL}", "{index}:{leg}", "", "")'


@dataclass
class Legs:
    """The coverage answer split per selector: ``{selector index: {leg: {t: value}}}``."""

    per_selector: dict[int, dict[str, dict[float, float]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, result: QueryResult, into: Legs | None = None) -> Legs:
        """Add a range (``values``) or instant (``timestamp``, ``value``) answer's legs."""
        out = into or cls()
        for series in result:
            index, _, leg = series.metric.get(LEG_LABEL, "").partition(":")
            if index.isdigit() and leg:
                pairs = series.values if hasattr(series, "values") else [(series.timestamp, series.value)]
                out.per_selector.setdefault(int(index), {})[leg] = {t: v for t, v in pairs if math.isfinite(v)}
        return out


@dataclass
class Judgement:
    """Coverage of one signal over one window: the record plus the fresh grid points.

    Attributes:
        coverage: the :class:`Coverage` record (stored with baselines and verdicts).
        grid: the window's grid points (unix seconds); ``mask``: which are fresh.
    """

    coverage: Coverage
    grid: np.ndarray
    mask: np.ndarray

    @property
    def fresh(self) -> set[float]:
        """Unix seconds of the fresh grid points (the samples statistics may use)."""
        return {float(t) for t, ok in zip(self.grid.tolist(), self.mask.tolist()) if ok}


def lead(step: float) -> float:
    """How far before the window the coverage grid starts: a whole number of steps >= :data:`LEAD_SECONDS`."""
    return math.ceil(LEAD_SECONDS / step) * step


def measure_coverage(client: PrometheusClient, selectors: list[str], start: float, end: float, step: float,
                     on_change: bool = False, answers: QueryResult | None = None) -> Judgement | None:
    """Query and judge the coverage of a signal whose inputs are ``selectors`` over ``(start, end]``.

    :func:`read_legs` (the requests) then :func:`judge`.

    Args:
        start, end: unix seconds; the window grid is ``start + step, ..., end``
            (``end - start`` a multiple of ``step``, as :func:`obsctl.baselining.measure.window.measure` uses).
        on_change: the signal is in ``verification.fresh_on_change`` (value changes only).
        answers: the signal's own answer; the coverage answers' warnings are added to it.

    Returns:
        The judgement, or None when the query has no selector (nothing to judge).

    Raises:
        PrometheusUnavailable, UsageError: as :meth:`PrometheusClient.query_range`.
    """
    legs = read_legs(client, selectors, start, end, step, on_change, answers)
    return None if legs is None else judge(legs, len(selectors), start, end, step, on_change)


def read_legs(client: PrometheusClient, selectors: list[str], start: float, end: float, step: float,
              on_change: bool = False, answers: QueryResult | None = None) -> Legs | None:
    """The coverage requests of :func:`measure_coverage` (two, three with ``on_change``:
    the summary, then the range query whose push legs the summary's ``pushgroups``
    decides), parsed; None when there is no selector. Arguments and errors as there."""
    if not selectors:
        return None
    first = start - lead(step) + step
    legs = Legs()
    answers = answers if answers is not None else QueryResult()
    summary = client.query(summary_query(selectors, end - start, step), end)
    Legs.parse(summary, legs)
    answers.add_notes(summary.warnings, summary.infos)
    for leg in legs.per_selector.values():
        # max_over_time(-count) is minus the minimum (summary_query).
        if "min" in leg:
            leg["min"] = {t: -v for t, v in leg["min"].items()}
    pushed = bool(next(iter(legs.per_selector.get(0, {}).pop("pushgroups", {}).values()), 0.0))
    scraped = client.query_range(coverage_query(selectors, step, pushed), first, end, step)
    Legs.parse(scraped, legs)
    answers.add_notes(scraped.warnings, scraped.infos)
    if on_change:
        full = _lead_grid(start, end, step)
        interval = max((_interval(_gap_arrivals(legs.per_selector.get(i, {}).get("gap", {}), full)) or step)
                       for i in range(len(selectors)))
        changes = client.query_range(change_query(selectors, step + interval), first, end, step)
        answers.add_notes(changes.warnings, changes.infos)
        Legs.parse(changes, legs)
    return legs


def _steps(span: float, step: float) -> int:
    """Whole steps in ``span`` seconds, rounded down: a grid is clipped at its end (a point
    past the end is never evaluated, so it is neither a sample nor a hole)."""
    return max(0, math.floor(span / step + 1e-9))


def _lead_grid(start: float, end: float, step: float) -> np.ndarray:
    """The coverage query's grid: from :func:`lead` before the window to its end (clipped there)."""
    first = start - lead(step) + step
    return first + step * np.arange(0, _steps(end - first, step) + 1)


def _gap_arrivals(gaps: dict[float, float], full: np.ndarray) -> np.ndarray:
    """Grid points that are not gaps: the arrivals of the scraped inputs."""
    if not gaps:
        return full
    gap = np.fromiter(gaps.keys(), dtype=float)
    return full[~np.isin(full, gap)]


def _count_arrivals(values: dict[float, float], end: float) -> np.ndarray:
    """Grid times (<= ``end``) whose count of changes is > 0, sorted."""
    return np.array(sorted(t for t, v in values.items() if v > 0 and t <= end), dtype=float)


def _push_arrivals(values: dict[float, float], end: float) -> np.ndarray:
    """Distinct push times (<= ``end``) from a push leg (its values are times), sorted."""
    if not values:
        return np.empty(0)
    times = np.unique(np.fromiter(values.values(), dtype=float))
    return times[times <= end]


def _interval(arrivals: np.ndarray) -> float | None:
    return float(np.median(np.diff(arrivals))) if arrivals.size >= 2 else None


def _latest(grid: np.ndarray, arrivals: np.ndarray) -> np.ndarray:
    """The latest arrival at or before each grid point (-inf where none)."""
    if arrivals.size == 0:
        return np.full(grid.size, -np.inf)
    idx = np.searchsorted(arrivals, grid, side="right") - 1
    return np.where(idx >= 0, arrivals[np.clip(idx, 0, None)], -np.inf)


def judge(legs: Legs, n_selectors: int, start: float, end: float, step: float, on_change: bool = False) -> Judgement:
    """Judge coverage from parsed legs (see module doc); pure, so tests can give it any answer.

    Leg values: ``gap`` 1 where no scraped sample arrived, ``change`` change counts and
    ``push`` push times per grid point (from :func:`lead` before ``start``: those points
    give the arrivals just before the window only); ``real``, ``first``, ``last``,
    ``min``, ``max`` one value each (the summary query).
    """
    grid = start + step * np.arange(1, _steps(end - start, step) + 1)
    full = _lead_grid(start, end, step)
    signal_mask: np.ndarray | None = None
    methods: list[str] = []
    intervals: list[float] = []
    real = 0
    last_seen = -math.inf
    for i in range(n_selectors):
        got = legs.per_selector.get(i, {})
        timed = [("push", "push_time")] + ([("change", "value_change")] if on_change else [("scrape", "scrape")])
        mask = np.zeros(grid.size, dtype=bool)
        has_any = False
        for leg, method in timed:
            values = got.get(leg, {})
            if leg == "push":
                arrivals = _push_arrivals(values, end)
                in_window = int((arrivals > start).sum())
            elif leg == "scrape":
                arrivals = _gap_arrivals(got.get("gap", {}), full)
                in_window = int((arrivals > start).sum())
                # The real sample count when the summary query gave it (several per step possible).
                in_window = int(next(iter(got.get("real", {}).values()), in_window)) if in_window else 0
            else:
                arrivals = _count_arrivals(values, end)
                in_window = int((arrivals > start).sum())
            if arrivals.size:
                last_seen = max(last_seen, float(arrivals[-1]))
            if in_window == 0:
                continue
            interval = _interval(arrivals)
            own = max(interval or step, step)
            latest = _latest(grid, arrivals)
            mask |= (latest > start - (own - step)) & (grid - latest < FRESH_INTERVALS * own)
            has_any = True
            real += in_window
            methods.append(method)
            if interval is not None:
                intervals.append(interval)
        if not has_any:
            continue  # no real sample of this input in the window: left out (module doc)
        signal_mask = mask if signal_mask is None else signal_mask & mask
    if signal_mask is None:
        signal_mask = np.zeros(grid.size, dtype=bool)
    fresh_points = int(signal_mask.sum())
    trailing = _trailing_unfresh(signal_mask)
    coverage = Coverage(
        ratio=fresh_points / grid.size if grid.size else 0.0,
        fresh_points=fresh_points, grid_points=int(grid.size), real_samples=real,
        input_interval_seconds=max(intervals) if intervals else None,
        method="+".join(sorted(set(methods))) or "scrape",
        last_real_sample=_utc(last_seen) if math.isfinite(last_seen) else None,
        stopped=bool(grid.size) and trailing > 0 and (fresh_points == 0 or trailing >= 2),
        holes=_holes(signal_mask, grid, start, end, step),
        **_series_counts(legs, n_selectors, grid),
    )
    return Judgement(coverage, grid, signal_mask)


def _series_counts(legs: Legs, n_selectors: int, grid: np.ndarray) -> dict[str, int | None]:
    # Summed over selectors; a leg Prometheus left out (no series at all) counts 0.
    out = {}
    for leg, key in (("first", "series_at_start"), ("last", "series_at_end"), ("min", "series_min"), ("max", "series_max")):
        out[key] = int(sum(next(iter(legs.per_selector.get(i, {}).get(leg, {}).values()), 0.0) for i in range(n_selectors)))
    return out


def _trailing_unfresh(mask: np.ndarray) -> int:
    fresh = np.flatnonzero(mask)
    return int(mask.size) if fresh.size == 0 else int(mask.size - 1 - fresh[-1])


def _holes(mask: np.ndarray, grid: np.ndarray, start: float, end: float, step: float) -> list[Hole]:
    """Maximal runs of unfresh grid points, longest first, at most :data:`MAX_HOLES`."""
    n = int(mask.size)
    # Run edges of the unfresh points: +1 where a run begins, -1 just past where it ends.
    edges = np.diff(np.concatenate(([0], (~mask.astype(bool)).astype(np.int8), [0])))
    runs = list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))
    # Longest first, then earliest (a hole's start grows with its first index): only the
    # kept ones are built as records.
    runs.sort(key=lambda r: (r[0] - r[1], r[0]))
    holes = []
    for a, b in runs[:MAX_HOLES]:
        begin = grid[a - 1] if a > 0 else start
        finish = grid[b] if b < n else end
        holes.append(Hole(start=_utc(begin), end=_utc(finish), steps=b - a))
    return holes


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(float(ts), dt.UTC)


def fresh_samples(samples: list[tuple[float, float]], judgement: Judgement | None) -> list[tuple[float, float]]:
    """The samples at fresh grid points (all of them when coverage could not be judged).

    Times are kept (grid times, holes allowed), so statistics can batch over time."""
    if judgement is None:
        return samples
    grid = judgement.grid
    # Prometheus answers at millisecond times: a window start with microseconds (an
    # initiative's default started_at) must still match its grid, so compare in ms.
    grid = np.round(grid, 3)
    if samples and grid.size and judgement.mask.all() and grid[0] <= round(samples[0][0], 3) and round(samples[-1][0], 3) <= grid[-1]:
        return samples  # every point fresh (the usual case): nothing to drop
    # Equality with the fresh grid points at millisecond resolution; the kept tuples are
    # the caller's own objects.
    times = np.round(np.fromiter(map(itemgetter(0), samples), dtype=np.float64, count=len(samples)), 3)
    keep = np.isin(times, grid[judgement.mask])
    return [samples[i] for i in np.flatnonzero(keep).tolist()]


def time_batch_means(samples: list[tuple[float, float]], start: float, end: float, batches: int) -> list[float]:
    """Means of the samples in ``batches`` equal stretches of *time* of ``(start, end]``.

    Stretch ``j`` is ``(start + j*L/k, start + (j+1)*L/k]`` with ``L = end - start``;
    empty stretches (holes) are left out, so the result may be shorter than ``batches``.
    Without holes on a grid whose point count is a multiple of ``k`` this equals the
    count-based batch means. Returns ``[]`` for no sample.
    """
    times = np.fromiter(map(itemgetter(0), samples), dtype=np.float64, count=len(samples))
    values = np.fromiter(map(itemgetter(1), samples), dtype=np.float64, count=len(samples))
    return time_batch_means_of(times, values, start, end, batches)


def time_batch_means_of(times: np.ndarray, values: np.ndarray, start: float, end: float, batches: int) -> list[float]:
    """:func:`time_batch_means` of samples given as two float64 arrays, shape ``(n,)`` each."""
    if not times.size or batches < 1 or end <= start:
        return []
    width = (end - start) / batches
    # (start + j*w, start + (j+1)*w] -> index j; a tiny epsilon keeps grid points on an edge in the earlier stretch.
    index = np.clip(np.ceil((times - start) / width - 1e-9).astype(int) - 1, 0, batches - 1)
    sums = np.bincount(index, weights=values, minlength=batches)
    counts = np.bincount(index, minlength=batches)
    return [float(s / c) for s, c in zip(sums, counts) if c > 0]


# --- verdict cap --------------------------------------------------------------------------------


