"""DcgmSource against a real local HTTP server (http.server in a thread): the public T4 dump
and each fault: down, slow, HTML, garbage, huge (with and without Content-Length), HTTP 500.
Also: through the exporter core, a failing dcgm-exporter leaves no stale GPU series."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from obsctl.exporters.app import Exporter
from obsctl.exporters.gpu.collector import GpuCollector
from obsctl.exporters.gpu.dcgm import DcgmSource
from obsctl.exporters.gpu.errors import GpuSourceError
from obsctl.stack import free_port


class FakeDcgm:
    """A dcgm-exporter stand-in: ``mode`` picks what GET /metrics answers."""

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture.encode()
        self.mode = "ok"
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        mode = self.mode
        if mode == "slow":  # headers only after far longer than the timeout
            self.release.wait(10)
            return
        if mode == "trickle":  # headers at once, then one byte every 0.2 s
            h.send_response(200)
            h.send_header("Content-Type", "text/plain; version=0.0.4")
            h.end_headers()
            for byte in self.fixture[:200]:
                if self.release.wait(0.2):
                    return
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
            return
        bodies = {
            "ok": (200, "text/plain; version=0.0.4; charset=utf-8", self.fixture),
            "html": (200, "text/html; charset=utf-8", b"<html><body>Login required</body></html>"),
            "html_as_text": (200, "text/plain", b"<!DOCTYPE html>\n<html></html>"),
            "garbage": (200, "text/plain", bytes(range(256)) * 8),
            "error": (500, "text/plain", b"internal error"),
        }
        if mode in bodies:
            code, ctype, body = bodies[mode]
            h.send_response(code)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        elif mode in ("huge", "huge_chunked"):
            line = b"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-x\"} 1\n" * 1000
            total = 17 * 2**20
            h.send_response(200)
            h.send_header("Content-Type", "text/plain")
            if mode == "huge":
                h.send_header("Content-Length", str(total))
            h.end_headers()
            sent = 0
            try:
                while sent < total:
                    h.wfile.write(line)
                    sent += len(line)
            except OSError:
                pass  # the client hung up at the cap, as it should

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


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
