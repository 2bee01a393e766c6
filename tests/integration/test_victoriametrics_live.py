"""obsctl past one Prometheus, live: two Prometheus shards (external label ``cluster``) remote-write
into a real VictoriaMetrics (Debian ``victoria-metrics``); obsctl snapshot-baseline reads the global
view through VictoriaMetrics' Prometheus API (``prometheus.backend: victoriametrics``); vmalert
evaluates the generated rules against VictoriaMetrics, writes ``ALERTS`` back through remote write,
and the regression alert reaches a real Alertmanager when one shard's replica stops working.
"""

from __future__ import annotations

import http.server
import json
import math
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml
from click.testing import CliRunner

from obsctl.cli import cli
from support.polling import wait_until
from support.servers import Alertmanager
from support.victoriametrics import PrometheusShard, VictoriaMetrics, VMAlert

pytestmark = pytest.mark.skipif(shutil.which("victoria-metrics") is None or shutil.which("vmalert") is None,
                                reason="Debian victoria-metrics not installed (scripts/install-system-deps.sh)")

RATE = 50.0  # tokens/s per replica


class CounterTarget:
    """A scrape target serving ``obsctl_tokens_total`` growing at ``rate`` per second (settable)."""

    def __init__(self, replica: str) -> None:
        self.rate, self.value, self.at = RATE, 0.0, time.monotonic()
        self.lock = threading.Lock()
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = (f'# TYPE obsctl_tokens_total counter\nobsctl_tokens_total{{replica="{replica}"}} '
                        f"{target.total():.3f}\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"

    def total(self) -> float:
        with self.lock:
            now = time.monotonic()
            self.value += self.rate * (now - self.at)
            self.at = now
            return self.value

    def set_rate(self, rate: float) -> None:
        self.total()
        self.rate = rate

    def close(self) -> None:
        self.server.shutdown()


def _spec(path: Path, url: str, store: Path) -> Path:
    spec = {
        "version": 1,
        "prometheus": {"url": url, "backend": "victoriametrics", "timeout_seconds": 10},
        "store": str(store),
        "workload_classes": [{"name": "chat", "kind": "inference", "owner": "team-chat", "selector": {"job": "workload"}}],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "record": "obsctl_tokens:rate20s",
                     "query": "sum(rate(obsctl_tokens_total{$selector}[20s]))", "unit": "tokens/s",
                     "direction": "higher_is_better", "tolerance_ratio": 0.2, "alert_for": "4s"}],
        "verification": {"window": "30s", "step": "2s", "min_samples": 10, "memory_history": "1m"},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _vm_query(vm: VictoriaMetrics, expr: str) -> list[dict]:
    answer = requests.get(f"{vm.url}/api/v1/query", params={"query": expr, "nocache": "1"}, timeout=10).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def _sample_times(vm: VictoriaMetrics, selector: str = "obsctl_tokens_total", span: str = "5m") -> dict[str, list[float]]:
    """cluster -> times of the raw samples of ``selector`` stored in the last ``span`` (a readiness poll at the server's clock)."""
    return {s["metric"]["cluster"]: [float(t) for t, _ in s["values"]] for s in _vm_query(vm, f"{selector}[{span}]")}


def _covered(vm: VictoriaMetrics, start: float | None, seconds: float) -> int | None:
    """The whole second to query up to, once both shards' series hold samples from ``start`` (default: their
    first) through it, ``seconds`` later or more, and 2 s beyond it (past VictoriaMetrics' 1 s latency offset)."""
    times = _sample_times(vm)
    if set(times) != {"a", "b"}:
        return None
    begin = max(min(t) for t in times.values()) if start is None else start
    end = math.floor(min(max(t) for t in times.values()) - 2)
    return end if end >= begin + seconds else None


