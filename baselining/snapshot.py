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
refused (``--allow-partial`` stores a partial one, marked ``partial``), and so is one whose
mean is 0 (every verdict is relative to it).

Overlap: one worker thread (:class:`_Reader`) makes the requests while the calling
thread judges coverage, summarizes, fits the memory model and stores, so the CPU work of
one pair runs while Prometheus evaluates the next pair's queries. Prometheus sees the
same requests as without it, **one at a time** (never two queries at once): per pair the
range, coverage and series queries of :func:`read_answers` in that order (a selector
whose coverage an earlier pair read for the same window is not asked again), read up to
:data:`READ_AHEAD` pairs ahead, and a stored pair's history query
(:func:`obsctl.baselining.measure.history.read_history_at`: a second one where Prometheus
holds less history than asked and it fits a finer step) as soon as the pair is judged (so it may
come after the next pair's queries). Each request keeps its own timeout, retries and
deadline (``prometheus.timeout_seconds``, ``overall_deadline_seconds``); an error is
raised at the pair that asked, after the pairs before it are stored, with the same
message, and no later pair is read; when a pair fails to store, the request in flight
is awaited, so none outlives the call.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from obsctl.baselining.decide import caps
from obsctl.baselining.measure import coverage as cov
from obsctl.baselining.measure.history import fit_history, placebo_checks, read_history, read_history_at
from obsctl.baselining.measure.raw import raw_query
from obsctl.baselining.measure.stationarity import baseline_stationarity
from obsctl.baselining.measure.tails import tails_line, tails_of
from obsctl.baselining.measure.window import Measurement, MeasureRequest, read_answers, summarize_answers
from obsctl.baselining.store import Store
from obsctl.baselining.text import present
from obsctl.baselining.text.notes import tails_plain
from obsctl.baselining.text.present_stationarity import stationarity_line, stationarity_plain
from obsctl.durations import parse_duration
from obsctl.errors import PrometheusUnavailable, UsageError
from obsctl.promapi import PrometheusClient
from obsctl.records import Baseline, Coverage, CycleKnowledge
from obsctl.spec import Spec
from obsctl.timeutil import align_down, check_window_points, minus_seconds, utcnow

#: How many pairs' answers ``snapshot`` reads ahead of the pair it judges and stores
#: (each holds one window of samples in memory until judged).
READ_AHEAD = 2


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
               "coverage_summary": present.describe(self.coverage), "warnings": self.warnings, "partial": self.partial}
        if self.baseline is not None:
            b = self.baseline
            out.update(baseline_id=b.id, unit=b.unit, mean=b.stats.mean, median=b.stats.median, p5=b.stats.p5, p95=b.stats.p95,
                       stddev=b.stats.stddev, batch_means=b.stats.batch_means, series_count=b.population.series_count,
                       window_start=b.window.start.isoformat(), window_end=b.window.end.isoformat(), query=b.query,
                       tails=tails_line(b.tails), tails_plain=tails_plain(b.tails),
                       cycles=b.cycles.model_dump(mode="json", exclude={"profile", "profile_counts"}) if b.cycles else None,
                       stationarity=({**b.stationarity.model_dump(mode="json"), "summary": stationarity_line(b.stationarity),
                                      "plain": stationarity_plain(b.stationarity)}
                                     if b.stationarity is not None else None))
        return out


@dataclass
class SnapshotReport:
    """All outcomes of one ``snapshot-baseline`` run."""

    outcomes: list[SnapshotOutcome] = field(default_factory=list)

    @property
    def stored(self) -> list[SnapshotOutcome]:
        """Outcomes that stored a baseline."""
        return [o for o in self.outcomes if o.status == "stored"]


@dataclass(frozen=True)
class SnapshotRequest:
    """What one :func:`snapshot` takes: the pairs, the window and what it accepts.

    Attributes:
        classes, signals: names to snapshot (default: all in the spec).
        window: PromQL duration (default ``spec.verification.window``).
        end: window end (default now); aligned down to a multiple of the step.
        allow_partial: store a partial answer (``partial: true``, with its warnings).
        from_raw: read catalogue signals from the raw series under every level of the
            rules that record them (:func:`obsctl.baselining.measure.raw.raw_query`), for windows before the
            rules were loaded; a signal that cannot be read raw is reported ``refused``.
    """

    classes: list[str] | None = None
    signals: list[str] | None = None
    window: str | None = None
    end: dt.datetime | None = None
    allow_partial: bool = False
    from_raw: bool = False


