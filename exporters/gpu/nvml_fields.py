"""Per-GPU NVML field readers: which pynvml call fills which catalogue series, and the unit conversion.

Each reader takes ``call`` (``call(fn_name, *args)`` runs ``pynvml.<fn_name>(*args)`` and times it;
``call.each(fn_name, handle, args)`` makes one such call per element of ``args``;
``call.each_uint(c_symbol, handle, args)`` calls the C function directly with one reused ``c_uint``
out-parameter, for the per-link calls: same errors, a third of the cost; ``call.field_values(handle, ids)``
is ``nvmlDeviceGetFieldValues`` without pynvml's per-call array type),
the device handle, the per-GPU cache ``st`` (its ``labels`` are the GPU's label dicts) and ``out``, and
appends prometheus_client Samples in base units to ``out`` (only once the whole field was read; Samples
are built with ``tuple.__new__``, not the namedtuple constructor: this is the scrape's hot path).
Readers raise pynvml's ``NVMLError``; the source decides what an error means (absent series, GPU down,
re-init). Conversions follow the NVML API reference
(https://docs.nvidia.com/deploy/nvml-api/): power in milliwatts, energy in millijoules, clocks in
MHz, utilization in percent, PCIe throughput in KB/s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client.samples import Sample

from obsctl.exporters.gpu.catalogue import CLOCK_EVENT_REASONS, NVLINK_ERROR_TYPES

Call = Callable[..., Any]
Out = list  # the list a reader appends prometheus_client Samples to

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
#: NVLink error totals over all of a GPU's links (nvml.h NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL, the
#: fields DCGM reads for its DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL), in NVLINK_ERROR_TYPES order.
NVML_FI_NVLINK_ERROR_TOTALS = (38, 45, 52, 59)  # CRC_FLIT, CRC_DATA, REPLAY, RECOVERY
NVML_AGGREGATE_ECC = 1
NVML_NVLINK_MAX_LINKS = 18  # NVLink links per GPU up to Hopper/Blackwell (pynvml allows 36; probed once)
NVML_MEMORY_V2 = 0x02000028  # pynvml.nvmlMemory_v2: sizeof(nvmlMemory_v2_t) | 2 << 24
# Clock-event reason bits (nvml.h nvmlClocksEventReason*), in CLOCK_EVENT_REASONS order.
REASON_BITS = (0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100)
KIB = 1024
_new = tuple.__new__  # Sample(...) without the namedtuple call overhead (hot path)


def _s(name: str, labels: dict[str, str], value: float) -> Sample:
    return _new(Sample, (name, labels, value, None, None, None))


class GpuLabels:
    """One GPU's label dicts (and its 0/1 Samples), built once per NVML init and reused every scrape.

    Reusing the same dicts keeps the per-sample cost of a scrape low (no merging per sample) and
    lets the exposition renderer's cache hit. Do not mutate them.

    Attributes:
        base: ``{"gpu", "uuid"}``; reasons, ecc, remap, pcie, links: ``base`` plus the one extra label
            (``reason``, ``error_type``, ``cause``, ``direction``, ``link``), in reader order;
            nvlink_errors: ``base`` plus ``error_type`` in NVLINK_ERROR_TYPES order.
    """

    __slots__ = ("base", "ecc", "link_samples", "links", "nvlink_errors", "pcie", "reason_samples", "reasons",
                 "remap")

    def __init__(self, base: dict[str, str]) -> None:
        self.base = base
        self.reasons = tuple({**base, "reason": r} for r in CLOCK_EVENT_REASONS)
        self.ecc = ({**base, "error_type": "corrected"}, {**base, "error_type": "uncorrected"})
        self.remap = ({**base, "cause": "correctable"}, {**base, "cause": "uncorrectable"})
        self.pcie = ({**base, "direction": "tx"}, {**base, "direction": "rx"})
        self.links = tuple({**base, "link": str(i)} for i in range(NVML_NVLINK_MAX_LINKS))
        self.nvlink_errors = tuple({**base, "error_type": t} for t in NVLINK_ERROR_TYPES)
        # 0/1 series: both possible Samples built once (Samples are immutable), picked per scrape.
        self.reason_samples = tuple(_pair("obsctl_gpu_clock_event_reason_active", lab) for lab in self.reasons)
        self.link_samples = tuple(_pair("obsctl_gpu_nvlink_link_up", lab) for lab in self.links)


def _pair(name: str, labels: dict[str, str]) -> tuple[Sample, Sample]:
    return _s(name, labels, 0.0), _s(name, labels, 1.0)


def nvml_code(exc: BaseException) -> int | None:
    """The NVML return code carried by a pynvml ``NVMLError`` (``.value``), else None."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


