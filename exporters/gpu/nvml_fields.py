"""Per-GPU NVML field readers: which pynvml call fills which catalogue series, and the unit conversion.

Each reader takes ``call`` (``call(fn_name, *args)`` runs ``pynvml.<fn_name>(*args)`` and times it),
the device handle and the per-GPU cache ``state``, and returns ``(metric_name, extra_labels, value)``
triples in base units. Readers raise pynvml's ``NVMLError``; the source decides what an error means
(absent series, GPU down, re-init). Conversions follow the NVML API reference
(https://docs.nvidia.com/deploy/nvml-api/): power in milliwatts, energy in millijoules, clocks in
MHz, utilization in percent, PCIe throughput in KB/s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from obsctl.exporters.gpu.catalogue import CLOCK_EVENT_REASONS

Sample = tuple[str, dict[str, str], float]
Call = Callable[..., Any]

# NVML return codes (nvml.h; same values as pynvml.NVML_ERROR_*).
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
INVALID_ARGUMENT = 2
FUNCTION_NOT_FOUND = 13
ARGUMENT_VERSION_MISMATCH = 25

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_AGGREGATE_ECC = 1
NVML_NVLINK_MAX_LINKS = 18  # NVLink links per GPU up to Hopper/Blackwell (pynvml allows 36; probed once)
NVML_MEMORY_V2 = 0x02000028  # pynvml.nvmlMemory_v2: sizeof(nvmlMemory_v2_t) | 2 << 24
# Clock-event reason bits (nvml.h nvmlClocksEventReason*), in CLOCK_EVENT_REASONS order.
REASON_BITS = (0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100)
KIB = 1024
# Constant label dicts, so the source can cache the merged per-GPU label dicts by identity.
_REASON_LABELS = tuple({"reason": r} for r in CLOCK_EVENT_REASONS)
_LINK_LABELS = tuple({"link": str(i)} for i in range(64))
_ECC_LABELS = ({"error_type": "corrected"}, {"error_type": "uncorrected"})
_REMAP_LABELS = ({"cause": "correctable"}, {"cause": "uncorrectable"})
_PCIE_LABELS = ({"direction": "tx"}, {"direction": "rx"})
NO_LABELS: dict[str, str] = {}


def nvml_code(exc: BaseException) -> int | None:
    """The NVML return code carried by a pynvml ``NVMLError`` (``.value``), else None."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


@dataclass
class FieldCache:
    """What was learnt about one GPU's fields since the last NVML init (dropped on re-init).

    Attributes:
        unsupported: reader keys that answered NOT_SUPPORTED / FUNCTION_NOT_FOUND (not asked again).
        nvlinks: link indexes that answered, probed on first use (None = not probed yet).
        memory_v2: whether nvmlDeviceGetMemoryInfo_v2 works (None = not tried yet).
        event_reasons_fn: the clock-event function name that works on this driver.
    """

    unsupported: set[str]
    nvlinks: tuple[int, ...] | None = None
    memory_v2: bool | None = None
    event_reasons_fn: str = "nvmlDeviceGetCurrentClocksEventReasons"


def _utilization(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    u = call("nvmlDeviceGetUtilizationRates", h)
    return [("obsctl_gpu_utilization_ratio", NO_LABELS, u.gpu / 100.0),
            ("obsctl_gpu_memory_utilization_ratio", NO_LABELS, u.memory / 100.0)]


def memory_info(call: Call, h: Any, st: FieldCache) -> Any:
    """Memory info, v2 (used excludes driver-reserved memory) where the driver has it, else v1."""
    if st.memory_v2 is not False:
        try:
            m = call("nvmlDeviceGetMemoryInfo", h, NVML_MEMORY_V2)
            st.memory_v2 = True
            return m
        except Exception as exc:  # noqa: BLE001 - classified by code below
            if nvml_code(exc) not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH):
                raise
            st.memory_v2 = False
    return call("nvmlDeviceGetMemoryInfo", h)


