"""Real-sample coverage of a signal over a window, and the verdict cap it implies.

Why: Prometheus' lookback repeats a series' last sample for 5 minutes at every
evaluation instant, and backfilled, remote-written or pushed data has no staleness
markers, so a range query of a signal that stopped still returns values. Judging those
copies as data gives directions to a signal that stopped. This module counts
what Prometheus really has for the signal's *input* series.

Method (two or three extra requests per signal, each batching every vector selector ``s``
of the signal's PromQL (:func:`obsctl.baselining.measure.window.selectors_of`) with ``or``,
the legs told apart by the label ``obsctl_leg="<selector index>:<leg>"``; with a
:class:`LegCache` a selector already read for the same window and step, by another
signal of the same snapshot or review, is not asked again: its legs depend on the
selector, the window and the step only):

1. an instant query at the window end: ``real`` = ``sum(count_over_time(s[window]))`` of
   the scraped inputs (the real samples), ``first`` / ``last`` = ``count(s)`` at the
   window start and end, and ``max`` / ``min`` its extremes over the window (one subquery
   at the step of ``count(s)`` times ``+1`` and ``-1``, so the selector is read once for
   both): the population, which a rolling restart changes. One more leg,
   ``pushgroups``, counts the Pushgateway groups (``push_time_seconds``) that any
   point of the coverage grid can see (its lookback included). Once a :class:`LegCache`
   knows that no group is in reach for the window and step, ``real`` and ``pushgroups``
   are left out: ``real`` is then the sum of the per-step counts ``c_k`` of 2 over the
   window's points (their one-step windows tile the window), one read of the samples less.
   Likewise, where the per-step counts are read (no group in reach) and the window's ends
   are multiples of the step from the epoch (the subquery's points are then the grid's),
   ``max`` / ``min`` are left out of this query: the count request carries ``count(s)``'s
   changes from one grid point to the next (``popchange``, sent where not 0, like the
   counts) and the seed request ``count(s)`` itself at the first points (``popseed``), and
   the population at every point is their running sum (:func:`population_from_changes`,
   exact in integers, checked against the seed points): the same extremes, without
   the signs' arithmetic at every step;

2. range queries on the signal's own step grid, started :data:`LEAD_SECONDS` early so
   samples just before the window are seen:

   - ``gap``: the grid points at which no scraped input has a stored sample in
     ``(t - step, t]`` (``count_over_time`` sees stored samples only, never lookback
     copies). Every other point is an *arrival*, its time known to one step (the
     point's time is used). Prometheus 2.42 re-seeks every series in every block when a
     range window does not overlap the previous step's (a window of exactly one step),
     which made a one-step window cost 10-20x the signal on a TSDB of 2-hour blocks;
     overlapping windows read each sample once, like the signal's own ``rate(...[5m])``.
     So the per-step count ``c_k`` (in ``(t_k - step, t_k]``) is derived from one
     overlapping range of ``W = m * step`` (:func:`window_steps`: ``m = 2 +
     ceil(300 s / step)``), ``C_k = sum(count_over_time(s[W]))`` at every grid point,
     sent as its changes ``C_k - C_{k-1}`` where they are not 0 (an ``idelta`` over a
     subquery of ``C``, so a steady input answers almost nothing: :func:`count_query`),
     by the recursion (:func:`counts_from_changes`)::

         C_k = c_k + c_{k-1} + ... + c_{k-m+1}      (the window is m whole steps)
         C_k - C_{k-1} = c_k - c_{k-m}
         c_k = C_k - C_{k-1} + c_{k-m}               (k >= m)

     seeded by ``c_0 .. c_{m-1}`` read directly with one-step windows over the first
     ``m`` grid points only (:func:`seed_query`, a third request that reads ``m`` steps).
     Exact in integers (float64 holds them exactly) under three assumptions: ``W`` is a
     whole number of steps; the same series are counted at every step (true without a
     per-step filter: ``count_over_time`` sums over every series with a sample in the
     window, so series that come and go add and leave exactly); and the TSDB answers one
     query from one state (Prometheus' isolation). A count below 0, which the
     assumptions rule out, or a seed answer without every point, sends the signal back
     to the two-window form below. The gaps are the ``c_k = 0`` points, the same set as
     the two-window form's (tests/integration/test_coverage_formulations.py).
     When a Pushgateway group is in reach the scraped legs carry ``unless on(job,
     instance) push_time_seconds``, a filter evaluated at each step (a group that
     appears or goes changes the counted series between steps), so the count is read
     there as ``count(t - W, t] - count(t - W, t - step]`` (``W = 2 * step + 300 s``,
     both windows overlap the previous step's: :func:`gap_expr`), every sample read twice;
   - ``push`` (only when ``pushgroups`` found a group: otherwise it answers nothing at
     every point): ``max(max by (job, instance) (push_time_seconds) and on(job, instance) s)``,
     the latest push time of the Pushgateway groups that serve ``s`` (a Pushgateway
     re-serves the last push at every scrape; only a new push time is a new sample), exact.
     Without a Pushgateway group the ``unless on(job, instance) push_time_seconds`` of the
     scraped legs is left out too (it removes nothing then).

(``timestamp(s)`` would give exact sample times, but Prometheus 2.42 evaluates it about
25x slower than the signal itself; ``count_over_time`` costs about what the signal does.)

For the signals listed in ``verification.fresh_on_change`` ("latest score" gauges that
re-serve their last value) one more query replaces the scrape leg by value changes:
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

Verdict cap (:func:`obsctl.baselining.decide.caps.cap_verdict`, applied by ``verify`` to the primary and every guard):
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
import threading
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


def window_steps(step: float) -> int:
    """``m``, the steps in the count leg's window ``W = m * step``: two plus the steps of
    :data:`OVERLAP_SECONDS`, so a scrape interval up to ``step + OVERLAP_SECONDS`` keeps
    consecutive windows overlapping (each sample read once)."""
    return 2 + math.ceil(OVERLAP_SECONDS / step)


def count_query(selectors: list[str], step: float, first: float, population: bool = False) -> str:
    """The range query of ``C_k - C_{k-1}`` where it is not 0 (``C_k``: each selector's
    stored samples in ``(t - W, t]``, ``W = m * step``, :func:`window_steps`; 0 where
    none), on the grid ``first + k * step``: the ``count`` legs, read without a
    Pushgateway group in reach only (module doc, 2). ``population``: also the
    ``popchange`` legs, ``P_k - P_{k-1}`` where it is not 0 (``P_k = count(s)`` at the
    grid point, 0 where no series is present: the population, module doc, 1).

    ``C`` is evaluated once per grid point by a subquery (Prometheus evaluates it once
    over the whole range) and ``idelta`` over its last two points gives the change, so a
    steady input answers almost nothing. Subquery points are multiples of the step from
    the epoch: a negative offset of the grid's phase puts them on the grid."""
    step_ms = round(step * 1000)
    phase = round(first * 1000) % step_ms
    shift = f" offset -{phase}ms" if phase else ""
    w = _range(window_steps(step) * step)
    legs = []
    for i, sel in enumerate(selectors):
        legs.append(_leg(_changes(f"sum(count_over_time({sel}[{w}]{shift}))", step_ms), i, "count"))
        if population:
            legs.append(_leg(_changes(f"count({sel}{shift})", step_ms), i, "popchange"))
    return " or ".join(legs)


