"""Workload SDK: what training and inference code calls to publish loop signals.

The SDK counts raw events only (tokens, samples, steps, requests, queue waits) and
leaves every per-class aggregation (rates, ratios, quantiles) to recording rules, as
Prometheus practice recommends: counters and histograms aggregate correctly, averages
of per-process ratios do not.

Series (all carry the ``workload`` label plus any constant labels you pass):

============================================ ========= =========================================
name                                         type      meaning
============================================ ========= =========================================
obsctl_tokens_total                          counter   tokens processed, all of them (input + output;
                                                       the two counters below add here too)
obsctl_input_tokens_total                    counter   prompt / input tokens (``count_input_tokens``)
obsctl_output_tokens_total                   counter   generated / output tokens (``count_output_tokens``)
obsctl_samples_total                         counter   samples processed (training or batch items)
obsctl_steps_total                           counter   optimizer / engine steps
obsctl_step_duration_seconds                 histogram wall time of one step, seconds (``step()``)
obsctl_requests_total{outcome}               counter   requests by outcome: success|error|rejected
obsctl_request_duration_seconds              histogram request latency, seconds
obsctl_requests_running                      gauge     requests being served now (``request()``)
obsctl_queue_wait_seconds                    histogram time a request waited before service, seconds
obsctl_queue_depth_requests                  gauge     requests waiting now
obsctl_quality_score{evaluation}             gauge     latest evaluation score, in that eval's scale
obsctl_sdk_dropped_label_values_total{label} counter   label values not published past a limit
                                                       (``max_evaluations``)
process_cpu_seconds_total                    counter   this process's user + system CPU time, seconds
                                                       (single-process mode; the saturation state's
                                                       busy figure on CPU-only nodes)
============================================ ========= =========================================

Example (one process)::

    wl = Workload("embed-online", labels={"model": "all-MiniLM-L6-v2"})
    wl.serve(port=8000)
    with wl.request() as req:          # latency observed, outcome=error on exception
        wl.count_tokens(n_tokens)
    with wl.step(samples=32, tokens=4096):   # training: one optimizer step, timed
        loss.backward(); opt.step()

Multiprocess mode (gunicorn / uvicorn workers, one process per data-parallel rank)
---------------------------------------------------------------------------------
Set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory of your own, writable by no one
else (:func:`prepare_multiprocess_dir` makes one, mode 0700; others are refused, and no
value file is written through a symbolic link: :mod:`obsctl.exporters.multiproc_dir`),
*before* the processes start (prometheus_client picks its value store when it is first
imported; the SDK raises RuntimeError if the variable appeared later). Every process then writes its values to
memory-mapped files there (prometheus_client's multiprocess mode) and any process can
expose the sum over all of them:

* counters and histograms are summed over every process that ever wrote, dead ones
  included (a counter must not drop when a worker is recycled);
* gauges use these ``multiprocess_mode`` choices: ``obsctl_queue_depth_requests`` and
  ``obsctl_requests_running`` are ``livesum`` (sum over live processes: call
  :func:`mark_process_dead` when a worker exits, e.g. gunicorn's ``child_exit`` hook, and
  its share disappears); ``obsctl_quality_score`` is ``mostrecent`` (the last score
  written by any process, kept after that process exits).

Data-parallel training: every rank counts its own samples and tokens (they add up), but
only rank 0 counts steps and step time (``observe_step`` / ``step()`` there,
``count_samples`` / ``count_tokens`` elsewhere): one data-parallel step is one step of the
job. The callbacks in :mod:`obsctl.exporters.training` do this.

What changes against single-process use: :meth:`Workload.serve` would bind the same port
in every worker, so in multiprocess mode it serves the *aggregate* and must be called by
exactly one process (rank 0 of a training job). For web workers, either mount
:func:`make_wsgi_app` / :func:`make_asgi_app` at ``/metrics`` in the application (any
worker answers with the aggregate) or call :func:`serve_multiprocess` from the master
(gunicorn ``when_ready``). Wipe the directory between runs (:func:`prepare_multiprocess_dir`,
e.g. in gunicorn's ``on_starting``), or old counts are added to the new run's. A
``_created`` series is not exposed in this mode (prometheus_client omits it), and neither
is ``process_cpu_seconds_total`` (scrape each worker's process metrics instead).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, start_http_server
from prometheus_client.core import CounterMetricFamily

from obsctl.exporters import multiproc_dir

log = logging.getLogger(__name__)

OUTCOMES = ("success", "error", "rejected")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Latency buckets from 1 ms to ~60 s; wide enough for embeddings and LLM requests alike.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Step buckets from 5 ms (tiny models, CPU) to 10 min (large models, long accumulation).
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

def _checked(value: object, what: str, negative: bool = False) -> float:
    """``value`` as a float, or ValueError: a NaN or infinity added to a counter or a
    histogram's ``_sum`` stays there for the life of the process (every rate is NaN
    from then on), and a negative count or duration is a caller's bug."""
    if isinstance(value, (str, bytes, bool)):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    try:
        number = float(value)  # also numpy and 0-d torch scalars
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}") from None
    if not math.isfinite(number) or (number < 0 and not negative):
        raise ValueError(f"{what} must be a finite number{'' if negative else ' >= 0'}, got {number!r}")
    return number


