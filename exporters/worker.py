"""A long-lived daemon thread that runs submitted calls one at a time, and the job it hands back.

Used wherever a call may block in I/O or a driver (a collector's collect, one GPU's NVML reads):
the caller waits on ``job.done`` with its own deadline and goes on without the result when the
call overruns; the call finishes on its own thread (a stuck call cannot block exit, the thread is a
daemon).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


class Job:
    """One call, run by a :class:`Worker`; ``result`` is ``list(fn())``.

    The job drops its callable (and with it the caller's context) once it has run, and the caller
    takes the result or error out of it (:meth:`take`), so a finished job holds nothing.
    """

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.done = threading.Event()
        self.result: Any = []
        self.error: BaseException | None = None
        self._fn: Callable[[], Any] | None = fn

    def run(self) -> None:
        fn, self._fn = self._fn, None
        try:
            self.result = list(fn())
        except BaseException as exc:  # noqa: BLE001 - reported to the scrape thread
            self.error = exc
        finally:
            del fn
            self.done.set()

    def take(self) -> tuple[Any, BaseException | None]:
        """The result and error of a finished job, leaving the job empty."""
        result, error = self.result, self.error
        self.result, self.error = [], None
        return result, error


class Worker:
    """A long-lived daemon thread named ``name`` (a stuck call cannot block exit).

    One per isolated collector (and one per GPU in the NVML source) instead of a new thread per
    call: starting a thread cost 0.5-3 ms per scrape on the 2-vCPU benchmark machine (cProfile), a
    queue hand-off a fraction of that. Callers never submit while their previous job is unfinished
    (they report ``busy`` or ``stuck``), so one thread is enough.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> Job:
        job = Job(fn)
        self._jobs.put(job)
        return job

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            job.run()

    def stop(self) -> None:
        """Let the thread end after its current job (it never blocks the caller)."""
        self._jobs.put(None)
