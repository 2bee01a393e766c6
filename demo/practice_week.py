"""A week of the practice on a live stack, compressed: one "day" is about a minute.

Starts Prometheus (scraping every second, evaluating the generated rules every second)
and a Pushgateway as local processes, and two stand-in vLLM replicas (the gauges vLLM's
metrics endpoint serves: ``vllm:avg_generation_throughput_toks_per_s`` and
``vllm:gpu_cache_usage_perc``, per ``model_name``, seeded noise around a level the script
sets; the spec reads them over 3 s, so a scrape a loaded machine drops does not drop a
replica from the sum). Then runs the practice with the real ``obsctl`` CLI, printing each command and its
output (docs/practice.md#a-week-on-a-live-stack quotes a run):

  Mon  snapshot-baseline, rules generate (+ reload), target show
  Tue  the change (+30 % tokens/s on both replicas), then initiative start
  Wed  verify (look 1: a part of the planned window)
  Thu  verify (look 2: the whole window)
  Fri  baseline promote (or, when the verdict is not IMPROVED, initiative close and a
       rollback), rules generate (+ reload); a KV-cache blip 0.1 % -> 0.2 % and a
       throughput dip inside the new baseline's spread: ALERTS shows what fires
  Sat  a real regression (-20 % tokens/s): ALERTS again
  Sun  review, publish (to the Pushgateway), ledger

Everything it started is stopped on exit. ``python demo/practice_week.py [WORKDIR]``.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import requests
import yaml

# The local servers (support.servers) are test and demo tooling under tests/, not in the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.servers import Prometheus, Pushgateway

MODEL = "facebook/opt-125m"
TOKENS = "vllm:avg_generation_throughput_toks_per_s"
KV = "vllm:gpu_cache_usage_perc"
DAY = 60  # seconds of live scraping per day of the week


class Replica:
    """One stand-in vLLM server: each scrape gets ``level x (1 + N(0, 2 %))`` tokens/s and
    ``kv x (1 + N(0, 10 %))`` of the KV cache, from a seeded generator."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.level, self.kv = 500.0, 0.001
        lock = threading.Lock()
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                with lock:
                    tok = replica.level * (1 + replica.rng.normal(0, 0.02))
                    kv = max(0.0, replica.kv * (1 + replica.rng.normal(0, 0.1)))
                body = (f"# TYPE {TOKENS} gauge\n{TOKENS}{{model_name=\"{MODEL}\"}} {tok:.3f}\n"
                        f"# TYPE {KV} gauge\n{KV}{{model_name=\"{MODEL}\"}} {kv:.6f}\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except BrokenPipeError:  # Prometheus gave up on a slow scrape (a loaded machine)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def obsctl(work: Path, *args: str) -> int:
    """Run the real CLI in ``work`` (the spec is ``work/obsctl.yaml``), print its output, return its exit code."""
    print(f"$ obsctl {' '.join(args)}", flush=True)
    result = subprocess.run([sys.executable, "-m", "obsctl", *args], cwd=work, text=True, capture_output=True)
    out = (result.stdout + result.stderr).rstrip()
    print(out + (f"\n(exit {result.returncode})" if result.returncode else ""), flush=True)
    return result.returncode


def day(name: str, seconds: float = DAY) -> None:
    print(f"\n## {name} (waiting {seconds:.0f} s of live scrapes)", flush=True)
    time.sleep(seconds)


def utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(int(ts), dt.UTC).isoformat().replace("+00:00", "Z")


def alerts(prom: Prometheus) -> None:
    print('$ curl -s "$PROM/api/v1/query?query=ALERTS{alertname=\\"ObsctlSignalRegression\\"}"', flush=True)
    body = requests.get(f"{prom.url}/api/v1/query", params={"query": 'ALERTS{alertname="ObsctlSignalRegression"}'}, timeout=10).json()
    found = [f"{r['metric'].get('signal')} {r['metric'].get('alertstate')}" for r in body["data"]["result"]]
    print("\n".join(found) if found else "(no ObsctlSignalRegression, pending or firing)", flush=True)


def main() -> int:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="practice-week-"))
    work.mkdir(parents=True, exist_ok=True)
    replicas = [Replica(11), Replica(12)]
    rules = work / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "empty.yaml").write_text("groups: []\n")
    prom = Prometheus(work / "prom", scrape_targets={"vllm": [r.address for r in replicas]}, rule_files=[rules / "empty.yaml"],
                      scrape_interval="1s", evaluation_interval="1s")
    gateway = Pushgateway(work / "pushgateway")
    try:
        prom.start()
        gateway.start()
        deadline = (dt.date.today() + dt.timedelta(days=90)).isoformat()
        (work / "obsctl.yaml").write_text(yaml.safe_dump({
            "name": "team-chat", "prometheus": {"url": prom.url}, "store": "store", "cadence": "weekly",
            "workload_classes": [{"name": "chat", "kind": "inference", "owner": "team-chat",
                                  "selector": {"job": "vllm", "model_name": MODEL}}],
            "signals": [
                {"name": "tokens_per_second", "category": "throughput", "unit": "tokens/s", "direction": "higher_is_better",
                 "query": f"sum(avg_over_time({TOKENS}{{$selector}}[3s]))", "alert_for": "20s"},
                {"name": "kv_cache_usage", "category": "saturation", "unit": "ratio", "direction": "lower_is_better",
                 "query": f"avg(avg_over_time({KV}{{$selector}}[3s]))", "alert_for": "20s"},
            ],
            "targets": [{"workload_class": "chat", "signal": "tokens_per_second", "relative": 0.2,
                         "driver": "serve the Q1 launch on the same GPUs", "deadline": deadline}],
            "verification": {"window": "4m", "step": "1s", "min_samples": 10, "memory_history": "4m",
                             "guards": ["kv_cache_usage"]},
        }, sort_keys=False))
        print(f"# stack: Prometheus {prom.url}, Pushgateway {gateway.url}, 2 vLLM replicas; spec {work / 'obsctl.yaml'}")

        def regenerate() -> None:
            obsctl(work, "rules", "generate", "--out", "rules")
            (rules / "empty.yaml").unlink(missing_ok=True)
            prom.rule_files = sorted(rules.glob("*.yaml"))
            prom.reload()

        day("Mon", 270)  # 60 s of baseline and 200 steps of history before it (the memory fit)
        monday = time.time() - 2
        obsctl(work, "snapshot-baseline", "--window", "60s", "--end", utc(monday))
        regenerate()
        obsctl(work, "target", "show")

        day("Tue", 5)
        for r in replicas:  # the change is deployed; the initiative starts at its first whole second after
            r.level *= 1.3
        time.sleep(2)
        started = time.time()
        obsctl(work, "initiative", "start", "--name", "batch 32", "--lever", "batch-size", "--class", "chat",
               "--signal", "tokens_per_second", "--expected-impact", "0.3", "--started-at", utc(started))
        iid = f"batch-32-{dt.datetime.fromtimestamp(started, dt.UTC):%Y%m%d}"

        day("Wed")
        obsctl(work, "verify", "--initiative", iid)
        day("Thu", max(5.0, started + 250 - time.time()))  # past 200 window steps: the window fits its own memory
        obsctl(work, "verify", "--initiative", iid)

        day("Fri", 5)
        if obsctl(work, "baseline", "promote", "--initiative", iid, "--lesson", "batch 32 fits the KV cache at this load"):
            obsctl(work, "initiative", "close", "--initiative", iid, "--lesson", "not shown on this window; rolled back")
            for r in replicas:  # rolled back: the Monday baseline describes the service again
                r.level /= 1.3
        regenerate()
        for r in replicas:
            r.kv = 0.002  # 0.1 % -> 0.2 %: +100 %, past p95, under the 0.02 floor
            r.level *= 0.985  # -1.5 %: inside the new baseline's spread
        day("Fri, an hour later", 40)
        alerts(prom)
        for r in replicas:
            r.kv, r.level = 0.001, r.level / 0.985 * 0.8  # a real regression: -20 %, past the spread
        day("Sat", 45)
        alerts(prom)
        for r in replicas:
            r.level /= 0.8

        day("Sun", 15)
        obsctl(work, "review")
        obsctl(work, "publish", "--pushgateway", gateway.url)
        obsctl(work, "ledger")
        return 0
    finally:
        gateway.stop()
        prom.stop()
        for r in replicas:
            r.close()


if __name__ == "__main__":
    sys.exit(main())
