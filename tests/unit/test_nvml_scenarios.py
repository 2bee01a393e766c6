"""NvmlSource against the stand-in NVML through the real pynvml ctypes path: known-answer scenarios.

Expected values are computed here from the scenario's NVML-unit numbers (mW, mJ, MHz, percent).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from obsctl.exporters.gpu.catalogue import CLOCK_EVENT_REASONS
from support import stubnvml


def _g(i: int) -> dict[str, str]:
    return {"gpu": str(i), "uuid": stubnvml.h100_uuid(i)}


def test_h100_8x_values(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    s = nvml_env.scrape(nvml_env.source())
    for i in range(8):
        g = _g(i)
        assert s.value("obsctl_gpu_up", **g) == 1
        assert s.value("obsctl_gpu_utilization_ratio", **g) == (87 - i) / 100
        assert s.value("obsctl_gpu_memory_utilization_ratio", **g) == (41 + i) / 100
        assert s.value("obsctl_gpu_memory_used_bytes", **g) == (10 + i) * 2**30
        assert s.value("obsctl_gpu_memory_total_bytes", **g) == 85520809984
        assert s.value("obsctl_gpu_power_watts", **g) == (612345 + i * 1000) / 1000
        assert s.value("obsctl_gpu_power_limit_watts", **g) == 700.0
        assert s.value("obsctl_gpu_energy_joules_total", **g) == (123456789 + i * 1000) / 1000
        assert s.value("obsctl_gpu_temperature_celsius", **g) == 45 + i
        assert s.value("obsctl_gpu_memory_temperature_celsius", **g) == 52 + i
        assert s.value("obsctl_gpu_sm_clock_hertz", **g) == 1980e6
        assert s.value("obsctl_gpu_memory_clock_hertz", **g) == 2619e6
        assert s.value("obsctl_gpu_ecc_errors_total", **g, error_type="corrected") == 3 * i
        assert s.value("obsctl_gpu_pcie_replays_total", **g) == i
        assert s.value("obsctl_gpu_info", **g, model="NVIDIA H100 80GB HBM3", driver_version="550.54.15",
                       pci_bus_id=f"00000000:{stubnvml.H100_BUSES[i]:02X}:00.0", mig_mode="disabled") == 1
        links = [x for x in s.samples("obsctl_gpu_nvlink_link_up") if x.labels["gpu"] == str(i)]
        assert len(links) == 18
    # clock-event reasons: GPU 0 idle (bit 0x1); GPU 1 sw_power_cap (0x4) + sw_thermal_slowdown (0x20)
    active = {(x.labels["gpu"], x.labels["reason"]) for x in s.samples("obsctl_gpu_clock_event_reason_active")
              if x.value == 1}
    assert active == {("0", "gpu_idle"), ("1", "sw_power_cap"), ("1", "sw_thermal_slowdown")}
    assert len(s.samples("obsctl_gpu_clock_event_reason_active")) == 8 * len(CLOCK_EVENT_REASONS)
    # GPU 4: ECC uncorrected 1, rows remapped 2 correctable / 1 uncorrectable; GPU 7 link 5 down
    assert s.value("obsctl_gpu_ecc_errors_total", **_g(4), error_type="uncorrected") == 1
    assert s.value("obsctl_gpu_remapped_rows", **_g(4), cause="correctable") == 2
    assert s.value("obsctl_gpu_remapped_rows", **_g(4), cause="uncorrectable") == 1
    assert s.value("obsctl_gpu_remapped_rows_pending", **_g(4)) == 0
    assert s.value("obsctl_gpu_nvlink_link_up", **_g(7), link="5") == 0
    assert s.value("obsctl_gpu_nvlink_link_up", **_g(7), link="4") == 1
    # PCIe throughput is a slow call: off by default
    assert "obsctl_gpu_pcie_throughput_bytes_per_second" not in s.names()
    assert "obsctl_gpu_xid_errors_total" not in s.names()


def test_pcie_throughput_opt_in(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    s = nvml_env.scrape(nvml_env.source(pcie_throughput=True))
    assert s.value("obsctl_gpu_pcie_throughput_bytes_per_second", **_g(3), direction="tx") == 1500 * 1024
    assert s.value("obsctl_gpu_pcie_throughput_bytes_per_second", **_g(3), direction="rx") == 2500 * 1024


def test_consumer_gpu_unsupported_fields_are_absent(nvml_env):
    nvml_env.write(stubnvml.rtx4090())
    src = nvml_env.source()
    g = {"gpu": "0", "uuid": stubnvml.RTX_UUID}
    for _ in range(2):  # second scrape runs from the NOT_SUPPORTED cache
        s = nvml_env.scrape(src)
        assert s.value("obsctl_gpu_up", **g) == 1
        for absent in ("obsctl_gpu_energy_joules_total", "obsctl_gpu_memory_temperature_celsius",
                       "obsctl_gpu_ecc_errors_total", "obsctl_gpu_remapped_rows",
                       "obsctl_gpu_remapped_rows_pending", "obsctl_gpu_nvlink_link_up",
                       "obsctl_gpu_pcie_replays_total"):  # last one: NO_PERMISSION
            assert absent not in s.names(), absent
        assert s.value("obsctl_gpu_power_watts", **g) == 123.456
        assert s.value("obsctl_gpu_power_limit_watts", **g) == 450.0
        assert s.value("obsctl_gpu_temperature_celsius", **g) == 61
        assert s.value("obsctl_gpu_memory_clock_hertz", **g) == 10501e6
        assert s.value("obsctl_gpu_clock_event_reason_active", **g, reason="sw_power_cap") == 1
        assert s.value("obsctl_gpu_info", **g, model="NVIDIA GeForce RTX 4090", driver_version="550.54.15",
                       pci_bus_id="00000000:01:00.0", mig_mode="unsupported") == 1
    calls_before = nvml_env.lib.nvmlStub_DeviceCallCount(0)
    nvml_env.scrape(src)
    second = nvml_env.lib.nvmlStub_DeviceCallCount(0) - calls_before
    assert second < 12, "NOT_SUPPORTED fields are asked again every scrape"


def test_a100_mig_instances(nvml_env):
    nvml_env.write(stubnvml.a100_mig())
    src = nvml_env.source()
    s = nvml_env.scrape(src)
    g = {"gpu": "0", "uuid": stubnvml.A100_UUID}
    assert s.value("obsctl_gpu_up", **g) == 1
    assert s.value("obsctl_gpu_info", **g, model="NVIDIA A100-SXM4-80GB", driver_version="535.161.08",
                   pci_bus_id="00000000:07:00.0", mig_mode="enabled") == 1
    # whole-GPU memory stays; utilization is NOT_SUPPORTED with MIG on -> absent for GPU 0
    assert s.value("obsctl_gpu_memory_used_bytes", **g) == 21474836480
    assert s.value("obsctl_gpu_utilization_ratio", **g) is None
    inst = {(x.labels["gpu_instance"], x.labels["mig_profile"]): x.value
            for x in s.samples("obsctl_gpu_memory_total_bytes") if "gpu_instance" in x.labels}
    assert inst == {("1", "3g.40gb"): 42144366592, ("9", "1g.10gb"): 10468982784,
                    ("5", "2g.20gb"): 21072183296}  # last: from attributes, ceil(20096 MiB / 1024)
    assert s.value("obsctl_gpu_memory_used_bytes", **g, gpu_instance="1", mig_profile="3g.40gb") == 8589934592
    # MIG series carry the parent's gpu and uuid; no per-instance utilization (NVML: NOT_SUPPORTED)
    assert not [x for x in s.samples("obsctl_gpu_utilization_ratio") if "gpu_instance" in x.labels]
    g1 = {"gpu": "1", "uuid": stubnvml.A100_PLAIN_UUID}
    assert s.value("obsctl_gpu_utilization_ratio", **g1) == 0.5
    assert s.value("obsctl_gpu_info", **g1, model="NVIDIA A100-SXM4-80GB", driver_version="535.161.08",
                   pci_bus_id="00000000:0F:00.0", mig_mode="disabled") == 1
    assert s.value("obsctl_gpu_memory_temperature_celsius", **g1) is None
    procs = src.processes()
    assert procs[stubnvml.A100_UUID] == [100, 101, 200]
    assert procs[f"{stubnvml.A100_UUID}/1"] == [100, 101]
    assert procs[f"{stubnvml.A100_UUID}/9"] == [200]
    assert stubnvml.A100_PLAIN_UUID not in procs  # its process query fails (NOT_SUPPORTED): left out


def test_processes_per_uuid(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    assert src.processes() == {}  # not initialised yet: best effort, no error
    nvml_env.scrape(src)
    procs = src.processes()
    assert procs[stubnvml.h100_uuid(0)] == [4242, 5000]
    assert procs[stubnvml.h100_uuid(1)] == [4243, 5001]
    assert procs[stubnvml.h100_uuid(5)] == []


def test_default_import_path_with_ld_library_path(nvml_env, tmp_path):
    """The unmodified ``import pynvml`` default finds the stub through LD_LIBRARY_PATH (as in production)."""
    nvml_env.write(stubnvml.rtx4090(), reload=False)
    code = textwrap.dedent("""
        import time
        from obsctl.exporters.gpu.nvml import NvmlSource
        src = NvmlSource()
        fams = src.collect(time.monotonic() + 5)
        src.close()
        for f in fams:
            for s in f.samples:
                if s.name in ("obsctl_gpu_up", "obsctl_gpu_power_watts"):
                    print(s.name, s.value)
    """)
    env = {**os.environ, "LD_LIBRARY_PATH": str(nvml_env.so.parent)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["obsctl_gpu_up 1.0", "obsctl_gpu_power_watts 123.456"]


def test_nvlink_error_totals(nvml_env):
    """CRC flit/data, replay and recovery totals per GPU from one field-values call; unsupported types absent."""
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    s = nvml_env.scrape(src)
    for i in range(8):
        got = {t: s.value("obsctl_gpu_nvlink_errors_total", **_g(i), error_type=t)
               for t in ("crc_flit", "crc_data", "replay", "recovery")}
        expected = {"crc_flit": 120000 if i == 6 else i, "crc_data": None if i == 5 else 2 * i,
                    "replay": 900 if i == 6 else 0, "recovery": 1 if i == 6 else 0}
        assert got == expected, i
    # GPU 5's NOT_SUPPORTED type is not asked again: three entries a scrape against GPU 4's four
    lib = nvml_env.lib
    before = [lib.nvmlStub_DeviceCallCount(i) for i in (4, 5)]
    nvml_env.scrape(src)
    after = [lib.nvmlStub_DeviceCallCount(i) for i in (4, 5)]
    assert (after[0] - before[0]) - (after[1] - before[1]) == 1


def test_nvlink_error_totals_absent_without_nvlink(nvml_env):
    nvml_env.write(stubnvml.rtx4090())
    src = nvml_env.source()
    for _ in range(2):
        assert "obsctl_gpu_nvlink_errors_total" not in nvml_env.scrape(src).names()
    assert "nvlink_errors" in src._gpus[0].fields.unsupported  # one call, then never asked again
