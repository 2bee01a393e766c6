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
   ``OBSCTL_WORKLOAD_OWNER``, ``slurm:job_<id>`` or ``user:<name>``.

``status="error"``: no class was found and a lookup failed (a process environment not
readable without privileges, or the process list failed). Process lookups go through a
TTL cache (negative results too), so a scrape reads at most one small ``/proc/<pid>/stat``
per GPU process. The PromQL join for a per-class GPU signal is
``... * on(uuid) group_left() obsctl_gpu_attribution_info{workload_class="c"}``; under MIG
join ``on(uuid, gpu_instance)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prometheus_client.core import Metric

from obsctl.exporters.config import AttributionConfig
from obsctl.exporters.gpu.catalogue import FamilySet
from obsctl.exporters.gpu.inventory import GpuRef, PodBinding
from obsctl.exporters.gpu.procinfo import ProcessCache

log = logging.getLogger(__name__)

ATTRIBUTED = "attributed"
UNATTRIBUTED = "unattributed"
ERROR = "error"
_MAX_OWNER = 200  # keep label values bounded when many processes share a GPU


class AttributionCollector:
    """Links GPUs / MIG instances to workload classes (see module docstring).

    Args:
        config: the ``attribution`` section of the exporter config.
        processes: ``() -> {uuid or "uuid/gi": [pid]}``; default: the GPU source's
            ``processes()`` when it has one (NVML), else no process attribution.
        cache: process lookup cache (default: TTL ``config.cache_ttl_seconds``).
    """

    name = "attribution"
    description = "GPU -> workload class and owner (static config, Kubernetes pod, process env / Slurm job)"
    isolate = True

    def __init__(self, config: AttributionConfig | None = None,
                 processes: Callable[[], dict[str, list[int]]] | None = None,
                 cache: ProcessCache | None = None) -> None:
        self.config = config or AttributionConfig()
        self._processes = processes
        self.cache = cache or ProcessCache(ttl_seconds=self.config.cache_ttl_seconds)

    def collect(self, ctx: Any) -> list[Metric]:
        """Attribution families for the units in ``ctx.inventory`` (none when it is None)."""
        inventory = getattr(ctx, "inventory", None)
        if inventory is None or not inventory.units:
            return []
        procs, procs_failed = self._process_map(ctx)
        out = FamilySet()
        for unit in inventory.units:
            found, errored = self.resolve(unit, inventory.pods.get(unit, []), procs)
            labels = unit.labels()
            for workload_class, (owners, source) in sorted(found.items()):
                owner = ",".join(sorted(o for o in owners if o))[:_MAX_OWNER]
                out.add("obsctl_gpu_attribution_info",
                        {**labels, "workload_class": workload_class, "owner": owner, "attribution_source": source}, 1)
            status = ATTRIBUTED if found else (ERROR if errored or procs_failed else UNATTRIBUTED)
            out.add("obsctl_gpu_attribution_status", {**labels, "status": status}, 1)
        return out.metrics()

    def resolve(self, unit: GpuRef, pods: list[PodBinding],
                procs: dict[str, list[int]]) -> tuple[dict[str, tuple[set[str], str]], bool]:
        """Classes found for one unit: ``({class: (owners, source)}, lookup_error)``."""
        static = self.config.static.get(f"{unit.uuid}/{unit.gpu_instance}") if unit.gpu_instance else None
        static = static or self.config.static.get(unit.uuid)
        if static is not None:
            return {static.workload_class: ({static.owner}, "static")}, False
        found: dict[str, tuple[set[str], str]] = {}
        for pod in pods:
            cls = self._pod_class(pod)
            if cls:
                found.setdefault(cls, (set(), "kubernetes"))[0].add(pod.owner)
        if found:
            return found, False
        errored = False
        key = f"{unit.uuid}/{unit.gpu_instance}" if unit.gpu_instance else unit.uuid
        for pid in procs.get(key, ()):
            info = self.cache.get(pid)
            if info is None:
                continue  # exited since the process list was taken
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
            if value:
                return value
        return k8s.namespace_classes.get(pod.namespace, "")

    def _process_map(self, ctx: Any) -> tuple[dict[str, list[int]], bool]:
        provider = self._processes
        if provider is None:
            source = getattr(ctx, "gpu_source", None)
            provider = getattr(source, "processes", None)
        if provider is None:
            return {}, False
        try:
            return provider() or {}, False
        except Exception as exc:  # noqa: BLE001 - best effort: status shows it
            log.debug("attribution: listing GPU processes failed: %s", exc)
            return {}, True

    def close(self) -> None:
        """Nothing to stop (the cache has no thread)."""
