"""NvmlSource fault behaviour against the stand-in NVML (real pynvml ctypes path)."""

from __future__ import annotations

import functools
import shutil
import threading
import time

import pytest

from obsctl.exporters.gpu import nvml
from obsctl.exporters.gpu.errors import GpuSourceError
from obsctl.exporters.gpu.xid_events import XidWatcher
from support import stubnvml
from support.nvml_fixtures import Scrape


def _g(i: int) -> dict[str, str]:
    return {"gpu": str(i), "uuid": stubnvml.h100_uuid(i)}


def _with(text: str, gpu: int, line: str) -> str:
    """Add a directive to GPU ``gpu`` of a scenario (the last one of a field wins)."""
    blocks = text.split("\ngpu\n")
    blocks[gpu + 1] += "\n" + line + "\n"
    return "\ngpu\n".join(blocks)


@pytest.mark.parametrize("code,reason", [(15, "gpu_is_lost"), (999, "unknown")])
def test_gpu_lost_mid_scrape_then_back(nvml_env, code, reason):
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    assert nvml_env.scrape(src).value("obsctl_gpu_up", **_g(3)) == 1
    # GPU 3 fails part-way through its fields (power is read after utilization and memory)
    nvml_env.write(_with(stubnvml.h100_8x(), 3, f"power err={code}"))
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(3)) == 0
    assert src.last_gpu_errors == {"3": reason}
    assert s.value("obsctl_gpu_utilization_ratio", **_g(3)) is None  # partial series dropped
    assert s.value("obsctl_gpu_info", **_g(3), model="NVIDIA H100 80GB HBM3", driver_version="550.54.15",
                   pci_bus_id="00000000:5D:00.0", mig_mode="disabled") == 1  # identity kept
    for i in (0, 1, 2, 4, 5, 6, 7):
        assert s.value("obsctl_gpu_up", **_g(i)) == 1
        assert s.value("obsctl_gpu_power_watts", **_g(i)) == (612345 + i * 1000) / 1000
    # whole device gone: the re-init cannot even get its handle; uuid is remembered
    nvml_env.write(_with(stubnvml.h100_8x(), 3, f"lost err={code}"))
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(3)) == 0
    assert s.value("obsctl_gpu_up", **_g(0)) == 1
    # the fault clears: next scrape re-initialises and GPU 3 is served again
    nvml_env.write(stubnvml.h100_8x())
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(3)) == 1
    assert s.value("obsctl_gpu_power_watts", **_g(3)) == 615.345
    assert src.last_gpu_errors == {}


@pytest.mark.parametrize("code,reason", [(9, "driver_not_loaded"), (18, "lib_rm_version_mismatch")])
def test_init_failure_then_recovery(nvml_env, code, reason):
    nvml_env.write(stubnvml.h100_8x() + f"init_error {code}\n")
    src = nvml_env.source()
    for _ in range(2):  # raised on every scrape until the fault clears, never a crash
        with pytest.raises(GpuSourceError) as err:
            nvml_env.scrape(src)
        assert err.value.reason == reason
    nvml_env.write(stubnvml.h100_8x())
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(0)) == 1


def test_driver_unloaded_while_running(nvml_env):
    nvml_env.write(stubnvml.rtx4090())
    src = nvml_env.source()
    g = {"gpu": "0", "uuid": stubnvml.RTX_UUID}
    assert nvml_env.scrape(src).value("obsctl_gpu_up", **g) == 1
    nvml_env.write(stubnvml.rtx4090().replace("util 33 12", "util err=9") + "init_error 9\n")
    assert nvml_env.scrape(src).value("obsctl_gpu_up", **g) == 0  # this scrape: GPU down
    with pytest.raises(GpuSourceError) as err:  # next: re-init fails, whole source unavailable
        nvml_env.scrape(src)
    assert err.value.reason == "driver_not_loaded"
    nvml_env.write(stubnvml.rtx4090())
    assert nvml_env.scrape(src).value("obsctl_gpu_up", **g) == 1


def test_reinit_is_rate_limited(nvml_env):
    nvml_env.write(stubnvml.h100_8x() + "init_error 9\n")
    src = nvml_env.source(reinit_interval=3600)
    with pytest.raises(GpuSourceError):
        nvml_env.scrape(src)
    calls = nvml_env.lib.nvmlStub_CallCount()
    nvml_env.write(stubnvml.h100_8x())
    with pytest.raises(GpuSourceError) as err:  # within the interval: no new init attempt
        nvml_env.scrape(src)
    assert err.value.reason == "driver_not_loaded"
    assert nvml_env.lib.nvmlStub_CallCount() == calls