def _changes(expr: str, step_ms: int) -> str:
    # The change of ``expr`` (0 where absent) from the previous grid point, where not 0.
    return f"idelta(({expr} or vector(0))[{2 * step_ms - 1}ms:{step_ms}ms]) != 0"


def seed_query(selectors: list[str], step: float, population: bool = False) -> str:
    """The range query of ``c_k``, each selector's stored samples in ``(t - step, t]``, 0
    where none: the ``seed`` legs, asked at the first :func:`window_steps` grid points only;
    ``population``: also ``count(s)`` there (0 where none), the ``popseed`` legs."""
    legs = []
    for i, sel in enumerate(selectors):
        legs.append(_leg(f"sum(count_over_time({sel}[{_range(step)}])) or vector(0)", i, "seed"))
        if population:
            legs.append(_leg(f"count({sel}) or vector(0)", i, "popseed"))
    return " or ".join(legs)


def population_from_changes(changes: np.ndarray, seed: np.ndarray) -> np.ndarray | None:
    """``P_k = P_0 + (P_1 - P_0) + ... + (P_k - P_{k-1})`` from ``changes[k] = P_k - P_{k-1}``
    (``changes[0]`` unused) and ``seed`` (``P_0 .. P_{j-1}``, read directly); None when the
    sums disagree with the seed or go below 0 (an answer not from one TSDB state).

    Shapes ``(K,)``, ``(j,)`` with ``1 <= j <= K`` -> ``(K,)``; float64 of integers (exact)."""
    if not seed.size:
        return None
    out = seed[0] + np.concatenate(([0.0], np.cumsum(changes[1:])))
    if not np.array_equal(out[:seed.size], seed) or (out < 0).any():
        return None
    return out