#: A Prometheus label name (the SDK also refuses names starting with "__", which are reserved).
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: Label names the SDK sets itself (``workload``, ``outcome``, ``evaluation``) or that
#: histograms reserve (``le``): a constant label of that name would replace or collide.
RESERVED_LABELS = frozenset({"workload", "outcome", "evaluation", "le", "quantile"})


def _check_labels(workload: object, labels: dict) -> None:
    if not isinstance(workload, str) or not workload:
        raise ValueError(f"workload must be a non-empty string, got {workload!r}")
    for name, value in labels.items():
        if not isinstance(name, str) or not LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"label name {name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with '__')")
        if name in RESERVED_LABELS:
            raise ValueError(f"label name {name!r} is reserved (the SDK sets {', '.join(sorted(RESERVED_LABELS))})")
        if not isinstance(value, str):
            raise ValueError(f"label {name!r}: value must be a string, got {type(value).__name__}")


#: Gauge name -> prometheus_client ``multiprocess_mode`` (see the module docstring).
GAUGE_MULTIPROCESS_MODES = {
    "obsctl_queue_depth_requests": "livesum",
    "obsctl_requests_running": "livesum",
    "obsctl_quality_score": "mostrecent",
}


class ProcessCPUCollector:
    """``process_cpu_seconds_total`` of this process with the workload's constant labels.

    prometheus_client's own ProcessCollector cannot carry the ``workload`` label, so a
    class selector (``{workload="embed-online"}``) would not find it; the saturation state
    (:mod:`obsctl.rules.saturation`) needs it as the busy figure of CPU-only classes.
    Value: ``os.times()`` user + system seconds of this process (children excluded), read
    at each scrape. Not registered in multiprocess mode, where each worker's CPU time
    would need its own series (a known gap, see the module docstring).
    """

    def __init__(self, const_labels: dict[str, str]):
        self._labels = dict(const_labels)

    def collect(self):
        times = os.times()
        family = CounterMetricFamily("process_cpu_seconds", "Total user and system CPU time spent in seconds.",
                                     labels=list(self._labels))
        family.add_metric(list(self._labels.values()), times.user + times.system)
        yield family


@dataclass
class RequestScope:
    """Handle yielded by :meth:`Workload.request`; set ``outcome`` to override the default."""

    outcome: str = "success"


@dataclass
class StepScope:
    """Handle yielded by :meth:`Workload.step`; ``samples`` / ``tokens`` may be set inside the block."""

    samples: float = 0
    tokens: float = 0


# --- multiprocess mode ------------------------------------------------------------------


def multiprocess_dir() -> Path | None:
    """The multiprocess directory from ``PROMETHEUS_MULTIPROC_DIR``, or None (single process)."""
    value = os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower())
    return Path(value) if value else None


def _require_multiprocess_values() -> None:
    # prometheus_client chooses its value store once, at import: a variable set later
    # would silently keep every value in this process only.
    if prometheus_client.values.ValueClass.__name__ != "MmapedValue":
        raise RuntimeError(
            f"{MULTIPROC_ENV} is set but prometheus_client was imported before it was: set it in the environment "
            "before the process starts (or before the first import of prometheus_client)"
        )
    directory = multiprocess_dir()
    # Checked here: prometheus_client would fail later, at the first metric, with a bare
    # FileNotFoundError on one of its .db files.
    if directory is not None and not (directory.is_dir() and os.access(directory, os.W_OK | os.X_OK)):
        why = "does not exist" if not directory.exists() else "is not a directory" if not directory.is_dir() else "is not writable"
        raise RuntimeError(f"{MULTIPROC_ENV}={directory} {why}: create it (empty) before the workers start, "
                           "e.g. with obsctl.exporters.sdk.prepare_multiprocess_dir()")
    if directory is not None:
        multiproc_dir.check_directory(directory)  # owned by this user, writable by no one else, not a link
        multiproc_dir.install()  # value files opened without following links