def _iso(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


@pytest.fixture
def fleet(tmp_path):
    """VictoriaMetrics, two replicas each scraped by its own shard (cluster a / b), an Alertmanager."""
    started: list = []
    try:
        vm = VictoriaMetrics(tmp_path / "vm").start()
        started.append(vm)
        replicas = [CounterTarget("r1"), CounterTarget("r2")]
        for cluster, replica in zip(("a", "b"), replicas, strict=True):
            started.append(PrometheusShard(tmp_path / f"prom-{cluster}", scrape_targets={"workload": [replica.address]},
                                           scrape_interval="1s", external_labels={"cluster": cluster},
                                           remote_write=f"{vm.url}/api/v1/write").start())
        am = Alertmanager(tmp_path / "am").start()
        started.append(am)
        yield vm, replicas, am
    finally:
        for server in reversed(started):
            server.stop()
        for replica in locals().get("replicas", []):
            replica.close()


def test_global_view_snapshot_and_regression_alert_through_victoriametrics(fleet, tmp_path):
    vm, replicas, am = fleet
    spec = _spec(tmp_path / "obsctl.yaml", vm.url, tmp_path / "store")
    # Both shards' series arrive through remote write, told apart by their external label,
    # and hold 20 s of rate() range + the 30 s window + margin before the window's end.
    end = wait_until(lambda: _covered(vm, None, 55), 150, interval=0.5, what=lambda: f"55 s of both series: {_sample_times(vm)}")

    runner = CliRunner()
    snap = runner.invoke(cli, ["snapshot-baseline", "--spec", str(spec), "--end", _iso(end), "--output", "json"])
    assert snap.exit_code == 0, snap.output
    (outcome,) = json.loads(snap.stdout)["outcomes"]
    # The global view: both replicas, one per shard (2 x 50 tokens/s), from two input series.
    assert outcome["mean"] == pytest.approx(2 * RATE, rel=0.15), outcome
    assert outcome["series_count"] == 2 and outcome["coverage"]["ratio"] >= 0.9, outcome

    rules = tmp_path / "rules"
    gen = runner.invoke(cli, ["rules", "generate", "--spec", str(spec), "--out", str(rules)])
    assert gen.exit_code == 0, gen.output
    files = sorted(rules.glob("obsctl-*.rules.yaml"))
    dry = subprocess.run(["vmalert", "-dryRun", *[f"-rule={p}" for p in files]], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stdout + dry.stderr  # the generated rules are a profile vmalert accepts

    vmalert = VMAlert(tmp_path / "vmalert", files, datasource=vm.url, remote_write=vm.url,
                      alertmanager=am.url).start()
    try:
        # Recorded series come back through remote write: the signal's and the baseline's.
        wait_until(lambda: _vm_query(vm, 'workload_class:obsctl_signal_baseline:value{workload_class="chat"}'), 60)
        replicas[1].set_rate(0.0)  # shard b's replica stops working: the class halves
        changed = time.time()  # a lower bound for the first scrape that sees it, not a query time

        def first_after_change() -> float | None:
            return min((t for t in _sample_times(vm, 'obsctl_tokens_total{cluster="b"}', "1m").get("b", []) if t > changed + 0.002),
                       default=None)

        seen = wait_until(first_after_change, 60, interval=0.5, what="a sample of shard b after the change")
        settled = math.ceil(seen + 22)  # past the 20 s rate() range after the first stopped sample
        start = runner.invoke(cli, ["initiative", "start", "--spec", str(spec), "--name", "replica r2 drained",
                                    "--lever", "scheduling", "--class", "chat", "--signal", "tokens_per_second",
                                    "--started-at", _iso(settled), "--output", "json"])
        assert start.exit_code == 0, start.output

        def fired() -> list[dict]:
            alerts = requests.get(f"{am.url}/api/v2/alerts", timeout=5).json()
            return [a for a in alerts if a["labels"].get("alertname") == "ObsctlSignalRegression"
                    and a["labels"].get("workload_class") == "chat"]

        (alert,) = wait_until(fired, 120, interval=1.0)
        assert alert["labels"]["signal"] == "tokens_per_second" and alert["labels"]["owner"] == "team-chat"
        # ALERTS, written back through remote write, is in VictoriaMetrics for dashboards and verify
        wait_until(lambda: _vm_query(vm, 'ALERTS{alertname="ObsctlSignalRegression",alertstate="firing",workload_class="chat"}'), 30)
        # verify over the global view: the window after the change, against the baseline
        end = wait_until(lambda: _covered(vm, settled, 32), 120, interval=0.5, what=lambda: f"the 30 s window stored: {_sample_times(vm)}")
        verdict = runner.invoke(cli, ["verify", "--spec", str(spec), "--class", "chat", "--end", _iso(end), "--output", "json"])
        # The drained replica's halved rate, measured over the global view; a minute of history is
        # too little for an honest memory (20 of its own lengths), so no verdict: INCONCLUSIVE, saying so.
        out = json.loads(verdict.stdout)
        assert verdict.exit_code == 11 and out["verdict"] == "INCONCLUSIVE", verdict.output
        assert out["change_ratio"] < -0.3 and "of history" in out["reason"], verdict.output
    finally:
        vmalert.stop()
