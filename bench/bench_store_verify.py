"""Benchmark of snapshot-baseline, verify and the store on long windows.

Prints figures and ratios measured in the same run (not a test):

- snapshot: ``snapshot()`` of 5 classes x 2 signals over a 30-day window at 60 s, against
  the same HTTP requests (all of them, coverage queries included; recorded through a
  logging proxy) issued plainly with ``requests`` (body read, JSON decoded). Goal <= 1.2x.
- verify: the whole ``obsctl verify`` process (30-day baseline, 7-day window, one guard)
  against its plain requests plus the CLI's own start-up (``obsctl --version``). Goal <= 1.5x.
- store: bytes of one 30-day baseline at 60 s (YAML + sample sidecar); the same record as
  inline YAML (the previous format) for reference. Goal <= 0.5 MB.
- listing and ``--class`` lookups: ``baseline list`` with 1-day vs 30-day baselines, and
  ``open_initiative`` (what ``verify --class`` does) with 10 vs 200 initiatives, each with
  a 7-day verification of 2 signals. Goal: ratios ~1 (independent of size and count).

History: backfilled with promtool (5 classes, a throughput gauge +10 % after the baseline
and a flat quality gauge, seeded noise), served by a real Prometheus on 127.0.0.1.

    python bench/bench_store_verify.py [--days 30] [--window-days 7] [--repeats 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
OBSCTL = str(Path(sys.executable).with_name("obsctl"))
STEP = 60
DAY = 86400
CLASSES = [f"c{i}" for i in range(5)]
TOKENS = "bench_tokens_per_second"
#: The CLI processes run as from an installed package: bytecode cached (pip compiles it at
#: install), so PYTHONDONTWRITEBYTECODE (set in some sandboxes and CI images) is dropped;
#: the first, recorded verify writes the cache for the timed ones.
CLI_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
QUALITY = "bench_quality_ratio"

# The local servers (support.servers) are test and demo tooling under tests/, not in the package.
sys.path.insert(0, str(ROOT / "tests"))

from obsctl.atomicio import atomic_write_yaml
from obsctl.baselining.initiative import Start, start_initiative
from obsctl.baselining.snapshot import SnapshotRequest, snapshot
from obsctl.baselining.store import Store
from obsctl.promapi import PrometheusClient
from obsctl.records import Initiative, VerificationResult, Window
from obsctl.spec import load_spec
from support.servers import Prometheus, create_blocks_from_openmetrics


def backfill(work: Path, data: Path, t0: int, end: int, split: int) -> None:
    """Write the history as one OpenMetrics file per UTC day and backfill each with promtool.

    promtool 2.42 re-reads its whole input for every 2 h block it makes, so one file of
    37 days costs 444 passes over it; day files (2 h-aligned, so blocks never overlap)
    keep that linear."""
    rng = np.random.default_rng(20260107)
    stamps = np.arange(t0, end + 1, STEP)
    series = []
    for metric, base, jump, sd in ((TOKENS, 1000.0, 1.10, 20.0), (QUALITY, 0.95, 1.0, 0.002)):
        for cls in CLASSES:
            values = np.where(stamps > split, base * jump, base) + rng.normal(0, sd, stamps.size)
            series.append((metric, f'{metric}{{job="bench",workload="{cls}"}}', values))
    days = stamps // DAY
    for day in np.unique(days):
        keep = days == day
        path = work / f"h-{day}.om"
        with path.open("w") as out:
            for metric in (TOKENS, QUALITY):
                out.write(f"# TYPE {metric} gauge\n")
                for name, label, values in series:
                    if name == metric:
                        out.writelines(f"{label} {v:.6f} {t}\n" for t, v in zip(stamps[keep].tolist(), values[keep].tolist(), strict=True))
            out.write("# EOF\n")
        create_blocks_from_openmetrics(path, data)
        path.unlink()


class RecordingProxy:
    """Forwards GETs to Prometheus and records each request's path and query string."""

    def __init__(self, upstream: str):
        self.requests: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy.requests.append(self.path)
                with urllib.request.urlopen(upstream + self.path, timeout=120) as answer:
                    body, ctype = answer.read(), answer.headers.get("Content-Type", "application/json")
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self) -> list[str]:
        out, self.requests = self.requests, []
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def plain(url: str, paths: list[str]) -> float:
    """Seconds to issue ``paths`` with a plain requests session, reading and decoding each body."""
    session = requests.Session()
    began = time.perf_counter()
    for path in paths:
        answer = session.get(url + path, timeout=120)
        answer.raise_for_status()
        answer.json()
    return time.perf_counter() - began


