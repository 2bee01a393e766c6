"""A slow field read less often than the collection (``NvmlSource(field_intervals=...)``,
``--collector.gpu.energy-interval``): its last samples are served in between, the driver is not
called for it, a failed read is not held, and an unknown field is refused."""

from __future__ import annotations

import pytest

from support import stubnvml


def _g(i: int) -> dict[str, str]:
    return {"gpu": str(i), "uuid": stubnvml.h100_uuid(i)}


def test_energy_held_between_reads_other_fields_fresh(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source(field_intervals={"energy": 3600.0})  # read once in this test's lifetime
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_energy_joules_total", **_g(0)) == 123456.789
    lib = nvml_env.lib
    calls = lib.nvmlStub_DeviceCallCount(0)
    s = nvml_env.scrape(src)
    held_calls = lib.nvmlStub_DeviceCallCount(0) - calls
    # the driver's values move; energy keeps the value read first, power is read afresh
    nvml_env.write(stubnvml.h100_8x().replace("energy 123456789\n", "energy 223456789\n")
                   .replace("power 612345\n", "power 512345\n"))
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_energy_joules_total", **_g(0)) == 123456.789
    assert s.value("obsctl_gpu_power_watts", **_g(0)) == 512.345
    # against a source reading energy every collection: exactly one call more per collection
    every = nvml_env.source()
    nvml_env.scrape(every)
    calls = lib.nvmlStub_DeviceCallCount(1)
    nvml_env.scrape(every)
    assert lib.nvmlStub_DeviceCallCount(1) - calls == held_calls + 1
    assert nvml_env.scrape(every).value("obsctl_gpu_energy_joules_total", **_g(0)) == 223456.789


def test_a_failed_read_is_not_held(nvml_env):
    text = stubnvml.h100_8x()
    nvml_env.write(text.replace("energy 123456789\n", "energy err=999\n"))  # UNKNOWN: GPU 0 down
    src = nvml_env.source(field_intervals={"energy": 3600.0})
    s = nvml_env.scrape(src)
    assert s.value("obsctl_gpu_up", **_g(0)) == 0
    nvml_env.write(text)
    s = nvml_env.scrape(src)  # re-initialised (reinit_interval 0): read, not a held failure
    assert s.value("obsctl_gpu_up", **_g(0)) == 1
    assert s.value("obsctl_gpu_energy_joules_total", **_g(0)) == 123456.789


def test_unknown_field_refused(nvml_env):
    with pytest.raises(ValueError, match="'energie'.*energy"):
        nvml_env.source(field_intervals={"energie": 30.0})
