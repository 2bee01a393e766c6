"""The source catalogue on a real Prometheus scraping the public dumps as live targets.

Each dump in ../shared/fixtures (vLLM plain and under Ray, TGI, Triton, SGLang, Kueue,
the Ray head with Ray Serve) and the two composed ones in tests/fixtures/composed
(llama.cpp and Slurm: no public capture exists, they are composed from the servers'
source, not captured) is served by its own small HTTP server. The text is served line by
line as in the file, quirks included (duplicate HELP/TYPE blocks, no final newline, blank
lines, ``-1`` sentinels); only each sample line's value changes: a cumulative series
(counter, histogram ``_bucket``/``_sum``/``_count``, summary ``_sum``/``_count``, and
Ray 2.6's counters typed ``gauge``) reads ``v * (1 + K * t)`` at ``t`` seconds after
start, so it rises at ``K * v`` per second, and every sample line carries that time as
its timestamp (so Prometheus' rates are exact, not jittered by scrape timing). Gauges
keep their dump value. llama.cpp's ``n_tokens_max`` is typed counter but is a running
maximum and stays put.

Expected values are computed here from the dump files (read with a small parser of the
text format, independent of Prometheus) and ``K``: a rate is ``K`` times the summed dump
value, a histogram quantile is the quantile of the dump's own buckets (scaling every
bucket by ``K`` does not move it), a mean is the ratio of the dump's ``_sum`` and
``_count``. The rules are the generated catalogue rules with a 4 s rate window instead
of 5 m (the only change; record names stay), scraped and evaluated every 500 ms.

Every query runs at one instant, after a barrier (:func:`support.prometheus.settle`):
once every target has filled a rate window, every rule group evaluates chain depth + 1
more rounds; from then on the recorded values no longer change (rates are exact).
"""

from __future__ import annotations

import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from obsctl.rules import canonical as c
from obsctl.rules.render import dump_rule_file
from obsctl.rules.signals import signal_groups
from obsctl.rules.sources import source_groups
from obsctl.spec import load_spec
from support.prometheus import Served, chain_depth, scraped, settle
from support.servers import Prometheus

