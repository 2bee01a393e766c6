"""DcgmSource against a real local HTTP server (http.server in a thread): the public T4 dump
and each fault: down, slow, HTML, garbage, huge (with and without Content-Length), HTTP 500.
Also: through the exporter core, a failing dcgm-exporter leaves no stale GPU series."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from obsctl.exporters.app import Exporter
from obsctl.exporters.gpu.collector import GpuCollector
from obsctl.exporters.gpu.dcgm import DcgmSource
from obsctl.exporters.gpu.errors import GpuSourceError
from support.dcgm_standin import DcgmStandIn
from support.servers import free_port

FakeDcgm = DcgmStandIn  # the shared fault-injecting stand-in (tests/support/dcgm_standin.py)


@pytest.fixture()
def fake(fixtures_dir: Path) -> Iterator[FakeDcgm]:
    server = FakeDcgm((fixtures_dir / "dcgm" / "datadog-t4.txt").read_text())
    try:
        yield server
    finally:
        server.close()


def deadline(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def test_serves_the_fixture(fake: FakeDcgm) -> None:
    src = DcgmSource(fake.url, timeout=2.0)
    names = {m.name for m in src.collect(deadline())}
    assert {"obsctl_gpu_up", "obsctl_gpu_energy_joules", "obsctl_gpu_sm_clock_hertz"} <= names
    assert any(unit.uuid == "GPU-abc" for unit in src.pod_bindings)
    src.close()


@pytest.mark.parametrize("mode, reason", [
    ("html", "dcgm_bad_response"),
    ("html_as_text", "dcgm_bad_response"),
    ("garbage", "dcgm_bad_response"),
    ("error", "dcgm_bad_response"),
    ("huge", "dcgm_bad_response"),
    ("huge_chunked", "dcgm_bad_response"),
])
def test_bad_responses(fake: FakeDcgm, mode: str, reason: str) -> None:
    fake.mode = mode
    src = DcgmSource(fake.url, timeout=3.0)
    with pytest.raises(GpuSourceError) as err:
        src.collect(deadline())
    assert err.value.reason == reason
    assert src.pod_bindings == {}
    src.close()


@pytest.mark.parametrize("mode", ["slow", "trickle"])
def test_slow_exporter_is_cut_off_by_the_timeout(fake: FakeDcgm, mode: str) -> None:
    fake.mode = mode
    src = DcgmSource(fake.url, timeout=0.5)
    with pytest.raises(GpuSourceError) as err:
        src.collect(deadline())
    assert err.value.reason == "dcgm_timeout"
    src.close()


def test_down_exporter() -> None:
    src = DcgmSource(f"http://127.0.0.1:{free_port()}/metrics", timeout=1.0)
    with pytest.raises(GpuSourceError) as err:
        src.collect(deadline())
    assert err.value.reason == "dcgm_unreachable"


def test_scrape_deadline_caps_the_fetch(fake: FakeDcgm) -> None:
    fake.mode = "slow"
    src = DcgmSource(fake.url, timeout=30.0)
    with pytest.raises(GpuSourceError) as err:
        src.collect(deadline(0.3))  # the scrape's deadline, not the 30 s, bounds the fetch
    assert err.value.reason == "dcgm_timeout"
    with pytest.raises(GpuSourceError) as err:
        src.collect(deadline(0.0))
    assert err.value.reason == "deadline_exceeded"


def test_no_stale_values_after_failure(fake: FakeDcgm) -> None:
    exporter = Exporter([GpuCollector(DcgmSource(fake.url, timeout=1.0), "dcgm")], process_metrics=False)
    try:
        first = {m.name: m for m in exporter.scrape(3.0)}
        assert "obsctl_gpu_power_watts" in first
        for mode in ("html", "garbage", "slow"):
            fake.mode = mode
            out = exporter.scrape(3.0)
            gpu_series = [m.name for m in out if m.name.startswith("obsctl_gpu_")]
            assert gpu_series == [], f"{mode}: stale GPU series served: {gpu_series}"
            success = {s.labels["collector"]: s.value for m in out for s in m.samples
                       if s.name == "obsctl_exporter_scrape_collector_success"}
            assert success == {"gpu": 0.0}
            reasons = {s.labels["reason"] for m in out for s in m.samples
                       if s.name == "obsctl_exporter_scrape_collector_error_info"}
            assert reasons == {"dcgm_bad_response" if mode != "slow" else "dcgm_timeout"}
        fake.release.set()  # let the slow handler go
        fake.mode = "ok"
        recovered = {m.name for m in exporter.scrape(3.0)}
        assert "obsctl_gpu_power_watts" in recovered
    finally:
        exporter.close()
