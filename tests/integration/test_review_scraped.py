"""``obsctl review`` on a live, freshly scraped stack: a real Prometheus scrapes two
stand-in vLLM replicas every second (``vllm:avg_generation_throughput_toks_per_s``, the
gauge vLLM's metrics endpoint served, per ``model_name``) and keeps scraping while the
review runs, and evaluates one real alerting rule that fires a regression alert for the
class.

Checked, with every query time pinned (read from Prometheus' own scrape times,
:func:`support.prometheus.scraped`, never the test's clock):

- a window whose end is not on the step grid is clipped at its end: the coverage grid
  holds the whole steps of the window only, and no real sample is dated after the end
  (a sample after the end is neither data nor a hole);
- right after a snapshot the baseline is too young to test: an ``info`` finding naming
  the time of its first test, never ``data_missing``;
- once that time has passed, a review at an instant between two scrapes (a scrape lands
  after it) finds no missing data: the movement test's window is aligned to the step;
- the regression alert that fired in the period and the unknown saturation state are listed;
- the history before a window, asked for a day of this young server, is read at the scrape
  step while it keeps scraping (the snapshot's memory history).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.measure.history import history_step, read_history_at
from obsctl.baselining.measure.window import MeasureRequest, measure
from obsctl.cli import cli
from obsctl.promapi import PrometheusClient
from support.prometheus import scraped
from support.servers import Prometheus

GAUGE = "vllm:avg_generation_throughput_toks_per_s"
MODEL = "facebook/opt-125m"
ALERT_RULES = """groups:
- name: standin-regression
  interval: 1s
  rules:
  - alert: ObsctlSignalRegression
    expr: vector(1)
    labels: {workload_class: chat, signal: tokens_per_second, severity: warning}
  - alert: ObsctlBaselineMissing
    expr: vector(1)
    labels: {workload_class: chat, signal: tokens_per_second, severity: info}
"""


class Replica:
    """One stand-in vLLM server: every scrape gets the next value of a seeded series."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.values = iter((500 + rng.normal(0, 5, 100_000)).round(3).tolist())
        lock = threading.Lock()
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    value = next(replica.values)
                body = (f"# HELP {GAUGE} Average generation throughput in tokens/s.\n# TYPE {GAUGE} gauge\n"
                        f'{GAUGE}{{model_name="{MODEL}"}} {value}\n').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("review-scraped")
    replicas = [Replica(11), Replica(12)]
    rules = work / "alerts.yml"
    rules.write_text(ALERT_RULES)
    prom = Prometheus(work / "prom", scrape_targets={"vllm": [r.address for r in replicas]}, rule_files=[rules],
                      scrape_interval="1s", evaluation_interval="1s")
    try:
        prom.start()
        spec_path = work / "obsctl.yaml"
        spec_path.write_text(yaml.safe_dump({
            "prometheus": {"url": prom.url}, "store": "store", "cadence": "weekly",
            "workload_classes": [{"name": "chat", "kind": "inference", "owner": "team-chat",
                                  "selector": {"job": "vllm", "model_name": MODEL}}],
            "signals": [{"name": "tokens_per_second", "category": "throughput", "unit": "tokens/s",
                         "direction": "higher_is_better", "query": f"sum({GAUGE}{{$selector}})"}],
            "verification": {"window": "1m", "step": "1s", "min_samples": 10},
        }))
        # A barrier on the data: 25 s of scrapes of both replicas are stored.
        first = scraped(prom.url)
        ready = scraped(prom.url, after=first + 25)
        yield prom, spec_path, ready
    finally:
        prom.stop()
        for r in replicas:
            r.close()


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _review(spec_path, as_of: dt.datetime):
    out = CliRunner().invoke(cli, ["review", "--spec", str(spec_path), "--as-of", as_of.isoformat(), "--output", "json"],
                             catch_exceptions=False)
    assert out.exit_code in (0, 10), out.output
    return {(f["kind"], f["signal"]): f for f in json.loads(out.stdout)["findings"]}


