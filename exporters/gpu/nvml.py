"""NVML GPU source: the canonical GPU series read through pynvml (nvidia-ml-py).

Fault behaviour (each one tested against the stand-in NVML in tests/nvml_stub/):

* NOT_SUPPORTED / NO_PERMISSION / FUNCTION_NOT_FOUND on a field: that series is absent, every other
  stays. NOT_SUPPORTED and FUNCTION_NOT_FOUND are remembered until the next NVML init (not asked again).
* GPU_IS_LOST, UNKNOWN, RESET_REQUIRED, UNINITIALIZED on a GPU: ``obsctl_gpu_up 0`` for that GPU,
  the others are served; NVML is shut down and re-initialised on the first collect ``reinit_interval``
  seconds after the fault (handles refreshed).
* Library missing, driver not loaded, library/driver version mismatch at init:
  :class:`GpuSourceError` with the reason; init is retried on a later collect (at most every
  ``reinit_interval`` seconds) and the source recovers when the fault clears.
* Deadline: each GPU is read on its own long-lived thread (:class:`obsctl.exporters.worker.Worker`),
  all GPUs at once; the deadline is checked before each field, and a GPU not finished by then
  reports up 0 and its partial series are dropped.
* A hung driver call: the collect waits for each GPU until 90 % of its budget (the rest assembles
  the families), then goes on without it: the GPU reports ``obsctl_gpu_up 0`` and
  ``obsctl_gpu_collection_stuck 1`` and none of its values. Its thread is not interrupted (an NVML
  call cannot be); while the call has not returned, later collects do not ask that GPU again and
  report it stuck at once; once it returns, the GPU is read on the next collect as before.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from ctypes import byref, c_int32, c_uint
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from obsctl.exporters.gpu import errors
from obsctl.exporters.gpu.catalogue import FamilySet, check_labels
from obsctl.exporters.gpu.errors import GpuSourceError
from obsctl.exporters.gpu.nvml_fields import (
    FUNCTION_NOT_FOUND,
    INVALID_ARGUMENT,
    NO_PERMISSION,
    NOT_FOUND,
    NOT_SUPPORTED,
    READERS,
    SLOW_READERS,
    FieldCache,
    GpuLabels,
    memory_info,
    nvml_code,
)
from obsctl.exporters.gpu.xid_events import XidCounts, XidWatcher
from obsctl.exporters.worker import Job, Worker

log = logging.getLogger(__name__)
_perf = time.perf_counter

# NVML return codes (nvml.h) that mean "this GPU (or NVML itself) is gone: re-init".
_GPU_FATAL = {1: "uninitialized", 9: errors.REASON_DRIVER_NOT_LOADED, 15: "gpu_is_lost",
              16: "reset_required", 18: errors.REASON_LIB_RM_VERSION_MISMATCH, 999: "unknown"}
# ... and at init, the whole-source reasons.
_INIT_REASONS = {12: errors.REASON_LIBRARY_NOT_FOUND, 9: errors.REASON_DRIVER_NOT_LOADED,
                 18: errors.REASON_LIB_RM_VERSION_MISMATCH, 4: errors.REASON_NO_PERMISSION}
_FIELD_ABSENT = {NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND}
_CACHE_ABSENT = {NOT_SUPPORTED, FUNCTION_NOT_FOUND}
# "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "... MIG 1c.3g.40gb", "... MIG 1g.10gb+me"
_MIG_PROFILE_RE = re.compile(r"MIG\s+((?:\d+c\.)?\d+g\.\d+gb(?:\+\w+)?)\s*$")
#: ``last_gpu_errors`` reason of a GPU whose driver call has not returned within the collect's budget.
REASON_STUCK = "stuck"
#: Share of a collect's budget spent waiting for the GPUs' threads; the rest assembles the families.
_GPU_WAIT_SHARE = 0.9


class _GpuDown(Exception):
    """This GPU answered a fatal code; ``reason`` is a short label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _DeadlinePassed(Exception):
    """The collect deadline passed before this GPU was finished."""


