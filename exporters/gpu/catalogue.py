"""The canonical GPU metric set: one table shared by the NVML and DCGM sources and the docs.

Every GPU series the exporter publishes is declared here once, with its Prometheus type, base
unit, help text, labels and which sources fill it. Sources build their families through
:class:`FamilySet`, which refuses a name or label set not declared here, so the two sources
cannot drift apart. ``render_markdown_table()`` renders the catalogue for README/docs.

Naming follows ../shared/DESIGN.md and the Prometheus naming guide
(https://prometheus.io/docs/practices/naming/): base units, ``_total`` counters, ``_ratio``
0-1, ``_info`` = 1. A value the hardware does not support is an ABSENT series, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

#: Labels every GPU series carries: NVML index as a string, and the UUID as NVML gives it ("GPU-...").
GPU_LABELS: tuple[str, ...] = ("gpu", "uuid")
#: Labels a MIG-instance series adds (only on metrics whose ``mig`` flag is set).
MIG_LABELS: tuple[str, ...] = ("gpu_instance", "mig_profile")

NVML = "nvml"
DCGM = "dcgm"
BOTH: tuple[str, ...] = (NVML, DCGM)

#: NVLink error counter types (label ``error_type`` of obsctl_gpu_nvlink_errors_total), DCGM's names.
NVLINK_ERROR_TYPES: tuple[str, ...] = ("crc_flit", "crc_data", "replay", "recovery")
#: Clock-event (throttle) reasons, in NVML bit order; label values of ``obsctl_gpu_clock_event_reason_active``.
CLOCK_EVENT_REASONS: tuple[str, ...] = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)


@dataclass(frozen=True)
class MetricDef:
    """One canonical GPU metric.

    Attributes:
        name: the exposed sample name (counters end in ``_total``).
        type: ``"gauge"`` or ``"counter"``.
        unit: base unit of the value: ``ratio`` (0-1), ``bytes``, ``watts``, ``joules``,
            ``celsius``, ``hertz``, ``seconds``, or ``""`` for counts, booleans and ``_info``.
        help: HELP text, naming the upstream field and the conversion applied.
        labels: labels every series of this metric carries, in order.
        sources: which sources fill it (``"nvml"``, ``"dcgm"``).
        mig: True when a MIG-instance series may add ``gpu_instance`` and ``mig_profile``.
    """

    name: str
    type: str
    unit: str
    help: str
    labels: tuple[str, ...]
    sources: tuple[str, ...]
    mig: bool = False

    @property
    def family_name(self) -> str:
        """Name given to prometheus_client (counters without the ``_total`` it re-adds)."""
        if self.type == "counter" and self.name.endswith("_total"):
            return self.name[: -len("_total")]
        return self.name


def _m(name, typ, unit, help_, extra=(), sources=BOTH, mig=False) -> MetricDef:
    return MetricDef(name, typ, unit, help_, GPU_LABELS + tuple(extra), tuple(sources), mig)


CATALOGUE: tuple[MetricDef, ...] = (
    _m("obsctl_gpu_info", "gauge", "",
       "GPU identity; always 1. mig_mode is enabled|disabled|unsupported.",
       ("model", "driver_version", "pci_bus_id", "mig_mode")),
    _m("obsctl_gpu_up", "gauge", "",
       "1 if the GPU answered this scrape, else 0 (lost, unknown error or deadline)."),
    _m("obsctl_gpu_collection_stuck", "gauge", "",
       "Present (=1) while a driver call for this GPU has not returned within the collection's budget; "
       "the GPU's other values are left out (obsctl_gpu_up 0) until it returns.", sources=(NVML,)),
    _m("obsctl_gpu_utilization_ratio", "gauge", "ratio",
       "Fraction of time a kernel ran on the GPU (NVML utilization.gpu or DCGM GPU_UTIL, percent/100).",
       mig=True),
    _m("obsctl_gpu_memory_utilization_ratio", "gauge", "ratio",
       "Fraction of time the memory controller was busy (NVML utilization.memory or DCGM MEM_COPY_UTIL, percent/100)."),
    _m("obsctl_gpu_memory_used_bytes", "gauge", "bytes",
       "Device memory in use (NVML v2 memory info where available; DCGM FB_USED MiB*2^20).", mig=True),
    _m("obsctl_gpu_memory_total_bytes", "gauge", "bytes",
       "Device memory size (NVML memory info total; DCGM FB_USED+FB_FREE(+FB_RESERVED) MiB*2^20).", mig=True),
    _m("obsctl_gpu_power_watts", "gauge", "watts",
       "Board power draw (NVML power usage mW/1000; DCGM POWER_USAGE W)."),
    _m("obsctl_gpu_power_limit_watts", "gauge", "watts",
       "Enforced power limit (NVML enforced power limit mW/1000; DCGM POWER_MGMT_LIMIT)."),
    _m("obsctl_gpu_energy_joules_total", "counter", "joules",
       "Energy consumed since the driver was loaded (NVML total energy mJ/1000; DCGM TOTAL_ENERGY_CONSUMPTION mJ/1000)."),
    _m("obsctl_gpu_temperature_celsius", "gauge", "celsius", "GPU die temperature."),
    _m("obsctl_gpu_memory_temperature_celsius", "gauge", "celsius", "HBM memory temperature."),
    _m("obsctl_gpu_sm_clock_hertz", "gauge", "hertz", "Current SM clock (MHz*1e6)."),
    _m("obsctl_gpu_memory_clock_hertz", "gauge", "hertz", "Current memory clock (MHz*1e6)."),
    _m("obsctl_gpu_clock_event_reason_active", "gauge", "",
       "1 if this clock-event (throttle) reason is active now, else 0.", ("reason",)),
    _m("obsctl_gpu_ecc_errors_total", "counter", "",
       "ECC errors since the counters were last cleared (aggregate/lifetime counts).", ("error_type",)),
    _m("obsctl_gpu_remapped_rows", "gauge", "",
       "Memory rows remapped, by cause (correctable|uncorrectable).", ("cause",)),
    _m("obsctl_gpu_remapped_rows_pending", "gauge", "",
       "1 if a row remapping is pending (needs a GPU reset), else 0."),
    _m("obsctl_gpu_remapped_rows_failed", "gauge", "",
       "1 if a row remapping has failed, else 0."),
    _m("obsctl_gpu_pcie_replays_total", "counter", "", "PCIe replay counter."),
    _m("obsctl_gpu_pcie_throughput_bytes_per_second", "gauge", "bytes_per_second",
       "PCIe throughput over NVML's ~20 ms sample, KB/s*1024 (off by default: the call blocks).",
       ("direction",)),  # also DCGM PROF_PCIE_{TX,RX}_BYTES(_PER_SECOND); the help text is in recorded scrapes
    _m("obsctl_gpu_nvlink_link_up", "gauge", "", "1 if this NVLink link is active, else 0.", ("link",)),
    _m("obsctl_gpu_nvlink_errors_total", "counter", "",
       "NVLink errors summed over the GPU's links, by error_type: crc_flit, crc_data, replay, recovery "
       "(NVML field values and DCGM fields NVLINK_<type>_ERROR_COUNT_TOTAL).", ("error_type",)),
    _m("obsctl_gpu_xid_errors_total", "counter", "",
       "XID errors seen by this exporter since it started, per XID code (NVML events; for DCGM, "
       "changes of the last-XID field).", ("xid",)),
    _m("obsctl_gpu_xid_last_seen_timestamp_seconds", "gauge", "seconds",
       "Unix time this XID code was last seen.", ("xid",)),
    _m("obsctl_gpu_sm_active_ratio", "gauge", "ratio",
       "Fraction of cycles an SM had at least one warp resident (DCGM PROF_SM_ACTIVE).", sources=(DCGM,), mig=True),
    _m("obsctl_gpu_sm_occupancy_ratio", "gauge", "ratio",
       "Resident warps over the SM maximum (DCGM PROF_SM_OCCUPANCY).", sources=(DCGM,), mig=True),
    _m("obsctl_gpu_tensor_pipe_active_ratio", "gauge", "ratio",
       "Fraction of cycles the tensor pipe was active (DCGM PROF_PIPE_TENSOR_ACTIVE).", sources=(DCGM,), mig=True),
    _m("obsctl_gpu_dram_active_ratio", "gauge", "ratio",
       "Fraction of cycles device memory was sending or receiving (DCGM PROF_DRAM_ACTIVE).", sources=(DCGM,), mig=True),
    _m("obsctl_gpu_attribution_info", "gauge", "",
       "Links a GPU (or MIG instance) to its workload class and owner; always 1.",
       ("workload_class", "owner", "attribution_source"), mig=True),
    _m("obsctl_gpu_attribution_status", "gauge", "",
       "Current attribution status of a GPU (or MIG instance), one series with value 1.",
       ("status",), mig=True),
)

BY_NAME: dict[str, MetricDef] = {d.name: d for d in CATALOGUE}
# name -> (label set, label set of a MIG-instance series or None); checked on every add, so precomputed.
_ALLOWED: dict[str, tuple[frozenset[str], frozenset[str] | None]] = {
    d.name: (frozenset(d.labels), frozenset(d.labels + MIG_LABELS) if d.mig else None) for d in CATALOGUE
}


def check_labels(name: str, labels: Mapping[str, str]) -> None:
    """Raise KeyError (unknown name) or ValueError (label names differ from the catalogue)."""
    allowed = _ALLOWED[name]
    keys = labels.keys()
    if keys != allowed[0] and keys != allowed[1]:
        raise ValueError(f"{name}: labels {sorted(keys)} do not match catalogue {sorted(allowed[0])}")


def new_family(defn: MetricDef) -> Metric:
    """An empty prometheus_client family for ``defn`` (counters get ``_total`` re-added on output)."""
    return Metric(defn.family_name, defn.help, defn.type)


class FamilySet:
    """Per-scrape builder of catalogue families; refuses undeclared names and label sets.

    Use ``add(name, labels, value)`` for each series, then ``metrics()`` for the families that
    got at least one sample (an unsupported value simply never gets added: absent, not 0).
    """

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, labels: Mapping[str, str], value: float,
            timestamp: float | None = None) -> None:
        """Add one sample.

        Args:
            name: a catalogue name (exposed name, counters with ``_total``).
            labels: exactly ``defn.labels`` (plus ``MIG_LABELS`` when ``defn.mig``); non-str values
                are converted with str(). An all-str mapping is kept as is (not copied): do not mutate it.
            value: the value in the metric's base unit.
            timestamp: optional sample timestamp (Unix seconds); normally None.

        Raises:
            KeyError: ``name`` is not in the catalogue.
            ValueError: the label names do not match the declaration.
        """
        allowed = _ALLOWED[name]
        keys = labels.keys()
        if keys != allowed[0] and keys != allowed[1]:
            raise ValueError(f"{name}: labels {sorted(keys)} do not match catalogue {sorted(allowed[0])}")
        fam = self._families.get(name)
        if fam is None:
            fam = self._families[name] = new_family(BY_NAME[name])
        if not all(type(v) is str for v in labels.values()):
            labels = {k: str(v) for k, v in labels.items()}
        fam.samples.append(Sample(name, labels, float(value), timestamp))

    def add_many(self, samples: Iterable[tuple[str, Mapping[str, str], float]]) -> None:
        """``add(name, labels, value)`` for each triple (same checks, less overhead per sample).

        Label values must already be str here (the NVML source's hot path).
        """
        families = self._families
        allowed_by_name = _ALLOWED
        new_sample = tuple.__new__  # Sample(...) without the namedtuple call overhead (hot path)
        for name, labels, value in samples:
            allowed = allowed_by_name[name]
            keys = labels.keys()
            if keys != allowed[0] and keys != allowed[1]:
                raise ValueError(f"{name}: labels {sorted(keys)} do not match catalogue {sorted(allowed[0])}")
            fam = families.get(name)
            if fam is None:
                fam = families[name] = new_family(BY_NAME[name])
            fam.samples.append(new_sample(Sample, (name, labels, float(value), None, None, None)))

    def add_checked(self, samples: Iterable[Sample]) -> None:
        """Append prometheus_client Samples whose names and labels were checked with ``check_labels``."""
        families = self._families
        last, append = None, None
        for sample in samples:
            name = sample[0]  # index, not the namedtuple property: hot path
            if name != last:  # runs of one name (reasons, links) skip the family lookup
                fam = families.get(name)
                if fam is None:
                    fam = families[name] = new_family(BY_NAME[name])
                last, append = name, fam.samples.append
            append(sample)

    def add_sample(self, sample: Sample) -> None:
        """Append one prometheus_client Sample whose name and labels were checked with ``check_labels``."""
        fam = self._families.get(sample[0])
        if fam is None:
            fam = self._families[sample[0]] = new_family(BY_NAME[sample[0]])
        fam.samples.append(sample)

    def extend(self, other: FamilySet) -> None:
        """Merge another set's samples into this one (already validated: not checked again)."""
        for name, fam in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = mine = new_family(BY_NAME[name])
            mine.samples.extend(fam.samples)

    def metrics(self) -> list[Metric]:
        """Families with at least one sample, in catalogue order."""
        return [self._families[d.name] for d in CATALOGUE if d.name in self._families]


def render_markdown_table(defs: Iterable[MetricDef] = CATALOGUE) -> str:
    """The catalogue as a Markdown table: name, type, unit, labels, sources, help."""
    rows = ["| name | type | unit | labels | source | meaning |", "|---|---|---|---|---|---|"]
    for d in defs:
        labels = ", ".join(f"`{label}`" for label in d.labels)
        if d.mig:
            labels += " (+ `gpu_instance`, `mig_profile` per MIG instance)"
        src = ", ".join(s.upper() for s in d.sources)
        help_ = d.help.replace("|", "\\|")  # a pipe would end the Markdown cell
        rows.append(f"| `{d.name}` | {d.type} | {d.unit or '-'} | {labels} | {src} | {help_} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m obsctl.exporters.gpu.catalogue > table.md
    print(render_markdown_table(), end="")
