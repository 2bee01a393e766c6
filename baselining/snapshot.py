"""``obsctl snapshot-baseline``: measure each class x signal over a window and store it.

For each workload class and signal the signal's PromQL (selector filled in) is
evaluated with a range query over the window at ``spec.verification.step``. The
evaluation instants are ``start + step, ..., end`` (``end`` aligned down to a multiple
of the step), so the window is ``(start, end]`` and back-to-back windows never share a
sample. The samples are summarized (:func:`obsctl.baselining.statistics.summary.summarize`), the
workload population is recorded, and the baseline is stored as current.

Population method: every vector selector of the rendered query (``name{matchers}``) is
passed to the Prometheus ``/api/v1/series`` endpoint over the window; the union of the
returned label sets is the population (the input series the signal aggregated), e.g.
the per-pod token counters behind ``sum(rate(obsctl_tokens_total{...}[1m]))``.

Real samples only: one more batched range query per signal judges which grid points had
fresh input (:mod:`obsctl.baselining.measure.coverage`); the samples kept, summarized and stored
are those points only (stale lookback copies are dropped), with their times, and the
batch means are taken over equal stretches of *time* (holes leave a stretch thinner or
empty, never shift the others). A baseline whose coverage is below
``verification.min_coverage_ratio``, or whose answer Prometheus marked partial, is
refused (``--allow-partial`` stores a partial one, marked ``partial``).

Overlap: one worker thread (:class:`_Reader`) makes the requests while the calling
thread judges coverage, summarizes, fits the memory model and stores, so the CPU work of
one pair runs while Prometheus evaluates the next pair's queries. Prometheus sees the
same requests as without it, **one at a time** (never two queries at once): per pair the
range, coverage and series queries of :func:`read_answers` in that order, read up to
:data:`READ_AHEAD` pairs ahead, and a stored pair's history query
(:func:`obsctl.baselining.measure.history.read_history`) as soon as the pair is judged (so it may
come after the next pair's queries). Each request keeps its own timeout, retries and
deadline (``prometheus.timeout_seconds``, ``overall_deadline_seconds``); an error is
raised at the pair that asked, after the pairs before it are stored, with the same
message, and no later pair is read; when a pair fails to store, the request in flight
is awaited, so none outlives the call.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from obsctl.baselining.measure import coverage as cov
from obsctl.baselining.statistics import summary as summary_stats
from obsctl.baselining.measure.history import fit_history, history_step, read_history
from obsctl.records import Baseline, Coverage, Population, Statistics, Window
from obsctl.promapi import PrometheusClient, QueryResult
from obsctl.baselining.store import Store
from obsctl.timeutil import align_down, check_window_points, minus_seconds, utcnow
from obsctl.durations import parse_duration
from obsctl.errors import UsageError
from obsctl.spec import Spec

#: At most this many label sets are kept in a Population (the count is always exact).
MAX_LABEL_SETS = 200

#: How many pairs' answers ``snapshot`` reads ahead of the pair it judges and stores
#: (each holds one window of samples in memory until judged).
READ_AHEAD = 2

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


@dataclass
class SnapshotOutcome:
    """One class x signal of a snapshot: ``stored`` (with the baseline) or ``no_data``."""

    workload_class: str
    signal: str
    status: str
    sample_count: int
    baseline: Baseline | None = None
    reason: str = ""
    dropped: int = 0
    coverage: Coverage | None = None
    warnings: list[str] = field(default_factory=list)
    partial: bool = False

    def as_dict(self) -> dict:
        """JSON-ready summary (``dropped``: NaN/Inf samples left out; ``coverage``: see
        :class:`obsctl.records.Coverage`; ``warnings``: Prometheus' warnings)."""
        out = {"workload_class": self.workload_class, "signal": self.signal, "status": self.status, "sample_count": self.sample_count,
               "reason": self.reason, "dropped_non_finite": self.dropped,
               "coverage": self.coverage.model_dump(mode="json") if self.coverage else None,
               "coverage_summary": cov.describe(self.coverage), "warnings": self.warnings, "partial": self.partial}
        if self.baseline is not None:
            b = self.baseline
            out.update(baseline_id=b.id, unit=b.unit, mean=b.stats.mean, median=b.stats.median, p5=b.stats.p5, p95=b.stats.p95,
                       stddev=b.stats.stddev, batch_means=b.stats.batch_means, series_count=b.population.series_count,
                       window_start=b.window.start.isoformat(), window_end=b.window.end.isoformat(), query=b.query)
        return out


@dataclass
class SnapshotReport:
    """All outcomes of one ``snapshot-baseline`` run."""

    outcomes: list[SnapshotOutcome] = field(default_factory=list)

    @property
    def stored(self) -> list[SnapshotOutcome]:
        """Outcomes that stored a baseline."""
        return [o for o in self.outcomes if o.status == "stored"]


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


def measure(client: PrometheusClient, query: str, start: dt.datetime, end: dt.datetime, step_seconds: float, min_samples: int,
            what: str = "query", on_change: bool = False) -> Measurement:
    """Evaluate ``query`` at ``start + step, ..., end``, keep the points with fresh input
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
    return summarize_answers(read_answers(client, query, start, end, step_seconds, what, on_change), min_samples)


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


def read_answers(client: PrometheusClient, query: str, start: dt.datetime, end: dt.datetime, step_seconds: float,
                 what: str = "query", on_change: bool = False) -> Answers:
    """The requests of :func:`measure`, in its order: the range query, the coverage
    queries (:func:`obsctl.baselining.measure.coverage.read_legs`), the series query. Errors as there."""
    result = client.query_range(query, start.timestamp() + step_seconds, end.timestamp(), step_seconds)
    if len(result) > 1:
        labels = ", ".join(str(s.metric) for s in result[:3])
        raise UsageError(f"{what}: the query returns {len(result)} series ({labels}...), a signal must return one; aggregate with sum(...) or similar: {query}")
    legs = cov.read_legs(client, selectors_of(query), start.timestamp(), end.timestamp(), step_seconds, on_change, result)
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
        summary = summary.model_copy(update={"batch_means": cov.time_batch_means_of(times, values, start.timestamp(), end.timestamp(), summary_stats.SUMMARY_BATCHES)})
    reason = f"{dropped} samples, all NaN/Inf" if fresh and not samples else ""
    bad = summary_stats.non_finite_fields(summary) if summary is not None else []
    if bad:
        reason = f"the {', '.join(bad)} of {len(samples)} samples {'is' if len(bad) == 1 else 'are'} not finite (values overflow the float range)"
        summary = None
    return Measurement(a.query, window, samples, a.population, summary, dropped, reason, list(result.warnings), result.partial,
                       judgement.coverage if judgement else None, stale, (times, values))


def snapshot(
    spec: Spec,
    client: PrometheusClient,
    store: Store,
    classes: list[str] | None = None,
    signals: list[str] | None = None,
    window: str | None = None,
    end: dt.datetime | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
    allow_partial: bool = False,
) -> SnapshotReport:
    """Snapshot a baseline of every selected class x signal and store it as current.

    A pair with fewer samples than ``spec.verification.min_samples`` (no data at all
    included), or whose inputs had no fresh sample or stopped (coverage NO_DATA), is
    reported as ``no_data``; one with coverage below ``verification.min_coverage_ratio``,
    or a partial answer (without ``allow_partial``), as ``refused``. Neither is stored.
    With ``allow_partial`` a partial answer is stored with ``partial: true`` and its
    warnings; every verdict against it is at most INCONCLUSIVE.

    Args:
        classes, signals: names to snapshot (default: all in the spec).
        window: PromQL duration (default ``spec.verification.window``).
        end: window end (default now); aligned down to a multiple of the step.
        progress: called with one line per pair, e.g.
            ``[3/10] embed-online/tokens_per_second ... 240 samples``.

    Raises:
        SpecError: an unknown class or signal name.
        UsageError: a bad window (too long: more than ``promapi.MAX_RANGE_POINTS``
            points; out of range), or a query that returns several series.
        PrometheusUnavailable: Prometheus unreachable or answering malformed data.
        StoreError: the store cannot be locked or written (checked before any query).
    """
    cfg = spec.verification
    step = parse_duration(cfg.step, "verification.step")
    length = parse_duration(window or cfg.window, "--window")
    if length < step * cfg.min_samples:
        raise UsageError(f"--window {window or cfg.window} holds fewer than the {cfg.min_samples} samples of one {cfg.step} step "
                         "a baseline needs (verification.min_samples)")
    end_at = align_down(end or utcnow(), step)
    start_at = minus_seconds(end_at, length, "--window/--end")
    check_window_points(start_at, end_at, step, "--window")
    wcs = [spec.workload_class(n) for n in classes] if classes else list(spec.workload_classes)
    sigs = [spec.signal(n) for n in signals] if signals else list(spec.signals)
    history_seconds = parse_duration(cfg.memory_history, "verification.memory_history")
    # Fail before any query when the store cannot be written (read-only, bad .lock).
    with store.locked():
        pass
    report = SnapshotReport()
    pairs = [(w, s) for w in wcs for s in sigs]
    total, created = len(pairs), utcnow()

    # One worker thread makes the requests, one at a time, while this thread judges, fits
    # and stores (module doc: "Overlap").
    reader = _Reader([(read_answers, (client, spec.query_for(s, w), start_at, end_at, step, f"{w.name}/{s.name}",
                                      s.name in cfg.fresh_on_change)) for w, s in pairs])
    try:
        for i, (wc, sig) in enumerate(pairs, start=1):
            m = summarize_answers(reader.take(i - 1), cfg.min_samples)
            n = len(m.samples)
            notes = {"dropped": m.dropped, "coverage": m.coverage, "warnings": m.warnings, "partial": m.partial}
            status, reason = refusal(m, cfg.min_samples, cfg.min_coverage_ratio, allow_partial)
            if status:
                progress(f"[{i}/{total}] {wc.name}/{sig.name} ... {'NO DATA' if status == 'no_data' else 'REFUSED'} ({reason})")
                report.outcomes.append(SnapshotOutcome(wc.name, sig.name, status, n, reason=reason, **notes))
                continue
            history = reader.ask(read_history, client, m.query, start_at, step, history_seconds)
            stored = _store_pair(store, wc, sig, m.query, m, created, history, history_step(history_seconds, step), step)
            dropped = f" ({m.dropped} NaN/Inf dropped)" if m.dropped else ""
            progress(f"[{i}/{total}] {wc.name}/{sig.name} ... {n} samples{dropped}, mean {m.stats.mean:.6g} {sig.unit}, "
                     f"{m.population.series_count} input series, {cov.describe(m.coverage)}")
            report.outcomes.append(SnapshotOutcome(wc.name, sig.name, "stored", n, baseline=stored, **notes))
    except Exception:
        reader.close(wait=True)  # no request of this snapshot outlives it (bounded by the client's deadline)
        raise
    except BaseException:
        reader.close(wait=False)  # interrupted: the daemon worker dies with the process
        raise
    reader.close(wait=True)
    return report


class _Reader:
    """One worker thread that makes a snapshot's requests, one at a time.

    ``jobs`` (``(fn, args)``, one per class x signal: its :func:`read_answers`) run in
    order, at most :data:`READ_AHEAD` ahead of the one :meth:`take` last returned; a job
    that raises stops the later ones (the sequential loop would not have reached them).
    :meth:`ask` runs one more request (a stored pair's history) before the next job, so
    it waits for at most the request in flight. Values and exceptions are handed to the
    calling thread by :meth:`take` / :meth:`ask`, in the calling thread.
    """

    def __init__(self, jobs: list[tuple]):
        self._jobs = jobs
        self._done: dict[int, tuple[bool, object]] = {}
        self._asked: list[tuple] = []
        self._answer: tuple[bool, object] | None = None
        self._taken = 0  # jobs handed out by take()
        self._next = 0  # next job to start
        self._stopped = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="obsctl-snapshot-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._stopped or self._asked or
                           (self._next < len(self._jobs) and self._next < self._taken + READ_AHEAD)):
                    self._cond.wait()
                if self._stopped:
                    return
                asked = self._asked.pop(0) if self._asked else None
                if asked is None:
                    index, (fn, args) = self._next, self._jobs[self._next]
                    self._next += 1
            try:
                outcome = (True, (asked[0] if asked else fn)(*(asked[1] if asked else args)))
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                outcome = (False, exc)
            with self._cond:
                if asked is not None:
                    self._answer = outcome
                else:
                    self._done[index] = outcome
                    if not outcome[0]:
                        self._next = len(self._jobs)  # later pairs are never asked for
                self._cond.notify_all()

    def _hand(self, outcome: tuple[bool, object]):
        ok, value = outcome
        if not ok:
            raise value
        return value

    def _wait(self) -> None:
        # Under the condition's lock. A worker that died outside a job would leave the caller waiting for ever.
        if not self._thread.is_alive():
            raise RuntimeError("obsctl snapshot: the request thread stopped unexpectedly")
        self._cond.wait(1.0)

    def take(self, index: int):
        """Job ``index``'s value (jobs are taken in order), or its exception raised here."""
        with self._cond:
            self._taken = index + 1
            self._cond.notify_all()
            while index not in self._done:
                self._wait()
            return self._hand(self._done.pop(index))

    def ask(self, fn, *args):
        """``fn(*args)`` run by the worker before its next job: its value, or its exception raised here."""
        with self._cond:
            self._asked.append((fn, args))
            self._cond.notify_all()
            while self._answer is None:
                self._wait()
            outcome, self._answer = self._answer, None
        return self._hand(outcome)

    def close(self, wait: bool = True) -> None:
        """Start no further request; ``wait``: until the one in flight (if any) has ended."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if wait:
            self._thread.join()


def _store_pair(store: Store, wc, sig, query: str, m: Measurement, created: dt.datetime, history: list[tuple[float, float]],
                hist_step: float, step: float) -> Baseline:
    """Fit the memory model and store one pair's baseline as current (returns it as stored)."""
    # One BLAS thread for the fit: OpenBLAS splits its 43,200-element dot products over
    # every core and its threads then spin-wait, ~0.06 s of CPU per pair taken from
    # Prometheus on a small machine; the sums differ only in rounding order (~1e-16).
    with threadpool_limits(limits=1, user_api="blas"):
        memory = fit_history(history, hist_step, step, m.samples, m.columns)
    baseline = Baseline(
        id=f"{wc.name}.{sig.name}.{created.strftime('%Y%m%dT%H%M%SZ')}",
        workload_class=wc.name, signal=sig.name, unit=sig.unit, direction=sig.direction, query=query,
        window=m.window, population=m.population, stats=m.stats, created_at=created, source="snapshot",
        coverage=m.coverage, warnings=m.warnings, partial=m.partial,
        # The signal's memory from the days before the window (measure.history).
        memory=memory,
    )
    # The samples are the client's (float, float) tuples, already checked: set them
    # without pydantic's per-pair re-validation (~8 ms per 43,200 pairs).
    baseline = baseline.model_copy(update={"samples": m.samples})
    return store.save_baseline(baseline, make_current=True, columns=m.columns)


def refusal(m: Measurement, min_samples: int, min_coverage_ratio: float, allow_partial: bool = False) -> tuple[str, str]:
    """Why a measurement cannot be a baseline: ``("no_data" | "refused", reason)``, or ``("", "")``.

    ``no_data``: too few finite samples, or coverage NO_DATA (nothing fresh, or the
    signal stopped); ``refused``: coverage below ``min_coverage_ratio``, or a partial
    answer without ``allow_partial`` (the same caps ``verify`` puts on a verdict).
    """
    cap, why = cov.coverage_cap(m.coverage, min_coverage_ratio, "baseline")
    if cap == "NO_DATA":
        return "no_data", why
    reason = m.no_data_reason(min_samples)
    if reason:
        return "no_data", reason
    if cap == "INCONCLUSIVE":
        return "refused", why
    if m.partial and not allow_partial:
        _, why = cov.partial_cap(m.warnings, m.partial, "baseline")
        return "refused", f"{why}; use --allow-partial to store it marked partial"
    return "", ""