def test_a_window_ending_between_steps_is_clipped_at_its_end(stack):
    prom, _, ready = stack
    end = _utc(ready - 0.4)  # between two scrapes; the next scrape is stored already
    start = end - dt.timedelta(seconds=20.6)
    m = measure(PrometheusClient(prom.url), MeasureRequest(f'sum({GAUGE}{{job="vllm",model_name="{MODEL}"}})', start, end, 1.0, 10))
    c = m.coverage
    assert c.grid_points == 20  # whole steps of the 20.6 s window; a 21st point would lie past the end
    assert c.last_real_sample is not None and c.last_real_sample <= end
    assert c.holes == [] and c.fresh_points == 20 and len(m.samples) == 20


def test_young_baseline_is_info_then_tested_on_an_aligned_window(stack):
    prom, spec_path, ready = stack
    snap_end = _utc(int(ready) - 1)
    snap = CliRunner().invoke(cli, ["snapshot-baseline", "--spec", str(spec_path), "--window", "20s", "--end", snap_end.isoformat(),
                                    "--output", "json"], catch_exceptions=False)
    assert snap.exit_code == 0, snap.output

    # Three seconds after the baseline's end: too young, with the time of its first test
    # (10 steps of 1 s after the end), and not a data problem.
    young = _review(spec_path, snap_end + dt.timedelta(seconds=3.25))
    finding = young[("baseline_young", "tokens_per_second")]
    first_test = (snap_end + dt.timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert finding["severity"] == "info" and finding["evidence"]["first_test_at"] == first_test
    assert f"the first movement test can run at {first_test}" in finding["summary"]
    assert ("data_missing", "tokens_per_second") not in young

    # Past the first test, at an instant between two scrapes (one lands after it): the data
    # are there, so no data_missing and no young baseline.
    later = scraped(prom.url, after=snap_end.timestamp() + 15)
    findings = _review(spec_path, _utc(later + 0.4567))
    assert ("data_missing", "tokens_per_second") not in findings, findings
    assert ("baseline_young", "tokens_per_second") not in findings
    alerts = findings[("regression_alerts", None)]
    assert alerts["evidence"]["alerts"] == ['ObsctlSignalRegression{signal="tokens_per_second"}']
    assert alerts["severity"] == "info" and alerts["owner"] == "team-chat"
    assert findings[("saturation_unknown", None)]["severity"] == "info"


def test_a_verdict_does_not_count_the_baseline_missing_alert(stack):
    # Both alerts fire (ALERTS has both, a real barrier); the verdict's alert list keeps the
    # regression and leaves out the one that only says a baseline had not reached Prometheus.
    from obsctl.baselining.verify import alerts_fired
    from support.polling import wait_until

    prom, _, ready = stack
    client = PrometheusClient(prom.url)
    both = wait_until(lambda: len({s.metric["alertname"] for s in client.query('ALERTS{alertstate="firing",workload_class="chat"}', _utc(ready))}) == 2,
                      60, what="both stand-in alerts firing")
    assert both
    assert alerts_fired(client, "chat", _utc(ready - 20), _utc(ready)) == ['ObsctlSignalRegression{signal="tokens_per_second"}']


def test_history_a_young_server_holds_is_read_at_the_scrape_step(stack):
    # A day asked at 1 s would be read at 5 s (20,000 points at most); this Prometheus holds
    # under a minute, so that part is read again at 1 s, while it keeps scraping: every
    # point before the pinned window start, the same as a range query of that span at 1 s.
    prom, _, ready = stack
    client = PrometheusClient(prom.url)
    query = f'sum({GAUGE}{{job="vllm",model_name="{MODEL}"}})'
    window_start = _utc(int(ready))
    assert history_step(86400.0, 1.0) == 5.0
    points, step = read_history_at(client, query, window_start, 1.0, 86400.0)
    assert step == 1.0 and len(points) >= 20
    direct = client.query_range(query, points[0][0], window_start.timestamp() - 1.0, 1.0, max_series=1)[0].values
    assert points == [(t, v) for t, v in direct]