def snapshot(spec: Spec, client: PrometheusClient, store: Store, request: SnapshotRequest | None = None,
             progress: Callable[[str], None] = lambda _msg: None) -> SnapshotReport:
    """Snapshot a baseline of every selected class x signal and store it as current.

    A pair with fewer samples than ``spec.verification.min_samples`` (no data at all
    included), or whose inputs had no fresh sample or stopped (coverage NO_DATA), is
    reported as ``no_data``; one with coverage below ``verification.min_coverage_ratio``,
    a partial answer (without ``allow_partial``), or a mean of 0 (a relative change has no
    scale), as ``refused``. Neither is stored.
    With ``allow_partial`` a partial answer is stored with ``partial: true`` and its
    warnings; every verdict against it is at most INCONCLUSIVE.

    Args:
        request: the pairs, the window, ``allow_partial`` and ``from_raw``
            (:class:`SnapshotRequest`; None: every pair over the spec's window ending now).
        progress: called with one line per pair, e.g.
            ``[3/10] embed-online/tokens_per_second ... 240 samples``.

    Raises:
        SpecError: an unknown class or signal name.
        UsageError: a bad window (too long: more than ``promapi.MAX_RANGE_POINTS``
            points; out of range), or a query that returns several series.
        PrometheusUnavailable: Prometheus unreachable or answering malformed data.
        StoreError: the store cannot be locked or written (checked before any query).
    """
    request = request or SnapshotRequest()
    classes, signals, window, end = request.classes, request.signals, request.window, request.end
    allow_partial, from_raw = request.allow_partial, request.from_raw
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
    queries = [raw_query(spec, w, s) if from_raw else (spec.query_for(s, w), "") for w, s in pairs]
    jobs = [i for i, (q, _) in enumerate(queries) if q is not None]
    job_of = {pair: k for k, pair in enumerate(jobs)}
    # A selector shared by several signals (the same window and step) is judged once.
    legs = cov.LegCache()
    storing = _Storing(store, created, parse_duration(cfg.window, "verification.window"))
    reader = _Reader([(read_answers, (client, MeasureRequest(queries[i][0], start_at, end_at, step, cfg.min_samples, f"{w.name}/{s.name}",
                                                             s.name in cfg.fresh_on_change), legs)) for i, (w, s) in ((i, pairs[i]) for i in jobs)])
    try:
        for i, (wc, sig) in enumerate(pairs, start=1):
            query, why = queries[i - 1]
            if query is None:
                reason = f"cannot be read from the raw series: {why}"
                progress(f"[{i}/{total}] {wc.name}/{sig.name} ... REFUSED ({reason})")
                report.outcomes.append(SnapshotOutcome(wc.name, sig.name, "refused", 0, reason=reason))
                continue
            m = summarize_answers(reader.take(job_of[i - 1]), cfg.min_samples)
            n = len(m.samples)
            notes = {"dropped": m.dropped, "coverage": m.coverage, "warnings": m.warnings, "partial": m.partial}
            status, reason = refusal(m, cfg.min_samples, cfg.min_coverage_ratio, allow_partial)
            if status == "no_data" and sig.catalogue is not None and not from_raw:
                reason += ("; a catalogue signal reads the recorded series, which start when the rules were loaded: "
                           "--from-raw reads the raw series under the rules for earlier windows")
            if status:
                progress(f"[{i}/{total}] {wc.name}/{sig.name} ... {'NO DATA' if status == 'no_data' else 'REFUSED'} ({reason})")
                report.outcomes.append(SnapshotOutcome(wc.name, sig.name, status, n, reason=reason, **notes))
                continue
            history = reader.ask(read_history_at, client, m.query, start_at, step, history_seconds)  # (points, step)
            # The daily and weekly cycles, from a longer and coarser read (designs.knowledge,
            # loaded with the first stored pair: importing the snapshot loads no design).
            from obsctl.baselining.designs import knowledge

            cycles = knowledge.learn(_columns(reader.ask(_cycle_history, client, m.query, start_at, step)), m.columns or _columns(m.samples),
                                     cfg.min_effect_ratio, spec.comparison.timezone)
            stored = _store_pair(storing, wc, sig, m, history, cycles)
            dropped = f" ({m.dropped} NaN/Inf dropped)" if m.dropped else ""
            progress(f"[{i}/{total}] {wc.name}/{sig.name} ... {n} samples{dropped}, mean {m.stats.mean:.6g} {sig.unit}, "
                     f"{m.population.series_count} input series, {present.describe(m.coverage)}")
            report.outcomes.append(SnapshotOutcome(wc.name, sig.name, "stored", n, baseline=stored, **notes))
    except Exception:
        reader.close(wait=True)  # no request of this snapshot outlives it (bounded by the client's deadline)
        raise
    except BaseException:
        reader.close(wait=False)  # interrupted: the daemon worker dies with the process
        raise
    reader.close(wait=True)
    # A target meets its first baseline here (or at initiative start, rules generate, review):
    # anchored now, so a later promotion counts toward it instead of moving it.
    from obsctl.baselining.practice.targets import anchor_all

    anchor_all(spec, store, created, {(o.workload_class, o.signal) for o in report.outcomes if o.status == "stored"})
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


