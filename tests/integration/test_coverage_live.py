"""Real-sample coverage and partial answers against a real Prometheus serving backfilled
history (promtool create-blocks-from openmetrics), and a small HTTP proxy in front of it
that adds a ``warnings`` entry to every answer, as Thanos or Mimir do when a store fails.

History (own to this module, two hours at 15 s from ``t0``, after :data:`PRE` of the same
noise before it for the memory fit; +30 % step at 1 h so the statistics alone would say
IMPROVED wherever there are data):

- ``stopping``: hour 0 only: the series stops at the initiative's start;
- ``holey``: both hours, but no samples from 1 h 15 m to 1 h 45 m (a 30 min hole);
- ``slow``: scraped every 30 s (read at the 15 s step);
- ``pushed``: what Prometheus stores when it scrapes a Pushgateway every 15 s:
  ``push_time_seconds{job="pushjob",instance=""}`` and the pushed value re-served at
  every scrape; the job pushes every 60 s until 1 h 15 m, then stops pushing (the
  Pushgateway keeps serving the last push).

Expected coverage figures are computed here from the written times.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, report, snapshot_baseline, verify
from obsctl.baselining.store import Store
from support.prometheus import served_history

STEP = 15
HOUR = 3600
METRIC = "obsctl_cov_tokens_per_second"
PUSHED = "obsctl_cov_score"
WARNING = "remote read: store-gateway 10.0.0.7:10901 unavailable, partial response"
#: The history ends 10 minutes before this fixed time (2026-12-01T06:40:00Z), not the wall clock.
HISTORY_NOW = 1_796_107_200
#: Seconds of history before ``t0``: a history memory fit needs 200 samples (measure.history), a verdict 20 memories.
PRE = HOUR


class Hist:
    def __init__(self, now: float):
        self.end = int(math.floor((now - 600) / STEP) * STEP)
        self.t0 = self.end - 2 * HOUR
        self.url = ""
        self.proxy_url = ""

    def at(self, hours: float) -> int:
        return int(self.t0 + hours * HOUR)

    def iso(self, hours: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at(hours)))


def _value(h: Hist, ts: int, rng) -> float:
    return round((1000.0 if ts <= h.at(1) else 1300.0) + float(rng.normal(0, 5)), 6)


def _openmetrics(h: Hist) -> str:
    rng = np.random.default_rng(7)
    lines = [f"# TYPE {METRIC} gauge"]
    before = np.random.default_rng(8)  # its own generator: the values from t0 on stay as they were
    for ts in range(h.t0 - PRE, h.t0, STEP):
        lines += [f'{METRIC}{{job="cov",workload="{cls}"}} {_value(h, ts, before)} {ts}' for cls in ("holey", "stopping")]
        if (ts - h.t0) % 30 == 0:
            lines.append(f'{METRIC}{{job="cov",workload="slow"}} {_value(h, ts, before)} {ts}')
    for ts in range(h.t0, h.end + 1, STEP):
        lines.append(f'{METRIC}{{job="cov",workload="holey"}} {_value(h, ts, rng)} {ts}' if not h.at(1.25) < ts <= h.at(1.75) else "")
        if ts <= h.at(1):
            lines.append(f'{METRIC}{{job="cov",workload="stopping"}} {_value(h, ts, rng)} {ts}')
        if (ts - h.t0) % 30 == 0:
            lines.append(f'{METRIC}{{job="cov",workload="slow"}} {_value(h, ts, rng)} {ts}')
    lines.append(f"# TYPE {PUSHED} gauge")
    pushes = []
    for ts in range(h.t0, h.end + 1, STEP):
        if ts <= h.at(1.25) and (ts - h.t0) % 60 == 0:
            pushes.append((ts, _value(h, ts, rng)))
        lines.append(f'{PUSHED}{{job="pushjob",instance=""}} {pushes[-1][1]} {ts}')
    lines.append("# TYPE push_time_seconds gauge")
    pushes_at = [p for p, _ in pushes]
    for ts in range(h.t0, h.end + 1, STEP):
        last = max(p for p in pushes_at if p <= ts)
        lines.append(f'push_time_seconds{{job="pushjob",instance=""}} {last} {ts}')
    lines.append("# EOF")
    return "\n".join(line for line in lines if line) + "\n"


class WarningProxy:
    """Forwards every GET to Prometheus and adds ``WARNING`` to the JSON answer's ``warnings``."""

    def __init__(self, upstream: str):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with urllib.request.urlopen(upstream + self.path, timeout=10) as answer:
                    body = json.loads(answer.read())
                body.setdefault("warnings", []).append(WARNING)
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    h = Hist(HISTORY_NOW)
    with served_history(tmp_path_factory.mktemp("coverage-prometheus"), _openmetrics(h)) as served:
        h.url = served.url
        with WarningProxy(served.url) as proxy:
            h.proxy_url = proxy.url
            yield h