def per_step_counts(counts: np.ndarray, seed: np.ndarray, m: int) -> np.ndarray:
    """``c_k`` from ``C_k`` (``counts``, one per grid point) and ``c_0 .. c_{m-1}``
    (``seed``): ``c_k = C_k - C_{k-1} + c_{k-m}`` for ``k >= m`` (module doc, 2).

    Shapes ``(K,)``, ``(min(m, K),)`` -> ``(K,)``; float64 of integers (exact)."""
    return counts_from_changes(np.diff(counts, prepend=0.0), seed, m)


def counts_from_changes(changes: np.ndarray, seed: np.ndarray, m: int) -> np.ndarray:
    """:func:`per_step_counts` from ``changes[k] = C_k - C_{k-1}`` (``changes[:m]`` unused)."""
    out = np.zeros(changes.size)
    out[:seed.size] = seed
    for r in range(min(m, changes.size)):
        # One residue class k = r, r + m, r + 2m, ...: c grows by the summed changes.
        idx = np.arange(r, changes.size, m)
        out[idx[1:]] = seed[r] + np.cumsum(changes[idx[1:]])
    return out


def coverage_query(selectors: list[str], step: float, pushed: bool = True) -> str:
    """The batched two-window range query of a signal's selectors at ``step`` seconds
    (module doc, 2: the form used when a Pushgateway group is in reach); ``pushed=False``
    leaves out the push legs and the Pushgateway exclusion."""
    legs = []
    for i, sel in enumerate(selectors):
        legs.append(_leg(gap_expr(sel, step, pushed), i, "gap"))
        if pushed:
            legs.append(_leg(f"max(max by (job, instance) (push_time_seconds) and on(job, instance) {sel})", i, "push"))
    return " or ".join(legs)


