"""The live alert path: Prometheus scrapes obsctl-exporter and an SDK-instrumented
synthetic load, evaluates the generated rules, and when the load slows beyond the
tolerance Alertmanager delivers the regression alert to a webhook receiver run by the
test. The recorded values' known answers for the same spec are checked through promtool
(tests/promtool/test_workload_signal_rules.py); here the subject is the delivery.
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

from obsctl.baselining.store import Store
from obsctl.exporters.sdk import Workload
from support.polling import wait_until
from support.prometheus import unix_seconds
from support.servers import Alertmanager, Prometheus, free_port, spawn, wait_ready
from support.workload_spec import BASELINE_TOKENS_PER_SECOND, baseline, spec_dict

QUEUE_WAIT_SECONDS = 0.3
ERRORS_PER_TICK, REQUESTS_PER_TICK = 1, 4


class SteadyLoad(threading.Thread):
    """Drives the SDK at ``tokens_per_second`` (adjustable) in 50 ms ticks."""

    def __init__(self, wl: Workload, tokens_per_second: float):
        super().__init__(daemon=True)
        self.wl, self.tokens_per_second = wl, tokens_per_second
        self.queue_wait_seconds = QUEUE_WAIT_SECONDS
        self.stop_event = threading.Event()

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop_event.wait(0.05):
            now = time.monotonic()
            self.wl.count_tokens(self.tokens_per_second * (now - last))
            last = now
            for i in range(REQUESTS_PER_TICK):
                self.wl.record_request("error" if i < ERRORS_PER_TICK else "success", 0.01)
                self.wl.observe_queue_wait(self.queue_wait_seconds)


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


def instant(prom: Prometheus, query: str, at: float) -> list[dict]:
    body = requests.get(f"{prom.url}/api/v1/query", params={"query": query, "time": at}, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]["result"]


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
        Store(work / "store").save_baseline(baseline("tokens_per_second", BASELINE_TOKENS_PER_SECOND, dt.datetime.now(dt.UTC)))
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


def test_slowdown_fires_regression_alert_delivered_by_alertmanager(live):
    prom, load, receiver = live["prom"], live["load"], live["receiver"]
    # A series' first rate() windows extrapolate low, so a regression may already have
    # fired and resolved at start-up: only alerts that start after the slowdown count (the
    # test's clock as a lower bound for the alert's start, not a query time).
    # A capacity slowdown: fewer tokens while requests wait longer than the saturation
    # threshold (1 s): the queue builds, so the dip is not only demand and the alert may fire.
    slowed_at = dt.datetime.now(dt.UTC)
    load.queue_wait_seconds = 3.0
    load.tokens_per_second = BASELINE_TOKENS_PER_SECOND * 0.4  # 60 % slower, tolerance is 20 %
    alerts = wait_until(lambda: receiver.firing("ObsctlSignalRegression", slowed_at), 90, interval=0.5,
                        what="the regression alert at the webhook")
    labels = {a["labels"]["signal"]: a for a in alerts}
    alert = labels["tokens_per_second"]
    assert alert["labels"]["workload_class"] == "synthetic"
    assert alert["labels"]["severity"] in {"warning", "critical"}
    assert {"summary", "description", "runbook_url"} <= set(alert["annotations"])
    # Prometheus sent it as firing: at the evaluation it turned firing (its startsAt), ALERTS says so.
    firing = instant(prom, 'ALERTS{alertname="ObsctlSignalRegression", alertstate="firing", signal="tokens_per_second"}',
                     unix_seconds(alert["startsAt"]))
    assert firing and firing[0]["metric"]["workload_class"] == "synthetic"
