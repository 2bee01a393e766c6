"""obsctl-exporter as a real process: zero/none/nvml/dcgm GPU sources, promtool check metrics
on what it serves, a real Prometheus scraping it, bad config -> exit 2, SIGTERM -> exit 0."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from obsctl.processes import require_binary
from support.prometheus import scraped
from support.servers import Prometheus, free_port, wait_ready


def exporter_argv() -> list[str]:
    script = shutil.which("obsctl-exporter")
    return [script] if script else [sys.executable, "-m", "obsctl.exporters.main"]


class Running:
    def __init__(self, args: list[str], tmp_path: Path) -> None:
        self.port = free_port()
        self.log = tmp_path / f"exporter-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([*exporter_argv(), f"--web.listen-address=127.0.0.1:{self.port}", *args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_ready(self.url + "/", timeout=30, process=self.proc)

    def metrics(self) -> str:
        r = requests.get(self.url + "/metrics", timeout=15)
        r.raise_for_status()
        return r.text

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture()
def start(tmp_path: Path) -> Iterator:
    running: list[Running] = []

    def _start(*args: str) -> Running:
        r = Running(list(args), tmp_path)
        running.append(r)
        return r

    try:
        yield _start
    finally:
        for r in running:
            r.kill()


def promtool_check(body: str) -> None:
    result = subprocess.run([require_binary("promtool"), "check", "metrics"], input=body,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"promtool check metrics: {result.stdout}{result.stderr}"


def value(body: str, series: str) -> float | None:
    for line in body.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_none_source_serves_prices_passes_promtool_and_prometheus_scrapes_it(
        start, example_spec_path: Path, tmp_path: Path) -> None:
    exp = start("--gpu.source=none", f"--config.file={example_spec_path}")
    body = exp.metrics()
    assert value(body, "obsctl_node_price_usd_per_hour") == 0.4
    assert value(body, 'obsctl_accelerator_price_usd_per_hour{gpu_model="NVIDIA H100 80GB HBM3"}') == 4.1
    assert value(body, 'obsctl_exporter_scrape_collector_success{collector="gpu"}') == 1
    assert value(body, 'obsctl_gpu_source_info{mode="none",source="none"}') == 1
    assert "process_resident_memory_bytes" in body
    promtool_check(body)
    landing = requests.get(exp.url + "/", timeout=5).text
    assert 'href="/metrics"' in landing and "attribution" in landing

    prom = Prometheus(tmp_path / "prom", scrape_targets={"obsctl-exporter": [f"127.0.0.1:{exp.port}"]},
                      scrape_interval="1s")
    prom.start()
    try:
        query = 'sum(obsctl_node_price_usd_per_hour{job="obsctl-exporter"}) / 3600'

        def ask(expr: str, at: float) -> list[dict]:
            return requests.get(prom.url + "/api/v1/query", params={"query": expr, "time": at}, timeout=5).json()["data"]["result"]

        at = scraped(prom.url)  # the instant of the exporter's first stored scrape
        assert float(ask(query, at)[0]["value"][1]) == pytest.approx(0.4 / 3600)
        assert ask('up{job="obsctl-exporter"}', at)[0]["value"][1] == "1"  # the same scrape
    finally:
        prom.stop()
    assert exp.terminate() == 0


def test_nvml_without_library_keeps_serving_logs_once(start) -> None:
    exp = start("--gpu.source=nvml")
    for _ in range(4):
        body = exp.metrics()
    assert value(body, 'obsctl_exporter_scrape_collector_success{collector="gpu"}') == 0
    assert 'obsctl_exporter_scrape_collector_error_info{collector="gpu",reason="library_not_found"} 1.0' in body
    assert value(body, 'obsctl_gpu_source_info{mode="nvml",source="nvml"}') == 1
    promtool_check(body)
    assert exp.terminate() == 0
    assert exp.output().count("collector gpu failed") == 1, exp.output()


def test_zero_config_default_auto(start) -> None:
    exp = start()
    body = exp.metrics()
    assert value(body, 'obsctl_gpu_source_info{mode="auto",source="none"}') == 1
    assert value(body, 'obsctl_exporter_scrape_collector_success{collector="pricing"}') == 1
    assert "obsctl_node_price_usd_per_hour" not in body
    promtool_check(body)
    assert exp.terminate() == 0


@pytest.fixture()
def dcgm_url(fixtures_dir: Path) -> Iterator[str]:
    body = (fixtures_dir / "dcgm" / "datadog-t4.txt").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_dcgm_source_output_passes_promtool_with_attribution(start, dcgm_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text("attribution:\n  kubernetes:\n    namespace_classes: {ray-llm: llm-serving}\n")
    exp = start("--gpu.source=auto", f"--dcgm.url={dcgm_url}", f"--config.file={cfg}")
    body = exp.metrics()
    assert value(body, 'obsctl_gpu_source_info{mode="auto",source="dcgm"}') == 1
    assert value(body, 'obsctl_gpu_energy_joules_total{gpu="0",uuid="GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"}') \
        == pytest.approx(128996.013)
    assert value(body, 'obsctl_gpu_attribution_info{attribution_source="kubernetes",gpu="0",owner="ray-llm/ray-1111111",'
                       'uuid="GPU-abc",workload_class="llm-serving"}') == 1
    assert value(body, 'obsctl_gpu_attribution_status{gpu="0",status="unattributed",'
                       'uuid="GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"}') == 1
    promtool_check(body)
    assert exp.terminate() == 0


DCGM_GENERATIONS = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"


def _gpu_series(body: str) -> dict[tuple[str, frozenset], float]:
    """obsctl_gpu_* samples of an exposition, (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    return {(s.name, frozenset(s.labels.items())): s.value for fam in text_string_to_metric_families(body)
            for s in fam.samples if s.name.startswith("obsctl_gpu_") and s.name != "obsctl_gpu_source_info"}


def test_dcgm_exporter_4_10_and_legacy_bodies_serve_the_same_series(start) -> None:
    """The real exporter process reading the stand-in's 4.10 exposition publishes what it publishes
    for the legacy-named one."""
    from support.dcgm_standin import DcgmStandIn  # noqa: PLC0415

    served = {}
    for gen in ("4.8", "4.10"):
        standin = DcgmStandIn((DCGM_GENERATIONS / f"dcgm-exporter-{gen}.txt").read_bytes())
        try:
            exp = start("--gpu.source=dcgm", f"--dcgm.url={standin.url}")
            body = exp.metrics()
            promtool_check(body)
            assert value(body, 'obsctl_gpu_source_info{mode="dcgm",source="dcgm"}') == 1
            served[gen] = _gpu_series(body)
            assert exp.terminate() == 0
        finally:
            standin.close()
    seen = "obsctl_gpu_xid_last_seen_timestamp_seconds"  # the wall-clock time each process saw XID 79
    assert [k for k in served["4.10"] if k[0] == seen] == [k for k in served["4.8"] if k[0] == seen] != []
    assert {k: v for k, v in served["4.10"].items() if k[0] != seen} == \
        {k: v for k, v in served["4.8"].items() if k[0] != seen}
    uuid = "GPU-5f6d2c1e-9a4b-4c3d-8e2f-1a2b3c4d5e6f"
    assert served["4.10"][("obsctl_gpu_sm_clock_hertz", frozenset({"gpu": "0", "uuid": uuid}.items()))] == 1.98e9


def test_bad_config_exits_2_with_one_message(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("pricing:\n  node_hour_usd: -1\n")
    result = subprocess.run([*exporter_argv(), f"--web.listen-address=127.0.0.1:{free_port()}", f"--config.file={cfg}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "bad.yaml:2: pricing.node_hour_usd" in result.stderr
    assert "Traceback" not in result.stderr
    result = subprocess.run([*exporter_argv(), "--gpu.source=cuda"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_port_in_use_is_a_clear_error(start) -> None:
    exp = start("--gpu.source=none")
    result = subprocess.run([*exporter_argv(), f"--web.listen-address=127.0.0.1:{exp.port}", "--gpu.source=none"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "cannot listen on" in result.stderr and "Traceback" not in result.stderr
    assert exp.terminate() == 0
