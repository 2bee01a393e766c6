"""A client's tiny X-Prometheus-Scrape-Timeout-Seconds must not make the next real scrape
find a collector busy: the call the short scrape left running is waited for, then run fresh.
Through the real HTTP front (ExporterServer) and exporter core."""

from __future__ import annotations

import threading
import time

import requests
from prometheus_client.core import GaugeMetricFamily

from obsctl.exporters.app import Exporter
from obsctl.exporters.server import ExporterServer


class Slow:
    """An isolated collector whose call takes ``seconds`` whatever the deadline (a hung driver call)."""

    name = "gpu"
    description = "slow"
    isolate = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0
        self.lock = threading.Lock()

    def collect(self, ctx):
        with self.lock:
            self.calls += 1
        time.sleep(self.seconds)
        family = GaugeMetricFamily("obsctl_test_value", "test")
        family.add_metric([], 1.0)
        return [family]

    def close(self) -> None:
        pass


def success(body: str) -> str:
    return next(line for line in body.splitlines() if line.startswith('obsctl_exporter_scrape_collector_success{collector="gpu"}'))


def test_short_client_budget_does_not_leave_the_collector_busy() -> None:
    slow = Slow(1.0)
    exporter = Exporter([slow], scrape_timeout=8.0, process_metrics=False)
    server = ExporterServer(exporter.scrape, "127.0.0.1:0", scrape_timeout=8.0).start()
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:
        short = requests.get(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": "0.55"}, timeout=10).text
        assert success(short).endswith(" 0.0") and 'reason="deadline_exceeded"' in short
        real = requests.get(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"}, timeout=15).text
        assert success(real).endswith(" 1.0"), real
        assert 'reason="busy"' not in real and "obsctl_test_value 1.0" in real
        assert slow.calls == 2  # the left-over call was not reused: a fresh one ran
    finally:
        server.stop()
        exporter.close()


def test_collector_still_running_past_half_the_budget_is_busy() -> None:
    exporter = Exporter([Slow(30.0)], process_metrics=False)
    try:
        exporter.scrape(0.05)
        out = exporter.scrape(0.2)
        reasons = {s.labels["reason"] for m in out for s in m.samples if s.name == "obsctl_exporter_scrape_collector_error_info"}
        assert reasons == {"busy"}
    finally:
        exporter.close()