def test_library_missing_then_installed(nvml_env, tmp_path):
    nvml_env.write(stubnvml.h100_8x(), reload=False)
    target = tmp_path / "driver" / "libnvidia-ml.so.1"  # nothing there yet
    src = nvml_env.source(so=target)
    with pytest.raises(GpuSourceError) as err:
        nvml_env.scrape(src)
    assert err.value.reason == "library_not_found"
    target.parent.mkdir()
    shutil.copy(nvml_env.so, target)
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(7)) == 1


def test_slow_gpu_is_reported_stuck_and_the_others_served(nvml_env):
    # GPU 1's power call takes 400 ms; the deadline is 200 ms away. Each GPU is read on its own
    # thread, so GPU 1 alone misses it: stuck, its values left out; the other seven are served.
    nvml_env.write(_with(stubnvml.h100_8x(), 1, "power 613345 delay_ms=400"))
    src = nvml_env.source()
    nvml_env.scrape(src)  # init outside the measured scrape
    s = Scrape(src.collect(time.monotonic() + 0.2))
    assert s.value("obsctl_gpu_up", **_g(1)) == 0
    assert s.value("obsctl_gpu_collection_stuck", **_g(1)) == 1
    assert s.value("obsctl_gpu_temperature_celsius", **_g(1)) is None
    assert s.value("obsctl_gpu_info", **_g(1), model="NVIDIA H100 80GB HBM3", driver_version="550.54.15",
                   pci_bus_id="00000000:2A:00.0", mig_mode="disabled") == 1  # identity is cached
    for i in (0, *range(2, 8)):
        assert s.value("obsctl_gpu_up", **_g(i)) == 1
        assert s.value("obsctl_gpu_collection_stuck", **_g(i)) is None
        assert s.value("obsctl_gpu_temperature_celsius", **_g(i)) == 45 + i
    assert s.value("obsctl_gpu_power_watts", **_g(0)) == 612.345
    assert src.last_gpu_errors == {"1": "stuck"}
    # while the call is inside the driver the GPU is not asked again (no second thread blocked on it)
    calls = nvml_env.lib.nvmlStub_DeviceCallCount(1)
    s = Scrape(src.collect(time.monotonic() + 0.05))
    if src.last_gpu_errors:  # the 400 ms call had not returned yet (it may have, on a slow machine)
        assert src.last_gpu_errors == {"1": "stuck"}
        assert nvml_env.lib.nvmlStub_DeviceCallCount(1) == calls
    # a stuck call is not a fault: no re-init; once it returned (its values dropped) the GPU is read afresh
    for _ in range(200):  # deadline follows progress: the late call returns after its 400 ms
        s = nvml_env.scrape(src)
        if not src.last_gpu_errors:
            break
        time.sleep(0.01)
    assert all(s.value("obsctl_gpu_up", **_g(i)) == 1 for i in range(8))
    assert "obsctl_gpu_collection_stuck" not in s.text
    assert s.value("obsctl_gpu_power_watts", **_g(1)) == 613.345


def test_xid_events_counted_and_thread_stopped(nvml_env, monkeypatch):
    extra = "event 1 79\nevent 1 79\nevent 2 48\n"
    nvml_env.write(stubnvml.h100_8x(extra=extra))
    seen_at = 1_796_107_200.25  # the event thread's injected clock: the last-seen time is exact
    monkeypatch.setattr(nvml, "XidWatcher", functools.partial(XidWatcher, clock=lambda: seen_at))
    src = nvml_env.source(xid_events=True, event_wait_ms=20)
    s = nvml_env.scrape(src)
    for _ in range(500):  # the event thread drains the stub's queue; poll, no timing assertion
        if nvml_env.lib.nvmlStub_PendingEvents() == 0:
            break
        time.sleep(0.01)
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_xid_errors_total", **_g(1), xid="79") == 2
    assert s.value("obsctl_gpu_xid_errors_total", **_g(2), xid="48") == 1
    assert s.value("obsctl_gpu_xid_errors_total", **_g(0), xid="79") is None
    assert s.value("obsctl_gpu_xid_last_seen_timestamp_seconds", **_g(1), xid="79") == seen_at
    assert any(t.name == "obsctl-nvml-xid" for t in threading.enumerate())
    src.close()
    assert not any(t.name == "obsctl-nvml-xid" for t in threading.enumerate())
    src.close()  # idempotent


def test_xid_counts_survive_reinit(nvml_env):
    nvml_env.write(stubnvml.h100_8x(extra="event 0 31\n"))
    src = nvml_env.source(xid_events=True, event_wait_ms=20)
    nvml_env.scrape(src)
    for _ in range(500):
        if nvml_env.lib.nvmlStub_PendingEvents() == 0:
            break
        time.sleep(0.01)
    nvml_env.write(_with(stubnvml.h100_8x(), 5, "lost err=15"))
    nvml_env.scrape(src)  # GPU 5 down -> re-init next time
    nvml_env.write(stubnvml.h100_8x())
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_xid_errors_total", **_g(0), xid="31") == 1


