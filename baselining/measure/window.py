"""One signal over one window: the range answer, its real-sample coverage, the finite fresh
samples and their summary, and the population of input series behind it.

``snapshot-baseline`` stores a :class:`Measurement` as a baseline; ``verify`` judges one
against a baseline. :func:`measure` is :func:`read_answers` (every request) then
:func:`summarize_answers` (no request), so a caller can overlap the requests of one pair
with the judging of another.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from obsctl.baselining.measure import coverage as cov
from obsctl.baselining.statistics import summary as summary_stats
from obsctl.errors import UsageError
from obsctl.promapi import PrometheusClient, QueryResult, TooManySeries
from obsctl.records import Coverage, Population, Statistics, Window

#: At most this many label sets are kept in a Population (the count is always exact).
MAX_LABEL_SETS = 200


# A vector selector: optional metric name, then {matchers} where values are quoted strings
# that may hold braces or escaped quotes.
_SELECTOR = re.compile(r'(?<![A-Za-z0-9_:])([A-Za-z_:][A-Za-z0-9_:]*)?(\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})')


@dataclass
class Measurement:
    """What one query over one window gave.

    Attributes:
        samples: ``(unix seconds, value)`` in time order, finite values only.
        population: the input series behind the query.
        stats: summary statistics, None when there is no finite sample or the summary
            is not finite (values that overflow the float range when summed).
        dropped: samples Prometheus returned as NaN or +-Inf (dropped, not in ``samples``).
        reason: why ``stats`` is None (``""`` otherwise), e.g. ``240 samples, all NaN/Inf``.
        warnings: Prometheus' warnings on the range and series answers
            (:class:`obsctl.promapi.QueryResult`).
        partial: a warning says the data may be incomplete.
        coverage: real-sample coverage of the window (None: the query has no selector).
        stale: evaluation points dropped because their input was not fresh (lookback copies).
        columns: ``samples`` as two float64 arrays ``(times, values)``, shape ``(n,)``
            each (the same floats; for the memory fit and the store), or None.
    """

    query: str
    window: Window
    samples: list[tuple[float, float]]
    population: Population
    stats: Statistics | None
    dropped: int = 0
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    partial: bool = False
    coverage: Coverage | None = None
    stale: int = 0
    columns: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def no_data_reason(self, min_samples: int) -> str:
        """Why this measurement is NO DATA (fewer finite samples than ``min_samples``, or a
        non-finite summary); ``""`` when it has enough data."""
        n = len(self.samples)
        if self.reason:
            return self.reason
        if n >= min_samples and self.stats is not None:
            return ""
        dropped = f" ({self.dropped} NaN/Inf sample(s) dropped)" if self.dropped else ""
        return f"no samples{dropped}" if n == 0 else f"{n} finite sample(s){dropped}, fewer than the {min_samples} needed (verification.min_samples)"


def selectors_of(query: str) -> list[str]:
    """The vector selectors (``name{matchers}``) in a PromQL expression, in order, unique.

    ``sum(rate(a_total{job="x"}[1m])) / sum(b{job="x"})`` -> ``['a_total{job="x"}', 'b{job="x"}']``.
    """
    out: list[str] = []
    for match in _SELECTOR.finditer(query):
        name, braces = match.group(1) or "", match.group(2)
        if name in ("by", "without", "on", "ignoring", "group_left", "group_right"):
            continue
        text = name + braces
        if text not in out:
            out.append(text)
    return out


def population_of(client: PrometheusClient, query: str, start: dt.datetime, end: dt.datetime,
                  answers: QueryResult | None = None) -> Population:
    """The input series of ``query`` in ``[start, end]`` via the series API (see module doc).

    The series answer's warnings are added to ``answers`` when given."""
    selectors = selectors_of(query)
    if not selectors:
        return Population(series_count=0)
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    found = client.series(selectors, start, end)
    if answers is not None:
        answers.add_notes(found.warnings, found.infos)
    for labels in found:
        seen.setdefault(tuple(sorted(labels.items())), labels)
    label_sets = [seen[k] for k in sorted(seen)]
    return Population(series_count=len(label_sets), label_sets=label_sets[:MAX_LABEL_SETS])


@dataclass(frozen=True)
class MeasureRequest:
    """One signal over one window, as :func:`measure` asks it.

    Attributes:
        query: the signal's PromQL (one series).
        start, end: the window (UTC); evaluated at ``start + step, ..., end``.
        step_seconds: the evaluation step (s).
        min_samples: fewer finite samples are NO DATA (spec ``verification.min_samples``).
        what: names the signal in errors, e.g. ``chat/tokens_per_second (guard)``.
        on_change: the signal is in ``verification.fresh_on_change`` (a sample is fresh
            while its input does not change).
    """

    query: str
    start: dt.datetime
    end: dt.datetime
    step_seconds: float
    min_samples: int
    what: str = "query"
    on_change: bool = False


