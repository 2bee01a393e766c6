"""DCGM mapping: the real public dcgm-exporter dump (../shared/fixtures/dcgm/datadog-t4.txt)
and a synthetic MIG dump, with expected values computed by hand from the text."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from obsctl.exporters.gpu import dcgm_fields as F
from obsctl.exporters.gpu.catalogue import BY_NAME
from obsctl.exporters.gpu.dcgm import XidTracker, parse_dcgm, snapshot_families
from obsctl.exporters.gpu.errors import GpuSourceError

T4_A = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"  # first capture: 460.106.00
T4_B = "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"  # second capture: 470.182.03
A10G = "GPU-abc"
MIB = 1048576


@pytest.fixture(scope="module")
def t4_text(fixtures_dir: Path) -> str:
    path = fixtures_dir / "dcgm" / "datadog-t4.txt"
    if not path.is_file():
        pytest.fail(f"missing shared fixture {path} (expected ../shared/fixtures beside the checkout)")
    return path.read_text()


class _Reg:
    def __init__(self, metrics):
        self._m = metrics

    def collect(self):
        return self._m


def registry_of(text: str, xids: XidTracker | None = None) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(_Reg(snapshot_families(parse_dcgm(text), xids or XidTracker()).metrics()))
    return reg


def test_parser_quirk_counter_samples_renamed(t4_text: str) -> None:
    # The reason dcgm.py keys on family names: the parser appends _total to counter samples.
    fams = {f.name: f for f in text_string_to_metric_families(t4_text)}
    energy = fams["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert energy.type == "counter"
    assert energy.samples[0].name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total"
    assert len(fams) == 38  # README: 38 families; NOTE comments and empty HELP accepted


def test_t4_fixture_known_values(t4_text: str) -> None:
    reg = registry_of(t4_text)
    v = reg.get_sample_value
    a = {"gpu": "0", "uuid": T4_A}
    b = {"gpu": "0", "uuid": T4_B}
    # MHz -> Hz: 300 MHz, 405 MHz
    assert v("obsctl_gpu_sm_clock_hertz", a) == 300e6
    assert v("obsctl_gpu_memory_clock_hertz", a) == 405e6
    assert v("obsctl_gpu_temperature_celsius", a) == 25
    assert v("obsctl_gpu_power_watts", a) == pytest.approx(8.969)
    # mJ -> J: 128996013 mJ = 128996.013 J
    assert v("obsctl_gpu_energy_joules_total", a) == pytest.approx(128996.013)
    assert v("obsctl_gpu_pcie_replays_total", a) == 0
    assert v("obsctl_gpu_utilization_ratio", a) == 0
    assert v("obsctl_gpu_memory_utilization_ratio", a) == 0
    # MiB -> bytes: used 0; total = used 0 + free 15109 MiB (no FB_TOTAL for this GPU)
    assert v("obsctl_gpu_memory_used_bytes", a) == 0
    assert v("obsctl_gpu_memory_total_bytes", a) == 15109 * MIB
    # second GPU: FB_TOTAL 15109 MiB wins over the copied FB_RESERVED; power limit 70 W
    assert v("obsctl_gpu_memory_total_bytes", b) == 15109 * MIB
    assert v("obsctl_gpu_power_limit_watts", b) == 70
    # throttle reasons bitmask 1 = gpu_idle only
    assert v("obsctl_gpu_clock_event_reason_active", {**b, "reason": "gpu_idle"}) == 1
    assert v("obsctl_gpu_clock_event_reason_active", {**b, "reason": "sw_power_cap"}) == 0
    # profiling field already a ratio: 0.000003
    assert v("obsctl_gpu_dram_active_ratio", {"gpu": "0", "uuid": A10G}) == pytest.approx(3e-6)
    # identity from labels; three GPUs share gpu="0" (hand-assembled file) and stay distinct by uuid
    assert v("obsctl_gpu_info", {**a, "model": "Tesla T4", "driver_version": "460.106.00",
                                 "pci_bus_id": "", "mig_mode": "disabled"}) == 1
    assert v("obsctl_gpu_info", {"gpu": "0", "uuid": A10G, "model": "NVIDIA A10G", "driver_version": "550.144.03",
                                 "pci_bus_id": "", "mig_mode": "disabled"}) == 1
    for u in (T4_A, T4_B, A10G):
        assert v("obsctl_gpu_up", {"gpu": "0", "uuid": u}) == 1
    # XID code 0 = no error: no xid series at all
    assert v("obsctl_gpu_xid_errors_total", {**a, "xid": "0"}) is None
    # not reported for this GPU -> absent, never 0
    assert v("obsctl_gpu_memory_temperature_celsius", a) is None
    assert v("obsctl_gpu_power_limit_watts", a) is None


def test_t4_fixture_skips_unlabelled_dummies_and_unmapped(t4_text: str) -> None:
    snap = parse_dcgm(t4_text)
    # 9 mapped fields appear only as unlabelled dummy series (no UUID): remapped rows x2,
    # row-remap failure, memory temp, SM active, SM occupancy, tensor active, PCIe rx/tx bytes
    assert snap.unlabelled == 9
    assert set(snap.gpus) == {T4_A, T4_B, A10G}
    names = {f.name for f in snapshot_families(snap, XidTracker()).metrics()}
    assert "obsctl_gpu_sm_active_ratio" not in names
    assert "obsctl_gpu_remapped_rows" not in names
    assert "obsctl_gpu_pcie_throughput_bytes_per_second" not in names


def test_t4_fixture_pod_labels(t4_text: str) -> None:
    snap = parse_dcgm(t4_text)
    [(unit, pods)] = snap.pods.items()
    assert unit.uuid == A10G
    assert (pods[0].namespace, pods[0].pod, pods[0].container) == ("ray-llm", "ray-1111111", "ray-worker")
    assert pods[0].owner == "ray-llm/ray-1111111"


def test_every_mapped_name_is_in_the_catalogue() -> None:
    for fmap in F.FIELDS.values():
        assert fmap.canonical in BY_NAME


# A synthetic dump in dcgm-exporter 3.x/4.x format (label layout as quoted in
# NVIDIA/dcgm-exporter issues #544 and #713), built to exercise what the T4 file lacks:
# MIG instances, blank sentinels, old/new label spellings, lowercase names, repeated families.
MIG_DUMP = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:17:00.0",device="nvidia0",modelName="NVIDIA A100 80GB PCIe",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="n1",DCGM_FI_DRIVER_VERSION="535.154.05",container="vllm",namespace="serving",pod="llm-0"} 1410
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:17:00.0",device="nvidia0",modelName="NVIDIA A100 80GB PCIe",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2",Hostname="n1",DCGM_FI_DRIVER_VERSION="535.154.05",container="",namespace="",pod=""} 1410
DCGM_FI_DEV_SM_CLOCK{gpu="1",uuid="GPU-bbbb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="n1",container_name="trainer",pod_name="train-7",pod_namespace="research"} 1980
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 250.500000
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2"} 250.500000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 5000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2"} 5000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",uuid="GPU-bbbb"} 2147483640
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 1024
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2"} 2048
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa"} 3072
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 39936
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2"} 38912
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 0.250000
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-aaaa",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2"} 0.500000
DCGM_FI_PROF_SM_ACTIVE{gpu="1",uuid="GPU-bbbb"} 140737488355328.000000
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="1",uuid="GPU-bbbb"} 2147483632
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="1",uuid="GPU-bbbb"} 87
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{gpu="1",uuid="GPU-bbbb"} 9223372036854775792
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="1",uuid="GPU-bbbb",err_code="79",err_msg="GPU has fallen off the bus"} 79
# HELP dcgm_fi_dev_ecc_dbe_agg_total Total double-bit persistent ECC errors.
# TYPE dcgm_fi_dev_ecc_dbe_agg_total counter
dcgm_fi_dev_ecc_dbe_agg_total{gpu="1",uuid="GPU-bbbb"} 2
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="1",uuid="GPU-bbbb"} 612.250000"""


