"""Fleet benchmark: snapshot-baseline against its own raw range queries, and the generated
rules' evaluation time and cardinality on a live stream, on one real Prometheus.

Prints tables (not a test); figures go into docs/benchmarks-fleet.md.

(a) snapshot: ``snapshot()`` (what ``obsctl snapshot-baseline --window W`` runs) of N
    classes x 5 signals over a backfilled fleet (``--gpus`` GPUs, 8 per node, exporter
    metric names, 60 s samples), against the signal range requests it issued (the window
    and the memory history, recorded through a logging proxy) sent plainly with
    ``requests`` (body read, JSON decoded), as a ratio measured in the same run, for each
    N of ``--classes`` and for 1 vs ``--replicas`` input series per class, with the
    current coverage queries and with the previous formulation (``old``: the count per
    step as the difference of two overlapping ranges, each selector read once per
    signal that uses it). Goal: <= 1.2x at 200 classes, linear in classes.
(b) rules: ``obsctl rules generate`` for the same spec, Prometheus scraping a stand-in
    exporter (one target per node, current values every scrape) and evaluating the rules
    every ``--interval``; after ``--settle`` seconds the sum over groups of
    ``prometheus_rule_group_last_duration_seconds`` against the interval (goal <= 10 %),
    and the series per GPU (exporter) and per class x signal (recorded by the pack)
    (goals <= 30 and <= 150).

``--legs K``: each coverage request of one selector (as sent without a Pushgateway group in
    reach) against the signal's own range query, per selector, in Prometheus CPU (from
    ``/proc``) and wall time, for the GPU power and token selectors of K classes.
(c) ``--review``: ``obsctl review`` and ``obsctl publish`` (subprocesses, as a CronJob runs
    them) of the largest N x 3 signals at the end of the history, after an untimed snapshot
    of each pair's baseline over the day before the weekly period (8 days read in all):
    wall time, CPU of obsctl and of Prometheus (goal: review <= 60 s on 2 cores).

History is generated as OpenMetrics, one file per 2 h block (promtool 2.42 re-reads its
whole input for every 2 h block it makes), and the TSDB is cached under ``--cache``
(default ``.bench-cache/``, which ignores itself) keyed by its parameters, then compacted
once by a Prometheus started on it so the timed runs read compacted blocks as a
long-running server would.

    nice -n 10 .venv/bin/python bench/bench_fleet.py [--gpus 1000] [--classes 10,50,200]
        [--replicas 50] [--days 30] [--skip-rules] [--review]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import resource
import shutil
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
BLOCK = 7200
GPUS_PER_NODE = 8
#: A fixed end (2026-12-01T00:00:00Z) so the cache key does not move with the clock.
END = 1_796_083_200
HISTORY_DAYS = 1

# The local servers (support.servers) are test and demo tooling under tests/, not in the package.
sys.path.insert(0, str(ROOT / "tests"))

from obsctl.baselining.measure import coverage as cov  # noqa: E402
from obsctl.baselining.snapshot import SnapshotRequest, snapshot  # noqa: E402
from obsctl.baselining.store import Store  # noqa: E402
from obsctl.promapi import PrometheusClient  # noqa: E402
from obsctl.spec import load_spec  # noqa: E402
from support.servers import Prometheus, free_port  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The logging proxy and the plain reference of the store/verify benchmark (requests of up to 120 s each).
from bench_store_verify import RecordingProxy, plain  # noqa: E402

GPU_METRICS = ("obsctl_gpu_utilization_ratio", "obsctl_gpu_power_watts", "obsctl_gpu_memory_used_bytes",
               "obsctl_gpu_energy_joules_total")


def classes_of(n: int, replicas: int) -> list[str]:
    return [f"r{replicas}-c{i:03d}" for i in range(n)]


def signals() -> list[dict]:
    """Five signals per class in the spec format of examples/obsctl.yaml."""
    return [
        {"name": "tokens_per_second", "category": "throughput", "record": "obsctl_fleet_tokens:rate5m",
         "query": "sum(rate(obsctl_tokens_total{$selector}[5m]))", "unit": "tokens/s", "direction": "higher_is_better"},
        {"name": "gpu_utilization", "category": "utilization", "record": "obsctl_gpu_utilization:avg",
         "query": "avg(obsctl_gpu_utilization_ratio{$node_selector})", "unit": "ratio", "direction": "higher_is_better"},
        {"name": "gpu_power_watts", "category": "cost", "record": "obsctl_gpu_power_watts:sum",
         "query": "sum(obsctl_gpu_power_watts{$node_selector})", "unit": "W", "direction": "lower_is_better"},
        {"name": "gpu_memory_used_bytes", "category": "saturation", "record": "obsctl_gpu_memory_used_bytes:sum",
         "query": "sum(obsctl_gpu_memory_used_bytes{$node_selector})", "unit": "bytes", "direction": "lower_is_better"},
        {"name": "tokens_per_joule", "category": "cost", "record": "obsctl_tokens_per_joule:ratio_rate5m",
         "query": "sum(rate(obsctl_tokens_total{$selector}[5m])) / sum(rate(obsctl_gpu_energy_joules_total{$node_selector}[5m]))",
         "unit": "tokens/J", "direction": "higher_is_better"},
    ]


def write_spec(path: Path, url: str, store: Path, classes: list[str], window: str) -> Path:
    spec = {
        "version": 1, "prometheus": {"url": url, "timeout_seconds": 300}, "store": str(store),
        "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "obsctl-workload", "workload": c},
                              "node_selector": {"job": "obsctl-exporter", "pool": c}} for c in classes],
        "signals": signals(),
        "verification": {"window": window, "step": f"{STEP}s", "memory_history": f"{HISTORY_DAYS}d", "confidence": 0.95,
                         "min_effect_ratio": 0.02},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# --- the fleet --------------------------------------------------------------------------------


class Fleet:
    """Series of the simulated fleet: GPUs spread over the classes (``pool`` label, the
    class's node pool), ``replicas`` workload pods per class."""

    def __init__(self, gpus: int, groups: list[tuple[int, int]]):
        self.gpu_rows: list[tuple[str, str]] = []  # (labels, class)
        self.pod_rows: list[tuple[str, str]] = []
        classes = [c for n, r in groups for c in classes_of(n, r)]
        for g in range(gpus):
            node, idx, cls = g // GPUS_PER_NODE, g % GPUS_PER_NODE, classes[g % len(classes)]
            self.gpu_rows.append((f'job="obsctl-exporter",instance="node-{node:03d}:9400",gpu="{idx}",uuid="GPU-{g:05d}",pool="{cls}"', cls))
        for n, r in groups:
            for cls in classes_of(n, r):
                for p in range(r):
                    self.pod_rows.append((f'job="obsctl-workload",instance="pod-{cls}-{p}:8000",workload="{cls}"', cls))

    def openmetrics(self, t0: int, t1: int, rng: np.random.Generator) -> str:
        """Samples at ``t0 <= t < t1`` every STEP seconds; counters continue from ``t0``."""
        stamps = [str(t) for t in range(t0, t1, STEP)]
        k = np.arange(len(stamps))
        base = (t0 - END) // STEP
        out = []
        values = {
            "obsctl_gpu_utilization_ratio": lambda n: np.round(rng.uniform(0.3, 0.9, (n, k.size)), 3),
            "obsctl_gpu_power_watts": lambda n: np.round(rng.uniform(200, 600, (n, k.size)), 1),
            "obsctl_gpu_memory_used_bytes": lambda n: np.round(rng.uniform(20, 70, (n, k.size))) * 2**30,
            "obsctl_gpu_energy_joules_total": lambda n: np.tile((base + k) * 400.0 * STEP + 1e9, (n, 1)),
        }
        for metric in GPU_METRICS:
            kind = "counter" if metric.endswith("_total") else "gauge"
            family = metric[: -len("_total")] if kind == "counter" else metric
            out.append(f"# TYPE {family} {kind}\n")
            block = values[metric](len(self.gpu_rows))
            for (labels, _), row in zip(self.gpu_rows, block.tolist(), strict=True):
                out.append("".join(f"{metric}{{{labels}}} {v:g} {t}\n" for v, t in zip(row, stamps, strict=True)))
        out.append("# TYPE obsctl_tokens counter\n")
        tokens = ((base + k) * 1000.0 * STEP + 1e9).tolist()
        for labels, _ in self.pod_rows:
            out.append("".join(f"obsctl_tokens_total{{{labels}}} {v:g} {t}\n" for v, t in zip(tokens, stamps, strict=True)))
        return "".join(out) + "# EOF\n"


def backfill(cache: Path, fleet: Fleet, days: int) -> Path:
    """The cached, compacted TSDB of ``days`` + history days ending at END (built once).

    Resumable: each 2 h block has its own seed and ``cache/blocks-done`` holds the start of
    the last block promtool wrote, so an interrupted backfill goes on from the next block
    (one written but not yet recorded is written again: Prometheus merges overlapping
    blocks when it compacts)."""
    data = cache / "data"
    if (cache / "done").exists():
        return data
    progress = cache / "blocks-done"
    resume = int(progress.read_text()) if progress.exists() and progress.read_text().strip().isdigit() else None
    if resume is None:
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
    t0 = END - (days + HISTORY_DAYS) * DAY - BLOCK
    began = time.perf_counter()
    for start in range(t0, END, BLOCK):
        if resume is not None and start <= resume:
            continue
        path = cache / "block.om"
        path.write_text(fleet.openmetrics(start, start + BLOCK, np.random.default_rng([20261201, start])))
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(data)],
                       check=True, capture_output=True, timeout=600)
        path.unlink()
        progress.write_text(f"{start}\n")
    print(f"backfilled {(END - t0) // DAY} days in {time.perf_counter() - began:.0f} s; compacting", flush=True)
    prom = Prometheus(workdir=cache / "compact", data_dir=data)
    prom.start(timeout=600)
    try:
        # Compaction first runs about a minute after start, then every minute: wait past
        # the first run, then until the block count stops falling.
        time.sleep(90)
        last, still = None, 0
        while still < 3:
            time.sleep(30)
            count = sum(1 for p in data.iterdir() if p.is_dir() and len(p.name) == 26)
            still = still + 1 if count == last else 0
            last = count
    finally:
        prom.stop()
    (cache / "done").write_text("ok\n")
    print(f"cached in {time.perf_counter() - began:.0f} s ({last} blocks)", flush=True)
    return data