def read_gaps(client: PrometheusClient, selectors: list[str], first: float, end: float, step: float, pushed: bool,
              answers: QueryResult, derive: frozenset[str] = frozenset()) -> Legs:
    """The ``gap`` (and, ``pushed``, ``push``) legs of ``selectors`` on the grid ``first,
    first + step, ..., end`` (module doc, 2): without a Pushgateway group in reach one
    ``count`` range query plus the ``seed`` query of the first :func:`window_steps`
    points, turned into gaps by :func:`per_step_counts`; otherwise the two-window query.
    The window is ``(first + lead - step, end]`` (:func:`lead`). With ``"real"`` in
    ``derive`` the per-step counts also give each selector's ``real`` leg, the sum of
    ``c_k`` over the window's points (its one-step windows tile the window), listed in
    :attr:`Legs.counted`. With ``"population"`` (only where the grid points are
    multiples of the step from the epoch, as the summary's subquery reads them:
    :func:`population_in_counts`) the same two requests carry the
    ``popchange`` and ``popseed`` legs, and each selector's ``min`` and ``max`` (the
    population's extremes over the window's points where any series is present, as
    :func:`summary_query` gives them) come from :func:`population_from_changes`, listed
    in :attr:`Legs.populated`. Warnings go to ``answers``. Errors as
    :meth:`PrometheusClient.query_range`."""
    legs = Legs()
    if not pushed:
        m = window_steps(step)
        points = round((end - first) / step) + 1
        pop = "population" in derive
        k0 = round(lead(step) / step)  # the window's first point
        counted = client.query_range(count_query(selectors, step, first, pop), first, end, step)
        answers.add_notes(counted.warnings, counted.infos)
        seeded = client.query_range(seed_query(selectors, step, pop), first, first + (min(m, points) - 1) * step, step)
        answers.add_notes(seeded.warnings, seeded.infos)
        parsed = Legs.parse(seeded, Legs.parse(counted))
        step_ms = round(step * 1000)
        for i in range(len(selectors)):
            got = parsed.per_selector.get(i, {})
            seed = got.get("seed", {})
            if len(seed) != min(m, points):
                break  # an answer without every seed point (an odd proxy or store): read the two-window form
            # Grid times as Prometheus answers them (milliseconds), from the seed's first point.
            first_ms = round(min(seed) * 1000)
            times = [(first_ms + k * step_ms) / 1000 for k in range(points)]
            changes = np.zeros(points)
            for t, v in got.get("count", {}).items():
                k = round((t * 1000 - first_ms) / step_ms)
                if 0 <= k < points:
                    changes[k] = v
            c = counts_from_changes(changes, np.array([seed[t] for t in sorted(seed)]), m)
            if (c < 0).any():
                break  # ruled out by the recursion's assumptions (module doc): read the two-window form
            gaps = {t: 1.0 for t, n in zip(times, c.tolist(), strict=True) if n == 0}
            if gaps:  # as Prometheus answers: no leg where nothing is a gap
                legs.per_selector[i] = {"gap": gaps}
            if "real" in derive:
                real = float(c[k0:].sum())
                if real > 0:  # as Prometheus answers: no leg without a sample
                    legs.per_selector.setdefault(i, {})["real"] = {round(end, 3): real}
                legs.counted.add(i)
            if pop:
                _populate(legs, i, got, times, first_ms, step_ms, k0, end)
        else:
            return legs
        legs = Legs()
    scraped = client.query_range(coverage_query(selectors, step, pushed), first, end, step)
    answers.add_notes(scraped.warnings, scraped.infos)
    return Legs.parse(scraped, legs)


def summary_query(selectors: list[str], window: float, step: float, real: bool = True, pushgroups: bool = True,
                  population: bool = True) -> str:
    """The batched instant query at the window end: real samples, population and the
    Pushgateway groups in reach of the coverage grid (module doc, 1). ``real=False``
    leaves out the real-sample legs (read from the per-step counts instead),
    ``pushgroups=False`` the Pushgateway leg (already known for this window and step),
    and ``population=False`` the population's extremes (read with the per-step counts:
    :func:`read_gaps`)."""
    legs = []
    for i, sel in enumerate(selectors):
        legs += [
            *([real_leg(sel, i, window)] if real else []),
            _leg(f"count({sel} offset {_range(window + 0.001)})", i, "first"),
            _leg(f"count({sel})", i, "last"),
            *([extremes_leg(sel, i, window, step)] if population else []),
        ]
    if pushgroups:
        # Every point of the coverage grid looks back 5 minutes (Prometheus' default
        # lookback) for push_time_seconds: one step more than that is in reach.
        reach = window + lead(step) + LEAD_SECONDS + step
        legs.append(_leg(f"count(last_over_time(push_time_seconds[{_range(reach)}]))", 0, "pushgroups"))
    return " or ".join(legs)


def extremes_leg(selector: str, index: int, window: float, step: float) -> str:
    """The ``min`` and ``max`` legs of one selector: ``count(s)`` at every step of the
    window (multiples of the step from the epoch), its minimum and maximum over the
    points where any series is present."""
    # count(s) once per step, as +count and -count: the max over time of each is the
    # maximum and minus the minimum.
    signs = (f'label_replace(vector(1), "{LEG_LABEL}", "{index}:max", "", "") or '
             f'label_replace(vector(-1), "{LEG_LABEL}", "{index}:min", "", "")')
    return f"max_over_time((count({selector}) * on() group_right() ({signs}))[{_range(window)}:{_range(step + 0.001)}])"