def test_mig_device_fields_once_per_gpu_instance_fields_per_instance() -> None:
    reg = registry_of(MIG_DUMP)
    v = reg.get_sample_value
    gpu0 = {"gpu": "0", "uuid": "GPU-aaaa"}
    i1 = {**gpu0, "gpu_instance": "1", "mig_profile": "3g.40gb"}
    i2 = {**gpu0, "gpu_instance": "2", "mig_profile": "4g.40gb"}
    # device-level, repeated on both instances: once per GPU, no MIG labels
    assert v("obsctl_gpu_sm_clock_hertz", gpu0) == 1410e6
    assert v("obsctl_gpu_sm_clock_hertz", i1) is None
    assert v("obsctl_gpu_power_watts", gpu0) == 250.5
    assert v("obsctl_gpu_energy_joules_total", gpu0) == 5000.0
    samples = [s for m in reg.collect() for s in m.samples if s.name == "obsctl_gpu_energy_joules_total"
               and s.labels["uuid"] == "GPU-aaaa"]
    assert len(samples) == 1  # not counted twice
    # per instance: FB_USED MiB -> bytes; the whole-GPU 3072 MiB row is dropped (no double count)
    assert v("obsctl_gpu_memory_used_bytes", i1) == 1024 * MIB
    assert v("obsctl_gpu_memory_used_bytes", i2) == 2048 * MIB
    assert v("obsctl_gpu_memory_used_bytes", gpu0) is None
    assert v("obsctl_gpu_memory_total_bytes", i1) == (1024 + 39936) * MIB
    assert v("obsctl_gpu_memory_total_bytes", i2) == (2048 + 38912) * MIB
    assert v("obsctl_gpu_sm_active_ratio", i1) == 0.25
    assert v("obsctl_gpu_sm_active_ratio", i2) == 0.5
    assert v("obsctl_gpu_info", {**gpu0, "model": "NVIDIA A100 80GB PCIe", "driver_version": "535.154.05",
                                 "pci_bus_id": "00000000:17:00.0", "mig_mode": "enabled"}) == 1