def write_spec(path: Path, url: str, store: Path, window: str) -> Path:
    spec = {
        "version": 1, "prometheus": {"url": url, "timeout_seconds": 120}, "store": str(store),
        "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "bench", "workload": c}} for c in CLASSES],
        "signals": [
            {"name": "tokens_per_second", "category": "throughput", "query": f"sum({TOKENS}{{$selector}})", "unit": "tokens/s",
             "direction": "higher_is_better"},
            {"name": "quality_ratio", "category": "quality", "query": f"avg({QUALITY}{{$selector}})", "unit": "ratio",
             "direction": "higher_is_better"},
        ],
        "verification": {"window": window, "step": f"{STEP}s", "confidence": 0.95, "min_effect_ratio": 0.02},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def median_time(fn, repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def bench_snapshot(work: Path, prom_url: str, proxy: RecordingProxy, end: int, days: int, repeats: int) -> Path:
    window = f"{days}d"
    at = dt.datetime.fromtimestamp(end, dt.UTC)
    rec_spec = load_spec(write_spec(work / "rec.yaml", proxy.url, work / "rec-store", window))
    snapshot(rec_spec, PrometheusClient.from_spec(rec_spec), Store(work / "rec-store"), SnapshotRequest(end=at))
    paths = proxy.take()
    runs: list[tuple[float, float]] = []
    for n in range(repeats):
        store = work / f"snap-store-{n}"
        spec = load_spec(write_spec(work / f"snap-{n}.yaml", prom_url, store, window))
        t_obsctl = timed(lambda spec=spec, store=store: snapshot(spec, PrometheusClient.from_spec(spec), Store(store), SnapshotRequest(end=at)))
        t_plain = plain(prom_url, paths)
        runs.append((t_obsctl, t_plain))
    t_obsctl = statistics.median(r[0] for r in runs)
    t_plain = statistics.median(r[1] for r in runs)
    print(f"snapshot {len(CLASSES)} classes x 2 signals, {days} d at {STEP} s: {len(paths)} HTTP requests "
          f"({sum('obsctl_leg' in urllib.parse.unquote(p) for p in paths)} coverage)")
    print(f"  obsctl snapshot()        {t_obsctl:8.3f} s (median of {repeats})")
    print(f"  same requests, plainly   {t_plain:8.3f} s")
    print(f"  ratio                    {t_obsctl / t_plain:8.2f} x   (goal <= 1.2)")
    # Where the difference goes: the client's own parsing of one signal's answer
    # (promapi.query_range) against the same requests plainly (body read, JSON decoded).
    query = spec.query_for(spec.signal("tokens_per_second"), spec.workload_class(CLASSES[0]))
    start = split_ts = at.timestamp() - days * DAY
    client = PrometheusClient.from_spec(spec)
    client.query_range(query, start + STEP, at.timestamp(), STEP)
    signal_paths = [p for p in paths if "query_range" in p and urllib.parse.quote_plus(query) in p]
    t_client = median_time(lambda: timed(lambda: client.query_range(query, split_ts + STEP, at.timestamp(), STEP)), repeats)
    t_raw = median_time(lambda: plain(prom_url, signal_paths), repeats)
    print(f"  one signal's range query ({len(signal_paths)} requests): PrometheusClient.query_range {t_client:.3f} s, "
          f"plainly {t_raw:.3f} s: the client's parsing is {t_client - t_raw:+.3f} s per signal")
    return work / "snap-store-0"


def store_figures(store_dir: Path, days: int) -> None:
    store = Store(store_dir)
    b = store.current_baselines()[0]
    record = store.baseline_file(b.workload_class, b.signal, b.id)
    sides = list(record.parent.glob(f"{b.id}.*.samples.npz"))
    size = record.stat().st_size + sum(p.stat().st_size for p in sides)
    full = store.baseline(b.id)
    legacy = Path(tempfile.mkstemp(suffix=".yaml")[1])
    atomic_write_yaml(legacy, full.model_dump(mode="json"))
    print(f"store: one {days}-day baseline at {STEP} s ({len(full.samples):,} samples)")
    print(f"  YAML {record.stat().st_size:,} B + sidecar {size - record.stat().st_size:,} B = {size / 1e6:.3f} MB   (goal <= 0.5 MB)")
    print(f"  previous format (inline YAML) {legacy.stat().st_size / 1e6:.3f} MB")
    legacy.unlink()


def bench_verify(work: Path, prom_url: str, proxy: RecordingProxy, base_store: Path, split: int, end: int, window_days: int,
                 repeats: int) -> None:
    window = f"{window_days}d"
    base = work / "verify-base"
    shutil.copytree(base_store, base)
    spec_path = write_spec(work / "verify.yaml", prom_url, base, window)
    spec = load_spec(spec_path)
    start_initiative(spec, Store(base), Start("bench", "batch-size", "c0", "tokens_per_second", 0.1, dt.datetime.fromtimestamp(split, dt.UTC), ""))
    args = ["verify", "--class", "c0", "--end", iso(end), "--window", window, "--output", "json"]

    def run(spec_file: Path) -> subprocess.CompletedProcess:
        return subprocess.run([OBSCTL, *args, "--spec", str(spec_file)], capture_output=True, text=True, timeout=600, check=False, env=CLI_ENV)

    rec = work / "verify-rec"
    shutil.copytree(base, rec)
    first = run(write_spec(work / "verify-rec.yaml", proxy.url, rec, window))
    verdict = json.loads(first.stdout)
    paths = proxy.take()
    runs = []
    for n in range(repeats):
        store = work / f"verify-{n}"
        shutil.copytree(base, store)
        spec_file = write_spec(work / f"verify-{n}.yaml", prom_url, store, window)
        t_verify = timed(lambda spec_file=spec_file: run(spec_file))
        t_version = timed(lambda: subprocess.run([OBSCTL, "--version"], capture_output=True, timeout=60, check=True, env=CLI_ENV))
        t_plain = plain(prom_url, paths)
        runs.append((t_verify, t_version, t_plain))
    t_verify, t_version, t_plain = (statistics.median(r[i] for r in runs) for i in range(3))
    probe = ("import time; t = time.perf_counter(); import obsctl.cli, obsctl.baselining.commands.cli, obsctl.baselining.verify; "
             "print(time.perf_counter() - t)")
    t_import = statistics.median(float(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                                                      env=CLI_ENV).stdout)
                                 for _ in range(repeats))
    print(f"verify: {window_days}-day window at {STEP} s vs a 30-day baseline, 1 guard: {verdict['verdict']} "
          f"{verdict['change_ratio'] * 100:+.1f} %, {len(paths)} HTTP requests, coverage {verdict['coverage']['ratio'] * 100:.1f} %")
    print(f"  obsctl verify (process)  {t_verify:8.3f} s (median of {repeats})")
    print(f"  obsctl --version         {t_version:8.3f} s")
    print(f"  (importing the verify modules alone: {t_import:.3f} s)")
    print(f"  same requests, plainly   {t_plain:8.3f} s")
    print(f"  ratio                    {t_verify / (t_version + t_plain):8.2f} x   (goal <= 1.5)")


def _initiatives(store: Store, count: int, samples: int) -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rng = np.random.default_rng(1)
    for n in range(count):
        grid = [(t0.timestamp() + STEP * (k + 1), float(v)) for k, v in enumerate(rng.normal(1000, 20, samples))]
        v = VerificationResult(verdict="IMPROVED", primary_verdict="IMPROVED", baseline_id="c.s.x", signal="tokens_per_second",
                               window=Window(start=t0, end=t0 + dt.timedelta(seconds=STEP * samples), step_seconds=STEP),
                               baseline_mean=1.0, window_mean=1.1, change_ratio=0.1, ci_low=0.05, ci_high=0.15, confidence=0.95,
                               verified_at=t0, samples=grid)
        store.add_initiative(Initiative(id=f"i-{n}", name=f"i {n}", lever="batch-size", workload_class=f"c{n % 50}",
                                        primary_signal="tokens_per_second", baseline_id="c.s.x", started_at=t0,
                                        status="open" if n >= count - 50 else "closed", verifications=[v, v]))


def bench_listing(work: Path, base_store: Path, repeats: int) -> None:
    few, many = Store(work / "init-10"), Store(work / "init-200")
    week = 7 * DAY // STEP
    _initiatives(few, 10, week)
    _initiatives(many, 200, week)
    t_few = median_time(lambda: timed(lambda: few.open_initiative("c3")), repeats * 4)
    t_many = median_time(lambda: timed(lambda: many.open_initiative("c3")), repeats * 4)
    print("lookups (in-process, median):")
    print(f"  open_initiative (--class), 10 initiatives   {t_few * 1e3:7.2f} ms")
    print(f"  open_initiative (--class), 200 initiatives  {t_many * 1e3:7.2f} ms   ratio {t_many / t_few:.2f} x")
    small = work / "small-store"
    store = Store(base_store)
    for b in store.current_baselines(samples=True):
        Store(small).save_baseline(b.model_copy(update={"samples": b.samples[: DAY // STEP]}))
    t_small = median_time(lambda: timed(lambda: Store(small).current_baselines()), repeats * 4)
    t_big = median_time(lambda: timed(lambda: store.current_baselines()), repeats * 4)
    print(f"  baseline list, 10 baselines of 1 day        {t_small * 1e3:7.2f} ms")
    print(f"  baseline list, 10 baselines of 30 days      {t_big * 1e3:7.2f} ms   ratio {t_big / t_small:.2f} x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=30, help="baseline window in days")
    ap.add_argument("--window-days", type=int, default=7, help="verification window in days")
    ap.add_argument("--repeats", type=int, default=5)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-verify-") as tmp:
        work = Path(tmp)
        end = int(math.floor((time.time() - 900) / STEP) * STEP)
        split = end - opts.window_days * DAY
        t0 = split - opts.days * DAY - 3600
        began = time.perf_counter()
        backfill(work, work / "data", t0, end, split)
        print(f"backfilled in {time.perf_counter() - began:.0f} s")
        prom = Prometheus(workdir=work / "prom", data_dir=work / "data")
        proxy = None
        try:
            prom.start()
            proxy = RecordingProxy(prom.url)
            print(f"Prometheus {prom.url}, {len(CLASSES)} classes, {opts.days + opts.window_days} days at {STEP} s backfilled; "
                  f"cores: {os.cpu_count()}")
            base_store = bench_snapshot(work, prom.url, proxy, split, opts.days, opts.repeats)
            store_figures(base_store, opts.days)
            bench_verify(work, prom.url, proxy, base_store, split, end, opts.window_days, opts.repeats)
            bench_listing(work, base_store, opts.repeats)
        finally:
            if proxy is not None:
                proxy.close()
            prom.stop()


if __name__ == "__main__":
    main()
