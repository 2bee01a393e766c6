"""Which GPUs (and MIG instances) a scrape saw, and which Kubernetes pod each one serves.

The GPU collector fills a :class:`GpuInventory` each scrape from what its source returned;
the attribution collector reads it in the same scrape, so attribution never lags the GPU
series by a scrape and never outlives a GPU that disappeared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import Metric

from obsctl.exporters.gpu.catalogue import CATALOGUE


@dataclass(frozen=True, order=True)
class GpuRef:
    """One attributable unit: a whole GPU, or one MIG GPU instance of it.

    Attributes:
        gpu: GPU index as a string (NVML index / dcgm-exporter ``gpu`` label).
        uuid: GPU UUID as NVML prints it (``GPU-...``), of the parent GPU for MIG instances.
        gpu_instance: MIG GPU-instance id as a string, ``""`` for a whole GPU.
        mig_profile: MIG profile name (``1g.10gb``), ``""`` for a whole GPU.
    """

    gpu: str
    uuid: str
    gpu_instance: str = ""
    mig_profile: str = ""

    def labels(self) -> dict[str, str]:
        """Catalogue labels of this unit: gpu, uuid (+ gpu_instance, mig_profile for MIG)."""
        out = {"gpu": self.gpu, "uuid": self.uuid}
        if self.gpu_instance:
            out["gpu_instance"] = self.gpu_instance
            out["mig_profile"] = self.mig_profile
        return out


@dataclass(frozen=True)
class PodBinding:
    """The Kubernetes workload dcgm-exporter attached to a GPU (or MIG instance).

    Attributes:
        namespace / pod / container: from the ``namespace``/``pod``/``container`` labels
            (older exporters: ``pod_namespace``/``pod_name``/``container_name``).
        labels: every label of that series, for the opt-in pod-label -> class mapping.
    """

    namespace: str
    pod: str
    container: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def owner(self) -> str:
        """``namespace/pod`` (the pod's identity inside the cluster)."""
        return f"{self.namespace}/{self.pod}" if self.namespace else self.pod


@dataclass
class GpuInventory:
    """GPUs and MIG instances seen in this scrape, and their pod bindings (DCGM only)."""

    units: list[GpuRef] = field(default_factory=list)
    pods: dict[GpuRef, list[PodBinding]] = field(default_factory=dict)

    @classmethod
    def from_metrics(cls, metrics: Iterable[Metric], pods: dict[GpuRef, list[PodBinding]] | None = None) -> GpuInventory:
        """Derive the units from catalogue families.

        A GPU is any (gpu, uuid) with an ``obsctl_gpu_up`` or ``obsctl_gpu_info`` sample; a
        GPU with MIG-labelled samples is represented by its instances instead (work runs on
        instances, so that is what gets attributed).
        """
        gpus: dict[str, str] = {}
        instances: dict[str, set[tuple[str, str]]] = {}
        for fam in metrics:
            if fam.name in _NO_UNITS:  # ~40% of a scrape's samples: skipped (this runs every scrape)
                continue
            for s in fam.samples:
                uuid = s.labels.get("uuid")
                if not uuid:
                    continue
                if fam.name in ("obsctl_gpu_up", "obsctl_gpu_info"):
                    gpus.setdefault(uuid, s.labels.get("gpu", ""))
                gi = s.labels.get("gpu_instance")
                if gi:
                    instances.setdefault(uuid, set()).add((gi, s.labels.get("mig_profile", "")))
        units: list[GpuRef] = []
        for uuid, gpu in gpus.items():
            if uuid in instances:
                units.extend(GpuRef(gpu, uuid, gi, prof) for gi, prof in sorted(instances[uuid], key=_gi_key))
            else:
                units.append(GpuRef(gpu, uuid))
        units.sort(key=lambda r: (_int_or(r.gpu), r.uuid, _gi_key((r.gpu_instance, ""))))
        return cls(units=units, pods=dict(pods or {}))


# Catalogue families that can name neither a GPU (only up/info do) nor a MIG instance (mig=False).
_NO_UNITS = frozenset(d.family_name for d in CATALOGUE
                      if not d.mig and d.name not in ("obsctl_gpu_up", "obsctl_gpu_info"))


def _int_or(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


def _gi_key(item: tuple[str, str]) -> tuple[int, str]:
    return _int_or(item[0])