def test_blank_sentinels_absent_counters_keep_large_values() -> None:
    reg = registry_of(MIG_DUMP)
    v = reg.get_sample_value
    gpu1 = {"gpu": "1", "uuid": "GPU-bbbb"}
    assert v("obsctl_gpu_temperature_celsius", gpu1) is None  # DCGM_INT32_BLANK
    assert v("obsctl_gpu_memory_temperature_celsius", gpu1) is None  # DCGM_INT64_BLANK
    assert v("obsctl_gpu_sm_active_ratio", gpu1) is None  # DCGM_FP64_BLANK
    # a counter in the int32-blank range is a real value: 2147483640 mJ = 2147483.64 J
    assert v("obsctl_gpu_energy_joules_total", gpu1) == pytest.approx(2147483.64)
    assert v("obsctl_gpu_utilization_ratio", gpu1) == pytest.approx(0.87)
    assert parse_dcgm(MIG_DUMP).blanks == 3


def test_label_spellings_lowercase_names_and_repeated_family() -> None:
    reg = registry_of(MIG_DUMP)
    v = reg.get_sample_value
    gpu1 = {"gpu": "1", "uuid": "GPU-bbbb"}
    assert v("obsctl_gpu_sm_clock_hertz", gpu1) == 1980e6  # lowercase uuid label
    # lowercase counter whose "_total" the parser strips: still DCGM_FI_DEV_ECC_DBE_AGG_TOTAL
    assert v("obsctl_gpu_ecc_errors_total", {**gpu1, "error_type": "uncorrected"}) == 2
    assert v("obsctl_gpu_power_watts", gpu1) == 612.25  # second block of the same family
    snap = parse_dcgm(MIG_DUMP)
    pods = {(u.uuid, u.gpu_instance): [(p.namespace, p.pod, p.container) for p in ps] for u, ps in snap.pods.items()}
    assert pods == {("GPU-aaaa", "1"): [("serving", "llm-0", "vllm")],
                    ("GPU-bbbb", ""): [("research", "train-7", "trainer")]}


def test_xid_is_last_code_not_count() -> None:
    now = [1000.0]
    xids = XidTracker(clock=lambda: now[0])
    gpu1 = {"gpu": "1", "uuid": "GPU-bbbb"}
    reg = registry_of(MIG_DUMP, xids)
    assert reg.get_sample_value("obsctl_gpu_xid_errors_total", {**gpu1, "xid": "79"}) == 1
    assert reg.get_sample_value("obsctl_gpu_xid_last_seen_timestamp_seconds", {**gpu1, "xid": "79"}) == 1000.0
    # same code on the next scrape: not a new error (the field is the last code)
    now[0] = 1015.0
    reg = registry_of(MIG_DUMP, xids)
    assert reg.get_sample_value("obsctl_gpu_xid_errors_total", {**gpu1, "xid": "79"}) == 1
    # code changes to 48, then back to 79: one more each, stamped when seen
    now[0] = 1030.0
    reg = registry_of(MIG_DUMP.replace("} 79", "} 48"), xids)
    assert reg.get_sample_value("obsctl_gpu_xid_errors_total", {**gpu1, "xid": "48"}) == 1
    now[0] = 1045.0
    reg = registry_of(MIG_DUMP, xids)
    assert reg.get_sample_value("obsctl_gpu_xid_errors_total", {**gpu1, "xid": "79"}) == 2
    assert reg.get_sample_value("obsctl_gpu_xid_last_seen_timestamp_seconds", {**gpu1, "xid": "79"}) == 1045.0
    assert reg.get_sample_value("obsctl_gpu_xid_last_seen_timestamp_seconds", {**gpu1, "xid": "48"}) == 1030.0