@dataclass
class FieldCache:
    """What was learnt about one GPU's fields since the last NVML init (dropped on re-init).

    Attributes:
        unsupported: reader keys that answered NOT_SUPPORTED / FUNCTION_NOT_FOUND (not asked again).
        labels: the GPU's label dicts (set by the source before the first read).
        nvlinks: link indexes that answered, probed on first use (None = not probed yet).
        memory_v2: whether nvmlDeviceGetMemoryInfo_v2 works (None = not tried yet).
        event_reasons_fn: the clock-event function name that works on this driver.
        nvlink_errors: indexes into NVML_FI_NVLINK_ERROR_TOTALS of the NVLink error fields still
            asked for (one that answered NOT_SUPPORTED is dropped until the next init).
    """

    unsupported: set[str]
    labels: GpuLabels | None = None
    nvlinks: tuple[int, ...] | None = None
    memory_v2: bool | None = None
    event_reasons_fn: str = "nvmlDeviceGetCurrentClocksEventReasons"
    nvlink_errors: tuple[int, ...] = tuple(range(len(NVML_FI_NVLINK_ERROR_TOTALS)))


def _utilization(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    u = call("nvmlDeviceGetUtilizationRates", h)
    base = st.labels.base
    out += (_new(Sample, ("obsctl_gpu_utilization_ratio", base, u.gpu / 100.0, None, None, None)),
            _new(Sample, ("obsctl_gpu_memory_utilization_ratio", base, u.memory / 100.0, None, None, None)))


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


def _memory(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    m = memory_info(call, h, st)
    base = st.labels.base
    out += (_new(Sample, ("obsctl_gpu_memory_used_bytes", base, float(m.used), None, None, None)),
            _new(Sample, ("obsctl_gpu_memory_total_bytes", base, float(m.total), None, None, None)))


def _power(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    w = call("nvmlDeviceGetPowerUsage", h) / 1000.0
    out.append(_new(Sample, ("obsctl_gpu_power_watts", st.labels.base, w, None, None, None)))


def _power_limit(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    w = call("nvmlDeviceGetEnforcedPowerLimit", h) / 1000.0
    out.append(_new(Sample, ("obsctl_gpu_power_limit_watts", st.labels.base, w, None, None, None)))


def _energy(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    j = call("nvmlDeviceGetTotalEnergyConsumption", h) / 1000.0
    out.append(_new(Sample, ("obsctl_gpu_energy_joules_total", st.labels.base, j, None, None, None)))


def _temperature(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    c = float(call("nvmlDeviceGetTemperature", h, NVML_TEMPERATURE_GPU))
    out.append(_new(Sample, ("obsctl_gpu_temperature_celsius", st.labels.base, c, None, None, None)))


class _FieldError(Exception):
    """A field-value entry answered an error code (mirrors pynvml.NVMLError's ``value``)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _memory_temperature(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    # Only reachable through field values (NVML_FI_DEV_MEMORY_TEMP); HBM parts only.
    (v,) = call.field_values(h, (NVML_FI_DEV_MEMORY_TEMP,))
    if v.nvmlReturn != 0:
        raise _FieldError(v.nvmlReturn)
    c = float(v.value.uiVal)
    out.append(_new(Sample, ("obsctl_gpu_memory_temperature_celsius", st.labels.base, c, None, None, None)))


def _clocks(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    base = st.labels.base
    sm, mem = call.each("nvmlDeviceGetClockInfo", h, (NVML_CLOCK_SM, NVML_CLOCK_MEM))
    out += (_new(Sample, ("obsctl_gpu_sm_clock_hertz", base, sm * 1e6, None, None, None)),
            _new(Sample, ("obsctl_gpu_memory_clock_hertz", base, mem * 1e6, None, None, None)))


def _clock_event_reasons(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    try:
        mask = call(st.event_reasons_fn, h)
    except Exception as exc:  # noqa: BLE001 - older pynvml (AttributeError) or driver: the Throttle name
        if not (isinstance(exc, AttributeError) or nvml_code(exc) == FUNCTION_NOT_FOUND) \
                or st.event_reasons_fn.endswith("ThrottleReasons"):
            raise
        st.event_reasons_fn = "nvmlDeviceGetCurrentClocksThrottleReasons"
        mask = call(st.event_reasons_fn, h)
    out += [pair[1] if mask & bit else pair[0] for pair, bit in zip(st.labels.reason_samples, REASON_BITS, strict=True)]


def _ecc(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    # Aggregate (lifetime) counts: volatile ones reset on driver reload and would look like counter resets.
    # 0 corrected, 1 uncorrected (nvmlMemoryErrorType_t); both read before either is published.
    corr = float(call("nvmlDeviceGetTotalEccErrors", h, 0, NVML_AGGREGATE_ECC))
    unc = float(call("nvmlDeviceGetTotalEccErrors", h, 1, NVML_AGGREGATE_ECC))
    labels = st.labels.ecc
    out += (_new(Sample, ("obsctl_gpu_ecc_errors_total", labels[0], corr, None, None, None)),
            _new(Sample, ("obsctl_gpu_ecc_errors_total", labels[1], unc, None, None, None)))


def _remapped_rows(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    corr, unc, pending, failed = call("nvmlDeviceGetRemappedRows", h)
    lab = st.labels
    out += (_new(Sample, ("obsctl_gpu_remapped_rows", lab.remap[0], float(corr), None, None, None)),
            _new(Sample, ("obsctl_gpu_remapped_rows", lab.remap[1], float(unc), None, None, None)),
            _new(Sample, ("obsctl_gpu_remapped_rows_pending", lab.base, 1.0 if pending else 0.0,
                          None, None, None)),
            _new(Sample, ("obsctl_gpu_remapped_rows_failed", lab.base, 1.0 if failed else 0.0, None, None, None)))


def _pcie_replays(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    n = float(call("nvmlDeviceGetPcieReplayCounter", h))
    out.append(_new(Sample, ("obsctl_gpu_pcie_replays_total", st.labels.base, n, None, None, None)))


def _nvlink(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    labels = st.labels.links
    if st.nvlinks is None:  # probe once per init: links past the GPU's count answer an error
        links, found = [], []
        for link in range(NVML_NVLINK_MAX_LINKS):
            try:
                up = call("nvmlDeviceGetNvLinkState", h, link)
            except Exception as exc:  # noqa: BLE001
                if nvml_code(exc) in (NOT_SUPPORTED, INVALID_ARGUMENT, FUNCTION_NOT_FOUND):
                    continue
                raise
            links.append(link)
            found.append(_s("obsctl_gpu_nvlink_link_up", labels[link], 1.0 if up else 0.0))
        st.nvlinks = tuple(links)
        if not links:
            raise _FieldError(NOT_SUPPORTED)
        out += found
        return
    states = call.each_uint("nvmlDeviceGetNvLinkState", h, st.nvlinks)  # all read, then published
    pairs = st.labels.link_samples
    out += [pairs[link][1] if up else pairs[link][0] for link, up in zip(st.nvlinks, states, strict=True)]


#: The member of nvmlValue_t that holds a field value, by its valueType (nvml.h nvmlValueType_t).
_VALUE_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def _nvlink_errors(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    """CRC flit, CRC data, replay and recovery error totals over the GPU's links: one field-values call.

    Each entry answers on its own: NOT_SUPPORTED (no NVLink, or a counter this GPU does not keep)
    leaves that type absent and it is not asked again until the next init; NO_PERMISSION leaves it
    absent this scrape; any other code fails the whole field (the source decides: absent, GPU down).
    """
    wanted = st.nvlink_errors
    values = call.field_values(h, tuple(NVML_FI_NVLINK_ERROR_TOTALS[k] for k in wanted))
    labels, found, keep = st.labels.nvlink_errors, [], []
    for k, v in zip(wanted, values, strict=True):
        code = v.nvmlReturn
        if code == 0:
            n = float(getattr(v.value, _VALUE_MEMBER[v.valueType]))
            found.append(_new(Sample, ("obsctl_gpu_nvlink_errors_total", labels[k], n, None, None, None)))
        elif code not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND, NO_PERMISSION):
            raise _FieldError(code)
        if code not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
            keep.append(k)
    st.nvlink_errors = tuple(keep)
    if not keep:
        raise _FieldError(NOT_SUPPORTED)
    out += found


def _pcie_throughput(call: Call, h: Any, st: FieldCache, out: Out) -> None:
    # Blocks ~20 ms per direction on real drivers: only read when enabled (pcie_throughput=True).
    values = call.each("nvmlDeviceGetPcieThroughput", h, (0, 1))  # NVML_PCIE_UTIL_TX_BYTES, _RX_BYTES
    out += [_new(Sample, ("obsctl_gpu_pcie_throughput_bytes_per_second", labels, float(v) * KIB, None, None, None))
            for labels, v in zip(st.labels.pcie, values, strict=True)]


#: (key, reader) in scrape order; keys name the NOT_SUPPORTED cache entries.
READERS: tuple[tuple[str, Callable[[Call, Any, FieldCache, Out], None]], ...] = (
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
    ("nvlink_errors", _nvlink_errors),
)
SLOW_READERS = (("pcie_throughput", _pcie_throughput),)