def test_healthy_gpus_served_while_reinit_is_not_due(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source(reinit_interval=3600)
    nvml_env.scrape(src)
    nvml_env.write(_with(stubnvml.h100_8x(), 2, "lost err=15"))
    for _ in range(3):  # no re-init for an hour: the other GPUs keep answering on their handles
        s = nvml_env.scrape(src)
        assert s.value("obsctl_gpu_up", **_g(2)) == 0
        assert [s.value("obsctl_gpu_up", **_g(i)) for i in (0, 1, 3, 4, 5, 6, 7)] == [1] * 7
        assert s.value("obsctl_gpu_temperature_celsius", **_g(7)) == 52


def _scrape_after_fault(nvml_env, gpu: int, line: str):
    """``(source, scrape)``: a healthy 8x H100 scrape (links probed, fields learnt), then one with ``line``."""
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    nvml_env.scrape(src)
    nvml_env.write(_with(stubnvml.h100_8x(), gpu, line))
    return src, nvml_env.scrape(src)


@pytest.mark.parametrize("code,reason", [(15, "gpu_is_lost"), (999, "unknown")])
def test_nvlink_state_fault_after_the_probe_takes_the_gpu_down(nvml_env, code, reason):
    """The per-link state reads (C function called directly) raise pynvml's errors like its wrapper."""
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    assert len([x for x in nvml_env.scrape(src).samples("obsctl_gpu_nvlink_link_up") if x.labels["gpu"] == "2"]) == 18
    nvml_env.write(_with(stubnvml.h100_8x(), 2, f"nvlink 18 262143 err={code}"))  # links probed: now every read fails
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(2)) == 0
    assert src.last_gpu_errors == {"2": reason}
    assert s.value("obsctl_gpu_nvlink_link_up", **_g(2), link="0") is None
    assert s.value("obsctl_gpu_nvlink_link_up", **_g(1), link="0") == 1


def test_nvlink_link_not_supported_after_the_probe_is_absent(nvml_env):
    _, s = _scrape_after_fault(nvml_env, 2, "nvlink 18 262143 err=3")
    assert s.value("obsctl_gpu_up", **_g(2)) == 1
    assert s.value("obsctl_gpu_nvlink_link_up", **_g(2), link="0") is None
    assert s.value("obsctl_gpu_power_watts", **_g(2)) == 614.345


def test_stub_vary_moves_values_between_reads(nvml_env):
    """The benchmark's busy-GPU mode: utilization, power, temperatures, clock and energy move on each read."""
    nvml_env.write(stubnvml.h100_n(2, vary=True))
    src = nvml_env.source()
    a, b = nvml_env.scrape(src), nvml_env.scrape(src)
    for name in ("obsctl_gpu_utilization_ratio", "obsctl_gpu_power_watts", "obsctl_gpu_temperature_celsius",
                 "obsctl_gpu_memory_temperature_celsius", "obsctl_gpu_sm_clock_hertz", "obsctl_gpu_memory_used_bytes"):
        assert a.value(name, **_g(1)) != b.value(name, **_g(1)), name
    assert b.value("obsctl_gpu_energy_joules_total", **_g(1)) - a.value("obsctl_gpu_energy_joules_total", **_g(1)) == 1.0
    assert a.value("obsctl_gpu_power_limit_watts", **_g(1)) == b.value("obsctl_gpu_power_limit_watts", **_g(1))


def test_nvlink_error_entry_no_permission_is_absent_then_back(nvml_env):
    src, s = _scrape_after_fault(nvml_env, 6, "nvl_replay err=4")
    assert s.value("obsctl_gpu_nvlink_errors_total", **_g(6), error_type="replay") is None
    assert s.value("obsctl_gpu_nvlink_errors_total", **_g(6), error_type="crc_flit") == 120000
    nvml_env.write(stubnvml.h100_8x())
    assert nvml_env.scrape(src).value("obsctl_gpu_nvlink_errors_total", **_g(6), error_type="replay") == 900


def test_nvlink_error_entry_gpu_lost_takes_the_gpu_down(nvml_env):
    src, s = _scrape_after_fault(nvml_env, 6, "nvl_recovery err=15")
    assert s.value("obsctl_gpu_up", **_g(6)) == 0 and src.last_gpu_errors == {"6": "gpu_is_lost"}
    assert s.value("obsctl_gpu_nvlink_errors_total", **_g(5), error_type="crc_flit") == 5
