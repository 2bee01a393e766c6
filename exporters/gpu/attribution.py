"""The ``attribution`` collector: which workload class and owner each GPU is working for.

For every GPU (or MIG GPU instance) the GPU collector saw in this scrape it publishes

* ``obsctl_gpu_attribution_info{gpu,uuid[,gpu_instance,mig_profile],workload_class,owner,attribution_source} 1``
  once per class found on that unit (``owner`` joins the distinct owners, sorted), and
* ``obsctl_gpu_attribution_status{...,status="attributed|unattributed|error"} 1``, one per
  unit, so a GPU nobody claimed is visible instead of silently missing from per-class sums.

Resolvers, first one that yields a class wins:

1. ``static``: ``attribution.static`` maps ``GPU-uuid`` (or ``GPU-uuid/<gpu_instance>``).
2. ``kubernetes``: the pod dcgm-exporter attached to the unit's series (``namespace``/``pod``
   labels, old spellings ``pod_namespace``/``pod_name``); the class comes from an opt-in
   label (``attribution.kubernetes.class_label``) or ``namespace_classes``; owner is
   ``namespace/pod``.
3. ``process_env`` / ``slurm``: the GPU's compute processes (``processes()`` of the NVML
   source): ``OBSCTL_WORKLOAD_CLASS`` in ``/proc/<pid>/environ``, else a Slurm job in
   ``/proc/<pid>/cgroup`` gets ``attribution.slurm.workload_class``. Owner:
   ``OBSCTL_WORKLOAD_OWNER``, ``slurm:job_<id>`` or ``user:<name>``. Any process can set
   these variables: a class that is not a spec class name is refused (``status="error"``
   when nothing else attributes the unit), an owner longer than 128 characters or with
   control characters is ignored, and a unit lists at most 16 classes.

``status="error"``: no class was found and a lookup failed (a process environment not
readable without privileges, or the process list failed). ``status="pending"``: the GPU
needs process attribution and no background resolution has completed since the GPU source
first answered (the first scrape after start).

Off the scrape path: one daemon thread (:class:`AttributionRefresher`, started by
:meth:`AttributionCollector.start` or the first scrape, stopped by ``close()``) lists the GPU
processes and resolves each to class/owner (``/proc/<pid>/environ`` and ``cgroup`` through
a TTL :class:`ProcessCache`, negative results too) every ``refresh_interval_seconds``,
into an immutable :class:`Snapshot`. A scrape only reads the latest snapshot plus one
small ``/proc/<pid>/stat`` per listed process (a liveness check against the start time
the refresher saw), so a GPU process that exits is gone on the next scrape, and a
recycled pid never inherits the dead process's class. A new process is attributed within
one refresh interval. The PromQL join for a per-class GPU signal is
``... * on(uuid) group_left() obsctl_gpu_attribution_info{workload_class="c"}``; under MIG
join ``on(uuid, gpu_instance)``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

from obsctl.exporters.config import AttributionConfig
from obsctl.exporters.gpu.catalogue import FamilySet
from obsctl.exporters.gpu.inventory import GpuRef, PodBinding
from obsctl.exporters.gpu.procinfo import CLASS_NAME, ProcessCache, ProcessInfo, start_time

log = logging.getLogger(__name__)

ATTRIBUTED = "attributed"
UNATTRIBUTED = "unattributed"
ERROR = "error"
PENDING = "pending"
_MAX_OWNER = 200  # keep label values bounded when many processes share a GPU
_MAX_CLASSES = 16  # attribution_info series per unit at most (each process may name its own class)
_JOIN_SECONDS = 5.0  # close() waits this long for a refresh stuck in /proc before giving up


@dataclass(frozen=True)
class ResolvedProcess:
    """One GPU process as the refresher resolved it.

    Attributes:
        pid: process id.
        started: start time in clock ticks after boot (``/proc/<pid>/stat`` field 22), the
            liveness key the scrape checks.
        info: its class / owner / Slurm job / lookup error (empty class: a negative result).
    """

    pid: int
    started: int
    info: ProcessInfo


@dataclass(frozen=True)
class Snapshot:
    """The result of one background resolution (never mutated; the scrape reads it as is).

    Attributes:
        processes: ``{uuid or "uuid/gi": (ResolvedProcess, ...)}``.
        failed: listing the GPU processes raised.
        started_at: ``time.monotonic()`` when the resolution began (seconds).
    """

    processes: dict[str, tuple[ResolvedProcess, ...]]
    failed: bool
    started_at: float


class AttributionRefresher:
    """Resolves GPU -> processes -> class/owner on one daemon thread, into a :class:`Snapshot`.

    Args:
        provider: ``() -> {uuid or "uuid/gi": [pid]}`` or None when no process source is
            known yet (then the snapshot is empty); may raise (snapshot ``failed=True``).
        cache: the ``/proc`` lookup cache (TTL, negative results included).
        interval_seconds: time between resolutions; :meth:`wake` starts one early.
        clock: monotonic clock.
    """

    def __init__(self, provider: Callable[[], dict[str, list[int]] | None], cache: ProcessCache,
                 interval_seconds: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._provider = provider
        self.cache = cache
        self.interval_seconds = interval_seconds
        self._clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.snapshot: Snapshot | None = None  # replaced whole; reading it needs no lock
        self.refreshes = 0  # completed resolutions (tests, benchmark)

    def refresh(self) -> Snapshot:
        """Do one resolution now on the calling thread, publish and return it."""
        began = self._clock()
        try:
            procs = self._provider() or {}
            failed = False
        except Exception as exc:  # noqa: BLE001 - best effort: the status series shows it
            log.debug("attribution: listing GPU processes failed: %s", exc)
            procs, failed = {}, True
        seen: dict[int, ResolvedProcess | None] = {}
        resolved: dict[str, tuple[ResolvedProcess, ...]] = {}
        for key, pids in procs.items():
            entries = []
            for pid in pids:
                if pid not in seen:
                    seen[pid] = self._resolve(pid)
                if seen[pid] is not None:
                    entries.append(seen[pid])
            resolved[key] = tuple(entries)
        snap = Snapshot(resolved, failed, began)
        self.snapshot = snap
        self.refreshes += 1
        return snap

    def _resolve(self, pid: int) -> ResolvedProcess | None:
        try:
            found = self.cache.lookup(pid)
        except Exception as exc:  # noqa: BLE001 - one odd /proc entry must not stop the others
            log.debug("attribution: reading process %d failed: %s", pid, exc)
            return ResolvedProcess(pid, -1, ProcessInfo(pid, error="read_error"))
        if found is None or found[1] is None:
            return None  # exited since the list was taken
        return ResolvedProcess(pid, found[0], found[1])

    def start(self) -> None:
        """Start the thread (idempotent; a no-op after :meth:`close`)."""
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="attribution-refresher", daemon=True)
                self._thread.start()

    def wake(self) -> None:
        """Run the next resolution now instead of at the end of the interval."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - keep the thread alive; next round retries
                log.warning("attribution refresh failed: %s", exc)
            self._wake.wait(self.interval_seconds)
            self._wake.clear()

    @property
    def alive(self) -> bool:
        """Whether the thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = _JOIN_SECONDS) -> None:
        """Stop the thread and wait up to ``timeout`` seconds for it (safe to call twice)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class AttributionCollector:
    """Links GPUs / MIG instances to workload classes (see module docstring).

    Args:
        config: the ``attribution`` section of the exporter config.
        processes: ``() -> {uuid or "uuid/gi": [pid]}``; default: the GPU source's
            ``processes()`` when it has one (NVML), else no process attribution.
        cache: process lookup cache (default: TTL ``config.cache_ttl_seconds``).
        proc_root: where the scrape's liveness check reads ``<pid>/stat`` (tests).
        autostart: start the refresher thread on the first scrape (tests pass False and
            call ``refresher.refresh()`` themselves).
        pod_resources: the kubelet's pod-resources client (``exporters/gpu/podresources.py``):
            with NVML, the pods holding each GPU, for the ``kubernetes`` resolver (dcgm-exporter's
            pod labels come first when the source is dcgm).
    """

    name = "attribution"
    description = "GPU -> workload class and owner (static config, Kubernetes pod, process env / Slurm job)"
    isolate = True

    def __init__(self, config: AttributionConfig | None = None,
                 processes: Callable[[], dict[str, list[int]]] | None = None,
                 cache: ProcessCache | None = None, proc_root: Path | None = None,
                 autostart: bool = True, pod_resources: Any = None) -> None:
        self.config = config or AttributionConfig()
        self.pod_resources = pod_resources
        self._processes = processes
        self._source: Any = None
        self.cache = cache or ProcessCache(ttl_seconds=self.config.cache_ttl_seconds)
        self.proc_root = proc_root or self.cache.proc_root
        self.refresher = AttributionRefresher(self._list_processes, self.cache,
                                              self.config.refresh_interval_seconds)
        self._source_since: float | None = None  # when the scrape first handed us this source
        self._autostart = autostart

    def start(self) -> None:
        """Start the background refresher (the first scrape also does)."""
        self.refresher.start()

    def _list_processes(self) -> dict[str, list[int]] | None:
        provider = self._processes or getattr(self._source, "processes", None)
        return provider() if provider is not None else None

    def collect(self, ctx: Any) -> list[Metric]:
        """Attribution families for the units in ``ctx.inventory`` (none when it is None).

        Reads the refresher's latest snapshot; never lists processes or reads
        ``/proc/<pid>/environ``/``cgroup`` itself.
        """
        inventory = getattr(ctx, "inventory", None)
        if inventory is None or not inventory.units:
            return []
        source = getattr(ctx, "gpu_source", None)
        if self._processes is None and source is not None and source is not self._source:
            # the GPU source answered for the first time: resolve now, not after a whole interval
            self._source = source
            self._source_since = time.monotonic()
            self.refresher.wake()
        if self._autostart:
            self.refresher.start()
        snap = self.refresher.snapshot
        if snap is not None and self._source_since is not None and snap.started_at < self._source_since:
            snap = None  # resolved before the GPU source answered: not an answer for these GPUs
        alive: dict[int, bool] = {}
        kubelet = self.pod_resources.devices() if self.pod_resources is not None else None
        out = FamilySet()
        for unit in inventory.units:
            pods = inventory.pods.get(unit) or []
            if not pods and kubelet is not None and not unit.gpu_instance:  # device ids: GPU UUIDs or indices
                pods = kubelet.devices.get(unit.uuid) or kubelet.devices.get(unit.gpu) or []
            found, errored = self.resolve(unit, pods, snap, alive)
            errored = errored or bool(not found and kubelet is not None and kubelet.error)
            labels = unit.labels()
            for workload_class, (owners, source_name) in sorted(found.items())[:_MAX_CLASSES]:
                owner = ",".join(sorted(o for o in owners if o))[:_MAX_OWNER]
                out.add("obsctl_gpu_attribution_info",
                        {**labels, "workload_class": workload_class, "owner": owner,
                         "attribution_source": source_name}, 1)
            if found:
                status = ATTRIBUTED
            elif snap is None and self._wants_processes():
                status = PENDING
            else:
                status = ERROR if errored or (snap is not None and snap.failed) else UNATTRIBUTED
            out.add("obsctl_gpu_attribution_status", {**labels, "status": status}, 1)
        return out.metrics()

    def _wants_processes(self) -> bool:
        """Whether process attribution applies (not for dcgm-exporter, which lists no processes)."""
        if self._processes is not None:
            return True
        return hasattr(self._source, "processes") and getattr(self._source, "active", "nvml") != "dcgm"

    def resolve(self, unit: GpuRef, pods: list[PodBinding], snap: Snapshot | None,
                alive: dict[int, bool] | None = None) -> tuple[dict[str, tuple[set[str], str]], bool]:
        """Classes found for one unit: ``({class: (owners, source)}, lookup_error)``.

        ``snap``: the refresher's snapshot (None: no process attribution yet); ``alive``:
        per-scrape memo of the liveness checks.
        """
        static = self.config.static.get(f"{unit.uuid}/{unit.gpu_instance}") if unit.gpu_instance else None
        static = static or self.config.static.get(unit.uuid)
        if static is not None:
            return {static.workload_class: ({static.owner}, "static")}, False
        found: dict[str, tuple[set[str], str]] = {}
        for pod in pods:
            cls = self._pod_class(pod)
            if cls:
                found.setdefault(cls, (set(), "kubernetes"))[0].add(pod.owner)
        if found or snap is None:
            return found, False
        alive = {} if alive is None else alive
        errored = False
        key = f"{unit.uuid}/{unit.gpu_instance}" if unit.gpu_instance else unit.uuid
        for proc in snap.processes.get(key, ()):
            if proc.pid not in alive:  # one small /proc/<pid>/stat read per process per scrape
                now = start_time(proc.pid, self.proc_root)
                alive[proc.pid] = now is not None and (proc.started < 0 or now == proc.started)
            if not alive[proc.pid]:
                continue  # exited (or pid recycled) since the refresher saw it
            info = proc.info
            errored = errored or bool(info.error)
            if info.workload_class and self.config.process_env:
                found.setdefault(info.workload_class, (set(), "process_env"))[0].add(info.owner)
            elif info.slurm_job and self.config.slurm.workload_class:
                found.setdefault(self.config.slurm.workload_class, (set(), "slurm"))[0].add(info.owner)
        return found, errored

    def _pod_class(self, pod: PodBinding) -> str:
        k8s = self.config.kubernetes
        if k8s.class_label:
            value = dict(pod.labels).get(k8s.class_label, "")
            if CLASS_NAME.match(value):  # a pod label anyone deploying there can set: a class name only
                return value
        return k8s.namespace_classes.get(pod.namespace, "")

    def close(self) -> None:
        """Stop the refresher thread (waits up to a few seconds for a refresh in progress)."""
        self.refresher.close()
        if self.pod_resources is not None:
            self.pod_resources.close()
