"""A bounded pool of daemon worker threads for a command's concurrent Prometheus calls.

``concurrent.futures.ThreadPoolExecutor`` waits for every running call twice before a
command can end: on leaving its ``with`` block and again at interpreter exit (its workers
are joined by an exit hook, whatever ``shutdown(wait=False)`` says). When one call fails
or the user presses Ctrl-C, the calls still in flight then hold the process for up to
their ``deadline_seconds`` (30 s by default) after the error was already known; run one
after the other, the command ended at the error. This pool's workers are daemon threads
and nothing waits for them: a command reads its results through the futures, and on an
error or an interrupt the calls not yet started are cancelled and the ones in flight are
abandoned (they only read: every store write happens on the calling thread).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    """``submit`` / ``map`` like ``ThreadPoolExecutor``, on at most ``max_workers`` daemon threads.

    Use as a context manager: leaving the block never waits; it lets the workers end once
    the queue is empty and, when the block is left by an exception, cancels the calls that
    have not started.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "obsctl-worker"):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` on a worker; its result or exception comes back through the future."""
        future: Future = Future()
        self._futures.append(future)
        self._queue.put((future, fn, args))
        if len(self._threads) < self._max_workers:
            t = threading.Thread(target=self._work, name=f"{self._prefix}_{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()
        return future

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn(item)`` of each item, in order; the first exception is raised where it is reached
        and the calls not yet started are then cancelled."""
        futures = [self.submit(fn, item) for item in items]

        def results() -> Iterator[Any]:
            try:
                for f in futures:
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()

        return results()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the future
                future.set_exception(exc)

    def __enter__(self) -> DaemonPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            for f in self._futures:
                f.cancel()
        for _ in self._threads:
            self._queue.put(None)