K = 0.25  # per second: a cumulative series with dump value v rises at K * v per second
WINDOW = "4s"
COMPOSED = Path(__file__).resolve().parents[1] / "fixtures" / "composed"
# Ray 2.6 exports these counters typed gauge; in reality they only go up.
RAY_CUMULATIVE_GAUGES = {
    "ray_serve_deployment_request_counter", "ray_serve_deployment_error_counter", "ray_serve_num_http_requests",
    "ray_serve_num_http_error_requests", "ray_serve_num_router_requests", "ray_serve_handle_request_counter",
    "ray_serve_num_deployment_http_error_requests",
}
RUNNING_MAXIMA = {"llamacpp:n_tokens_max"}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def read_dump(path: Path) -> tuple[list[tuple[str, dict, float]], dict[str, str]]:
    """(samples as (name, labels, value), {family: type}) of a text-format file."""
    samples, types = [], {}
    for line in path.read_text().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind.strip()
        elif line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            labels = dict(_LABEL.findall(m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
    return samples, types


def cumulative(name: str, types: dict[str, str]) -> bool:
    """Whether a sample of ``name`` only rises (see the module docstring)."""
    if name in RUNNING_MAXIMA:
        return False
    if name in RAY_CUMULATIVE_GAUGES or types.get(name) == "counter":
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return True
    return False


class LiveDump:
    """Serves one dump at /metrics, its cumulative series rising at K * value per second."""

    def __init__(self, path: Path, t0: float):
        _, types = read_dump(path)
        # Parsed once: (line, None) for comments and blank lines, (series, value, rises) for
        # samples; split on "\n" so a missing final newline stays missing.
        lines: list[tuple] = []
        for line in path.read_text().split("\n"):
            m = _SAMPLE.match(line) if line and not line.startswith("#") else None
            lines.append((line, None) if m is None else (m.group(1) + (m.group(2) or ""), float(m.group(3)),
                                                         cumulative(m.group(1), types)))

        def render() -> bytes:
            now_ms = int(time.time() * 1000)  # the target's own clock stamps its samples, as an exporter's does: data, not a query time
            growth = 1 + K * (now_ms / 1000 - t0)
            out = [item[0] if item[1] is None else f"{item[0]} {item[1] * growth if item[2] else item[1]!r} {now_ms}"
                   for item in lines]
            return "\n".join(out).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render()
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


def quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative buckets ``{le: count}`` (inf included)."""
    rank = q * buckets[math.inf]
    prev_le, prev = 0.0, 0.0
    for le in sorted(buckets):
        if buckets[le] >= rank:
            return prev_le if le == math.inf else prev_le + (le - prev_le) * (rank - prev) / (buckets[le] - prev)
        prev_le, prev = le, buckets[le]
    raise AssertionError("rank beyond the +Inf bucket")


class Dump:
    """Sums and bucket sets of one dump file, for the expected values."""

    def __init__(self, path: Path):
        self.samples, _ = read_dump(path)

    def total(self, metric: str, /, **match: str) -> float:
        name = metric
        values = [v for n, labels, v in self.samples if n == name and all(labels.get(k) == x for k, x in match.items())]
        assert values, f"{name} {match} not in the dump"
        return sum(values)

    def buckets(self, name: str, /, **match: str) -> dict[float, float]:
        out: dict[float, float] = {}
        for n, labels, v in self.samples:
            if n == f"{name}_bucket" and all(labels.get(k) == x for k, x in match.items()):
                le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
                out[le] = out.get(le, 0.0) + v
        assert out, f"{name} {match} has no buckets in the dump"
        return out


OPT = "facebook/opt-125m"
LLAMA = "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"

TARGETS = {  # job -> dump file (relative to the shared fixtures, or composed)
    "vllm": "vllm/datadog-vllm.txt", "ray-vllm": "vllm/datadog-ray-vllm.txt", "tgi": "tgi/datadog-tgi.txt",
    "triton": "triton/datadog-triton.txt", "sglang": "sglang/datadog-sglang.txt", "kueue": "kueue/datadog-kueue.txt",
    "ray": "ray/datadog-ray-head.txt", "llamacpp": "composed/llamacpp-metrics.txt", "slurm": "composed/slurm-metrics.txt",
}

SPEC = {
    "store": "store",
    "workload_classes": [
        {"name": "vllm-opt", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": OPT}},
        {"name": "ray-llama", "kind": "inference", "source": "vllm", "selector": {"job": "ray-vllm", "model_name": LLAMA}},
        {"name": "ray-opt", "kind": "inference", "source": "vllm", "selector": {"job": "ray-vllm", "model_name": OPT}},
        {"name": "tgi", "kind": "inference", "source": "tgi", "selector": {"job": "tgi"}},
        {"name": "triton", "kind": "inference", "source": "triton", "selector": {"job": "triton"}},
        {"name": "sglang", "kind": "inference", "source": "sglang", "selector": {"job": "sglang"}},
        {"name": "llamacpp", "kind": "inference", "source": "llamacpp", "selector": {"job": "llamacpp"}},
        {"name": "serve-add", "kind": "inference", "source": "ray-serve", "selector": {"job": "ray", "application": "add"}},
        {"name": "train-cq", "kind": "training", "selector": {"job": "trainer"},
         "queue": {"source": "kueue", "selector": {"job": "kueue"}, "cluster_queue": "cluster-queue"}},
        {"name": "train-lq", "kind": "training", "selector": {"job": "trainer"},
         "queue": {"source": "kueue", "selector": {"job": "kueue"}, "local_queue": "default/user-queue"}},
        {"name": "behind-serve", "kind": "inference", "selector": {"job": "app"},
         "queue": {"source": "ray-serve", "selector": {"job": "ray", "application": "hello"}}},
        {"name": "hpc", "kind": "training", "selector": {"job": "hpc"},
         "queue": {"source": "slurm", "selector": {"job": "slurm"}, "partition": "gpu"}},
    ],
    "signals": [{"name": "ttft_p95", "catalogue": "ttft_p95_seconds"}],
}


def expected(root: Path) -> dict[tuple[str, str], float | dict[str, float] | None]:
    """Hand computation from the dumps: ``{(class, record): value}``; dict: per outcome; None: absent."""
    v, rv = Dump(root / TARGETS["vllm"]), Dump(root / TARGETS["ray-vllm"])
    tgi, tr, sg = Dump(root / TARGETS["tgi"]), Dump(root / TARGETS["triton"]), Dump(root / TARGETS["sglang"])
    kq, ray = Dump(root / TARGETS["kueue"]), Dump(root / TARGETS["ray"])
    ll, sl = Dump(root / TARGETS["llamacpp"]), Dump(root / TARGETS["slurm"])
    opt, big = {"model_name": OPT}, {"model_name": LLAMA}
    add = {"application": "add"}
    return {
        # vLLM, plain: a dump with old and new names at once -> the new ones.
        ("vllm-opt", c.INPUT_TOKENS): K * v.total("vllm:prompt_tokens_total", **opt),
        ("vllm-opt", c.OUTPUT_TOKENS): K * v.total("vllm:generation_tokens_total", **opt),
        ("vllm-opt", c.REQUESTS): {"success": K * v.total("vllm:request_success_total", **opt, finished_reason="length")},
        ("vllm-opt", c.STEPS): K * v.total("vllm:iteration_tokens_total_count", **opt),
        ("vllm-opt", c.TTFT_P95): quantile(0.95, v.buckets("vllm:time_to_first_token_seconds", **opt)),
        ("vllm-opt", c.ITL_P95): quantile(0.95, v.buckets("vllm:inter_token_latency_seconds", **opt)),
        ("vllm-opt", c.QUEUE_WAIT_P95): quantile(0.95, v.buckets("vllm:request_queue_time_seconds", **opt)),
        ("vllm-opt", c.E2E_MEAN): v.total("vllm:e2e_request_latency_seconds_sum", **opt) / v.total("vllm:e2e_request_latency_seconds_count", **opt),
        ("vllm-opt", c.KV_CACHE_USAGE): v.total("vllm:kv_cache_usage_perc", **opt),
        ("vllm-opt", c.PREFIX_CACHE_HIT): v.total("vllm:prefix_cache_hits_total", **opt) / v.total("vllm:prefix_cache_queries_total", **opt),
        ("vllm-opt", c.REQUESTS_WAITING): v.total("vllm:num_requests_waiting", **opt),
        ("vllm-opt", c.PREEMPTIONS): K * v.total("vllm:num_preemptions_total", **opt),
        # nothing waits: the engine's busy fraction is its KV-cache usage
        ("vllm-opt", c.ENGINE_BUSY): v.total("vllm:kv_cache_usage_perc", **opt),
        # vLLM under Ray, the 70B model: old names only, prefix-cache hit rate -1 (no data).
        ("ray-llama", c.KV_CACHE_USAGE): rv.total("ray_vllm:gpu_cache_usage_perc", **big),
        ("ray-llama", c.ITL_P95): quantile(0.95, rv.buckets("ray_vllm:time_per_output_token_seconds", **big)),
        ("ray-llama", c.PREFIX_CACHE_HIT): None,
        ("ray-llama", c.INPUT_TOKENS): K * rv.total("ray_vllm:prompt_tokens_total", **big),
        ("ray-llama", c.REQUESTS_RUNNING): rv.total("ray_vllm:num_requests_running", **big),
        # vLLM under Ray, opt-125m: the new names with the ray_vllm: prefix.
        ("ray-opt", c.ITL_P95): quantile(0.95, rv.buckets("ray_vllm:inter_token_latency_seconds", **opt)),
        ("ray-opt", c.PREFIX_CACHE_HIT): rv.total("ray_vllm:prefix_cache_hits_total", **opt)
        / rv.total("ray_vllm:prefix_cache_queries_total", **opt),
        ("ray-opt", c.STEPS): K * rv.total("ray_vllm:iteration_tokens_total_count", **opt),
        ("ray-opt", c.OUTPUT_TOKENS): None,  # this part of the Ray dump has no token counters
        # TGI: counters without _total.
        ("tgi", c.INPUT_TOKENS): K * tgi.total("tgi_request_input_length_sum"),
        ("tgi", c.OUTPUT_TOKENS): K * tgi.total("tgi_request_generated_tokens_sum"),
        ("tgi", c.REQUESTS): {"success": K * tgi.total("tgi_request_success"),
                              "error": K * tgi.total("tgi_request_failure", err="validation")},
        ("tgi", c.REQUESTS_OFFERED): K * tgi.total("tgi_request_count"),
        ("tgi", c.QUEUE_WAIT_P95): quantile(0.95, tgi.buckets("tgi_request_queue_duration")),
        ("tgi", c.E2E_P95): quantile(0.95, tgi.buckets("tgi_request_duration")),
        ("tgi", c.REQUESTS_WAITING): tgi.total("tgi_queue_size"),
        ("tgi", c.TTFT_P95): None,
        ("tgi", c.ENGINE_BUSY): 0 if tgi.total("tgi_queue_size") == tgi.total("tgi_batch_current_size") == 0 else None,
        # Triton: microsecond counters and summaries.
        ("triton", c.REQUESTS): {"success": K * tr.total("nv_inference_request_success"),
                                 "error": K * tr.total("nv_inference_request_failure")},
        ("triton", c.E2E_MEAN): tr.total("nv_inference_request_duration_us") / tr.total("nv_inference_request_success") * 1e-6,
        ("triton", c.QUEUE_WAIT_MEAN): tr.total("nv_inference_queue_duration_us") / tr.total("nv_inference_request_success") * 1e-6,
        ("triton", c.QUEUE_WAIT_P95): tr.total("nv_inference_queue_summary_us", model="densenet_onnx", quantile="0.95") * 1e-6,
        ("triton", c.REQUESTS_WAITING): tr.total("nv_inference_pending_request_count"),
        ("triton", c.OUTPUT_TOKENS): None,
        ("triton", c.ENGINE_BUSY): tr.total("nv_gpu_utilization"),  # nothing pending: Triton's GPU utilization
        # SGLang.
        ("sglang", c.INPUT_TOKENS): K * sg.total("sglang:prompt_tokens_total"),
        ("sglang", c.OUTPUT_TOKENS): K * sg.total("sglang:generation_tokens_total"),
        ("sglang", c.REQUESTS_OFFERED): K * sg.total("sglang:num_requests_total"),
        ("sglang", c.CACHED_INPUT_TOKENS): K * sg.total("sglang:cached_tokens_total"),
        ("sglang", c.TTFT_P95): quantile(0.95, sg.buckets("sglang:time_to_first_token_seconds")),
        ("sglang", c.E2E_P95): quantile(0.95, sg.buckets("sglang:e2e_request_latency_seconds")),
        ("sglang", c.KV_CACHE_USAGE): sg.total("sglang:token_usage"),
        ("sglang", c.PREFIX_CACHE_HIT): sg.total("sglang:cache_hit_rate"),
        ("sglang", c.REQUESTS): None,
        ("sglang", c.ENGINE_BUSY): sg.total("sglang:token_usage"),  # queue empty: the KV token pool in use
        # llama.cpp (composed input).
        ("llamacpp", c.INPUT_TOKENS): K * ll.total("llamacpp:prompt_tokens_total"),
        ("llamacpp", c.OUTPUT_TOKENS): K * ll.total("llamacpp:tokens_predicted_total"),
        ("llamacpp", c.STEPS): K * ll.total("llamacpp:n_decode_total"),
        ("llamacpp", c.REQUESTS_RUNNING): ll.total("llamacpp:requests_processing"),
        ("llamacpp", c.REQUESTS_WAITING): ll.total("llamacpp:requests_deferred"),
        ("llamacpp", c.KV_CACHE_USAGE): ll.total("llamacpp:kv_cache_usage_ratio"),
        ("llamacpp", c.ENGINE_BUSY): 1 if ll.total("llamacpp:requests_deferred") > 0 else None,  # requests deferred: every slot busy
        # Ray Serve, application "add": counts typed gauge, latency in ms.
        ("serve-add", c.REQUESTS): {"success": K * ray.total("ray_serve_deployment_request_counter", **add),
                                    "error": K * ray.total("ray_serve_deployment_error_counter", **add)},
        ("serve-add", c.E2E_P95): quantile(0.95, ray.buckets("ray_serve_http_request_latency_ms", **add)) / 1000,
        ("serve-add", c.REQUESTS_WAITING): ray.total("ray_serve_deployment_queued_queries", **add)
        + ray.total("ray_serve_replica_pending_queries", **add),
        ("serve-add", c.REQUESTS_RUNNING): ray.total("ray_serve_replica_processing_queries", **add),
        # Ray Serve as the queue of a class served by another source (application "hello").
        ("behind-serve", c.REQUESTS_WAITING): ray.total("ray_serve_deployment_queued_queries", application="hello")
        + ray.total("ray_serve_replica_pending_queries", application="hello"),
        # Kueue: ClusterQueue and LocalQueue of the dump.
        ("train-cq", c.REQUESTS_WAITING): kq.total("kueue_pending_workloads", cluster_queue="cluster-queue"),
        ("train-cq", c.QUEUE_WAIT_P95): quantile(0.95, kq.buckets("kueue_admission_wait_time_seconds", cluster_queue="cluster-queue")),
        ("train-lq", c.REQUESTS_WAITING): kq.total("kueue_local_queue_pending_workloads", namespace="default", name="user-queue"),
        ("train-lq", c.QUEUE_WAIT_P95): quantile(0.95, kq.buckets("kueue_local_queue_admission_wait_time_seconds",
                                                                 namespace="default", name="user-queue")),
        # Slurm (composed input): pending jobs of partition gpu; no wait metric.
        ("hpc", c.REQUESTS_WAITING): sl.total("slurm_partition_job_state_total", partition="gpu", state="PENDING"),
        ("hpc", c.QUEUE_WAIT_P95): None,
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory, fixtures_dir):
    """Prometheus scraping every dump, with the catalogue rules; yields (url, fixtures root)."""
    tmp = tmp_path_factory.mktemp("sources-live")
    root = tmp / "dumps"
    root.mkdir()
    for rel in TARGETS.values():  # one folder holding shared and composed dumps
        src = (COMPOSED / Path(rel).name) if rel.startswith("composed/") else fixtures_dir / rel
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(src.read_bytes())
    spec_path = tmp / "obsctl.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    spec = load_spec(spec_path)
    rules = tmp / "catalogue.rules.yaml"
    rules.write_text(dump_rule_file(source_groups(spec, window=WINDOW) + signal_groups(spec), "live test"))
    t0 = time.time()  # where the targets' series start rising (their own clock), not a query time
    servers = {job: LiveDump(root / rel, t0) for job, rel in TARGETS.items()}
    prom = Prometheus(tmp / "prom", scrape_targets={job: [s.address] for job, s in servers.items()},
                      rule_files=[rules], scrape_interval="500ms", evaluation_interval="500ms")
    try:
        prom.start()
        served = Served(prom.url)
        # Every target's scrapes fill one rate window (a second of 500 ms scrapes after the
        # first scrape of all): the barrier starts at that scrape's stored instant.
        filled = scraped(prom.url, after=scraped(prom.url) + 1)
        full = served.query(f"count_over_time(up[{WINDOW}]) >= 3", filled)
        assert len(full) == len(servers), f"every target inside one rate window ({served.query('up', filled)})"
        served.instant = settle(served, chain_depth([rules]) + 1, filled)
        yield served, root
    finally:
        prom.stop()
        for server in servers.values():
            server.close()


def close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12)


def compare(served: Served, exp: dict) -> list[str]:
    """Mismatches between Prometheus and the expectations, as readable lines (one query)."""
    series: dict[tuple[str, str], dict[str, float]] = {}
    for r in served.query('{__name__=~"workload_class:.+",workload_class!=""}'):
        key = (r["metric"]["workload_class"], r["metric"]["__name__"])
        series.setdefault(key, {})[r["metric"].get("outcome", "")] = float(r["value"][1])
    problems = []
    for (cls, record), want in exp.items():
        got = series.get((cls, record), {})
        if want is None:
            if got:
                problems.append(f"{cls} {record}: expected absent, got {got}")
        elif isinstance(want, dict):
            if set(got) != set(want) or not all(close(got[o], w) for o, w in want.items()):
                problems.append(f"{cls} {record}: expected {want}, got {got}")
        elif set(got) != {""} or not close(got[""], want):
            problems.append(f"{cls} {record}: expected {want}, got {got}")
    return problems


def test_canonical_series_equal_the_hand_computed_values(live):
    served, root = live
    problems = compare(served, expected(root))
    assert not problems, "\n".join(problems)
    up = {r["metric"]["job"]: r["value"][1] for r in served.query("up")}
    assert up == {job: "1" for job in TARGETS}, up  # every dump was accepted as a scrape


def test_catalogue_signal_reads_the_canonical_series(live):
    served, root = live
    want = quantile(0.95, Dump(root / TARGETS["vllm"]).buckets("vllm:time_to_first_token_seconds", model_name=OPT))
    result = served.query('workload_class:obsctl_ttft_p95:value{workload_class="vllm-opt",signal="ttft_p95"}')
    assert len(result) == 1 and close(float(result[0]["value"][1]), want), result
    # A class whose source has no TTFT gets no signal series either (absent, not 0).
    assert served.query('workload_class:obsctl_ttft_p95:value{workload_class="tgi"}') == []