@pytest.mark.parametrize("body, why", [
    ("<!DOCTYPE html><html><body>login</body></html>", "HTML"),
    ("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-x\"} not-a-number\n", "not Prometheus text"),
    ("\x00\x01garbage \x02\n", "not Prometheus text"),
    ("# HELP node_load1 x\n# TYPE node_load1 gauge\nnode_load1 0.5\n", "no DCGM_"),
    ("", "no DCGM_"),
])
def test_bad_bodies_raise_bad_response(body: str, why: str) -> None:
    with pytest.raises(GpuSourceError) as err:
        parse_dcgm(body)
    assert err.value.reason == "dcgm_bad_response"
    assert why in str(err.value)


def test_one_bad_line_rejects_the_whole_response(t4_text: str) -> None:
    # the parser has already yielded earlier families when it hits the bad line; we serve none
    broken = t4_text.replace("DCGM_FI_DEV_GPU_TEMP{", "DCGM_FI_DEV_GPU_TEMP {{", 1)
    with pytest.raises(GpuSourceError):
        parse_dcgm(broken)


def test_is_blank_boundaries() -> None:
    assert F.is_blank(F.DCGM_INT32_BLANK, counter=False)
    assert not F.is_blank(F.DCGM_INT32_BLANK - 1, counter=False)
    assert not F.is_blank(F.DCGM_INT32_BLANK, counter=True)
    assert F.is_blank(F.DCGM_FP64_BLANK, counter=True)
    assert F.is_blank(float(F.DCGM_INT64_BLANK), counter=True)
    assert F.is_blank(float("nan"), counter=False)


@pytest.mark.parametrize("field, canonical, divisor", [
    ("DCGM_FI_DEV_GPU_UTIL", "obsctl_gpu_utilization_ratio", 100),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "obsctl_gpu_energy_joules_total", 1000),
])
def test_unit_conversion_is_the_exact_decimal(field: str, canonical: str, divisor: int) -> None:
    """57 % is published as 0.57, not 0.5700000000000001: each value's exposition text
    is the Go-style shortest form of the decimal quotient, computed here with Decimal."""
    from decimal import Decimal

    from prometheus_client.utils import floatToGoString

    from obsctl.exporters.exposition import TextRenderer

    raws = list(range(0, 101)) + [123457, 128996013]
    body = "".join(f'{field}{{gpu="{i}",UUID="GPU-{i}"}} {raw}\n' for i, raw in enumerate(raws))
    rendered = TextRenderer().render(snapshot_families(parse_dcgm(body), XidTracker()).metrics()).decode()
    for i, raw in enumerate(raws):
        expected = float(Decimal(raw) / Decimal(divisor))
        line = next(ln for ln in rendered.splitlines() if ln.startswith(f'{canonical}{{gpu="{i}",'))
        assert line.rsplit(" ", 1)[1] == floatToGoString(expected), line
    assert f'{canonical}{{gpu="57",uuid="GPU-57"}} {"0.57" if divisor == 100 else "0.057"}' in rendered


NVLINK_DUMP = """\
# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL Total number of NVLink flow-control CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-nv0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 120000
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-nv1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 9223372036854775794
# HELP DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL Total number of NVLink data CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-nv0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 4
# HELP DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL Total number of NVLink retries.
# TYPE DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-nv0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 900
# HELP dcgm_fi_dev_nvlink_recovery_error_count_total Total number of NVLink recovery errors.
# TYPE dcgm_fi_dev_nvlink_recovery_error_count_total counter
dcgm_fi_dev_nvlink_recovery_error_count_total{gpu="0",UUID="GPU-nv0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 1
"""


def test_nvlink_error_totals_map_by_field_name() -> None:
    """The four DCGM NVLink error totals fill obsctl_gpu_nvlink_errors_total{error_type}; a blank is absent."""
    v = registry_of(NVLINK_DUMP).get_sample_value
    gpu0, gpu1 = {"gpu": "0", "uuid": "GPU-nv0"}, {"gpu": "1", "uuid": "GPU-nv1"}
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu0, "error_type": "crc_flit"}) == 120000
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu0, "error_type": "crc_data"}) == 4
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu0, "error_type": "replay"}) == 900
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu0, "error_type": "recovery"}) == 1  # lowercase, _total stripped
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu1, "error_type": "crc_flit"}) is None  # DCGM_INT64_BLANK + 4
    assert v("obsctl_gpu_nvlink_errors_total", {**gpu1, "error_type": "replay"}) is None  # not in the response