def write_spec(tmp_path, url: str, store=None):
    spec = {
        "version": 1,
        "prometheus": {"url": url, "timeout_seconds": 10},
        "store": str(store or tmp_path / "store"),
        "workload_classes": [{"name": n, "kind": "inference", "selector": {"job": "cov", "workload": n}}
                             for n in ("stopping", "holey", "slow")]
        + [{"name": "pushed", "kind": "training", "selector": {"job": "pushjob"}}],
        "signals": [
            {"name": "tokens_per_second", "category": "throughput", "query": f"sum({METRIC}{{$selector}})", "unit": "tokens/s",
             "direction": "higher_is_better"},
            {"name": "score", "category": "quality", "query": f"max({PUSHED}{{$selector}})", "unit": "ratio",
             "direction": "higher_is_better"},
        ],
        "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02},
    }
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(h, spec, cls, signal="tokens_per_second"):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--signal", signal, "--end", h.iso(1), "--output", "json"])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", spec, "--name", f"tune {cls}", "--lever", "batch-size", "--class", cls,
                               "--signal", signal, "--started-at", h.iso(1), "--output", "json"])
    assert started.exit_code == 0, started.output
    return json.loads(snap.stdout), json.loads(started.stdout)["id"]


def verify_json(h, spec, iid):
    out = run(verify, ["--spec", spec, "--initiative", iid, "--end", h.iso(2), "--output", "json", "--no-guards"])
    return out.exit_code, json.loads(out.stdout)


def test_series_that_stops_at_the_initiative_start_is_no_data_naming_the_hole(hist, tmp_path):
    spec = write_spec(tmp_path, hist.url)
    snap, iid = start(hist, spec, "stopping")
    assert snap["outcomes"][0]["coverage"]["ratio"] == 1.0
    code, out = verify_json(hist, spec, iid)
    assert (code, out["verdict"]) == (13, "NO_DATA")
    assert out["reason"].startswith(f"window: no fresh samples after {hist.iso(1)}: the signal stopped")
    assert out["coverage"]["fresh_points"] == 0 and out["coverage"]["real_samples"] == 0
    # The 20 lookback copies of the last baseline sample are not judged as the window.
    assert out["window_stats"] is None
    text = run(verify, ["--spec", spec, "--initiative", iid, "--end", hist.iso(2), "--no-guards"])
    assert text.exit_code == 13 and f"no fresh samples after {hist.iso(1)}" in text.stdout


def test_window_with_a_hole_reports_coverage_and_refuses_the_verdict(hist, tmp_path):
    spec = write_spec(tmp_path, hist.url)
    _, iid = start(hist, spec, "holey")
    code, out = verify_json(hist, spec, iid)
    grid = [hist.at(1) + STEP * k for k in range(1, 241)]
    written = [t for t in grid if not hist.at(1.25) < t <= hist.at(1.75)]
    # Fresh: a written sample at t, or one 15 s before (1.5 intervals); the hole is 30 min.
    fresh = [t for t in grid if t in written or (t - STEP in written and t - STEP > hist.at(1))]
    assert out["coverage"]["fresh_points"] == len(fresh)
    assert out["coverage"]["ratio"] == pytest.approx(len(fresh) / 240)
    assert (code, out["verdict"]) == (11, "INCONCLUSIVE")
    assert "below the 90 % minimum (verification.min_coverage_ratio)" in out["reason"]
    assert "the statistics alone said IMPROVED" in out["reason"]
    assert out["window_stats"]["sample_count"] <= len(fresh)
    hole = out["coverage"]["holes"][0]
    assert hole["steps"] == 240 - len(fresh)
    text = run(verify, ["--spec", spec, "--initiative", iid, "--end", hist.iso(2), "--no-guards"])
    assert f"window coverage {len(fresh) / 240 * 100:.1f} % ({len(fresh)}/240 steps fresh" in text.stdout
    # Baselines are refused the same way: the hour with the hole is not stored.
    refused = run(snapshot_baseline, ["--spec", spec, "--class", "holey", "--signal", "tokens_per_second", "--end", hist.iso(2)])
    assert refused.exit_code == 1 and "holey/tokens_per_second: REFUSED (baseline: coverage" in refused.stdout


def test_thirty_second_scrape_at_fifteen_second_step_is_full_coverage(hist, tmp_path):
    spec = write_spec(tmp_path, hist.url)
    snap, iid = start(hist, spec, "slow")
    c = snap["outcomes"][0]["coverage"]
    assert (c["ratio"], c["input_interval_seconds"], c["real_samples"]) == (1.0, 30.0, 120)
    code, out = verify_json(hist, spec, iid)
    assert (code, out["verdict"]) == (0, "IMPROVED")
    assert out["coverage"]["ratio"] == 1.0 and out["warnings"] == [] and out["partial"] is False


