"""The obsctl loop, end to end, on a real stack and a real CPU inference workload.

Starts Alertmanager, Prometheus (generated config and rules), ``obsctl-exporter`` and
two replicas of the embedding workload (``demo/embedding_workload.py``, track ``stable``
and track ``canary``, one core each) as local processes on free ports, then runs the
loop exactly as a platform engineer would, with the ``obsctl`` CLI:

  1. baseline   both replicas at batch size 1, ``obsctl snapshot-baseline``, rules regenerated
  2. initiative ``obsctl initiative start`` (lever batch-size; design canary from the spec),
                deploy batch size 32 on the canary replica only
  3. verify     ``obsctl verify``: canary vs stable in the same window (tokens per CPU-second),
                with the demand and saturation of the class
  4. update     ``obsctl baseline promote`` (the canary's window becomes the baseline)
  5. share      ``obsctl report`` (Markdown + PNG) in demo-output/report/
  6. practice   ``obsctl review`` (the cadence meeting: the promoted baseline, the next
                opportunity; a dated document in demo-output/review/) and ``obsctl ledger``
                (the verified initiative with its effort and lesson, the staircase) in
                demo-output/ledger/

The canary design compares the two replicas at the same instants, so whatever else the
shared 2-core machine does (other jobs, the other replica's load) moves both and cancels.

Everything it started is stopped on exit, also on Ctrl-C. Outputs stay in demo-output/.
Durations: ``OBSCTL_DEMO_WINDOW_SECONDS`` (default 180) per window.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# The local servers (support.servers) are test and demo tooling under tests/, not in the package.
sys.path.insert(0, str(ROOT / "tests"))

from support.servers import Alertmanager, ManagedProcess, Prometheus, free_port, spawn, wait_ready

OUT = ROOT / "demo-output"
WINDOW = int(os.environ.get("OBSCTL_DEMO_WINDOW_SECONDS", "180"))
RATE_WINDOW = 30  # seconds; the spec's rate()s use [30s]
CLASS = "embed-online"
SIGNAL = "tokens_per_cpu_second"
TRACKS = ("stable", "canary")


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def obsctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, echoing the command."""
    argv = [sys.executable, "-m", "obsctl", *args]
    say("$ obsctl " + " ".join(args))
    result = subprocess.run(argv, text=True, capture_output=True)
    if result.stderr.strip():
        print(result.stderr.rstrip(), file=sys.stderr)
    if result.stdout.strip():
        print(result.stdout.rstrip())
    if check and result.returncode != 0:
        raise SystemExit(f"demo: 'obsctl {args[0]}' failed with exit code {result.returncode}")
    return result


def start_workload(batch_size: int, port: int, track: str, wait: bool = True) -> ManagedProcess:
    # One torch thread per replica: the two replicas get a core each on a 2-core node.
    proc = spawn(
        f"workload-{track}-batch{batch_size}",
        [sys.executable, str(ROOT / "demo" / "embedding_workload.py"), "--batch-size", str(batch_size), "--port", str(port),
         "--track", track, "--threads", "1"],
        OUT,
    )
    if wait:
        wait_ready(f"http://127.0.0.1:{port}/metrics", timeout=180, process=proc.process)
    return proc


def relabel(ports: dict[str, int]) -> list[dict]:
    """Target labels of the workload job: the class's ``workload`` and each replica's ``track``
    on every series it exposes (process_cpu_seconds_total included)."""
    rules = [{"target_label": "workload", "replacement": CLASS}]
    rules += [{"source_labels": ["__address__"], "regex": f"127\\.0\\.0\\.1:{port}", "target_label": "track", "replacement": track}
              for track, port in ports.items()]
    return rules


