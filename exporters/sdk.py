"""Workload SDK: what training and inference code calls to publish loop signals.

The SDK counts raw events only (tokens, samples, steps, requests, queue waits) and
leaves every per-class aggregation (rates, ratios, quantiles) to recording rules, as
Prometheus practice recommends: counters and histograms aggregate correctly, averages
of per-process ratios do not.

Series (all carry the ``workload`` label plus any constant labels you pass):

=================================== ========= =========================================
name                                type      meaning
=================================== ========= =========================================
obsctl_tokens_total                 counter   tokens processed (input + output)
obsctl_samples_total                counter   samples processed (training or batch items)
obsctl_steps_total                  counter   optimizer / engine steps
obsctl_requests_total{outcome}      counter   requests by outcome: success|error|rejected
obsctl_request_duration_seconds     histogram request latency, seconds
obsctl_queue_wait_seconds           histogram time a request waited before service, seconds
obsctl_queue_depth_requests         gauge     requests waiting now
obsctl_quality_score{evaluation}    gauge     latest evaluation score, in that eval's scale
=================================== ========= =========================================

Example::

    wl = Workload("embed-online", labels={"model": "all-MiniLM-L6-v2"})
    wl.serve(port=8000)
    with wl.request() as req:          # latency observed, outcome=error on exception
        wl.count_tokens(n_tokens)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

OUTCOMES = ("success", "error", "rejected")

# Latency buckets from 1 ms to ~60 s; wide enough for embeddings and LLM requests alike.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class RequestScope:
    """Handle yielded by :meth:`Workload.request`; set ``outcome`` to override the default."""

    outcome: str = "success"


class Workload:
    """Instrumentation for one workload process.

    Args:
        workload: the workload's name, published as the ``workload`` label; a workload
            class's selector in the spec usually matches it.
        labels: extra constant labels (e.g. ``{"model": "..."}``), same on every series.
        registry: a prometheus_client registry; a fresh one by default so the SDK never
            collides with metrics the application registers itself.

    Raises:
        ValueError: a label name is not a valid Prometheus label name or is reserved.
    """

    def __init__(self, workload: str, labels: dict[str, str] | None = None, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self._const = {"workload": workload, **(labels or {})}
        names = list(self._const)
        reg = self.registry
        self._tokens = Counter("obsctl_tokens", "Tokens processed (input and output).", names, registry=reg).labels(**self._const)
        self._samples = Counter("obsctl_samples", "Samples processed.", names, registry=reg).labels(**self._const)
        self._steps = Counter("obsctl_steps", "Optimizer or engine steps completed.", names, registry=reg).labels(**self._const)
        self._requests = Counter("obsctl_requests", "Requests by outcome (success, error, rejected).", [*names, "outcome"], registry=reg)
        self._latency = Histogram(
            "obsctl_request_duration_seconds", "Request latency in seconds.", names, buckets=LATENCY_BUCKETS, registry=reg
        ).labels(**self._const)
        self._queue_wait = Histogram(
            "obsctl_queue_wait_seconds", "Time a request waited in queue before service, in seconds.", names, buckets=LATENCY_BUCKETS, registry=reg
        ).labels(**self._const)
        self._queue_depth = Gauge("obsctl_queue_depth_requests", "Requests waiting in queue now.", names, registry=reg).labels(**self._const)
        self._quality = Gauge("obsctl_quality_score", "Latest evaluation score, in the evaluation's own scale.", [*names, "evaluation"], registry=reg)
        # Pre-create every outcome so rates and error ratios exist before the first error.
        for outcome in OUTCOMES:
            self._requests.labels(**self._const, outcome=outcome)
        self._server = None

    # --- counters ----------------------------------------------------------------

    def count_tokens(self, n: int | float) -> None:
        """Add ``n`` (>= 0) processed tokens; raises ValueError on a negative ``n``."""
        self._tokens.inc(n)

    def count_samples(self, n: int | float = 1) -> None:
        """Add ``n`` (>= 0) processed samples."""
        self._samples.inc(n)

    def count_steps(self, n: int | float = 1) -> None:
        """Add ``n`` (>= 0) completed steps."""
        self._steps.inc(n)

    def record_request(self, outcome: str = "success", duration_seconds: float | None = None) -> None:
        """Count one finished request and, if given, observe its latency in seconds.

        Raises:
            ValueError: ``outcome`` is not one of success, error, rejected.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        self._requests.labels(**self._const, outcome=outcome).inc()
        if duration_seconds is not None:
            self._latency.observe(duration_seconds)

    @contextlib.contextmanager
    def request(self) -> Iterator[RequestScope]:
        """Time a request: outcome ``error`` if the block raises, else ``scope.outcome``."""
        scope = RequestScope()
        start = time.perf_counter()
        try:
            yield scope
        except BaseException:
            scope.outcome = "error"
            raise
        finally:
            self.record_request(scope.outcome, time.perf_counter() - start)

    # --- saturation and quality -------------------------------------------------------

    def set_queue_depth(self, n: int | float) -> None:
        """Set the number of requests waiting now."""
        self._queue_depth.set(n)

    def observe_queue_wait(self, seconds: float) -> None:
        """Observe how long one request waited before service, in seconds."""
        self._queue_wait.observe(seconds)

    def set_quality_score(self, evaluation: str, score: float) -> None:
        """Publish the latest score of the named evaluation (e.g. ``"sts-b-spearman"``)."""
        self._quality.labels(**self._const, evaluation=evaluation).set(score)

    # --- exposition ------------------------------------------------------------------

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve this workload's ``/metrics`` on ``addr:port`` from a daemon thread."""
        self._server = start_http_server(port, addr=addr, registry=self.registry)

    def close(self) -> None:
        """Stop the HTTP server started by :meth:`serve`, if any."""
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._server = None