def test_pushgateway_value_is_fresh_only_while_pushes_continue(hist, tmp_path):
    spec = write_spec(tmp_path, hist.url)
    snap, iid = start(hist, spec, "pushed", signal="score")
    c = snap["outcomes"][0]["coverage"]
    assert c["method"] == "push_time" and c["input_interval_seconds"] == 60.0 and c["ratio"] == 1.0
    code, out = verify_json(hist, spec, iid)
    last_push = hist.at(1.25)
    grid = [hist.at(1) + STEP * k for k in range(1, 241)]
    expected = sum(1 for t in grid if t - max(p for p in range(hist.t0, last_push + 1, 60) if p <= t) < 90)
    assert out["coverage"]["fresh_points"] == expected
    assert (code, out["verdict"]) == (13, "NO_DATA")
    assert out["reason"].startswith(f"window: no fresh samples after {hist.iso(1.25)}: the signal stopped")


def test_partial_answer_is_inconclusive_printed_and_baseline_needs_allow_partial(hist, tmp_path):
    direct = write_spec(tmp_path, hist.url)
    _, iid = start(hist, direct, "slow")
    (tmp_path / "proxied").mkdir()
    proxied = write_spec(tmp_path / "proxied", hist.proxy_url, store=tmp_path / "store")
    code, out = verify_json(hist, proxied, iid)
    assert (code, out["verdict"], out["primary_verdict"]) == (11, "INCONCLUSIVE", "INCONCLUSIVE")
    assert out["partial"] is True and WARNING in out["warnings"]
    assert out["reason"].startswith(f"window: Prometheus answered partially ({WARNING}); the statistics alone said IMPROVED")
    text = run(verify, ["--spec", proxied, "--initiative", iid, "--end", hist.iso(2), "--no-guards"])
    assert text.exit_code == 11 and f"warning: {WARNING}" in text.stdout

    md_dir = tmp_path / "report"
    assert run(report, ["--spec", proxied, "--initiative", iid, "--out", md_dir]).exit_code == 0
    md = (md_dir / f"{iid}.md").read_text()
    assert "Coverage" in md and WARNING in md

    # A partial baseline is refused, or stored marked partial with --allow-partial.
    refused = run(snapshot_baseline, ["--spec", proxied, "--class", "slow", "--signal", "tokens_per_second", "--end", hist.iso(1)])
    assert refused.exit_code == 1 and "REFUSED (baseline: Prometheus answered partially" in refused.stdout
    assert f"warning: {WARNING}" in refused.stdout
    kept = run(snapshot_baseline, ["--spec", proxied, "--class", "slow", "--signal", "tokens_per_second", "--end", hist.iso(1),
                                   "--allow-partial", "--output", "json"])
    assert kept.exit_code == 0, kept.output
    outcome = json.loads(kept.stdout)["outcomes"][0]
    assert (outcome["status"], outcome["partial"], outcome["warnings"]) == ("stored", True, [WARNING])
    stored = Store(tmp_path / "store").current_baseline("slow", "tokens_per_second")
    assert stored.partial is True and WARNING in stored.warnings
    # The change's looks so far compared with the first baseline: the same start with the
    # new one is refused (a sequence keeps its first look's baseline).
    run(initiative, ["close", "--spec", direct, "--initiative", iid])
    start_again = ["start", "--name", "again", "--lever", "batch-size", "--class", "slow", "--signal", "tokens_per_second",
                   "--started-at", hist.iso(1), "--output", "json"]
    swapped = run(initiative, [*start_again, "--spec", direct])
    assert swapped.exit_code == 1 and "a change keeps the baseline of its first look" in json.loads(swapped.stdout)["error"], swapped.output
    # Any verdict against a partial baseline is at most INCONCLUSIVE, even on a complete window
    # (a store where the change was not looked at yet).
    for folder in ("fresh", "fresh-proxied"):
        (tmp_path / folder).mkdir()
    fresh = write_spec(tmp_path / "fresh", hist.url)
    kept = run(snapshot_baseline, ["--spec", write_spec(tmp_path / "fresh-proxied", hist.proxy_url, store=tmp_path / "fresh" / "store"),
                                   "--class", "slow", "--signal", "tokens_per_second", "--end", hist.iso(1), "--allow-partial"])
    assert kept.exit_code == 0, kept.output
    stored = Store(tmp_path / "fresh" / "store").current_baseline("slow", "tokens_per_second")
    assert stored.partial is True
    again = run(initiative, [*start_again, "--spec", fresh])
    code, out = verify_json(hist, fresh, json.loads(again.stdout)["id"])
    assert (code, out["verdict"]) == (11, "INCONCLUSIVE") and out["partial"] is False
    assert f"baseline {stored.id} is partial" in out["reason"]