# --- the previous coverage formulation (reference for "before") -------------------------------


def _two_window_gaps(client, selectors, first, end, step, pushed, answers, derive=frozenset()):
    """The previous gap leg: ``count(t - W, t] - count(t - W, t - step]`` (two overlapping
    ranges, every input sample read twice) whether or not a Pushgateway group is in reach."""
    scraped = client.query_range(cov.coverage_query(selectors, step, pushed), first, end, step)
    answers.add_notes(scraped.warnings, scraped.infos)
    return cov.Legs.parse(scraped)


class _NoCache(cov.LegCache):
    """The previous behaviour: every signal reads all its selectors."""

    def get(self, selector, key):
        return None

    def pushed(self, key):
        return None


@contextlib.contextmanager
def formulation(name: str):
    """``new``: the module as it is; ``old``: the two-window gap leg and no shared-selector cache."""
    if name == "new":
        yield
        return
    saved = cov.read_gaps, cov.LegCache
    cov.read_gaps, cov.LegCache = _two_window_gaps, _NoCache
    try:
        yield
    finally:
        cov.read_gaps, cov.LegCache = saved


# --- (a) snapshot against its raw range queries ------------------------------------------------


def _is_signal_range(path: str) -> bool:
    query = urllib.parse.parse_qs(urllib.parse.urlparse(path).query).get("query", [""])[0]
    return path.startswith("/api/v1/query_range") and cov.LEG_LABEL not in query


