"""The exporter core (deadline, meta series, one log line per failure), pricing, config
loading, flags, source selection and the HTTP front, all in-process."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.core import GaugeMetricFamily

from obsctl.durations import parse_duration
from obsctl.errors import SpecError, UsageError
from obsctl.exporters.app import Exporter
from obsctl.exporters.config import load_exporter_config, spec_namespace_classes
from obsctl.exporters.gpu.collector import AutoSource, GpuCollector, make_source
from obsctl.exporters.gpu.errors import GpuSourceError
from obsctl.exporters.main import build, build_parser
from obsctl.exporters.pricing import PricingCollector
from obsctl.exporters.server import ExporterServer, landing_page, parse_listen_address
from obsctl.spec import Pricing, load_spec


def samples(families, name):
    return {tuple(sorted(s.labels.items())): s.value for m in families for s in m.samples if s.name == name}


class Slow:
    name = "slow"
    description = "sleeps"
    isolate = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.release = threading.Event()

    def collect(self, ctx):
        self.release.wait(self.seconds)
        g = GaugeMetricFamily("obsctl_test_value", "x")
        g.add_metric([], 1)
        return [g]

    def close(self) -> None:
        self.release.set()


class Failing:
    name = "gpu"
    description = "fails"
    isolate = True

    def collect(self, ctx):
        raise GpuSourceError("library_not_found", "NVML Shared Library Not Found")

    def close(self) -> None:
        pass


def test_deadline_exceeded_then_busy_then_recovers() -> None:
    slow = Slow(30)
    exporter = Exporter([slow, PricingCollector(Pricing(node_hour_usd=0.4))], process_metrics=False)
    try:
        out = exporter.scrape(0.2)
        assert samples(out, "obsctl_exporter_scrape_collector_success") == {
            (("collector", "slow"),): 0.0, (("collector", "pricing"),): 0.0}  # no time left for pricing
        assert (("collector", "slow"), ("reason", "deadline_exceeded")) in samples(out, "obsctl_exporter_scrape_collector_error_info")
        assert "obsctl_test_value" not in {m.name for m in out}
        out = exporter.scrape(0.2)  # the first call is still running: not started twice
        assert samples(out, "obsctl_exporter_scrape_collector_error_info")[(("collector", "slow"), ("reason", "busy"))] == 1
        slow.release.set()
        time.sleep(0.05)
        out = exporter.scrape(1.0)
        assert samples(out, "obsctl_exporter_scrape_collector_success") == {
            (("collector", "slow"),): 1.0, (("collector", "pricing"),): 1.0}
        assert samples(out, "obsctl_node_price_usd_per_hour") == {(): 0.4}
    finally:
        exporter.close()


def test_failure_logged_once_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    exporter = Exporter([Failing()], process_metrics=False)
    with caplog.at_level(logging.INFO, logger="obsctl.exporter"):
        for _ in range(5):
            out = exporter.scrape(1.0)
    lines = [r for r in caplog.records if "collector gpu failed" in r.getMessage()]
    assert len(lines) == 1
    assert "library_not_found" in lines[0].getMessage()
    assert samples(out, "obsctl_exporter_scrape_collector_error_info") == {
        (("collector", "gpu"), ("reason", "library_not_found")): 1.0}
    assert samples(out, "obsctl_exporter_build_info") == {(("version", exporter.version),): 1.0}


def test_pricing_series() -> None:
    pricing = Pricing(node_hour_usd=0.4, accelerator_hour_usd={"NVIDIA H100 80GB HBM3": 4.1, "NVIDIA A100-SXM4-80GB": 2.2})
    out = PricingCollector(pricing).collect(None)
    assert samples(out, "obsctl_node_price_usd_per_hour") == {(): 0.4}
    assert samples(out, "obsctl_accelerator_price_usd_per_hour") == {
        (("gpu_model", "NVIDIA A100-SXM4-80GB"),): 2.2, (("gpu_model", "NVIDIA H100 80GB HBM3"),): 4.1}
    assert PricingCollector(Pricing()).collect(None) == []  # zero config: no price series


def test_config_from_spec_and_exporter_file(example_spec_path: Path, tmp_path: Path) -> None:
    cfg = load_exporter_config(example_spec_path)
    assert cfg.pricing.node_hour_usd == 0.40
    assert cfg.pricing.accelerator_hour_usd["NVIDIA H100 80GB HBM3"] == 4.10
    own = tmp_path / "exporter.yaml"
    own.write_text("pricing:\n  node_hour_usd: 1.5\nattribution:\n  static:\n    GPU-1: {workload_class: a}\n")
    cfg = load_exporter_config(own)
    assert cfg.pricing.node_hour_usd == 1.5 and cfg.attribution.static["GPU-1"].workload_class == "a"
    assert load_exporter_config(None).pricing.node_hour_usd is None


def test_exporter_file_takes_its_prices_from_the_spec(example_spec_path: Path, tmp_path: Path) -> None:
    # One source of prices: the exporter file names the spec and adds what the spec has no place for.
    spec = tmp_path / "conf" / "obsctl.yaml"
    spec.parent.mkdir()
    spec.write_text(example_spec_path.read_text())
    own = tmp_path / "conf" / "exporter.yaml"
    own.write_text("spec: obsctl.yaml\nattribution:\n  static:\n    GPU-1: {workload_class: a}\n"
                   "  kubernetes:\n    namespace_classes: {ray-llm: llm}\n")
    cfg = load_exporter_config(own)
    assert cfg.pricing == load_exporter_config(spec).pricing and cfg.pricing.node_hour_usd == 0.40
    assert cfg.attribution.static["GPU-1"].workload_class == "a"
    expected = {**spec_namespace_classes(load_spec(spec)), "ray-llm": "llm"}
    assert cfg.attribution.kubernetes.namespace_classes == expected
    both = tmp_path / "conf" / "both.yaml"
    both.write_text("spec: obsctl.yaml\npricing:\n  node_hour_usd: 1.5\n")
    with pytest.raises(UsageError, match="both.yaml:2: pricing: and spec: obsctl.yaml both give prices"):
        load_exporter_config(both)
    missing = tmp_path / "conf" / "missing.yaml"
    missing.write_text("spec: nowhere.yaml\n")
    with pytest.raises((SpecError, UsageError), match="nowhere.yaml"):
        load_exporter_config(missing)


@pytest.mark.parametrize("text, fragment", [
    ("pricing:\n  node_hour_usd: cheap\n", "exporter.yaml:2: pricing.node_hour_usd"),
    ("pricing:\n  node_hour: 1\n", "unknown key; allowed here: node_hour_usd, accelerator_hour_usd"),
    ("attribution:\n  static:\n    GPU-1: {class: a}\n", "allowed here: workload_class, owner"),
    ("pricing: [1\n", "YAML syntax error"),
    ("- a\n- b\n", "must be a YAML mapping"),
])
def test_bad_exporter_config(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "exporter.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_exporter_config(path)
    assert fragment in str(err.value)
    assert err.value.exit_code == 2


def test_bad_spec_as_config(tmp_path: Path) -> None:
    path = tmp_path / "obsctl.yaml"
    path.write_text("workload_classes: []\nsignals: []\n")
    with pytest.raises(SpecError):
        load_exporter_config(path)
    with pytest.raises(UsageError, match="not found"):
        load_exporter_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("argv, fragment", [
    (["--dcgm.timeout=9s", "--scrape.timeout=8s"], "must be below --scrape.timeout"),
    (["--scrape.timeout=soon"], "--scrape.timeout: 'soon' is not a Prometheus duration"),
    (["--dcgm.url=localhost:9400"], "--dcgm.url"),
    (["--web.listen-address=nowhere"], "--web.listen-address"),
    (["--web.telemetry-path=metrics"], "--web.telemetry-path"),
])
def test_bad_flags(argv: list[str], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace(".", r"\.")):
        build(build_parser().parse_args(argv))


def test_unknown_flag_exits_2() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--collector.nope"])
    assert exc.value.code == 2


def test_flags_and_durations() -> None:
    args = build_parser().parse_args(["--no-collector.gpu", "--web.listen-address=127.0.0.1:0"])
    assert args.collector_gpu is False and args.collector_pricing is True
    assert parse_duration("500ms", "x") == 0.5 and parse_duration("1m", "x") == 60
    assert parse_listen_address(":9847") == ("0.0.0.0", 9847)
    assert parse_listen_address("[::1]:9847") == ("::1", 9847)


class FakeNvml:
    name = "nvml"

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.calls = 0

    def collect(self, deadline):
        self.calls += 1
        if self.fail:
            raise GpuSourceError("driver_not_loaded", "no driver")
        return []

    def processes(self):
        return {"GPU-x": [1]}

    def close(self):
        pass


class FakeDcgm:
    name = "dcgm"
    url = "http://dcgm"
    pod_bindings: dict = {}

    def collect(self, deadline):
        return []

    def close(self):
        pass


def test_auto_source_prefers_nvml_then_dcgm_then_retries_nvml() -> None:
    now = [0.0]
    nvml = FakeNvml(fail=False)
    auto = AutoSource(nvml, FakeDcgm(), nvml_retry_seconds=60, clock=lambda: now[0])
    auto.collect(0)
    assert auto.active == "nvml" and auto.processes() == {"GPU-x": [1]}
    nvml.fail = True
    auto.collect(0)
    assert auto.active == "dcgm" and auto.processes() == {}
    calls = nvml.calls
    now[0] = 30
    auto.collect(0)
    assert nvml.calls == calls  # not retried before nvml_retry_seconds
    nvml.fail = False
    now[0] = 61
    auto.collect(0)
    assert auto.active == "nvml"


def test_auto_without_dcgm_reports_nvml_reason() -> None:
    auto = AutoSource(FakeNvml(fail=True), None)
    with pytest.raises(GpuSourceError, match="driver_not_loaded"):
        auto.collect(0)
    assert auto.active == "none"


def test_nvml_mode_without_library_fails_with_reason() -> None:
    # no NVIDIA driver on this machine: the real NvmlSource path reports why, never raises otherwise
    exporter = Exporter([GpuCollector(make_source("nvml"), "nvml")], process_metrics=False)
    try:
        out = exporter.scrape(5.0)
        (key, value), = samples(out, "obsctl_exporter_scrape_collector_error_info").items()
        assert dict(key)["collector"] == "gpu" and dict(key)["reason"] in ("library_not_found", "driver_not_loaded")
    finally:
        exporter.close()


def test_http_front_landing_page_404_and_header_budget() -> None:
    seen: list[float] = []

    def scrape(budget: float):
        seen.append(budget)
        g = GaugeMetricFamily("obsctl_test_value", "x")
        g.add_metric([], 1)
        return [g]

    page = landing_page("9.9", "/metrics", [("gpu", True, "GPU series"), ("pricing", False, "prices")], "auto")
    server = ExporterServer(scrape, "127.0.0.1:0", "/metrics", scrape_timeout=8.0, landing_page=page).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        r = requests.get(base + "/", timeout=5)
        assert r.status_code == 200 and 'href="/metrics"' in r.text and "<code>pricing</code></td><td>disabled" in r.text
        r = requests.get(base + "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "3"}, timeout=5)
        assert r.status_code == 200 and "obsctl_test_value 1.0" in r.text
        assert seen[-1] == pytest.approx(2.5)
        requests.get(base + "/metrics", timeout=5)
        assert seen[-1] == 8.0
        r = requests.get(base + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}, timeout=5)
        assert r.text.endswith("# EOF\n")
        assert requests.get(base + "/nope", timeout=5).status_code == 404
    finally:
        server.stop()