def _cycle_history(client, query: str, window_start: dt.datetime, step: float) -> list[tuple[float, float]]:
    """The signal over :data:`~obsctl.baselining.designs.knowledge.CYCLE_HISTORY_SECONDS` before the
    window at a coarse step, best effort (a refused or failed read: no history, cycles unknown)."""
    from obsctl.baselining.designs import knowledge

    try:
        return read_history(client, query, window_start, max(step, knowledge.CYCLE_STEP_SECONDS), knowledge.CYCLE_HISTORY_SECONDS)
    except (PrometheusUnavailable, UsageError):
        return []


def _columns(points) -> tuple[np.ndarray, np.ndarray]:
    return (np.fromiter((t for t, _ in points), float, len(points)), np.fromiter((v for _, v in points), float, len(points)))


@dataclass(frozen=True)
class _Storing:
    """What every pair stored by one snapshot shares: the store, the creation instant and
    the spec's verification window (s, the length the placebo checks judge)."""

    store: Store
    created: dt.datetime
    default_window: float


def _store_pair(storing: _Storing, wc, sig, m: Measurement, read: tuple[list[tuple[float, float]], float],
                cycles: CycleKnowledge | None = None) -> Baseline:
    """Fit the memory model and store one pair's baseline as current (returns it as stored):
    ``m`` its window's measurement (its query and step are the baseline's), ``read`` the
    ``(unix s, value)`` points read before the window and their step (s), as
    :func:`~obsctl.baselining.measure.history.read_history_at` returns them."""
    store, created, default_window = storing.store, storing.created, storing.default_window
    history, hist_step = read
    query, step = m.query, m.window.step_seconds
    # One BLAS thread for the fit: OpenBLAS splits its 43,200-element dot products over
    # every core and its threads then spin-wait, ~0.06 s of CPU per pair taken from
    # Prometheus on a small machine; the sums differ only in rounding order (~1e-16).
    with threadpool_limits(limits=1, user_api="blas"):
        memory = fit_history(history, hist_step, step, m.samples, m.columns)
        # The same comparison verify makes, on placebo starts in that history (statistics.placebo).
        checks = placebo_checks(history, hist_step, memory, (m.window.end - m.window.start).total_seconds(), default_window)
        # The heavy-tail test and the trimmed mean's memory (measure.tails).
        tails = tails_of(history, hist_step, step, m.samples, m.columns, sig.spiky)
        # Did the baseline itself move inside its window (a step, a trend)? (statistics.stationarity)
        steady = baseline_stationarity(m.columns if m.columns is not None else m.samples, step, memory)
        # The profile design's memory: the same fit with the known cycle divided out (designs.knowledge).
        cycles = with_cycle_memory(cycles, history, hist_step, step, m.columns if m.columns is not None else _columns(m.samples))
    baseline = Baseline(
        id=f"{wc.name}.{sig.name}.{created.strftime('%Y%m%dT%H%M%SZ')}",
        workload_class=wc.name, signal=sig.name, unit=sig.unit, direction=sig.direction, query=query,
        window=m.window, population=m.population, stats=m.stats, created_at=created, source="snapshot",
        coverage=m.coverage, warnings=m.warnings, partial=m.partial,
        # The signal's memory from the days before the window (measure.history).
        memory=memory, placebo=checks, tails=tails, cycles=cycles, stationarity=steady,
    )
    # The samples are the client's (float, float) tuples, already checked: set them
    # without pydantic's per-pair re-validation (~8 ms per 43,200 pairs).
    baseline = baseline.model_copy(update={"samples": m.samples})
    return store.save_baseline(baseline, make_current=True, columns=m.columns)