def _memory(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    m = memory_info(call, h, st)
    return [("obsctl_gpu_memory_used_bytes", NO_LABELS, float(m.used)),
            ("obsctl_gpu_memory_total_bytes", NO_LABELS, float(m.total))]


def _power(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_power_watts", NO_LABELS, call("nvmlDeviceGetPowerUsage", h) / 1000.0)]


def _power_limit(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_power_limit_watts", NO_LABELS, call("nvmlDeviceGetEnforcedPowerLimit", h) / 1000.0)]


def _energy(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_energy_joules_total", NO_LABELS, call("nvmlDeviceGetTotalEnergyConsumption", h) / 1000.0)]


def _temperature(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_temperature_celsius", NO_LABELS,
             float(call("nvmlDeviceGetTemperature", h, NVML_TEMPERATURE_GPU)))]


class _FieldError(Exception):
    """A field-value entry answered an error code (mirrors pynvml.NVMLError's ``value``)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _memory_temperature(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    # Only reachable through field values (NVML_FI_DEV_MEMORY_TEMP); HBM parts only.
    (v,) = call("nvmlDeviceGetFieldValues", h, [NVML_FI_DEV_MEMORY_TEMP])
    if v.nvmlReturn != 0:
        raise _FieldError(v.nvmlReturn)
    return [("obsctl_gpu_memory_temperature_celsius", NO_LABELS, float(v.value.uiVal))]


def _clocks(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_sm_clock_hertz", NO_LABELS, call("nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM) * 1e6),
            ("obsctl_gpu_memory_clock_hertz", NO_LABELS, call("nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM) * 1e6)]


def _clock_event_reasons(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    try:
        mask = call(st.event_reasons_fn, h)
    except Exception as exc:  # noqa: BLE001 - older pynvml (AttributeError) or driver: the Throttle name
        if not (isinstance(exc, AttributeError) or nvml_code(exc) == FUNCTION_NOT_FOUND) \
                or st.event_reasons_fn.endswith("ThrottleReasons"):
            raise
        st.event_reasons_fn = "nvmlDeviceGetCurrentClocksThrottleReasons"
        mask = call(st.event_reasons_fn, h)
    return [("obsctl_gpu_clock_event_reason_active", labels, 1.0 if mask & bit else 0.0)
            for labels, bit in zip(_REASON_LABELS, REASON_BITS)]


def _ecc(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    # Aggregate (lifetime) counts: volatile ones reset on driver reload and would look like counter resets.
    out = []
    for code, labels in enumerate(_ECC_LABELS):  # 0 corrected, 1 uncorrected (nvmlMemoryErrorType_t)
        n = call("nvmlDeviceGetTotalEccErrors", h, code, NVML_AGGREGATE_ECC)
        out.append(("obsctl_gpu_ecc_errors_total", labels, float(n)))
    return out


def _remapped_rows(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    corr, unc, pending, failed = call("nvmlDeviceGetRemappedRows", h)
    return [("obsctl_gpu_remapped_rows", _REMAP_LABELS[0], float(corr)),
            ("obsctl_gpu_remapped_rows", _REMAP_LABELS[1], float(unc)),
            ("obsctl_gpu_remapped_rows_pending", NO_LABELS, 1.0 if pending else 0.0),
            ("obsctl_gpu_remapped_rows_failed", NO_LABELS, 1.0 if failed else 0.0)]


def _pcie_replays(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    return [("obsctl_gpu_pcie_replays_total", NO_LABELS, float(call("nvmlDeviceGetPcieReplayCounter", h)))]


def _nvlink(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    if st.nvlinks is None:  # probe once per init: links past the GPU's count answer an error
        links, out = [], []
        for link in range(NVML_NVLINK_MAX_LINKS):
            try:
                up = call("nvmlDeviceGetNvLinkState", h, link)
            except Exception as exc:  # noqa: BLE001
                if nvml_code(exc) in (NOT_SUPPORTED, INVALID_ARGUMENT, FUNCTION_NOT_FOUND):
                    continue
                raise
            links.append(link)
            out.append(("obsctl_gpu_nvlink_link_up", _LINK_LABELS[link], 1.0 if up else 0.0))
        st.nvlinks = tuple(links)
        if not links:
            raise _FieldError(NOT_SUPPORTED)
        return out
    return [("obsctl_gpu_nvlink_link_up", _LINK_LABELS[link],
             1.0 if call("nvmlDeviceGetNvLinkState", h, link) else 0.0) for link in st.nvlinks]


def _pcie_throughput(call: Call, h: Any, st: FieldCache) -> list[Sample]:
    # Blocks ~20 ms per direction on real drivers: only read when enabled (pcie_throughput=True).
    return [("obsctl_gpu_pcie_throughput_bytes_per_second", labels,
             float(call("nvmlDeviceGetPcieThroughput", h, counter)) * KIB)
            for counter, labels in enumerate(_PCIE_LABELS)]


#: (key, reader) in scrape order; keys name the NOT_SUPPORTED cache entries.
READERS: tuple[tuple[str, Callable[[Call, Any, FieldCache], list[Sample]]], ...] = (
    ("utilization", _utilization),
    ("memory", _memory),
    ("power", _power),
    ("power_limit", _power_limit),
    ("energy", _energy),
    ("temperature", _temperature),
    ("memory_temperature", _memory_temperature),
    ("clocks", _clocks),
    ("clock_event_reasons", _clock_event_reasons),
    ("ecc", _ecc),
    ("remapped_rows", _remapped_rows),
    ("pcie_replays", _pcie_replays),
    ("nvlink", _nvlink),
)
SLOW_READERS = (("pcie_throughput", _pcie_throughput),)