def bench_snapshot(work: Path, prom_url: str, classes: list[str], days: int, form: str, prom_pid: int) -> dict:
    """One snapshot of ``classes`` x 5 signals through the recording proxy, then the same
    snapshot direct, then its signal range requests, its coverage requests and its series
    requests each sent plainly, one after the other (a load that changes between them moves
    the ratio: compare rows of one quiet run). Prometheus' CPU during the timed snapshot and
    during the plain signal requests (``/proc/PID/stat``) gives a ratio that the rest of the
    machine's load moves much less."""
    at = dt.datetime.fromtimestamp(END - 1800, dt.UTC)
    window = f"{days}d"
    work.mkdir(parents=True)
    proxy = RecordingProxy(prom_url)
    try:
        with formulation(form):
            spec = load_spec(write_spec(work / f"rec-{form}.yaml", proxy.url, work / f"rec-{form}", classes, window))
            report = snapshot(spec, PrometheusClient.from_spec(spec), Store(work / f"rec-{form}"), SnapshotRequest(end=at))
    finally:
        proxy.close()
    stored = sum(o.status == "stored" for o in report.outcomes)
    signal_paths = [p for p in proxy.requests if _is_signal_range(p)]
    with formulation(form):
        spec = load_spec(write_spec(work / f"run-{form}.yaml", prom_url, work / f"run-{form}", classes, window))
        began, cpu = time.perf_counter(), _cpu_seconds(prom_pid)
        snapshot(spec, PrometheusClient.from_spec(spec), Store(work / f"run-{form}"), SnapshotRequest(end=at))
        t_snap, cpu_snap = time.perf_counter() - began, _cpu_seconds(prom_pid) - cpu
    cpu = _cpu_seconds(prom_pid)
    t_raw = plain(prom_url, signal_paths)
    cpu_raw = _cpu_seconds(prom_pid) - cpu
    coverage_paths = [p for p in proxy.requests if cov.LEG_LABEL in urllib.parse.unquote_plus(p)]
    t_cov = plain(prom_url, coverage_paths)
    t_series = plain(prom_url, [p for p in proxy.requests if p.startswith("/api/v1/series")])
    return {"pairs": len(report.outcomes), "stored": stored, "requests": len(proxy.requests), "snapshot": t_snap, "raw": t_raw,
            "coverage": t_cov, "series": t_series, "cpu_snapshot": cpu_snap, "cpu_raw": cpu_raw}


