"""The exporter core: runs the enabled collectors once per scrape, under a deadline.

Each scrape gets a :class:`ScrapeContext` with a ``time.monotonic()`` deadline. Collectors
run in order; one that does I/O (``isolate = True``) runs on its own daemon thread and the
scrape stops waiting for it at the deadline: its series are left out of that scrape and it
is reported failed with reason ``deadline_exceeded`` (the call finishes on its own; until
then the next scrape waits for it with up to half its own budget, and if it is still
running the collector is reported ``busy`` rather than started twice). Each such collector has one
long-lived worker thread. Any exception becomes
``obsctl_exporter_scrape_collector_success 0`` plus an error-reason series, and ONE log line
per change of reason, never one per scrape.

Concurrent scrapes (two Prometheus replicas) are serialised, so collectors never run twice
at once and shared state (XID counters, caches) stays consistent.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import ProcessCollector
from prometheus_client.core import Metric

from obsctl import __version__
from obsctl.exporters import meta
from obsctl.exporters.gpu.inventory import GpuInventory
from obsctl.exporters.worker import Job as _Job
from obsctl.exporters.worker import Worker as _Worker

log = logging.getLogger("obsctl.exporter")

REASON_DEADLINE = "deadline_exceeded"
REASON_BUSY = "busy"
REASON_EXCEPTION = "exception"


@dataclass
class ScrapeContext:
    """What one scrape shares between its collectors.

    Attributes:
        deadline: ``time.monotonic()`` value by which every collector must be done.
        inventory: GPUs / MIG instances seen by the GPU collector in this scrape (None when
            the GPU collector is off or failed).
        gpu_source: the GPU source used in this scrape (for the attribution collector).
    """

    deadline: float
    inventory: GpuInventory | None = None
    gpu_source: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def remaining(self) -> float:
        """Seconds left before the deadline (may be negative)."""
        return self.deadline - time.monotonic()


class Collector(Protocol):
    """What the exporter runs each scrape (one module per collector)."""

    name: str
    description: str
    isolate: bool

    def collect(self, ctx: ScrapeContext) -> Iterable[Metric]:
        """Fresh metric families for this scrape; raise to report failure (``.reason`` used)."""

    def close(self) -> None:
        """Stop threads and release resources."""


def release_exception(exc: BaseException) -> None:
    """Drop what a handled exception keeps alive: its traceback frames' locals and its chain.

    A traceback references every frame it passed through, and each frame its locals: a failed
    dcgm fetch's frames hold the response and the body read so far (up to the 16 MiB cap), and
    the scrape thread's frames held the previous job, whose error held the job before it, so
    each failed scrape kept all earlier ones alive (docs/benchmarks-soak.md).
    Called once the failure has been logged; the reason and message stay on the exception.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        todo += [cur.__cause__, cur.__context__]
        if cur.__traceback__ is not None:
            traceback.clear_frames(cur.__traceback__)  # skips frames still executing
        cur.__traceback__ = cur.__cause__ = cur.__context__ = None


class CollectorTimeout(Exception):
    """The collector did not return before the scrape deadline."""

    reason = REASON_DEADLINE


class CollectorBusy(Exception):
    """The collector's previous call (from an earlier, timed-out scrape) is still running."""

    reason = REASON_BUSY