@dataclass
class _Gpu:
    """Static identity of one GPU, cached from init to the next re-init."""

    index: int
    handle: Any = None
    uuid: str = ""
    model: str = ""
    pci_bus_id: str = ""
    mig_mode: str = "unsupported"
    fields: FieldCache = field(default_factory=lambda: FieldCache(unsupported=set()))
    down_reason: str = ""
    base: dict[str, str] | None = None  # {"gpu", "uuid"} labels
    checked_count: int = -1  # sample count of the last collect whose labels were checked
    held: dict[str, tuple[float, list]] = field(default_factory=dict)  # field -> (next read due, its Samples)
    info_labels: dict[str, str] | None = None  # obsctl_gpu_info labels, cached per init


def _str(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def mig_profile_name(device_name: str, slices: int | None = None, memory_mib: int | None = None) -> str:
    """MIG profile (e.g. ``"1g.10gb"``) from a MIG device name such as ``"NVIDIA A100-SXM4-80GB MIG 1g.10gb"``.

    Falls back to ``"{slices}g.{ceil(memory_mib/1024)}gb"`` from nvmlDeviceGetAttributes (an
    approximation of NVIDIA's naming), else ``"unknown"``.
    """
    m = _MIG_PROFILE_RE.search(device_name or "")
    if m:
        return m.group(1)
    if slices and memory_mib:
        return f"{slices}g.{-(-memory_mib // 1024)}gb"
    return "unknown"


class NvmlSource:
    """Reads the canonical GPU series from NVML; one instance per exporter.

    Args:
        nvml: the pynvml module (injected; default ``import pynvml`` from nvidia-ml-py).
        pcie_throughput: also read PCIe throughput (blocks ~20 ms per direction per GPU on real drivers).
        xid_events: run the XID event thread.
        reinit_interval: minimum seconds between NVML init attempts after a fault.
        event_wait_ms: nvmlEventSetWait timeout in the XID thread (bounds ``close()``).
        field_intervals: ``{reader key: seconds}``: read that field at most once per that many seconds
            and serve its last samples in between (e.g. ``{"energy": 30.0}``: the energy counter costs
            3.8-4.7 ms a call on an H200, docs/benchmarks-gpu.md); a failed read is not held. Keys:
            the names in ``nvml_fields.READERS`` (``energy``, ``power``, ...).

    Raises:
        ValueError: a key of ``field_intervals`` that names no reader, or a negative interval.

    Attributes:
        name: ``"nvml"``.
        nvml_seconds: cumulative seconds spent inside pynvml calls made by ``collect`` (for the
            benchmark's own-time ratio; the GPU threads add to it without a lock, so a rare
            update may be lost); ``collect_seconds``: cumulative wall seconds in ``collect``.
        last_gpu_errors: ``{gpu_index: reason}`` of GPUs that were down in the last collect
            (``stuck``: a driver call that has not returned, see the module docstring).
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | None = None, *, pcie_throughput: bool = False,
                 xid_events: bool = True, reinit_interval: float = 10.0, event_wait_ms: int = 100,
                 field_intervals: Mapping[str, float] | None = None) -> None:
        if nvml is None:
            import pynvml as nvml  # nvidia-ml-py
        self._nvml = nvml
        self._fns: dict[str, Callable[..., Any]] = {}
        self._readers = READERS + (SLOW_READERS if pcie_throughput else ())
        known = {key for key, _ in READERS + SLOW_READERS}
        for key, seconds in (field_intervals or {}).items():
            if key not in known:
                raise ValueError(f"field interval for {key!r}: not one of {', '.join(sorted(known))}")
            if seconds < 0:
                raise ValueError(f"field interval for {key!r}: {seconds} is negative")
        self._field_intervals = {k: float(v) for k, v in (field_intervals or {}).items() if v > 0}
        self._xid_enabled = xid_events
        self._reinit_interval = reinit_interval
        self._event_wait_ms = event_wait_ms
        self._lock = threading.RLock()
        self._initialised = False
        self._needs_reinit = False
        self._next_init = 0.0
        self._last_reason = ""
        self._gpus: list[_Gpu] = []
        self._known_uuids: dict[int, str] = {}  # index -> uuid, kept across re-inits
        self._driver = ""
        self._watcher: XidWatcher | None = None
        self._xids = XidCounts()
        self._nvml_time = [0.0]  # a cell the call closure adds to (no attribute lookups per call)
        self._call = self._make_call()
        self.collect_seconds = 0.0
        self.last_gpu_errors: dict[str, str] = {}
        self._logged_errors: dict[str, str] = {}
        self._workers: dict[int, Worker] = {}  # GPU index -> its reading thread, kept across re-inits
        self._stuck: dict[int, Job] = {}  # GPU index -> the read that has not returned

    # -- NVML calls -------------------------------------------------------------------------------
    @property
    def nvml_seconds(self) -> float:
        """Cumulative seconds inside pynvml calls made through ``_call`` (settable, e.g. to 0)."""
        return self._nvml_time[0]

    @nvml_seconds.setter
    def nvml_seconds(self, value: float) -> None:
        self._nvml_time[0] = value

    def _make_call(self) -> Callable[..., Any]:
        """``call(fn_name, *args)``: run ``pynvml.<fn_name>(*args)``, adding its duration to ``nvml_seconds``.

        A closure over locals, because its own overhead counts against the own-time ratio. The timed
        span is the pynvml function alone (looking the function up is not in it). Raises
        AttributeError when this pynvml lacks the function (callers treat it as unsupported).
        """
        fns, nvml, acc, perf = self._fns, self._nvml, self._nvml_time, _perf

        def call(fn_name: str, *args: Any) -> Any:
            fn = fns.get(fn_name)
            if fn is None:
                fn = fns[fn_name] = getattr(nvml, fn_name)
            t0 = perf()
            try:
                return fn(*args)
            finally:
                acc[0] += perf() - t0

        def call_each(fn_name: str, handle: Any, args: Any) -> list[Any]:
            """``[pynvml.<fn_name>(handle, a) for a in args]``, each call timed on its own."""
            fn = fns.get(fn_name)
            if fn is None:
                fn = fns[fn_name] = getattr(nvml, fn_name)
            out, spent = [], 0.0
            try:
                for a in args:
                    t0 = perf()
                    r = fn(handle, a)
                    spent += perf() - t0  # a call that raises is not counted: errs towards own time
                    out.append(r)
            finally:
                acc[0] += spent
            return out

        get_pointer = getattr(nvml, "_nvmlGetFunctionPointer", None)
        nvml_error = getattr(nvml, "NVMLError", None)

        def call_each_uint(fn_name: str, handle: Any, args: Any) -> list[int]:
            """``[<fn_name>(handle, a, &uint) for a in args]``: the C function called directly.

            For the calls a scrape makes many of per GPU (one per NVLink link). pynvml's wrapper
            looks up the function pointer (under a lock), allocates a ``c_uint`` and checks the
            return code on every call: about two thirds of a call's cost against the stand-in.
            Here the pointer comes from pynvml once per batch and one ``c_uint`` is reused; a
            non-zero return raises ``pynvml.NVMLError(code)`` as pynvml's ``_nvmlCheckReturn``
            does, so callers see the same errors. ``fn_name`` is the C symbol, whose signature
            must be ``nvmlReturn_t fn(nvmlDevice_t, unsigned int, unsigned int *)``. A pynvml
            without the private lookup falls back to its public wrapper per element.
            """
            if get_pointer is None or nvml_error is None:
                return call_each(fn_name, handle, args)
            fn = get_pointer(fn_name)
            value = c_uint()
            ref = byref(value)
            out, spent = [], 0.0
            try:
                for a in args:
                    t0 = perf()
                    ret = fn(handle, a, ref)
                    spent += perf() - t0  # only the C call: the rest is own time
                    if ret:
                        raise nvml_error(ret)
                    out.append(value.value)
            finally:
                acc[0] += spent
            return out

        field_value_t = getattr(nvml, "c_nvmlFieldValue_t", None)
        array_types: dict[int, Any] = {}

        def call_field_values(handle: Any, field_ids: tuple[int, ...]) -> Any:
            """``pynvml.nvmlDeviceGetFieldValues(handle, field_ids)``: the same ctypes array, cheaper.

            pynvml's wrapper creates a new ctypes array *type* on every call (3.6 us of a 4 us call
            against the stand-in); the array type is made once per length here and the C function
            called directly. Errors as pynvml's (``NVMLError(code)`` for the call's own return; each
            entry carries its ``nvmlReturn``).
            """
            if get_pointer is None or nvml_error is None or field_value_t is None:
                return call("nvmlDeviceGetFieldValues", handle, list(field_ids))
            n = len(field_ids)
            array_type = array_types.get(n)
            if array_type is None:
                array_type = array_types[n] = field_value_t * n
            values = array_type()
            for i, field_id in enumerate(field_ids):
                values[i].fieldId = field_id
            fn = get_pointer("nvmlDeviceGetFieldValues")
            t0 = perf()
            ret = fn(handle, c_int32(n), byref(values))
            acc[0] += perf() - t0
            if ret:
                raise nvml_error(ret)
            return values

        call.each = call_each  # type: ignore[attr-defined]  # for readers of several like calls
        call.each_uint = call_each_uint  # type: ignore[attr-defined]
        call.field_values = call_field_values  # type: ignore[attr-defined]
        return call

    def _raw_call(self, fn_name: str, *args: Any) -> Any:
        return getattr(self._nvml, fn_name)(*args)

    # -- init / shutdown --------------------------------------------------------------------------
    def _init(self) -> None:
        """nvmlInit, enumerate GPUs, cache static info, start the XID thread. Raises GpuSourceError."""
        try:
            self._call("nvmlInit")
        except Exception as exc:  # noqa: BLE001 - pynvml raises NVMLError subclasses
            code = nvml_code(exc)
            reason = _INIT_REASONS.get(code, errors.REASON_NVML_ERROR) if code is not None \
                else errors.REASON_LIBRARY_NOT_FOUND
            raise GpuSourceError(reason, str(exc)) from None
        self._initialised = True
        try:
            self._driver = _str(self._call("nvmlSystemGetDriverVersion"))
            count = self._call("nvmlDeviceGetCount")
        except Exception as exc:  # noqa: BLE001
            self._shutdown()
            code = nvml_code(exc)
            raise GpuSourceError(_INIT_REASONS.get(code, errors.REASON_NVML_ERROR), str(exc)) from None
        self._gpus = [self._open_gpu(i) for i in range(count)]
        if self._xid_enabled:
            devices = [(g.handle, (str(g.index), g.uuid)) for g in self._gpus if g.handle is not None]
            self._watcher = XidWatcher(self._raw_call, devices, self._xids, wait_ms=self._event_wait_ms)
            self._watcher.start()

    def _open_gpu(self, index: int) -> _Gpu:
        g = _Gpu(index=index, uuid=self._known_uuids.get(index, ""))
        try:  # (labels are built once the UUID is known, below)
            g.handle = self._call("nvmlDeviceGetHandleByIndex", index)
            g.uuid = _str(self._call("nvmlDeviceGetUUID", g.handle))
            g.model = _str(self._call("nvmlDeviceGetName", g.handle))
            g.pci_bus_id = _str(self._call("nvmlDeviceGetPciInfo", g.handle).busId)
        except Exception as exc:  # noqa: BLE001
            g.handle = None
            g.down_reason = _GPU_FATAL.get(nvml_code(exc), "nvml_error")
            return g
        self._known_uuids[index] = g.uuid
        g.base = {"gpu": str(index), "uuid": g.uuid}
        g.fields.labels = GpuLabels(g.base)
        return g

    def _shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._initialised:
            try:
                self._call("nvmlShutdown")
            except Exception as exc:  # noqa: BLE001 - shutting down a broken NVML may fail
                log.debug("nvmlShutdown: %s", exc)
            self._initialised = False
        self._gpus = []

    def close(self) -> None:
        """Stop the XID thread and the GPU threads (each after its current read), shut NVML down.
        Safe to call twice."""
        with self._lock:
            for worker in self._workers.values():
                worker.stop()
            self._workers.clear()
            self._shutdown()

    # -- collect ----------------------------------------------------------------------------------
    def collect(self, deadline: float) -> list[Metric]:
        """All GPU series for one scrape.

        Args:
            deadline: ``time.monotonic()`` value by which to return.

        Returns:
            prometheus_client metric families (catalogue names); unsupported values are absent.

        Raises:
            GpuSourceError: NVML cannot be initialised (reason: library_not_found,
                driver_not_loaded, lib_rm_version_mismatch, no_permission, nvml_error).
        """
        t0 = time.perf_counter()
        try:
            with self._lock:
                return self._collect(deadline)
        finally:
            self.collect_seconds += time.perf_counter() - t0

    def _collect(self, deadline: float) -> list[Metric]:
        if self._needs_reinit and time.monotonic() >= self._next_init:
            self._shutdown()  # until then the GPUs that still answer are served with the old handles
            self._needs_reinit = False
        if not self._initialised:
            now = time.monotonic()
            if now < self._next_init and self._last_reason:  # init failed recently: do not hammer it
                raise GpuSourceError(self._last_reason, "waiting to retry NVML init")
            self._next_init = now + self._reinit_interval
            try:
                self._init()
            except GpuSourceError as exc:
                self._last_reason = exc.reason
                raise
            self._last_reason = ""
        out = FamilySet()
        add_sample, new = out.add_sample, tuple.__new__  # checked labels, Sample without namedtuple overhead
        self.last_gpu_errors = {}
        fatal = False
        jobs = self._start_reads(deadline)
        now = time.monotonic()
        wait_until = now + _GPU_WAIT_SHARE * max(deadline - now, 0.0)
        for g in self._gpus:
            base = g.base  # the same dict every scrape, so label renderings can be cached downstream
            if base is None:  # a GPU that failed to open: only its up series
                base = g.base = {"gpu": str(g.index), "uuid": g.uuid}
            reason = g.down_reason
            if not reason:
                reason = self._finish_read(g, jobs.get(g.index), wait_until, out)
            if g.handle is not None:  # identity is cached, so it is served even while the GPU is down
                info = g.info_labels
                if info is None or info["mig_mode"] != g.mig_mode:  # built once (again if MIG mode changes)
                    info = g.info_labels = {**base, "model": g.model, "driver_version": self._driver,
                                            "pci_bus_id": g.pci_bus_id, "mig_mode": g.mig_mode}
                    check_labels("obsctl_gpu_info", info)
                add_sample(new(Sample, ("obsctl_gpu_info", info, 1.0, None, None, None)))
            if reason:
                self.last_gpu_errors[str(g.index)] = reason
                fatal = fatal or reason not in ("deadline", REASON_STUCK)
            add_sample(new(Sample, ("obsctl_gpu_up", base, 0.0 if reason else 1.0, None, None, None)))
            if reason == REASON_STUCK:
                add_sample(new(Sample, ("obsctl_gpu_collection_stuck", base, 1.0, None, None, None)))
        for gpu, uuid, xid, count, last in self._xids.snapshot():
            labels = {"gpu": gpu, "uuid": uuid, "xid": xid}
            out.add("obsctl_gpu_xid_errors_total", labels, count)
            out.add("obsctl_gpu_xid_last_seen_timestamp_seconds", labels, last)
        if self.last_gpu_errors != self._logged_errors:  # one line per change, not one per scrape
            log.info("NVML: GPUs down: %s", self.last_gpu_errors or "none")
            self._logged_errors = dict(self.last_gpu_errors)
        if fatal:  # re-init on a later collect; handles may change after a GPU reset
            if not self._needs_reinit:  # the first fault sets the time; repeats must not push it out
                self._needs_reinit = True  # the XID thread keeps running until then (XID 79 = fell off the bus)
                self._next_init = time.monotonic() + self._reinit_interval
            self._last_reason = ""
        return out.metrics()

    def _start_reads(self, deadline: float) -> dict[int, Job]:
        """Hand each answering GPU's read to its thread; GPUs whose earlier read is still running get none."""
        jobs: dict[int, Job] = {}
        for g in self._gpus:
            if g.down_reason:
                continue
            late = self._stuck.get(g.index)
            if late is not None:
                if not late.done.is_set():
                    continue  # still inside the driver: reported stuck again, not asked twice
                del self._stuck[g.index]
                late.take()  # its values are from an earlier collect: dropped
            worker = self._workers.get(g.index)
            if worker is None:
                worker = self._workers[g.index] = Worker(f"nvml-gpu-{g.index}")
            jobs[g.index] = worker.submit(partial(self._read_gpu, g, deadline))
        return jobs

    def _read_gpu(self, g: _Gpu, deadline: float) -> list[Sample]:
        """One GPU's Samples (on its thread); raises _GpuDown / _DeadlinePassed."""
        pending: list[Sample] = []
        self._collect_gpu(g, g.base, pending, deadline)
        return pending

    def _finish_read(self, g: _Gpu, job: Job | None, wait_until: float, out: FamilySet) -> str:
        """Add a GPU's finished read to ``out``; returns the reason it is down (``""``: up).

        ``job`` None: the GPU's read from an earlier collect is still inside the driver, so the GPU is
        reported stuck at once (not waited for: a hung GPU must not make every collect take its whole
        budget). A GPU's series are published only when its read finished: no partial GPU.
        """
        if job is None:
            return REASON_STUCK
        if not job.done.wait(max(wait_until - time.monotonic(), 0.0)):
            self._stuck[g.index] = job
            return REASON_STUCK
        samples, error = job.take()
        if error is None:
            out.add_checked(samples)
            return ""
        if isinstance(error, _GpuDown):
            return error.reason
        if isinstance(error, _DeadlinePassed):
            return "deadline"
        raise error  # a bug in a reader: the collector reports it, as when it ran on the caller's thread

    def _collect_gpu(self, g: _Gpu, base: dict[str, str], out: list, deadline: float) -> None:
        """Append one GPU's Samples to ``out``; raises _GpuDown / _DeadlinePassed."""
        call, fields, handle, monotonic = self._call, g.fields, g.handle, time.monotonic
        unsupported, intervals, held = fields.unsupported, self._field_intervals, g.held
        for key, reader in self._readers:
            if key in unsupported:
                continue
            now = monotonic()
            if now >= deadline:
                raise _DeadlinePassed()
            every = intervals.get(key) if intervals else None
            if every is not None:
                kept = held.get(key)
                if kept is not None and now < kept[0]:
                    out.extend(kept[1])  # read less often than the collection: its last samples
                    continue
                start = len(out)
            try:
                reader(call, handle, fields, out)  # appends only when the whole field was read
            except Exception as exc:  # noqa: BLE001
                if every is not None:
                    held.pop(key, None)
                self._field_error(g, key, exc)
                continue
            if every is not None:
                held[key] = (now + every, out[start:])
        if len(out) != g.checked_count:  # a new set of fields answered: check its names and labels once
            for sample in out:
                check_labels(sample[0], sample[1])
            g.checked_count = len(out)
        self._collect_mig(g, base, out, deadline)

    def _field_error(self, g: _Gpu, key: str, exc: BaseException) -> None:
        """Absent series for this field, or raise _GpuDown for a GPU-level fault."""
        code = nvml_code(exc)
        if code in _GPU_FATAL:
            raise _GpuDown(_GPU_FATAL[code])
        if code in _CACHE_ABSENT:
            g.fields.unsupported.add(key)
        elif code not in _FIELD_ABSENT:
            log.debug("GPU %d %s: %s", g.index, key, exc)

    def _collect_mig(self, g: _Gpu, base: dict[str, str], out: list, deadline: float) -> None:
        if "mig" in g.fields.unsupported:
            return
        try:
            current, _pending = self._call("nvmlDeviceGetMigMode", g.handle)
        except Exception as exc:  # noqa: BLE001
            self._field_error(g, "mig", exc)
            return
        g.mig_mode = "enabled" if current else "disabled"
        if not current:
            return
        try:
            slots = self._call("nvmlDeviceGetMaxMigDeviceCount", g.handle)
        except Exception as exc:  # noqa: BLE001
            self._field_error(g, "mig", exc)
            return
        for i in range(slots):
            if time.monotonic() >= deadline:
                raise _DeadlinePassed()
            try:
                mh = self._call("nvmlDeviceGetMigDeviceHandleByIndex", g.handle, i)
            except Exception as exc:  # noqa: BLE001 - empty slots answer NOT_FOUND
                if nvml_code(exc) in (NOT_FOUND, INVALID_ARGUMENT):
                    continue
                self._field_error(g, "mig", exc)
                continue
            try:
                self._collect_mig_device(mh, base, out)
            except Exception as exc:  # noqa: BLE001
                code = nvml_code(exc)
                if code in _GPU_FATAL:
                    raise _GpuDown(_GPU_FATAL[code]) from None

    def _collect_mig_device(self, mh: Any, base: dict[str, str], out: list) -> None:
        gi = self._call("nvmlDeviceGetGpuInstanceId", mh)
        name = _str(self._call("nvmlDeviceGetName", mh))
        profile = mig_profile_name(name)
        if profile == "unknown":
            try:
                a = self._call("nvmlDeviceGetAttributes", mh)
                profile = mig_profile_name(name, a.gpuInstanceSliceCount, a.memorySizeMB)
            except Exception:  # noqa: BLE001 - keep "unknown"
                pass
        labels = {**base, "gpu_instance": str(gi), "mig_profile": profile}
        check_labels("obsctl_gpu_memory_used_bytes", labels)
        m = memory_info(self._call, mh, FieldCache(unsupported=set(), memory_v2=False))
        out.append(Sample("obsctl_gpu_memory_used_bytes", labels, float(m.used)))
        out.append(Sample("obsctl_gpu_memory_total_bytes", labels, float(m.total)))
        try:  # NVML answers NOT_SUPPORTED for utilization on MIG devices today; kept if a driver adds it
            u = self._call("nvmlDeviceGetUtilizationRates", mh)
            out.append(Sample("obsctl_gpu_utilization_ratio", labels, u.gpu / 100.0))
        except Exception as exc:  # noqa: BLE001
            if nvml_code(exc) in _GPU_FATAL:
                raise

    # -- processes (for attribution) ---------------------------------------------------------------
    def processes(self) -> dict[str, list[int]]:
        """PIDs of compute processes per GPU, best effort.

        Returns:
            ``{uuid: [pid, ...]}`` keyed by the GPU's ``GPU-...`` UUID (all processes on the GPU),
            and for MIG-enabled GPUs also ``"{uuid}/{gpu_instance}"`` with the processes of that GPU
            instance. GPUs that fail are left out; an uninitialised NVML gives ``{}``.
        """
        result: dict[str, list[int]] = {}
        with self._lock:
            if not self._initialised:
                return result
            for g in self._gpus:
                if g.handle is None:
                    continue
                try:
                    procs = self._raw_call("nvmlDeviceGetComputeRunningProcesses", g.handle)
                except Exception:  # noqa: BLE001 - best effort
                    continue
                result[g.uuid] = sorted({int(p.pid) for p in procs})
                if g.mig_mode == "enabled":
                    for p in procs:
                        gi = getattr(p, "gpuInstanceId", None)
                        if gi is not None and gi != 0xFFFFFFFF:
                            result.setdefault(f"{g.uuid}/{gi}", []).append(int(p.pid))
        return result