# --- (a') what each coverage request costs Prometheus --------------------------------------


def bench_legs(prom_url: str, classes: list[str], days: int, prom_pid: int, rounds: int = 2) -> list[tuple[str, float, float]]:
    """Prometheus CPU and wall seconds of each kind of request, one selector at a time, for
    the GPU power and token selectors of ``classes`` over the snapshot window: the
    signal's own range query, and each coverage request of one selector as
    ``coverage.read_legs`` sends it without a Pushgateway group in reach (the summary,
    the count range with and without the population's changes, the seeds) beside the
    summary's population subquery it replaces. The kinds take turns for ``rounds`` rounds
    (a load that changes during the run spreads over all of them); CPU is read from
    ``/proc/PID/stat``, so other work on the machine moves the wall column only."""
    end = END - 1800
    end -= end % STEP
    start, first, m = end - days * DAY, end - days * DAY - cov.lead(STEP) + STEP, cov.window_steps(STEP)
    sels = [f'obsctl_gpu_power_watts{{job="obsctl-exporter",pool="{c}"}}' for c in classes]
    sels += [f'obsctl_tokens_total{{job="obsctl-workload",workload="{c}"}}' for c in classes]
    session = requests.Session()

    def send(path: str, **params) -> None:
        answer = session.get(prom_url + path, params=params, timeout=300)
        answer.raise_for_status()
        answer.json()

    def ranged(expr: str, a: float, b: float) -> None:
        send("/api/v1/query_range", query=expr, start=a, end=b, step=STEP)

    kinds = {
        "signal `sum(s)` (range, every point answered)": lambda s: ranged(f"sum({s})", start + STEP, end),
        "summary, `first` and `last` only": lambda s: send("/api/v1/query", time=end, query=cov.summary_query(
            [s], end - start, STEP, real=False, pushgroups=False, population=False)),
        "population subquery `max_over_time((count(s) * signs)[W:step])` (previous)": lambda s: send(
            "/api/v1/query", time=end, query=cov.extremes_leg(s, 0, end - start, STEP)),
        "count range, `count` leg only (previous)": lambda s: ranged(cov.count_query([s], STEP, first), first, end),
        "count range with `popchange` (current)": lambda s: ranged(cov.count_query([s], STEP, first, True), first, end),
        "seeds, `seed` and `popseed`": lambda s: ranged(cov.seed_query([s], STEP, True), first, first + (m - 1) * STEP),
        # Alternatives not taken: both quantities in one value (one idelta), and every point answered.
        "alternative: `C + 2^32 count(s)`, one `idelta`, changes only": lambda s: ranged(
            f"idelta(({_encoded(s, first)})[{2 * STEP * 1000 - 1}ms:{STEP * 1000}ms]) != 0", first, end),
        "alternative: `C + 2^32 count(s)`, every point answered": lambda s: ranged(_encoded(s, first), first, end),
    }
    totals = {name: [0.0, 0.0] for name in kinds}
    for fn in kinds.values():  # warm the page cache and the head
        fn(sels[0])
    for _ in range(rounds):
        for name, fn in kinds.items():
            wall, cpu = time.perf_counter(), _cpu_seconds(prom_pid)
            for sel in sels:
                fn(sel)
            totals[name][0] += time.perf_counter() - wall
            totals[name][1] += _cpu_seconds(prom_pid) - cpu
    n = rounds * len(sels)
    return [(name, cpu / n, wall / n) for name, (wall, cpu) in totals.items()]