def prepare_multiprocess_dir(path: str | os.PathLike | None = None) -> Path:
    """Create the multiprocess directory (default: ``$PROMETHEUS_MULTIPROC_DIR``; mode 0700
    whatever the umask) and delete the ``*.db`` files a previous run left there. Call once,
    before any worker starts.

    Raises:
        ValueError: no path given and ``PROMETHEUS_MULTIPROC_DIR`` unset.
        RuntimeError (:class:`~obsctl.exporters.multiproc_dir.UnsafeMultiprocessDir`): an
            existing directory is a symbolic link, another user's, or group/world-writable.
    """
    directory = Path(path) if path is not None else multiprocess_dir()
    if directory is None:
        raise ValueError(f"no multiprocess directory: pass one or set {MULTIPROC_ENV}")
    multiproc_dir.make_directory(directory)
    for stale in directory.glob("*.db"):
        stale.unlink()
    return directory


class _AggregateCollector(multiprocess.MultiProcessCollector):
    """prometheus_client's ``MultiProcessCollector`` that skips a value file still 0 bytes long.

    ``MmapedDict`` creates a process's ``<type>_<pid>.db`` and sizes it afterwards, so a
    worker starting (or one killed in between, whose file then stays empty) leaves a file
    with no header; the stock collector raises ``struct.error`` on it and fails the whole
    scrape, every other worker's values included (prometheus/client_python#1199). An empty
    file holds no value yet, so skipping it changes no sum.
    """

    def collect(self):
        files = []
        for name in glob.glob(os.path.join(self._path, "*.db")):
            with contextlib.suppress(FileNotFoundError):  # a live gauge file removed by mark_process_dead
                if os.stat(name).st_size > 0:
                    files.append(name)
        return self.merge(files, accumulate=True)


def multiprocess_registry(path: str | os.PathLike | None = None) -> CollectorRegistry:
    """A registry whose ``collect()`` sums every process's files in the directory (default
    ``$PROMETHEUS_MULTIPROC_DIR``); read at each scrape, so it can be built once.

    Raises:
        ValueError: no directory given or set.
    """
    directory = Path(path) if path is not None else multiprocess_dir()
    if directory is None:
        raise ValueError(f"no multiprocess directory: pass one or set {MULTIPROC_ENV}")
    registry = CollectorRegistry()
    _AggregateCollector(registry, path=str(directory))
    return registry


def make_wsgi_app(path: str | os.PathLike | None = None):
    """WSGI app answering every GET with the aggregate exposition of all processes; mount it
    at ``/metrics`` in a multi-worker WSGI server (any worker answers the same)."""
    return prometheus_client.make_wsgi_app(registry=multiprocess_registry(path))


def make_asgi_app(path: str | os.PathLike | None = None):
    """ASGI twin of :func:`make_wsgi_app` (uvicorn ``--workers``, Starlette/FastAPI ``mount``)."""
    return prometheus_client.make_asgi_app(registry=multiprocess_registry(path))


def serve_multiprocess(port: int, addr: str = "127.0.0.1", path: str | os.PathLike | None = None):
    """Serve the aggregate ``/metrics`` from this process (the master, or one rank) in a daemon
    thread; returns ``(server, thread)`` for :func:`stop_server`."""
    return start_http_server(port, addr=addr, registry=multiprocess_registry(path))


def mark_process_dead(pid: int, path: str | os.PathLike | None = None) -> None:
    """Drop the ``live*`` gauge files of exited process ``pid`` (its counters stay in the sums)."""
    multiprocess.mark_process_dead(pid, str(path) if path is not None else None)


def stop_server(server_and_thread) -> None:
    """Stop a ``(server, thread)`` pair returned by :func:`serve_multiprocess`."""
    server, thread = server_and_thread
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