def with_cycle_memory(cycles: CycleKnowledge | None, history: list[tuple[float, float]], hist_step: float, step: float,
                      baseline: tuple[np.ndarray, np.ndarray]) -> CycleKnowledge | None:
    """``cycles`` with its ``memory``: :func:`fit_history` on the history read before the
    window (``(unix s, value)`` at ``hist_step``) and the baseline window's ``(seconds,
    values)`` (at ``step``), each divided by the profile
    (:func:`obsctl.baselining.designs.knowledge.divide_out`). ``cycles`` unchanged without a
    profile; its memory None without enough history (a model fitted to the baseline window
    alone is the lower bound the profile design already falls back to)."""
    from obsctl.baselining.designs import knowledge

    if not knowledge.present(cycles):
        return cycles
    th, vh = _columns(history)
    tb = np.asarray(baseline[0], float)
    past, window = knowledge.divide_out(cycles, th, vh), knowledge.divide_out(cycles, tb, baseline[1])
    memory = fit_history(list(zip(th.tolist(), past.tolist(), strict=True)), hist_step, step,
                         list(zip(tb.tolist(), window.tolist(), strict=True)), (tb, window))
    return cycles.model_copy(update={"memory": memory if memory is not None and memory.source == "history" else None})


def refusal(m: Measurement, min_samples: int, min_coverage_ratio: float, allow_partial: bool = False) -> tuple[str, str]:
    """Why a measurement cannot be a baseline: ``("no_data" | "refused", reason)``, or ``("", "")``.

    ``no_data``: too few finite samples, or coverage NO_DATA (nothing fresh, or the
    signal stopped); ``refused``: a mean of 0 (:func:`zero_mean_reason`), coverage below
    ``min_coverage_ratio``, or a partial answer without ``allow_partial`` (the same caps
    ``verify`` puts on a verdict).
    """
    cap, why = caps.coverage_cap(m.coverage, min_coverage_ratio, "baseline")
    if cap == "NO_DATA":
        return "no_data", why
    reason = m.no_data_reason(min_samples)
    if reason:
        return "no_data", reason
    reason = zero_mean_reason(m)
    if reason:
        return "refused", reason
    if cap == "INCONCLUSIVE":
        return "refused", why
    if m.partial and not allow_partial:
        _, why = caps.partial_cap(m.warnings, m.partial, "baseline")
        return "refused", f"{why}; use --allow-partial to store it marked partial"
    return "", ""


def zero_mean_reason(m: Measurement) -> str:
    """Why a measurement with a mean of 0 cannot be a baseline (``""`` otherwise).

    Every verdict is a change relative to the baseline's mean (``window / baseline - 1``):
    against 0 it has no scale, and a stored zero baseline would later read as
    ``NO_CHANGE +0.0 %``. Both means count: the summary's (``m.stats.mean``, the samples the
    batch means use) and the mean of every kept sample (what ``verify`` divides by).
    """
    if m.stats is None or (m.stats.mean != 0 and math.fsum(v for _, v in m.samples) != 0):
        return ""
    return ("the mean over the window is 0: a change relative to it has no scale (every verdict would read +0.0 %); "
            "snapshot a window in which the signal is not 0, or choose a signal whose level is not 0 at rest")