def population_in_counts(start: float, end: float, step: float) -> bool:
    """Whether :func:`read_gaps` can give the population's extremes of the window
    ``(start, end]``: both ends multiples of the step from the epoch (in milliseconds),
    so the count legs' grid points are the points the summary's subquery reads."""
    step_ms = round(step * 1000)
    return round(start * 1000) % step_ms == 0 and round(end * 1000) % step_ms == 0


def _populate(legs: Legs, i: int, got: dict, times: list[float], first_ms: int, step_ms: int, k0: int, end: float) -> None:
    """Selector ``i``'s ``min`` and ``max`` legs from its ``popchange`` and ``popseed``
    answers (``got``) on the grid ``times``, over the points from ``k0`` on (the window's);
    listed in :attr:`Legs.populated` unless the answer is not consistent."""
    seed = got.get("popseed", {})
    changes = np.zeros(len(times))
    for t, v in got.get("popchange", {}).items():
        k = round((t * 1000 - first_ms) / step_ms)
        if 0 <= k < len(times):
            changes[k] = v
    counts = population_from_changes(changes, np.array([seed[t] for t in sorted(seed)]))
    if counts is None:
        return  # read by the summary's subquery instead
    present = counts[k0:][counts[k0:] > 0]
    if present.size:  # as Prometheus answers: no leg where no series is ever present
        legs.per_selector.setdefault(i, {}).update({"min": {round(end, 3): float(present.min())},
                                                    "max": {round(end, 3): float(present.max())}})
    legs.populated.add(i)


def real_leg(selector: str, index: int, window: float) -> str:
    """The ``real`` leg of one selector: its scraped inputs' stored samples in the window."""
    return _leg(f"sum(count_over_time({selector}[{_range(window)}]) {SCRAPED})", index, "real")


def change_query(selectors: list[str], range_seconds: float) -> str:
    """The value-change query of a ``fresh_on_change`` signal: one leg per selector."""
    return " or ".join(_leg(f"max(changes({sel}[{_range(range_seconds)}]))", i, "change") for i, sel in enumerate(selectors))


def _leg(expr: str, index: int, leg: str) -> str:
    return f'label_replace({expr}, "{LEG_LABEL}", "{index}:{leg}", "", "")'


@dataclass
class Legs:
    """The coverage answer split per selector: ``{selector index: {leg: {t: value}}}``."""

    per_selector: dict[int, dict[str, dict[float, float]]] = field(default_factory=dict)
    #: Selector indices whose ``real`` leg was derived from their per-step counts (absent: 0).
    counted: set[int] = field(default_factory=set)
    #: Selector indices whose ``min`` and ``max`` legs were derived from the population's
    #: changes read with the per-step counts (absent: no series present in the window).
    populated: set[int] = field(default_factory=set)

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
        return {float(t) for t, ok in zip(self.grid.tolist(), self.mask.tolist(), strict=True) if ok}


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