def _encoded(selector: str, first: float) -> str:
    """The per-step count window and the population of ``selector`` in one value (a
    formulation measured by :func:`bench_legs`, not used: it costs what two legs do)."""
    w = cov._range(cov.window_steps(STEP) * STEP)
    assert round(first * 1000) % (STEP * 1000) == 0  # on the subquery's grid: no offset needed
    return f"(sum(count_over_time({selector}[{w}])) or vector(0)) + {2**32} * (count({selector}) or vector(0))"


# --- (c) review and publish at fleet scale ----------------------------------------------------

REVIEW_SIGNALS = ("tokens_per_second", "gpu_utilization", "gpu_power_watts")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_review(work: Path, prom_url: str, classes: list[str], days: int, prom_pid: int) -> dict:
    """``obsctl review`` and ``obsctl publish`` (the commands, as a CronJob runs them) of
    ``classes`` x 3 signals at the end of the history: each pair's baseline is snapshotted
    first over the day before the weekly period (untimed), so the review's movement test
    reads the last 7 days and the baseline the day before (8 days of history)."""
    work.mkdir(parents=True)
    spec_path = write_spec(work / "review.yaml", prom_url, work / "store", classes, "1d")
    spec_doc = yaml.safe_load(spec_path.read_text())
    spec_doc["signals"] = [s for s in spec_doc["signals"] if s["name"] in REVIEW_SIGNALS]
    spec_doc["verification"]["memory_history"] = "1h"
    spec_path.write_text(yaml.safe_dump(spec_doc, sort_keys=False))
    spec = load_spec(spec_path)
    began = time.perf_counter()
    report = snapshot(spec, PrometheusClient.from_spec(spec), Store(work / "store"), SnapshotRequest(end=dt.datetime.fromtimestamp(END - 7 * DAY, dt.UTC)))
    t_baselines = time.perf_counter() - began
    as_of = dt.datetime.fromtimestamp(END, dt.UTC).isoformat().replace("+00:00", "Z")
    out = {"pairs": len(report.outcomes), "stored": len(report.stored), "baselines": t_baselines}
    for name, argv in (("review", ["review", "--as-of", as_of, "--output", "json"]),
                       ("publish", ["publish", "--as-of", as_of, "--textfile", str(work / "obsctl.prom"), "--output", "json"])):
        began, children, server = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN), _cpu_seconds(prom_pid)
        done = subprocess.run([OBSCTL, *argv, "--spec", str(spec_path)], capture_output=True, text=True, timeout=3600)
        out[name] = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out[f"{name}_cpu"] = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
        out[f"{name}_prometheus_cpu"] = _cpu_seconds(prom_pid) - server
        if done.returncode not in (0, 10):
            raise RuntimeError(f"obsctl {name} exited {done.returncode}: {done.stderr[-2000:]}")
        out[f"{name}_progress_lines"] = len(done.stderr.splitlines())
        if name == "review":
            findings = json.loads(done.stdout)["findings"]
            out["findings"] = len(findings)
            out["kinds"] = dict(sorted(collections.Counter(f["kind"] for f in findings).items()))
    return out