def sleep_with_progress(seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        say(f"{what}: {left:4.0f} s left")
        time.sleep(min(30.0, left))


def utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main() -> int:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    spec = yaml.safe_load((ROOT / "demo" / "obsctl.yaml").read_text())
    exporter_port = free_port()
    ports = {track: free_port() for track in TRACKS}
    rules_dir = OUT / "rules"

    with ExitStack() as stack:
        say("starting Alertmanager and obsctl-exporter")
        am = Alertmanager(OUT / "alertmanager").start()
        stack.callback(am.stop)
        prom = Prometheus(
            OUT / "prometheus",
            scrape_targets={"obsctl-exporter": [f"127.0.0.1:{exporter_port}"],
                            "obsctl-workload": [f"127.0.0.1:{p}" for p in ports.values()]},
            scrape_options={"obsctl-workload": {"honor_labels": True, "relabel_configs": relabel(ports)}},
            alertmanager=am.address,
            scrape_interval="2s",
            evaluation_interval="2s",
        )
        prom.port = free_port()
        spec["prometheus"]["url"] = prom.url
        spec["alertmanager_url"] = am.url
        spec["store"] = str(OUT / "store")
        spec_path = OUT / "obsctl.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))

        exporter = spawn(
            "obsctl-exporter",
            [sys.executable, "-m", "obsctl.exporters.main", f"--web.listen-address=127.0.0.1:{exporter_port}",
             f"--config.file={spec_path}", "--gpu.source=auto"],
            OUT,
        )
        stack.callback(exporter.stop)
        wait_ready(f"http://127.0.0.1:{exporter_port}/metrics", timeout=30, process=exporter.process)

        obsctl("check", "--spec", str(spec_path))
        obsctl("rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir))
        prom.rule_files = sorted(rules_dir.glob("*.yaml"))
        prom.start()
        stack.callback(prom.stop)
        say(f"Prometheus {prom.url}, Alertmanager {am.url}, exporter :{exporter_port}, workload replicas {ports}")

        # 1. Baseline: both replicas at batch size 1.
        say("deploying two replicas at batch size 1 (track stable and track canary; loading all-MiniLM-L6-v2)")
        replicas = {track: start_workload(1, port, track, wait=False) for track, port in ports.items()}
        stack.callback(lambda: [r.stop() for r in replicas.values()])
        for track, port in ports.items():
            wait_ready(f"http://127.0.0.1:{port}/metrics", timeout=180, process=replicas[track].process)
        sleep_with_progress(RATE_WINDOW + 15 + WINDOW, "collecting the baseline window")
        obsctl("snapshot-baseline", "--spec", str(spec_path), "--class", CLASS, "--window", f"{WINDOW}s")
        obsctl("rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir))
        prom.rule_files = sorted(rules_dir.glob("*.yaml"))
        prom.reload()

        # 2. Initiative: one lever, one class. It starts when the change is live and its rate
        # window holds only the new state: every look is the window cumulative from there.
        say("deploying the change on the canary replica only: batch size 32")
        replicas["canary"].stop()
        replicas["canary"] = start_workload(32, ports["canary"], "canary")
        settle_end = time.time() + RATE_WINDOW + 15
        result = obsctl(
            "initiative", "start", "--spec", str(spec_path), "--name", "batch size 32", "--lever", "batch-size",
            "--class", CLASS, "--signal", SIGNAL, "--expected-impact", "1.0", "--effort", "half an engineer-day",
            "--started-at", utc(settle_end), "--output", "json",
        )
        initiative_id = json.loads(result.stdout)["id"]
        sleep_with_progress(RATE_WINDOW + 15 + WINDOW, "collecting the verification window")
        window_end = time.time()

        # 3. Verify (exit code carries the verdict; 0 = IMPROVED): a look at the window from the start.
        verdict = obsctl("verify", "--spec", str(spec_path), "--initiative", initiative_id, "--end", utc(window_end), check=False)
        # What a pipeline would read instead: the stored verification, as JSON.
        obsctl("initiative", "list", "--spec", str(spec_path), "--class", CLASS, "--output", "json", check=False)
        if verdict.returncode != 0:
            say(f"verification did not say IMPROVED (exit code {verdict.returncode}); not promoting")
            return verdict.returncode

        # 4. Update the baseline; 5. share.
        obsctl("baseline", "promote", "--spec", str(spec_path), "--initiative", initiative_id, "--lesson",
               "batching amortizes the per-call overhead on CPU; the next limit is the tokenizer, not the model")
        obsctl("report", "--spec", str(spec_path), "--initiative", initiative_id, "--out", str(OUT / "report"))
        obsctl("rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir))

        # 6. The practice: the review on the class's cadence (exit 10 when something needs
        # acting on, as from cron) and the ledger of what the loop has verified so far.
        obsctl("review", "--spec", str(spec_path), "--write", "--out", str(OUT / "review"), check=False)
        obsctl("ledger", "--spec", str(spec_path), "--out", str(OUT / "ledger"))
        say(f"done: report in {OUT / 'report'}, review in {OUT / 'review'}, ledger in {OUT / 'ledger'}; "
            f"verdict: {verdict.stdout.strip().splitlines()[0] if verdict.stdout.strip() else '?'}")
    say("stopped everything the demo started")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