class Workload:
    """Instrumentation for one workload process.

    Args:
        workload: the workload's name, published as the ``workload`` label; a workload
            class's selector in the spec usually matches it.
        labels: extra constant labels (e.g. ``{"model": "..."}``), same on every series.
        registry: a prometheus_client registry; a fresh one by default so the SDK never
            collides with metrics the application registers itself.
        clock: seconds of a monotonic clock, read at the start and end of ``step()`` and
            ``request()`` (``time.perf_counter``; tests pass a clock they advance).
        max_evaluations: most distinct ``evaluation`` label values :meth:`set_quality_score`
            publishes (None: no limit). Each one is a series kept for the life of the
            process; scores of further evaluations are dropped and counted in
            ``obsctl_sdk_dropped_label_values_total{label="evaluation"}`` (one warning logged).
            In multiprocess mode the limit holds per process.

    In multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set, see the module docstring) the
    values go to the shared directory; ``registry`` then holds only this process's values
    (what :class:`obsctl.exporters.training.batch.BatchJob` pushes).

    Raises:
        ValueError: a label name is not a valid Prometheus label name or is reserved.
        RuntimeError: ``PROMETHEUS_MULTIPROC_DIR`` set after prometheus_client was imported,
            or naming a path that is not a writable directory.
    """

    def __init__(self, workload: str, labels: dict[str, str] | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.perf_counter, max_evaluations: int | None = None):
        if max_evaluations is not None and (isinstance(max_evaluations, bool) or not isinstance(max_evaluations, int)
                                            or max_evaluations < 1):
            raise ValueError(f"max_evaluations must be a positive integer or None, got {max_evaluations!r}")
        self._clock = clock
        self._max_evaluations = max_evaluations
        self._evaluations: set[str] = set()
        self._warned_evaluations = False
        self.multiprocess = multiprocess_dir() is not None
        if self.multiprocess:
            _require_multiprocess_values()
        _check_labels(workload, labels or {})
        self.registry = registry or CollectorRegistry()
        self._const = {"workload": workload, **(labels or {})}
        names = list(self._const)
        reg = self.registry

        def counter(name: str, help_: str):
            return Counter(name, help_, names, registry=reg).labels(**self._const)

        def gauge(name: str, help_: str, extra: tuple[str, ...] = ()):
            metric = Gauge(name, help_, [*names, *extra], registry=reg, multiprocess_mode=GAUGE_MULTIPROCESS_MODES[name])
            return metric if extra else metric.labels(**self._const)

        def histogram(name: str, help_: str, buckets: tuple[float, ...]):
            return Histogram(name, help_, names, buckets=buckets, registry=reg).labels(**self._const)

        self._tokens = counter("obsctl_tokens", "Tokens processed (input and output).")
        self._input_tokens = counter("obsctl_input_tokens", "Prompt (input) tokens processed.")
        self._output_tokens = counter("obsctl_output_tokens", "Generated (output) tokens.")
        self._samples = counter("obsctl_samples", "Samples processed.")
        self._steps = counter("obsctl_steps", "Optimizer or engine steps completed.")
        self._step_time = histogram("obsctl_step_duration_seconds", "Wall time of one step in seconds.", STEP_BUCKETS)
        self._requests = Counter("obsctl_requests", "Requests by outcome (success, error, rejected).", [*names, "outcome"], registry=reg)
        self._latency = histogram("obsctl_request_duration_seconds", "Request latency in seconds.", LATENCY_BUCKETS)
        self._running = gauge("obsctl_requests_running", "Requests being served now.")
        self._queue_wait = histogram(
            "obsctl_queue_wait_seconds", "Time a request waited in queue before service, in seconds.", LATENCY_BUCKETS
        )
        self._queue_depth = gauge("obsctl_queue_depth_requests", "Requests waiting in queue now.")
        self._quality = gauge("obsctl_quality_score", "Latest evaluation score, in the evaluation's own scale.", ("evaluation",))
        self._dropped = Counter("obsctl_sdk_dropped_label_values", "Values of a label the SDK did not publish: "
                                "the workload's limit on distinct values was reached.", [*names, "label"], registry=reg)
        # Pre-create every outcome so rates and error ratios exist before the first error.
        for outcome in OUTCOMES:
            self._requests.labels(**self._const, outcome=outcome)
        if not self.multiprocess:
            reg.register(ProcessCPUCollector(self._const))
        self._server = None

    @property
    def const_labels(self) -> dict[str, str]:
        """The constant labels on every series: ``workload`` plus the ``labels`` given."""
        return dict(self._const)

    # --- counters ----------------------------------------------------------------

    def count_tokens(self, n: int | float) -> None:
        """Add ``n`` (>= 0) processed tokens; raises ValueError on a negative or non-finite ``n``."""
        self._tokens.inc(_checked(n, "tokens"))

    def count_input_tokens(self, n: int | float) -> None:
        """Add ``n`` (>= 0) prompt tokens; also added to ``obsctl_tokens_total``."""
        n = _checked(n, "input tokens")
        self._input_tokens.inc(n)
        self._tokens.inc(n)

    def count_output_tokens(self, n: int | float) -> None:
        """Add ``n`` (>= 0) generated tokens; also added to ``obsctl_tokens_total``."""
        n = _checked(n, "output tokens")
        self._output_tokens.inc(n)
        self._tokens.inc(n)

    def count_samples(self, n: int | float = 1) -> None:
        """Add ``n`` (>= 0) processed samples."""
        self._samples.inc(_checked(n, "samples"))

    def count_steps(self, n: int | float = 1) -> None:
        """Add ``n`` (>= 0) completed steps (not timed; see :meth:`step`)."""
        self._steps.inc(_checked(n, "steps"))

    def observe_step(self, duration_seconds: float, samples: int | float = 0, tokens: int | float = 0) -> None:
        """Count one completed step that took ``duration_seconds`` (wall time), with the
        ``samples`` and ``tokens`` it processed (added to their counters when > 0).

        Raises:
            ValueError: a negative or non-finite duration, samples or tokens.
        """
        duration_seconds = _checked(duration_seconds, "step duration")
        samples, tokens = _checked(samples, "step samples"), _checked(tokens, "step tokens")
        self._steps.inc()
        self._step_time.observe(duration_seconds)
        if samples:
            self._samples.inc(samples)
        if tokens:
            self._tokens.inc(tokens)

    @contextlib.contextmanager
    def step(self, samples: int | float = 0, tokens: int | float = 0) -> Iterator[StepScope]:
        """Time one step (the block): on normal exit the step, its duration and the scope's
        samples and tokens are counted; a block that raises counts nothing."""
        scope = StepScope(samples, tokens)
        start = self._clock()
        yield scope
        self.observe_step(self._clock() - start, scope.samples, scope.tokens)

    def record_request(self, outcome: str = "success", duration_seconds: float | None = None) -> None:
        """Count one finished request and, if given, observe its latency in seconds.

        Raises:
            ValueError: ``outcome`` is not one of success, error, rejected, or the
                duration is negative or not finite (nothing is counted then).
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        if duration_seconds is not None:
            duration_seconds = _checked(duration_seconds, "request duration")
        self._requests.labels(**self._const, outcome=outcome).inc()
        if duration_seconds is not None:
            self._latency.observe(duration_seconds)

    @contextlib.contextmanager
    def request(self) -> Iterator[RequestScope]:
        """Time a request: outcome ``error`` if the block raises, else ``scope.outcome``;
        ``obsctl_requests_running`` is one higher while the block runs."""
        scope = RequestScope()
        start = self._clock()
        self._running.inc()
        try:
            yield scope
        except BaseException:
            scope.outcome = "error"
            raise
        finally:
            self._running.dec()
            self.record_request(scope.outcome, self._clock() - start)

    # --- saturation and quality -------------------------------------------------------

    def set_requests_running(self, n: int | float) -> None:
        """Set the number of requests being served now (for servers that track it themselves; finite, >= 0)."""
        self._running.set(_checked(n, "requests running"))

    def set_queue_depth(self, n: int | float) -> None:
        """Set the number of requests waiting now (finite, >= 0)."""
        self._queue_depth.set(_checked(n, "queue depth"))

    def observe_queue_wait(self, seconds: float) -> None:
        """Observe how long one request waited before service, in seconds (finite, >= 0)."""
        self._queue_wait.observe(_checked(seconds, "queue wait"))

    def set_quality_score(self, evaluation: str, score: float) -> None:
        """Publish the latest score of the named evaluation (e.g. ``"sts-b-spearman"``); a
        NaN or infinite score raises ValueError (a failed evaluation publishes nothing). Past
        ``max_evaluations`` distinct names, a new name's score is dropped and counted."""
        if not isinstance(evaluation, str) or not evaluation:
            raise ValueError(f"evaluation must be a non-empty string, got {evaluation!r}")
        score = _checked(score, "quality score", negative=True)  # before labels(): that creates the series at 0
        if evaluation not in self._evaluations:
            if self._max_evaluations is not None and len(self._evaluations) >= self._max_evaluations:
                if not self._warned_evaluations:
                    self._warned_evaluations = True
                    log.warning("workload %s: more than %d distinct evaluation names; scores of further ones are dropped "
                                "and counted in obsctl_sdk_dropped_label_values_total", self._const["workload"],
                                self._max_evaluations)
                self._dropped.labels(**self._const, label="evaluation").inc()
                return
            self._evaluations.add(evaluation)
        self._quality.labels(**self._const, evaluation=evaluation).set(score)

    # --- exposition ------------------------------------------------------------------

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve ``/metrics`` on ``addr:port`` from a daemon thread: this workload's registry,
        or in multiprocess mode the aggregate of every process (call it in one process only)."""
        registry = multiprocess_registry() if self.multiprocess else self.registry
        self._server = start_http_server(port, addr=addr, registry=registry)

    def close(self) -> None:
        """Stop the HTTP server started by :meth:`serve`, if any."""
        if self._server is not None:
            stop_server(self._server)
            self._server = None