# --- (b) rules on a live stream ---------------------------------------------------------------


class StandIn:
    """Serves ``/metrics/<node>`` for every node of the fleet: current values at every scrape."""

    def __init__(self, fleet: Fleet):
        nodes: dict[str, list[str]] = {}
        for labels, _ in fleet.gpu_rows:
            node = labels.split('instance="')[1].split(":")[0]
            nodes.setdefault(node, []).append(labels.replace('job="obsctl-exporter",', "").split(",", 1)[1])
        self.nodes = sorted(nodes)
        pods = [labels.split('workload="')[1].rstrip('"') + "|" + labels.split('instance="')[1].split('"')[0] for labels, _ in fleet.pod_rows]
        started = time.time()
        rng = np.random.default_rng(5)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                elapsed = time.time() - started
                lines = []
                if name == "workload":
                    lines.append("# TYPE obsctl_tokens_total counter")
                    lines += [f'obsctl_tokens_total{{workload="{p.split("|")[0]}",pod="{p.split("|")[1]}"}} {1000 * elapsed:.0f}' for p in pods]
                else:
                    gpus = nodes.get(name, [])
                    for metric in GPU_METRICS:
                        lines.append(f"# TYPE {metric} {'counter' if metric.endswith('_total') else 'gauge'}")
                        for labels in gpus:
                            value = 400 * elapsed if metric.endswith("_total") else float(rng.uniform(0.3, 0.9))
                            lines.append(f"{metric}{{{labels}}} {value:.3f}")
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class LivePrometheus(Prometheus):
    """Prometheus scraping the stand-in: one target per node (``instance`` = node), and
    the workload pods (``instance`` and ``workload`` from the exposition)."""

    nodes: list[str] = []
    address: str = ""

    def config(self) -> dict:
        cfg = super().config()
        cfg["scrape_configs"] = [
            {"job_name": "obsctl-exporter", "honor_labels": True, "static_configs": [
                {"targets": [self.address], "labels": {"__metrics_path__": f"/metrics/{n}", "instance": f"{n}:9400"}}
                for n in self.nodes]},
            {"job_name": "obsctl-workload", "metrics_path": "/metrics/workload", "static_configs": [{"targets": [self.address]}],
             "metric_relabel_configs": [{"source_labels": ["pod"], "target_label": "instance"},
                                        {"regex": "pod", "action": "labeldrop"}]},
        ]
        return cfg


