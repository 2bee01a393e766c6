"""Generated rules on a real stack: Prometheus scrapes obsctl-exporter and an
SDK-instrumented synthetic load, evaluates the generated recording and alerting rules,
and Alertmanager delivers the regression alert to a webhook receiver run by the test.

Known answers are computed from the load the test drives, not read back from the code
under test: tokens/s is the rate the load thread keeps, USD per million tokens follows
from the configured node price, the p95 queue wait follows from histogram_quantile's
linear interpolation inside the one bucket every observation falls in.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import yaml

from obsctl.records import Baseline, Population, Statistics, Window
from obsctl.baselining.store import Store
from obsctl.exporters.sdk import Workload
from obsctl.stack import Alertmanager, Prometheus, free_port, spawn, wait_ready

NODE_PRICE_USD_PER_HOUR = 0.72
BASELINE_TOKENS_PER_SECOND = 500.0
TOLERANCE = 0.2
QUEUE_WAIT_SECONDS = 0.3  # falls in the (0.25, 0.5] bucket of the SDK's histogram
ERRORS_PER_TICK, REQUESTS_PER_TICK = 1, 4


class SteadyLoad(threading.Thread):
    """Drives the SDK at ``tokens_per_second`` (adjustable) in 50 ms ticks."""

    def __init__(self, wl: Workload, tokens_per_second: float):
        super().__init__(daemon=True)
        self.wl, self.tokens_per_second = wl, tokens_per_second
        self.stop_event = threading.Event()

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(0.05):
            now = time.monotonic()
            self.wl.count_tokens(self.tokens_per_second * (now - last))
            last = now
            for i in range(REQUESTS_PER_TICK):
                self.wl.record_request("error" if i < ERRORS_PER_TICK else "success", 0.01)
                self.wl.observe_queue_wait(QUEUE_WAIT_SECONDS)


class WebhookReceiver:
    """A real HTTP receiver for Alertmanager's webhook notifications."""

    def __init__(self) -> None:
        self.notifications: list[dict] = []
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def firing(self, alertname: str, since: dt.datetime) -> list[dict]:
        """Firing alerts named ``alertname`` that started at or after ``since``."""
        return [
            alert
            for note in self.notifications
            for alert in note["alerts"]
            if alert["labels"].get("alertname") == alertname
            and alert["status"] == "firing"
            and dt.datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00")) >= since
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def spec_dict(prom_url: str, store: str) -> dict:
    selector = {"job": "obsctl-workload", "workload": "synthetic"}
    return {
        "prometheus": {"url": prom_url},
        "store": store,
        "workload_classes": [{"name": "synthetic", "kind": "inference", "selector": selector}],
        "pricing": {"node_hour_usd": NODE_PRICE_USD_PER_HOUR},
        "signals": [
            {"name": "tokens_per_second", "category": "throughput", "record": "obsctl_tokens:rate10s",
             "query": "sum(rate(obsctl_tokens_total{$selector}[10s]))", "unit": "tokens/s",
             "direction": "higher_is_better", "tolerance_ratio": TOLERANCE, "alert_for": "3s"},
            {"name": "usd_per_million_tokens", "category": "cost", "record": "obsctl_cost_usd_per_million_tokens:ratio_rate10s",
             "query": "(sum(obsctl_node_price_usd_per_hour{$node_selector}) / 3600) / sum(rate(obsctl_tokens_total{$selector}[10s])) * 1e6",
             "unit": "USD/1M tokens", "direction": "lower_is_better"},
            {"name": "queue_wait_p95_seconds", "category": "saturation", "record": "obsctl_queue_wait_seconds:p95_rate10s",
             "query": "histogram_quantile(0.95, sum by (le) (rate(obsctl_queue_wait_seconds_bucket{$selector}[10s])))",
             "unit": "seconds", "direction": "lower_is_better"},
            {"name": "request_error_ratio", "category": "quality", "record": "obsctl_requests_error:ratio_rate10s",
             "query": 'sum(rate(obsctl_requests_total{$selector,outcome="error"}[10s])) / sum(rate(obsctl_requests_total{$selector}[10s]))',
             "unit": "ratio", "direction": "lower_is_better"},
        ],
    }


def baseline(signal: str, mean: float) -> Baseline:
    now = dt.datetime.now(dt.timezone.utc)
    return Baseline(
        id=f"synthetic.{signal}.test", workload_class="synthetic", signal=signal, unit="tokens/s",
        direction="higher_is_better", query="(test)",
        window=Window(start=now - dt.timedelta(hours=1), end=now, step_seconds=15),
        population=Population(series_count=1),
        stats=Statistics(sample_count=240, mean=mean, median=mean, p5=mean, p95=mean, stddev=0.0, batch_means=[mean] * 10),
        created_at=now,
    )


def instant(prom: Prometheus, query: str) -> list[dict]:
    body = requests.get(f"{prom.url}/api/v1/query", params={"query": query}, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    work = tmp_path_factory.mktemp("rules-live")
    receiver = WebhookReceiver()
    wl = Workload("synthetic")
    wl_port, exporter_port = free_port(), free_port()
    wl.serve(wl_port)
    load = SteadyLoad(wl, BASELINE_TOKENS_PER_SECOND)
    load.start()
    am = Alertmanager(work / "am", webhook_url=receiver.url)
    prom = Prometheus(
        work / "prom",
        scrape_targets={"obsctl-workload": [f"127.0.0.1:{wl_port}"], "obsctl-exporter": [f"127.0.0.1:{exporter_port}"]},
        scrape_interval="1s",
        evaluation_interval="1s",
    )
    exporter = None
    try:
        am.start()
        prom.alertmanager = am.address
        prom.port = free_port()
        spec_path = work / "obsctl.yaml"
        spec_path.write_text(yaml.safe_dump(spec_dict(prom.url, str(work / "store"))))
        Store(work / "store").save_baseline(baseline("tokens_per_second", BASELINE_TOKENS_PER_SECOND))
        exporter = spawn(
            "exporter",
            [sys.executable, "-m", "obsctl.exporters.main", f"--web.listen-address=127.0.0.1:{exporter_port}",
             f"--config.file={spec_path}", "--gpu.source=none"],
            work,
        )
        wait_ready(f"http://127.0.0.1:{exporter_port}/metrics", 30, exporter.process)
        rules_dir = work / "rules"
        result = subprocess.run(
            [sys.executable, "-m", "obsctl", "rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir)],
            capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stderr
        prom.rule_files = sorted(rules_dir.glob("*.yaml"))
        prom.start()
        yield {"prom": prom, "load": load, "receiver": receiver}
    finally:
        load.stop_event.set()
        for stop in (prom.stop, am.stop, (exporter.stop if exporter else lambda: None), wl.close, receiver.close):
            stop()


def test_recording_rules_give_independently_computed_values(live):
    prom = live["prom"]
    # Wait until the 10 s rate window is full of steady load.
    wait_for(lambda: instant(prom, "count_over_time(workload_class:obsctl_tokens:rate10s[15s]) >= 12"), 60, "15 s of recorded rate")
    snapshot = instant(
        prom,
        '{__name__=~"workload_class:.*", workload_class="synthetic"}',
    )
    by_name = {(s["metric"]["__name__"], s["metric"].get("signal")): float(s["value"][1]) for s in snapshot}

    rate = by_name[("workload_class:obsctl_tokens:rate10s", "tokens_per_second")]
    assert rate == pytest.approx(BASELINE_TOKENS_PER_SECOND, rel=0.05)
    cost = by_name[("workload_class:obsctl_cost_usd_per_million_tokens:ratio_rate10s", "usd_per_million_tokens")]
    assert cost == pytest.approx(NODE_PRICE_USD_PER_HOUR / 3600 / rate * 1e6, rel=0.02)
    assert cost == pytest.approx(NODE_PRICE_USD_PER_HOUR / 3600 / BASELINE_TOKENS_PER_SECOND * 1e6, rel=0.06)
    # histogram_quantile interpolates linearly inside (0.25, 0.5]: 0.25 + 0.25 * 0.95.
    assert by_name[("workload_class:obsctl_queue_wait_seconds:p95_rate10s", "queue_wait_p95_seconds")] == pytest.approx(0.25 + 0.25 * 0.95)
    assert by_name[("workload_class:obsctl_requests_error:ratio_rate10s", "request_error_ratio")] == pytest.approx(
        ERRORS_PER_TICK / REQUESTS_PER_TICK, rel=1e-6
    )
    assert by_name[("workload_class:obsctl_signal_baseline:value", "tokens_per_second")] == BASELINE_TOKENS_PER_SECOND
    # Within tolerance: no regression alert firing now.
    assert not instant(prom, 'ALERTS{alertname="ObsctlSignalRegression", alertstate="firing", signal="tokens_per_second"}')


def test_slowdown_fires_regression_alert_delivered_by_alertmanager(live):
    prom, load, receiver = live["prom"], live["load"], live["receiver"]
    # A series' first rate() windows extrapolate low, so a regression may already have
    # fired and resolved at start-up: only alerts that start after the slowdown count.
    slowed_at = dt.datetime.now(dt.timezone.utc)
    load.tokens_per_second = BASELINE_TOKENS_PER_SECOND * 0.4  # 60 % slower, tolerance is 20 %
    alerts = wait_for(lambda: receiver.firing("ObsctlSignalRegression", slowed_at), 90, "the regression alert at the webhook")
    labels = {a["labels"]["signal"]: a for a in alerts}
    alert = labels["tokens_per_second"]
    assert alert["labels"]["workload_class"] == "synthetic"
    assert alert["labels"]["severity"] in {"warning", "critical"}
    assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
    firing = instant(prom, 'ALERTS{alertname="ObsctlSignalRegression", alertstate="firing", signal="tokens_per_second"}')
    assert firing and firing[0]["metric"]["workload_class"] == "synthetic"