def measure(client: PrometheusClient, req: MeasureRequest, cache: cov.LegCache | None = None) -> Measurement:
    """Evaluate ``req.query`` at ``start + step, ..., end``, keep the points with fresh input
    (:func:`obsctl.baselining.measure.coverage.measure_coverage`; ``on_change``: the signal is in
    ``verification.fresh_on_change``) and summarize them, batch means over equal
    stretches of time (:func:`obsctl.baselining.measure.coverage.time_batch_means`).

    :func:`read_answers` (every request) then :func:`summarize_answers` (no request).

    Raises:
        UsageError: the query returns more than one series (a signal must aggregate to one).
        PrometheusUnavailable: as :meth:`PrometheusClient.query_range`.

    NaN/Inf samples are dropped and counted (``dropped``); a summary with a non-finite
    field is discarded (``stats`` None, ``reason`` says why), so it is never stored or
    judged.
    """
    return summarize_answers(read_answers(client, req, cache), req.min_samples)


@dataclass
class Answers:
    """What :func:`measure` asked Prometheus, before any judgement: the signal's range
    answer (the coverage and series answers' warnings added), the parsed coverage legs
    (None: the query has no selector) and the population."""

    query: str
    start: dt.datetime
    end: dt.datetime
    step_seconds: float
    on_change: bool
    result: QueryResult
    legs: cov.Legs | None
    population: Population


def read_answers(client: PrometheusClient, req: MeasureRequest, cache: cov.LegCache | None = None) -> Answers:
    """The requests of :func:`measure`, in its order: the range query, the coverage
    queries (:func:`obsctl.baselining.measure.coverage.read_legs`; ``cache``: selectors
    read before for the same window and step are not asked again), the series query.
    Errors as there.

    The range answer is read only as far as one series of the window's points can take
    (:meth:`obsctl.promapi.PrometheusClient.query_range` with ``max_series=1``): a query that
    forgot its ``sum()`` is a UsageError naming the series it returns, read in bounded memory
    and time, for ``snapshot-baseline`` and ``verify`` alike."""
    query, start, end, step_seconds, what, on_change = req.query, req.start, req.end, req.step_seconds, req.what, req.on_change
    try:  # a signal returns one series: reading stops where a second one would not fit
        result = client.query_range(query, start.timestamp() + step_seconds, end.timestamp(), step_seconds, max_series=1)
    except TooManySeries as exc:
        raise UsageError(f"{what}: {exc}; a signal must return one series: aggregate with sum(...) or similar: {query}") from None
    if len(result) > 1:
        labels = ", ".join(str(s.metric) for s in result[:3])
        raise UsageError(f"{what}: the query returns {len(result)} series ({labels}...), a signal must return one; aggregate with sum(...) or similar: {query}")
    legs = cov.read_legs(client, selectors_of(query), start.timestamp(), end.timestamp(), step_seconds, on_change, result, cache)
    population = population_of(client, query, start, end, result)
    return Answers(query, start, end, step_seconds, on_change, result, legs, population)


def summarize_answers(a: Answers, min_samples: int) -> Measurement:
    """The :class:`Measurement` of :func:`read_answers`' answers (coverage judged, fresh
    finite samples kept and summarized); no request."""
    start, end, step_seconds, result = a.start, a.end, a.step_seconds, a.result
    window = Window(start=start, end=end, step_seconds=step_seconds)
    raw = result[0].values if result else []
    judgement = None if a.legs is None else cov.judge(a.legs, len(selectors_of(a.query)), start.timestamp(), end.timestamp(), step_seconds, a.on_change)
    fresh = cov.fresh_samples(raw, judgement)
    # One pair of arrays for the finite filter, the summary, the batch means, the memory
    # fit and the store (the same floats as the tuples).
    times = np.fromiter(map(itemgetter(0), fresh), dtype=np.float64, count=len(fresh))
    values = np.fromiter(map(itemgetter(1), fresh), dtype=np.float64, count=len(fresh))
    finite = np.isfinite(values)
    if finite.all():
        samples = list(fresh)
    else:
        samples = [fresh[i] for i in np.flatnonzero(finite).tolist()]
        times, values = times[finite], values[finite]
    dropped, stale = len(fresh) - len(samples), len(raw) - len(fresh)
    summary = summary_stats.summarize(values.tolist()) if samples else None
    if summary is not None:
        batch_means = cov.time_batch_means_of(times, values, start.timestamp(), end.timestamp(), summary_stats.SUMMARY_BATCHES)
        summary = summary.model_copy(update={"batch_means": batch_means})
    reason = f"{dropped} samples, all NaN/Inf" if fresh and not samples else ""
    bad = summary_stats.non_finite_fields(summary) if summary is not None else []
    if bad:
        reason = f"the {', '.join(bad)} of {len(samples)} samples {'is' if len(bad) == 1 else 'are'} not finite (values overflow the float range)"
        summary = None
    return Measurement(a.query, window, samples, a.population, summary, dropped, reason, list(result.warnings), result.partial,
                       judgement.coverage if judgement else None, stale, (times, values))