def bench_rules(work: Path, fleet: Fleet, classes: list[str], interval: int, settle: int) -> dict:
    spec_path = write_spec(work / "rules.yaml", "http://127.0.0.1:9", work / "rules-store", classes, "1h")
    out = work / "rules"
    subprocess.run([OBSCTL, "rules", "generate", "--spec", str(spec_path), "--out", str(out), "--empty-store"],
                   check=True, capture_output=True, text=True, timeout=600)
    rule_files = sorted(out.glob("*.rules.yaml"))
    standin = StandIn(fleet)
    prom = LivePrometheus(workdir=work / "live", rule_files=rule_files, scrape_interval=f"{interval}s",
                          evaluation_interval=f"{interval}s", port=free_port())
    prom.nodes, prom.address = standin.nodes, standin.address
    try:
        prom.start(timeout=120)
        time.sleep(settle)

        def q(expr: str) -> list[dict]:
            body = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=120).json()
            return body["data"]["result"]

        # Prometheus' own /metrics (it does not scrape itself here): one line per group.
        own = requests.get(f"{prom.url}/metrics", timeout=60).text.splitlines()
        last = [float(line.rsplit(" ", 1)[1]) for line in own if line.startswith("prometheus_rule_group_last_duration_seconds{")]
        per_gpu = q('count({job="obsctl-exporter", uuid!=""})')
        recorded = q('count({__name__=~".+:.+"})')
        per_pair = q('count by (workload_class, signal) ({__name__=~".+:.+", workload_class!="", signal!=""})')
        per_class = q('count by (workload_class) ({__name__=~".+:.+", workload_class!=""})')
        rules = sum(len(g.get("rules", [])) for f in rule_files for g in (yaml.safe_load(f.read_text()) or {}).get("groups", []))
        value = lambda r: float(r[0]["value"][1]) if r else 0.0  # noqa: E731
        return {"groups": len(last), "rules": rules, "eval": sum(last), "interval": interval,
                "gpu_series": value(per_gpu), "gpus": len(fleet.gpu_rows), "recorded": value(recorded),
                "per_pair_max": max((float(r["value"][1]) for r in per_pair), default=0.0),
                "per_class_max": max((float(r["value"][1]) for r in per_class), default=0.0), "pairs": len(per_pair)}
    finally:
        prom.stop()
        standin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--classes", default="10,50,200", help="class counts N of the sweep (the largest is the fleet's)")
    ap.add_argument("--replicas", type=int, default=50, help="input series per class of the 1-vs-many row (at the smallest N)")
    ap.add_argument("--days", type=int, default=30, help="snapshot window in days")
    ap.add_argument("--forms", default="old,new", help="coverage formulations to time")
    ap.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    ap.add_argument("--interval", type=int, default=15, help="live scrape and rule evaluation interval (s)")
    ap.add_argument("--settle", type=int, default=120, help="seconds of live stream before the rules are read")
    ap.add_argument("--skip-rules", action="store_true")
    ap.add_argument("--skip-snapshot", action="store_true")
    ap.add_argument("--review", action="store_true",
                    help="also time obsctl review and publish of the largest N of --classes x 3 signals (7 d period + 1 d baseline)")
    ap.add_argument("--sweep", default=None,
                    help="the class counts of --classes to time with one series per class (default all; '' for none)")
    ap.add_argument("--no-replicas-row", action="store_true", help="skip the row with --replicas series per class")
    ap.add_argument("--legs", type=int, default=0,
                    help="also time each coverage request against the signal's own, per selector, for the GPU power and "
                         "token selectors of this many classes (Prometheus CPU from /proc)")
    ap.add_argument("--backfill-only", action="store_true",
                    help="build (or finish) the cached TSDB and stop: the generation is not timed, so it can run on a busy machine")
    opts = ap.parse_args()
    sizes = sorted(int(n) for n in opts.classes.split(","))
    groups = [(sizes[-1], 1), (sizes[0], opts.replicas)]
    fleet = Fleet(opts.gpus, groups)
    began = time.perf_counter()
    opts.cache.mkdir(exist_ok=True)
    (opts.cache / ".gitignore").write_text("*\n")
    key = f"g{opts.gpus}-c{sizes[-1]}-r{sizes[0]}x{opts.replicas}-d{opts.days}"
    print(f"fleet: {opts.gpus} GPUs ({opts.gpus // GPUS_PER_NODE} nodes x {GPUS_PER_NODE}), {sizes[-1]} classes with 1 pod "
          f"+ {sizes[0]} with {opts.replicas}, 5 signals, {opts.days} d + {HISTORY_DAYS} d history at {STEP} s", flush=True)
    if opts.backfill_only:
        backfill(opts.cache / key, fleet, opts.days)
        return
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = Path(tmp)
        if not opts.skip_snapshot:
            data = backfill(opts.cache / key, fleet, opts.days)
            prom = Prometheus(workdir=work / "prom", data_dir=data)
            prom.start(timeout=600)
            rows = []
            try:
                if opts.review:
                    got = bench_review(work / "review", prom.url, classes_of(sizes[-1], 1), opts.days, prom.proc.process.pid)
                    print(f"review: {got['pairs']} pairs ({got['stored']} baselines stored in {got['baselines']:.1f} s, untimed); "
                          f"obsctl review {got['review']:.2f} s ({got['findings']} findings {got['kinds']}, "
                          f"{got['review_progress_lines']} stderr lines), obsctl publish {got['publish']:.2f} s; CPU s "
                          f"(obsctl, Prometheus): review {got['review_cpu']:.1f}, {got['review_prometheus_cpu']:.1f}, "
                          f"publish {got['publish_cpu']:.1f}, {got['publish_prometheus_cpu']:.1f}; "
                          f"load average {os.getloadavg()[0]:.1f}", flush=True)
                if opts.legs:
                    legs = bench_legs(prom.url, classes_of(sizes[-1], 1)[:opts.legs], opts.days, prom.proc.process.pid)
                    print(f"\nper request, {2 * opts.legs} selectors (GPU power, tokens) x 2 rounds, {opts.days} d at {STEP} s; "
                          f"load average {os.getloadavg()[0]:.1f}\n\n| request | Prometheus CPU ms | wall ms |\n|---|---|---|")
                    for name, cpu, wall in legs:
                        print(f"| {name} | {cpu * 1000:.1f} | {wall * 1000:.1f} |", flush=True)
                sweep = sizes if opts.sweep is None else [int(n) for n in opts.sweep.split(",") if n.strip()]
                if not set(sweep) <= set(sizes):
                    ap.error(f"--sweep {opts.sweep}: not among --classes {opts.classes}")
                cases = [(n, 1) for n in sweep] + ([] if opts.no_replicas_row else [(sizes[0], opts.replicas)])
                for n, r in cases:
                    for form in opts.forms.split(","):
                        got = bench_snapshot(work / f"{form}-{n}-{r}", prom.url, classes_of(n, 1 if r == 1 else r)[:n], opts.days, form,
                                             prom.proc.process.pid)
                        rows.append((n, r, form, got))
                        print(f"  N={n:4d} series/class={r:3d} {form}: snapshot {got['snapshot']:8.2f} s, raw range {got['raw']:8.2f} s, "
                              f"ratio {got['snapshot'] / got['raw']:5.2f}x; coverage requests alone {got['coverage']:7.2f} s, "
                              f"series requests alone {got['series']:6.2f} s; Prometheus CPU snapshot {got['cpu_snapshot']:.2f} s, "
                              f"raw {got['cpu_raw']:.2f} s ({got['cpu_snapshot'] / max(got['cpu_raw'], 1e-9):.2f}x); "
                              f"load average {os.getloadavg()[0]:.1f} "
                              f"({got['stored']}/{got['pairs']} stored, {got['requests']} requests)", flush=True)
            finally:
                prom.stop()
            print("\n| classes N | input series / class | coverage | pairs stored | snapshot s | raw range s | ratio | coverage requests s "
                  "| series requests s | Prometheus CPU, snapshot / raw s | CPU ratio |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for n, r, form, got in rows:
                print(f"| {n} | {r} | {form} | {got['stored']}/{got['pairs']} | {got['snapshot']:.2f} | {got['raw']:.2f} | "
                      f"**{got['snapshot'] / got['raw']:.2f}x** | {got['coverage']:.2f} | {got['series']:.2f} | "
                      f"{got['cpu_snapshot']:.2f} / {got['cpu_raw']:.2f} | {got['cpu_snapshot'] / max(got['cpu_raw'], 1e-9):.2f}x |")
        if not opts.skip_rules:
            got = bench_rules(work, fleet, classes_of(sizes[-1], 1), opts.interval, opts.settle)
            print(f"\nrules: {got['groups']} groups, {got['rules']} rules, evaluated every {got['interval']} s on a live stream "
                  f"of {got['gpus']} GPUs")
            print("| figure | value | goal |")
            print("|---|---|---|")
            share = got["eval"] / got["interval"] * 100
            print(f"| rule evaluation, sum over groups (last) | {got['eval'] * 1000:.1f} ms = {share:.2f} % of {got['interval']} s | <= 10 % |")
            print(f"| exporter series per GPU | {got['gpu_series'] / max(got['gpus'], 1):.1f} | <= 30 |")
            print(f"| recorded series, all | {got['recorded']:.0f} | |")
            print(f"| recorded series per class x signal (max over {got['pairs']} pairs) | {got['per_pair_max']:.0f} | <= 150 |")
            print(f"| recorded series per class (max) | {got['per_class_max']:.0f} | |")
    print(f"\nwall time {time.perf_counter() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
