"""XID error events from NVML, counted per (gpu, uuid, xid) by a background thread.

NVML delivers XID errors only as events (nvmlEventTypeXidCriticalError = 0x8 in nvml.h): the
thread waits in ``nvmlEventSetWait`` with a short timeout so ``stop()`` returns promptly. Counts
live in :class:`XidCounts`, owned by the source, so they survive an NVML re-init.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from obsctl.exporters.gpu.nvml_fields import nvml_code

log = logging.getLogger(__name__)

EVENT_XID_CRITICAL = 0x8  # nvml.h nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT = 10


def handle_address(handle: Any) -> int:
    """Integer address of a pynvml device handle (a ctypes pointer), to match event data to GPUs."""
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class XidCounts:
    """Thread-safe XID tallies: ``{(gpu, uuid, xid): [count, last_seen_unix_seconds]}``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str, str], list[float]] = {}

    def record(self, gpu: str, uuid: str, xid: int, when: float) -> None:
        """Count one XID ``xid`` on a GPU seen at Unix time ``when`` (seconds)."""
        with self._lock:
            entry = self._data.setdefault((gpu, uuid, str(xid)), [0.0, 0.0])
            entry[0] += 1
            entry[1] = max(entry[1], when)

    def snapshot(self) -> list[tuple[str, str, str, float, float]]:
        """``[(gpu, uuid, xid, count, last_seen_seconds)]`` sorted by gpu, xid."""
        with self._lock:
            return sorted((g, u, x, c, t) for (g, u, x), (c, t) in self._data.items())


class XidWatcher:
    """Registers every GPU for XID events and tallies them into ``counts`` until ``stop()``.

    Args:
        call: ``call(fn_name, *args)`` running a pynvml function.
        devices: ``[(handle, (gpu_index_str, uuid))]`` of the GPUs to watch.
        counts: where to record events.
        wait_ms: nvmlEventSetWait timeout; bounds how long ``stop()`` waits.
        clock: Unix-time source for last-seen timestamps.
    """

    def __init__(self, call: Callable[..., Any], devices: list[tuple[Any, tuple[str, str]]], counts: XidCounts,
                 wait_ms: int = 100, clock: Callable[[], float] = time.time) -> None:
        self._call = call
        self._counts = counts
        self._wait_ms = wait_ms
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set = None
        self._by_addr: dict[int, tuple[str, str]] = {}
        self.registered = 0
        try:
            self._set = call("nvmlEventSetCreate")
        except Exception as exc:  # noqa: BLE001 - XIDs are best effort; metrics still flow
            log.info("XID events unavailable: %s", exc)
            return
        for handle, ident in devices:
            try:
                call("nvmlDeviceRegisterEvents", handle, EVENT_XID_CRITICAL, self._set)
            except Exception as exc:  # noqa: BLE001 - e.g. NOT_SUPPORTED on this GPU
                log.debug("GPU %s: no XID events (%s)", ident[0], exc)
                continue
            self._by_addr[handle_address(handle)] = ident
            self.registered += 1

    def start(self) -> None:
        """Start the thread (no-op when no GPU could be registered)."""
        if self.registered and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="obsctl-nvml-xid", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._call("nvmlEventSetWait", self._set, self._wait_ms)
            except Exception as exc:  # noqa: BLE001
                if nvml_code(exc) == NVML_ERROR_TIMEOUT:
                    continue
                log.info("XID event wait failed: %s", exc)
                self._stop.wait(self._wait_ms / 1000.0)  # a fault ends at re-init, which stops us
                continue
            if not data.eventType & EVENT_XID_CRITICAL:
                continue
            ident = self._by_addr.get(handle_address(data.device))
            if ident is not None:
                self._counts.record(ident[0], ident[1], int(data.eventData), self._clock())

    def stop(self) -> None:
        """Stop the thread (waits at most ~wait_ms) and free the event set."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._wait_ms / 1000.0 + 5.0)
            self._thread = None
        if self._set is not None:
            try:
                self._call("nvmlEventSetFree", self._set)
            except Exception:  # noqa: BLE001 - NVML may already be gone
                pass
            self._set = None