class Exporter:
    """Runs collectors under a deadline and adds meta series; a prometheus_client "registry".

    Args:
        collectors: enabled collectors, in run order (the GPU collector before attribution).
        scrape_timeout: default per-scrape budget in seconds (a Prometheus
            ``X-Prometheus-Scrape-Timeout-Seconds`` header may shorten it, see server).
        process_metrics: include prometheus_client's ``process_*`` series.
        version: value of ``obsctl_exporter_build_info{version}``.
    """

    def __init__(self, collectors: Sequence[Collector], scrape_timeout: float = 8.0,
                 process_metrics: bool = True, version: str = __version__) -> None:
        self.collectors = list(collectors)
        self.scrape_timeout = scrape_timeout
        self.version = version
        self._process = ProcessCollector(registry=None) if process_metrics else None
        self._scrape_lock = threading.Lock()
        self._pending: dict[str, _Job] = {}
        self._workers: dict[str, _Worker] = {}
        self._last_reason: dict[str, str] = {}
        self.extra_meta: list[Callable[[], Iterable[Metric]]] = []

    def collect(self) -> list[Metric]:
        """prometheus_client registry interface: one scrape with the default budget."""
        return self.scrape(self.scrape_timeout)

    def scrape(self, budget: float) -> list[Metric]:
        """Run every collector within ``budget`` seconds and return all families.

        Never raises for a collector fault: the fault shows in the meta series.
        """
        deadline = time.monotonic() + budget
        families: list[Metric] = []
        outcomes: list[meta.CollectorOutcome] = []
        got_lock = self._scrape_lock.acquire(timeout=max(budget, 0.0))
        try:
            ctx = ScrapeContext(deadline=deadline)
            for coll in self.collectors:
                if not got_lock:
                    outcomes.append(meta.CollectorOutcome(coll.name, False, 0.0, REASON_BUSY))
                    continue
                outcome, metrics = self._run(coll, ctx)
                outcomes.append(outcome)
                families.extend(metrics)
            for extra in self.extra_meta:
                families.extend(extra())
        finally:
            if got_lock:
                self._scrape_lock.release()
        families.extend(meta.collector_meta(outcomes))
        families.append(meta.build_info(self.version))
        if self._process is not None:
            families.extend(self._process.collect())
        return families

    def _run(self, coll: Collector, ctx: ScrapeContext) -> tuple[meta.CollectorOutcome, list[Metric]]:
        t0 = time.perf_counter()
        try:
            if ctx.remaining() <= 0:
                raise CollectorTimeout("no time left in the scrape")
            if getattr(coll, "isolate", True):
                metrics = self._isolated(coll, ctx)
            else:
                metrics = list(coll.collect(ctx))
            after = getattr(coll, "after", None)
            if after is not None:
                after(ctx, metrics)  # on the scrape thread, only for results that arrived in time
        except Exception as exc:  # noqa: BLE001 - every fault becomes meta series
            reason = getattr(exc, "reason", "") or REASON_EXCEPTION
            self._log_failure(coll.name, reason, exc)
            release_exception(exc)
            return meta.CollectorOutcome(coll.name, False, time.perf_counter() - t0, reason), []
        self._log_recovery(coll.name)
        return meta.CollectorOutcome(coll.name, True, time.perf_counter() - t0), metrics

    def _isolated(self, coll: Collector, ctx: ScrapeContext) -> list[Metric]:
        # Only an unfinished job stays in _pending (to report ``busy``); no local names another job
        # when this frame raises, so an error's traceback cannot reach an earlier job.
        late = self._pending.get(coll.name)
        if late is not None:
            # A call left running by an earlier scrape with a shorter budget (a client may send a
            # tiny X-Prometheus-Scrape-Timeout-Seconds) was bounded by that budget and ends soon:
            # wait for it with up to half of this scrape's time, then run a fresh call.
            if not late.done.wait(max(ctx.remaining() / 2, 0.0)):
                raise CollectorBusy("previous call still running")
            del self._pending[coll.name]
            release_error = late.take()[1]  # a timed-out job's late error: never raised
            if release_error is not None:
                release_exception(release_error)
            del release_error
        del late
        worker = self._workers.get(coll.name)
        if worker is None:
            worker = self._workers[coll.name] = _Worker(f"collector-{coll.name}")
        job = worker.submit(lambda: coll.collect(ctx))
        if not job.done.wait(max(ctx.remaining(), 0.0)):
            self._pending[coll.name] = job
            raise CollectorTimeout("no result within the scrape deadline")
        result, error = job.take()
        if error is not None:
            raise error
        return result

    def _log_failure(self, name: str, reason: str, exc: BaseException) -> None:
        if self._last_reason.get(name) == reason:
            return  # one log line per change of reason, not one per scrape
        self._last_reason[name] = reason
        detail = getattr(exc, "detail", "") or str(exc)
        if reason == REASON_EXCEPTION:
            log.error("collector %s failed: %s; its series are left out until it recovers "
                      "(logged once per change of reason)", name, detail, exc_info=exc)
        else:
            log.warning("collector %s failed: %s%s; its series are left out until it recovers "
                        "(logged once per change of reason)", name, reason, f" ({detail})" if detail else "")

    def _log_recovery(self, name: str) -> None:
        if self._last_reason.pop(name, None) is not None:
            log.info("collector %s recovered", name)

    def close(self) -> None:
        """Close every collector (stops their threads); safe to call twice."""
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()
        for coll in self.collectors:
            try:
                coll.close()
            except Exception as exc:  # noqa: BLE001 - shutting down must not fail
                log.debug("closing collector %s: %s", coll.name, exc)
