"""How dcgm-exporter's ``DCGM_FI_*`` series map onto the canonical GPU catalogue.

One table, :data:`FIELDS`, says for every DCGM field we read: the canonical metric it fills,
the factor that turns DCGM's unit into the base unit, and whether the field is per GPU
(``device``: repeated verbatim on every MIG instance, published once per GPU) or per MIG
GPU instance (``instance``: published with ``gpu_instance`` and ``mig_profile``).

Units (DCGM field reference, dcgm_fields.h and dcgm-exporter's default-counters.csv): the
legacy names carry percent -> ratio (/100), MiB -> bytes (*2**20), mJ -> J (/1000), MHz -> Hz
(*1e6); the ``DCGM_FI_PROF_*`` fields are already ratios 0-1 (PCIe traffic: bytes per second).

Two generations of names. dcgm-exporter 4.9.0 moved its default and profiling fields to the
DCGM 4.7 names, which carry their unit in the name (DCGM's field naming standard: ``_CELSIUS``,
``_WATTS``, ``_HERTZ``, ``_JOULES``, ``_BYTES``, suffix ``_RATIO`` / ``_TOTAL``), and 4.10.0
renamed ``DCGM_FI_PROF_PCIE_{TX,RX}_BYTES`` to ``..._BYTES_PER_SECOND``. Both spellings are
in :data:`FIELDS`, each with its own conversion, so each value is converted exactly once
whichever name the scrape carries (a node mid-upgrade may expose either). Where the current
names come from (DCGM 4.6.0's ``dcgm_fields.h`` deprecated-alias table, go-dcgm's base-unit
fields, the dcgm-exporter 4.9.0 / 4.10.0 release notes, and for the framebuffer bytes and the
utilization ratios a write-up quoting DCGM 4.7's field reference): docs/exporter.md.

Blank / not-supported values: DCGM stores "no value" as sentinels at the top of each type's
range (dcgmvalue.h / dcgm_structs.h): ``DCGM_INT32_BLANK = 0x7ffffff0``,
``DCGM_INT64_BLANK = 0x7ffffffffffffff0``, ``DCGM_FP64_BLANK = 140737488355328.0`` (2**47),
and the ``*_NOT_FOUND``, ``*_NOT_SUPPORTED``, ``*_NOT_PERMISSIONED`` values are BLANK+1..+3;
DCGM's own test is ``value >= BLANK``. dcgm-exporter prints int64 fields as integers and
doubles with ``%f``, so a sentinel reaches us as a plain number: see :func:`is_blank`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: DCGM blank sentinels (dcgmvalue.h). Everything >= the base value is blank / an error code.
DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0

MIB = 2**20
PCIE_THROUGHPUT = "obsctl_gpu_pcie_throughput_bytes_per_second"
DEVICE = "device"
INSTANCE = "instance"


@dataclass(frozen=True)
class FieldMap:
    """How one DCGM field becomes one canonical series.

    Attributes:
        canonical: catalogue name (``obsctl_gpu_...``); for special fields (``xid``,
            ``clock_events``, ``memory_total``) the name of the family they end up in.
        scale: multiply the DCGM value by this to get the base unit (exact: powers of 2, 10^6).
        divisor: then divide by this (percent -> ratio, mJ -> J). Dividing, not multiplying by
            0.01, gives the closest float to the decimal: 57 / 100 = 0.57, 57 * 0.01 = 0.5700000000000001.
        scope: ``device`` (one series per GPU) or ``instance`` (per MIG GPU instance).
        extra: fixed extra labels (e.g. ``{"error_type": "corrected"}``).
        special: ``""`` for a plain value, else ``xid`` | ``clock_events`` | ``memory_part``.
        counter: True for DCGM counters and for any field whose real values can pass 2**31
            (bytes, hertz, bytes per second): only the int64/fp64 sentinels apply, see is_blank.
    """

    canonical: str
    scale: float = 1.0
    scope: str = DEVICE
    extra: tuple[tuple[str, str], ...] = ()
    special: str = ""
    counter: bool = False
    divisor: float = 1.0

    def convert(self, value: float) -> float:
        """The DCGM value in the canonical base unit."""
        return value * self.scale / self.divisor


#: Field names across dcgm-exporter generations, each with its own unit (see the module docstring
#: and docs/exporter.md). Where a field has two names, the current (DCGM 4.7, dcgm-exporter 4.9+)
#: name comes first: when one scrape carries both spellings of a series (a collector CSV that
#: lists both), the current one is kept. The two convert to the same value, so the choice never
#: changes a number.
FIELDS: dict[str, FieldMap] = {
    # utilization. Not supported per MIG instance (DCGM answers blank/0).
    "DCGM_FI_DEV_GPU_UTIL_RATIO": FieldMap("obsctl_gpu_utilization_ratio"),  # 0-1 already
    "DCGM_FI_DEV_GPU_UTIL": FieldMap("obsctl_gpu_utilization_ratio", divisor=100),  # percent
    "DCGM_FI_DEV_MEMORY_UTIL_RATIO": FieldMap("obsctl_gpu_memory_utilization_ratio"),  # 0-1 already
    "DCGM_FI_DEV_MEM_COPY_UTIL": FieldMap("obsctl_gpu_memory_utilization_ratio", divisor=100),  # percent
    # framebuffer: the *_BYTES fields in bytes (they pass 2**31, hence counter=True: only the wide
    # sentinels apply), the legacy ones in MiB; per GPU instance under MIG.
    "DCGM_FI_DEV_FB_USED_BYTES": FieldMap("obsctl_gpu_memory_used_bytes", scope=INSTANCE, counter=True),
    "DCGM_FI_DEV_FB_USED": FieldMap("obsctl_gpu_memory_used_bytes", MIB, INSTANCE),
    "DCGM_FI_DEV_FB_CAPACITY_BYTES": FieldMap("obsctl_gpu_memory_total_bytes", scope=INSTANCE, special="memory_part", counter=True),
    "DCGM_FI_DEV_FB_TOTAL": FieldMap("obsctl_gpu_memory_total_bytes", MIB, INSTANCE, special="memory_part"),
    "DCGM_FI_DEV_FB_FREE_BYTES": FieldMap("obsctl_gpu_memory_total_bytes", scope=INSTANCE, special="memory_part", counter=True),
    "DCGM_FI_DEV_FB_FREE": FieldMap("obsctl_gpu_memory_total_bytes", MIB, INSTANCE, special="memory_part"),
    "DCGM_FI_DEV_FB_RESERVED_BYTES": FieldMap("obsctl_gpu_memory_total_bytes", scope=INSTANCE, special="memory_part", counter=True),
    "DCGM_FI_DEV_FB_RESERVED": FieldMap("obsctl_gpu_memory_total_bytes", MIB, INSTANCE, special="memory_part"),
    # power (W), energy (J; the legacy field in mJ)
    "DCGM_FI_DEV_BOARD_POWER_WATTS": FieldMap("obsctl_gpu_power_watts"),
    "DCGM_FI_DEV_POWER_USAGE": FieldMap("obsctl_gpu_power_watts"),
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS": FieldMap("obsctl_gpu_power_limit_watts"),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": FieldMap("obsctl_gpu_power_limit_watts"),
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS": FieldMap("obsctl_gpu_power_limit_watts"),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": FieldMap("obsctl_gpu_power_limit_watts"),
    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": FieldMap("obsctl_gpu_energy_joules_total", counter=True),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": FieldMap("obsctl_gpu_energy_joules_total", divisor=1000, counter=True),
    # temperatures (C), clocks (Hz; the legacy fields in MHz). A memory clock in Hz passes 2**31.
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": FieldMap("obsctl_gpu_temperature_celsius"),
    "DCGM_FI_DEV_GPU_TEMP": FieldMap("obsctl_gpu_temperature_celsius"),
    "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS": FieldMap("obsctl_gpu_memory_temperature_celsius"),
    "DCGM_FI_DEV_MEMORY_TEMP": FieldMap("obsctl_gpu_memory_temperature_celsius"),
    "DCGM_FI_DEV_SM_CLOCK_HERTZ": FieldMap("obsctl_gpu_sm_clock_hertz", counter=True),
    "DCGM_FI_DEV_SM_CLOCK": FieldMap("obsctl_gpu_sm_clock_hertz", 1e6),
    "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ": FieldMap("obsctl_gpu_memory_clock_hertz", counter=True),
    "DCGM_FI_DEV_MEM_CLOCK": FieldMap("obsctl_gpu_memory_clock_hertz", 1e6),
    # clock-event (throttle) reasons bitmask; renamed CLOCKS_EVENT_REASONS in DCGM 3.2.
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": FieldMap("obsctl_gpu_clock_event_reason_active", special="clock_events"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": FieldMap("obsctl_gpu_clock_event_reason_active", special="clock_events"),
    # ECC aggregate (lifetime) counts, remapped rows, PCIe replays
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": FieldMap("obsctl_gpu_ecc_errors_total", extra=(("error_type", "corrected"),), counter=True),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": FieldMap("obsctl_gpu_ecc_errors_total", extra=(("error_type", "uncorrected"),), counter=True),
    "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL": FieldMap("obsctl_gpu_remapped_rows", extra=(("cause", "correctable"),)),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": FieldMap("obsctl_gpu_remapped_rows", extra=(("cause", "correctable"),)),
    "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL": FieldMap("obsctl_gpu_remapped_rows", extra=(("cause", "uncorrectable"),)),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": FieldMap("obsctl_gpu_remapped_rows", extra=(("cause", "uncorrectable"),)),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": FieldMap("obsctl_gpu_remapped_rows_pending"),
    "DCGM_FI_DEV_ROW_REMAP_FAILED": FieldMap("obsctl_gpu_remapped_rows_failed"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": FieldMap("obsctl_gpu_remapped_rows_failed"),
    "DCGM_FI_DEV_PCIE_REPLAY_TOTAL": FieldMap("obsctl_gpu_pcie_replays_total", counter=True),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": FieldMap("obsctl_gpu_pcie_replays_total", counter=True),
    # PCIe traffic (DCGM profiling, bytes per second under both names; up to ~64e9 on Gen5 x16)
    "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": FieldMap(PCIE_THROUGHPUT, extra=(("direction", "tx"),), counter=True),
    "DCGM_FI_PROF_PCIE_TX_BYTES": FieldMap(PCIE_THROUGHPUT, extra=(("direction", "tx"),), counter=True),
    "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND": FieldMap(PCIE_THROUGHPUT, extra=(("direction", "rx"),), counter=True),
    "DCGM_FI_PROF_PCIE_RX_BYTES": FieldMap(PCIE_THROUGHPUT, extra=(("direction", "rx"),), counter=True),
    # NVLink error totals over the GPU's links (the NVML field values the NVML source reads too)
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "crc_flit"),), counter=True),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "crc_flit"),), counter=True),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "crc_data"),), counter=True),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "crc_data"),), counter=True),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "replay"),), counter=True),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "replay"),), counter=True),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "recovery"),), counter=True),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": FieldMap("obsctl_gpu_nvlink_errors_total", extra=(("error_type", "recovery"),), counter=True),
    # the code of the LAST XID error, not a count (see DcgmSource)
    "DCGM_FI_DEV_XID_ERROR": FieldMap("obsctl_gpu_xid_errors_total", special="xid"),
    "DCGM_FI_DEV_XID_ERRORS": FieldMap("obsctl_gpu_xid_errors_total", special="xid"),
    # profiling (DCP) fields: ratios 0-1 under both names, per GPU instance under MIG
    "DCGM_FI_PROF_SM_UTIL_RATIO": FieldMap("obsctl_gpu_sm_active_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_SM_ACTIVE": FieldMap("obsctl_gpu_sm_active_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_SM_OCCUPANCY_RATIO": FieldMap("obsctl_gpu_sm_occupancy_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_SM_OCCUPANCY": FieldMap("obsctl_gpu_sm_occupancy_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO": FieldMap("obsctl_gpu_tensor_pipe_active_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": FieldMap("obsctl_gpu_tensor_pipe_active_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_DRAM_UTIL_RATIO": FieldMap("obsctl_gpu_dram_active_ratio", scope=INSTANCE),
    "DCGM_FI_PROF_DRAM_ACTIVE": FieldMap("obsctl_gpu_dram_active_ratio", scope=INSTANCE),
}

#: The fields that name the same series: current (DCGM 4.7) name -> legacy name. Where a scrape
#: carries both for one GPU, the current one wins (the table order above).
RENAMED: dict[str, str] = {
    new: old for new, old in (
        ("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_GPU_UTIL"),
        ("DCGM_FI_DEV_MEMORY_UTIL_RATIO", "DCGM_FI_DEV_MEM_COPY_UTIL"),
        ("DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_USED"),
        ("DCGM_FI_DEV_FB_CAPACITY_BYTES", "DCGM_FI_DEV_FB_TOTAL"),
        ("DCGM_FI_DEV_FB_FREE_BYTES", "DCGM_FI_DEV_FB_FREE"),
        ("DCGM_FI_DEV_FB_RESERVED_BYTES", "DCGM_FI_DEV_FB_RESERVED"),
        ("DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_POWER_USAGE"),
        ("DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"),
        ("DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS", "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
        ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
        ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_GPU_TEMP"),
        ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", "DCGM_FI_DEV_MEMORY_TEMP"),
        ("DCGM_FI_DEV_SM_CLOCK_HERTZ", "DCGM_FI_DEV_SM_CLOCK"),
        ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "DCGM_FI_DEV_MEM_CLOCK"),
        ("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
        ("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
        ("DCGM_FI_DEV_ROW_REMAP_FAILED", "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
        ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "DCGM_FI_PROF_PCIE_TX_BYTES"),
        ("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", "DCGM_FI_PROF_PCIE_RX_BYTES"),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
        ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"),
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"),
        ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"),
        ("DCGM_FI_DEV_XID_ERROR", "DCGM_FI_DEV_XID_ERRORS"),
        ("DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_SM_ACTIVE"),
        ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "DCGM_FI_PROF_SM_OCCUPANCY"),
        ("DCGM_FI_PROF_TENSOR_UTIL_RATIO", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
        ("DCGM_FI_PROF_DRAM_UTIL_RATIO", "DCGM_FI_PROF_DRAM_ACTIVE"),
    )
}

#: The framebuffer fields that make up obsctl_gpu_memory_total_bytes: field -> its part
#: (``total`` | ``free`` | ``reserved``), current name first within each part.
MEMORY_PARTS: dict[str, str] = {
    "DCGM_FI_DEV_FB_CAPACITY_BYTES": "total", "DCGM_FI_DEV_FB_TOTAL": "total",
    "DCGM_FI_DEV_FB_FREE_BYTES": "free", "DCGM_FI_DEV_FB_FREE": "free",
    "DCGM_FI_DEV_FB_RESERVED_BYTES": "reserved", "DCGM_FI_DEV_FB_RESERVED": "reserved",
}

#: Label spellings across dcgm-exporter versions: canonical key -> accepted label names, first wins.
LABEL_ALIASES: dict[str, tuple[str, ...]] = {
    "uuid": ("UUID", "uuid"),
    "gpu": ("gpu",),
    "model": ("modelName", "DCGM_FI_DEV_GPU_NAME", "DCGM_FI_DEV_NAME"),
    "driver_version": ("DCGM_FI_SYSTEM_DRIVER_VERSION", "DCGM_FI_DRIVER_VERSION"),
    "pci_bus_id": ("pci_bus_id", "DCGM_FI_DEV_PCI_BUS_ID", "DCGM_FI_DEV_PCI_BUSID"),
    "gpu_instance": ("GPU_I_ID",),
    "mig_profile": ("GPU_I_PROFILE",),
    "pod": ("pod", "pod_name"),
    "namespace": ("namespace", "pod_namespace"),
    "container": ("container", "container_name"),
    "hostname": ("hostname", "Hostname"),
}


def label(labels: dict[str, str], key: str) -> str:
    """The first non-empty value among the spellings of ``key`` in ``labels`` ('' if none)."""
    for name in LABEL_ALIASES[key]:
        value = labels.get(name)
        if value:
            return value
    return ""


def lookup(family_name: str, family_type: str) -> tuple[str, FieldMap] | None:
    """The table entry for a parsed family, tolerating two spellings.

    prometheus_client's parser strips a lowercase ``_total`` from counter family names, and
    some pipelines lowercase DCGM names (``dcgm_fi_dev_gpu_util``), so the lookup is
    case-insensitive and retries ``<name>_TOTAL`` for counters.

    Returns:
        ``(DCGM field name, FieldMap)`` or None for fields we do not map.
    """
    key = family_name.upper()
    if key in FIELDS:
        return key, FIELDS[key]
    if family_type == "counter" and key + "_TOTAL" in FIELDS:
        return key + "_TOTAL", FIELDS[key + "_TOTAL"]
    return None


def is_blank(value: float, counter: bool) -> bool:
    """True if ``value`` is a DCGM blank / not-supported sentinel (or not a finite number).

    Gauges: anything >= ``DCGM_INT32_BLANK`` (2147483632) is a sentinel: no gauge we map
    (percent, MiB, W, C, MHz, row counts, XID codes) can legitimately reach 2**31.
    Counters (energy in mJ, ECC, PCIe replays) can pass 2**31, so only the int64 and fp64
    sentinels apply: anything >= ``DCGM_FP64_BLANK`` (2**47) is blank. That covers
    ``DCGM_INT64_BLANK`` too; a real energy counter reaches 2**47 mJ only after ~4.5 years
    at 1 kW.
    """
    if not math.isfinite(value):
        return True
    if counter:
        return value >= DCGM_FP64_BLANK
    return value >= DCGM_INT32_BLANK