class LegCache:
    """The coverage legs already read, per ``(selector, start, end, step)``: a selector
    shared by several signals (one input of two ratios, a class's node selector) is asked
    once per window and step. Thread-safe (a review reads from several threads; two that
    ask for the same selector at once may both read it: the same legs either way)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._legs: dict[tuple, tuple[dict[str, dict[float, float]], list, list]] = {}
        self._pushed: dict[tuple, bool] = {}

    def get(self, selector: str, key: tuple) -> tuple[dict[str, dict[float, float]], list, list] | None:
        with self._lock:
            return self._legs.get((selector, *key))

    def put(self, selector: str, key: tuple, legs: dict[str, dict[float, float]], warnings: list, infos: list) -> None:
        with self._lock:
            self._legs[(selector, *key)] = (legs, warnings, infos)

    def pushed(self, key: tuple) -> bool | None:
        with self._lock:
            return self._pushed.get(key)

    def set_pushed(self, key: tuple, pushed: bool) -> None:
        with self._lock:
            self._pushed[key] = pushed


def read_legs(client: PrometheusClient, selectors: list[str], start: float, end: float, step: float,
              on_change: bool = False, answers: QueryResult | None = None, cache: LegCache | None = None) -> Legs | None:
    """The coverage requests of :func:`measure_coverage` (the summary, then the range
    query or queries whose push legs the summary's ``pushgroups`` decides
    (:func:`read_gaps`), then with ``on_change`` the change query), parsed; None when
    there is no selector. ``cache``: selectors read before for this window and step are
    taken from it (with their answers' warnings) and not asked again; those read now are
    added. Arguments and errors as there."""
    if not selectors:
        return None
    first = start - lead(step) + step
    legs = Legs()
    answers = answers if answers is not None else QueryResult()
    key = (start, end, step)
    cached = {i: cache.get(sel, key) for i, sel in enumerate(selectors)} if cache is not None else {}
    ask = [i for i, sel in enumerate(selectors) if cached.get(i) is None]
    for i, hit in cached.items():
        if hit is not None:
            legs.per_selector[i] = {leg: dict(values) for leg, values in hit[0].items()}
            answers.add_notes(hit[1], hit[2])
    if ask:
        asked = Legs()
        notes = QueryResult()
        # Once this window's Pushgateway answer is known to be "none", the real samples
        # come from the per-step counts and the summary leaves both legs out.
        known = cache.pushed(key) if cache is not None else None
        real = known is not False
        # The population's extremes come with the per-step counts where those are read
        # (no Pushgateway group in reach) and the grid is the summary's subquery's.
        counts_population = known is not True and population_in_counts(start, end, step)
        sels = [selectors[i] for i in ask]
        summary = client.query(summary_query(sels, end - start, step, real=real, pushgroups=known is None,
                                             population=not counts_population), end)
        Legs.parse(summary, asked)
        notes.add_notes(summary.warnings, summary.infos)
        _negate_min(asked)
        pushed = bool(next(iter(asked.per_selector.get(0, {}).pop("pushgroups", {}).values()), 0.0)) if known is None else known
        if cache is not None and known is None:
            cache.set_pushed(key, pushed)
        derive = {"real"} if not real else set()
        if counts_population and not pushed:
            derive.add("population")
        gaps = read_gaps(client, sels, first, end, step, pushed, notes, frozenset(derive))
        for j, got in gaps.per_selector.items():
            asked.per_selector.setdefault(j, {}).update(got)
        missing = [] if real else [j for j in range(len(ask)) if j not in gaps.counted]
        unpopulated = [j for j in range(len(ask)) if j not in gaps.populated] if counts_population else []
        if missing or unpopulated:  # the counts were not read (the two-window form): ask what they would have given
            rest = client.query(" or ".join([real_leg(sels[j], j, end - start) for j in missing] +
                                            [extremes_leg(sels[j], j, end - start, step) for j in unpopulated]), end)
            notes.add_notes(rest.warnings, rest.infos)
            for j, got in _negate_min(Legs.parse(rest)).per_selector.items():
                asked.per_selector.setdefault(j, {}).update(got)
        answers.add_notes(notes.warnings, notes.infos)
        for j, i in enumerate(ask):
            got = asked.per_selector.get(j)
            if got is not None:
                legs.per_selector[i] = got
            if cache is not None:
                cache.put(selectors[i], key, {leg: dict(values) for leg, values in (got or {}).items()},
                          list(notes.warnings), list(notes.infos))
    if on_change:
        full = _lead_grid(start, end, step)
        interval = max((_interval(_gap_arrivals(legs.per_selector.get(i, {}).get("gap", {}), full)) or step)
                       for i in range(len(selectors)))
        changes = client.query_range(change_query(selectors, step + interval), first, end, step)
        answers.add_notes(changes.warnings, changes.infos)
        Legs.parse(changes, legs)
    return legs


def _negate_min(legs: Legs) -> Legs:
    """The ``min`` legs as answered by :func:`extremes_leg` (``max_over_time(-count)``, minus
    the minimum) turned into the minimum, in place."""
    for leg in legs.per_selector.values():
        if "min" in leg:
            leg["min"] = {t: -v for t, v in leg["min"].items()}
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
    runs = list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))
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
    return [float(s / c) for s, c in zip(sums, counts, strict=True) if c > 0]


# --- verdict cap --------------------------------------------------------------------------------


