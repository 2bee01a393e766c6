"""``--from-raw`` queries equal the recorded series they stand for, on the same data.

For every catalogue signal of classes of seven sources (vLLM, TGI, Triton, SGLang,
llama.cpp, Ray Serve, the SDK), :func:`obsctl.baselining.measure.raw.raw_query` inlines the
rules ``obsctl rules generate`` writes, every level down to the raw series (cost per token
over the GPU price, attribution share and token rules; efficiency over the busy, allocated
and energy rules). ``promtool test rules`` loads those same generated rule files over raw
input series and, at pinned instants, evaluates both the signal's recorded query
(``sum(<record>{workload_class=...})``) and the inlined one; each case holds only when
they agree within 1e-9 relative.

The inputs change rate every few minutes (counters with a varying increment per 15 s
step, gauges following the same wave), so a wrong range, a lost matcher (another class's
series summed in) or a missing level gives another value at some instant. The groups are
evaluated in the order of the chain (``group_eval_order``: a group after the groups it
reads), as the inlined query reads every level at the instant itself
(:mod:`obsctl.rules.inline`).
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from obsctl.baselining.measure.raw import raw_query
from obsctl.rules import promtool
from obsctl.rules.canonical import CATALOGUE_SIGNALS
from obsctl.rules.generate import generate
from obsctl.rules.lookback import recording_rules, rules_for
from support.promtool import series, values
from support.rules_fixtures import write_spec

STEP, N = 15, 70  # 15 s steps, 17.5 minutes
EVAL_TIMES = ("6m", "8m15s", "11m", "13m45s", "17m")
H100 = "NVIDIA H100 80GB HBM3"


def wave(i: int, phase: float = 0.0) -> float:
    """A rate factor for step ``i``: moves every few minutes, never 0."""
    return 1.0 + 0.5 * math.sin(i / 6.0 + phase) + (0.75 if 28 <= i < 40 else 0.0)


SPEC = {
    "store": "store",
    "workload_classes": [
        {"name": "chat", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "m1"},
         "node_selector": {"job": "x"}},
        {"name": "tgi", "kind": "inference", "source": "tgi", "selector": {"job": "tgi"}, "node_selector": {"job": "x"}},
        {"name": "triton", "kind": "inference", "source": "triton", "selector": {"job": "triton"}, "node_selector": {"job": "x"}},
        {"name": "sglang", "kind": "inference", "source": "sglang", "selector": {"job": "sglang"}, "node_selector": {"job": "x"}},
        {"name": "llama", "kind": "inference", "source": "llamacpp", "selector": {"job": "llama"},
         "node_selector": {"job": "cpuexp"}},
        {"name": "serve", "kind": "inference", "source": "ray-serve", "selector": {"job": "ray-serve", "application": "add"},
         "node_selector": {"job": "x"}},
        {"name": "train", "kind": "training", "selector": {"job": "trainer"}, "node_selector": {"job": "x"},
         "mfu": {"flops_per_token": 7.8e9, "dtype": "bf16"}},
    ],
    "signals": [{"name": key, "catalogue": key} for key in CATALOGUE_SIGNALS],
    "pricing": {"prefer": "spec", "energy_usd_per_kwh": 0.25, "accelerator_hour_usd": {H100: 4.0}},
}
# uuid: (classes attributed, utilization); GPU-S is shared by chat and tgi.
GPUS = {"GPU-A": (["chat"], 0.5), "GPU-S": (["chat", "tgi"], 0.25), "GPU-B": (["tgi"], 0.75), "GPU-C": (["triton"], 0.375),
        "GPU-D": (["sglang"], 0.625), "GPU-E": (["train"], 0.875), "GPU-F": (["serve"], 0.0625), "GPU-G": ([], 0.5)}


class Inputs:
    """promtool input series; counters add ``per_step x wave`` each step, gauges follow the wave."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []
        self.phase = 0.0

    def counter(self, metric: str, per_step: float, **labels: str) -> Inputs:
        self.phase += 0.7  # each series its own wave: ratios of two series move too
        phase, total, out = self.phase, 0.0, []
        for i in range(N):
            out.append(total)
            total += per_step * wave(i, phase)
        self.rows.append((series(metric, labels), " ".join(repr(v) for v in out)))
        return self

    def gauge(self, metric: str, value: float, **labels: str) -> Inputs:
        self.phase += 0.7
        phase = self.phase
        self.rows.append((series(metric, labels), values(lambda i: value * wave(i, phase), N)))
        return self

    def constant(self, metric: str, value: float, **labels: str) -> Inputs:
        self.rows.append((series(metric, labels), values(value, N)))
        return self

    def histogram(self, metric: str, per_step: dict[str, float], **labels: str) -> Inputs:
        """Buckets ``{le: increment}`` (one wave for all, so they stay cumulative), with _sum and _count."""
        phase = self.phase = self.phase + 0.7
        for le, inc in per_step.items():
            self.rows.append((series(f"{metric}_bucket", {**labels, "le": le}),
                              " ".join(repr(sum(inc * wave(j, phase) for j in range(i))) for i in range(N))))
        count = per_step["+Inf"]
        self.rows.append((series(f"{metric}_count", labels), " ".join(repr(sum(count * wave(j, phase) for j in range(i)))
                                                                       for i in range(N))))
        self.rows.append((series(f"{metric}_sum", labels), " ".join(repr(sum(0.05 * count * wave(j, phase) for j in range(i)))
                                                                     for i in range(N))))
        return self


BUCKETS = {"0.01": 30.0, "0.05": 90.0, "0.1": 100.0, "+Inf": 105.0}


def inputs() -> list[tuple[str, str]]:
    x = Inputs()
    v = {"job": "vllm", "instance": "v:8000", "model_name": "m1"}
    x.gauge("vllm:kv_cache_usage_perc", 0.4, **v).gauge("vllm:num_requests_running", 7, **v).gauge("vllm:num_requests_waiting", 2, **v)
    for name in ("inter_token_latency_seconds", "time_to_first_token_seconds", "e2e_request_latency_seconds",
                 "request_queue_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds"):
        x.histogram(f"vllm:{name}", BUCKETS, **v)
    x.counter("vllm:prompt_tokens_total", 300, **v).counter("vllm:generation_tokens_total", 600, **v)
    x.counter("vllm:prompt_tokens_cached_total", 60, **v)
    for reason, inc in (("stop", 45), ("length", 15), ("abort", 6), ("error", 3)):
        x.counter("vllm:request_success_total", inc, **v, finished_reason=reason)
    x.counter("vllm:prefix_cache_queries_total", 200, **v).counter("vllm:prefix_cache_hits_total", 50, **v)
    x.counter("vllm:num_preemptions_total", 1.5, **v).counter("vllm:iteration_tokens_total_count", 150, **v)
    x.counter("vllm:admission_rejections_total", 4, **v, reason="max_num_queued_reqs")
    # another vLLM model on the same job: must never be summed into chat
    x.counter("vllm:generation_tokens_total", 999, job="vllm", instance="v:8000", model_name="m9")
    t1, t2 = {"job": "tgi", "instance": "t1"}, {"job": "tgi", "instance": "t2"}
    x.counter("tgi_request_success", 30, **t1).counter("tgi_request_success_total", 15, **t2)
    x.counter("tgi_request_failure", 3, **t1, err="validation").counter("tgi_request_failure", 6, **t1, err="overloaded")
    x.counter("tgi_request_count", 39, **t1).counter("tgi_request_count_total", 15, **t2)
    x.counter("tgi_request_input_length_sum", 1200, **t1).counter("tgi_request_generated_tokens_sum", 2400, **t1)
    x.histogram("tgi_request_queue_duration", BUCKETS, **t1).histogram("tgi_request_duration", BUCKETS, **t1)
    x.gauge("tgi_queue_size", 4, **t1).gauge("tgi_batch_current_size", 8, **t1)
    x.histogram("tgi_request_mean_time_per_token_duration", BUCKETS, **t1).counter("tgi_batch_inference_count", 20, **t1)
    tr = {"job": "triton", "instance": "tr", "version": "1", "model": "busy"}
    x.counter("nv_inference_request_success", 30, **tr).counter("nv_inference_request_failure", 3, **tr, reason="REJECTED")
    x.counter("nv_inference_request_failure", 1.5, **tr, reason="BACKEND")
    x.counter("nv_inference_queue_duration_us", 30 * 1500, **tr).counter("nv_inference_request_duration_us", 30 * 20000, **tr)
    x.gauge("nv_inference_pending_request_count", 5, **tr)
    x.histogram("nv_inference_first_response_histogram_ms", {"10": 20.0, "100": 28.0, "+Inf": 30.0}, **tr)
    for summary, p95 in (("nv_inference_queue_summary_us", 2500), ("nv_inference_request_summary_us", 30000)):
        x.counter(f"{summary}_count", 30, **tr).gauge(summary, p95, **tr, quantile="0.95")
    for rank in ("0", "1"):
        s = {"job": "sglang", "instance": "s", "model_name": "m", "tp_rank": rank}
        x.gauge("sglang:num_running_reqs", 6, **s).gauge("sglang:num_queue_reqs", 3, **s).gauge("sglang:token_usage", 0.7, **s)
        x.counter("sglang:prompt_tokens_total", 150, **s).counter("sglang:generation_tokens_total", 300, **s)
        x.counter("sglang:cached_tokens_total", 40, **s).counter("sglang:num_requests_total", 10, **s)
    x.histogram("sglang:time_to_first_token_seconds", BUCKETS, job="sglang", instance="s", model_name="m")
    for name in ("e2e_request_latency_seconds", "inter_token_latency_seconds", "queue_time_seconds"):
        x.histogram(f"sglang:{name}", BUCKETS, job="sglang", instance="s", model_name="m")
    x.gauge("sglang:cache_hit_rate", 0.3, job="sglang", instance="s", model_name="m", tp_rank="0")
    ll = {"job": "llama", "instance": "l"}
    x.counter("llamacpp:prompt_tokens_total", 450, **ll).counter("llamacpp:tokens_predicted_total", 150, **ll)
    x.counter("llamacpp:n_decode_total", 75, **ll).counter("llamacpp:prompt_tokens_cached_total", 90, **ll)
    x.gauge("llamacpp:requests_processing", 2, **ll).gauge("llamacpp:requests_deferred", 1, **ll)
    x.gauge("llamacpp:kv_cache_usage_ratio", 0.35, **ll)
    rs = {"job": "ray-serve", "instance": "head", "application": "add", "deployment": "add_Add"}
    x.counter("ray_serve_deployment_request_counter", 60, **rs, replica="r1").counter("ray_serve_deployment_error_counter", 15, **rs, replica="r1")
    x.counter("ray_serve_deployment_request_counter", 30, **{**rs, "application": "hello"}, replica="h1")
    x.gauge("ray_serve_deployment_queued_queries", 4, **rs).gauge("ray_serve_replica_pending_queries", 2, **rs, replica="r1")
    x.gauge("ray_serve_replica_processing_queries", 3, **rs, replica="r1")
    x.histogram("ray_serve_http_request_latency_ms", {"10": 30.0, "100": 90.0, "+Inf": 100.0}, job="ray-serve", instance="head",
                application="add", route="/add")
    sd = {"job": "trainer", "instance": "t"}
    x.counter("obsctl_samples_total", 64 * 15, **sd).counter("obsctl_steps_total", 15, **sd)
    x.counter("obsctl_tokens_total", 4096 * 15, **sd).counter("obsctl_requests_total", 20, **sd, outcome="success")
    x.counter("obsctl_requests_total", 2, **sd, outcome="error").counter("obsctl_input_tokens_total", 3000, **sd)
    x.counter("obsctl_output_tokens_total", 1000, **sd)
    x.histogram("obsctl_step_duration_seconds", BUCKETS, **sd).histogram("obsctl_queue_wait_seconds", BUCKETS, **sd)
    x.histogram("obsctl_request_duration_seconds", BUCKETS, **sd)
    x.gauge("obsctl_requests_running", 3, **sd).gauge("obsctl_queue_depth_requests", 5, **sd)
    # the fleet: GPUs, their attribution, prices, a CPU node for llama
    for k, (uuid, (classes, util)) in enumerate(GPUS.items()):
        gl = {"job": "x", "instance": "n1:9400", "node": "gpu-node-1", "gpu": str(k), "uuid": uuid}
        x.constant("obsctl_gpu_info", 1, **gl, model=H100).gauge("obsctl_gpu_utilization_ratio", util, **gl)
        x.counter("obsctl_gpu_energy_joules_total", 300.0 * STEP, **gl, gpu_instance="")
        for c in classes:
            x.constant("obsctl_gpu_attribution_info", 1, **gl, workload_class=c, gpu_instance="", owner="o")
    x.constant("obsctl_accelerator_price_usd_per_hour", 4.0, job="x", instance="n1:9400", gpu_model=H100)
    x.constant("obsctl_energy_price_usd_per_kwh", 0.25, job="x", instance="n1:9400")
    x.constant("obsctl_node_price_usd_per_hour", 0.5, job="cpuexp", instance="c1:9400")
    x.gauge("process_cpu_seconds_total", 1, job="llama", instance="l")
    return x.rows


def group_order(spec) -> list[str]:
    """The generated groups, each after the groups whose series it reads; where two read each
    other (the signals group records the class info the cost rules read and reads the cost
    series), the one with fewer unread inputs first (the class info is a constant)."""
    rules = recording_rules(spec)
    groups = list(dict.fromkeys(r.group for r in rules))
    reads = {g: {d.group for r in rules if r.group == g for d in rules_for(r.expr, rules)} - {g} for g in groups}
    order: list[str] = []
    while len(order) < len(groups):
        rest = [g for g in groups if g not in order]
        ready = [g for g in rest if reads[g] <= set(order)]
        order += ready or [min(rest, key=lambda g: (len(reads[g] - set(order)), g))]
    return order


def pairs(spec) -> tuple[dict[tuple[str, str], tuple[str, str]], dict[tuple[str, str], str]]:
    """``({(class, signal): (recorded query, raw query)}, {(class, signal): why refused})``."""
    inlined, refused = {}, {}
    for wc in spec.workload_classes:
        for sig in spec.signals:
            query, why = raw_query(spec, wc, sig)
            if query is None:
                refused[wc.name, sig.name] = why
            else:
                inlined[wc.name, sig.name] = (spec.query_for(sig, wc), query)
    return inlined, refused


def suite(tmp_path, spec, cases: dict[tuple[str, str], tuple[str, str]]):
    files = generate(spec, [])[0]
    paths = []
    for name in ("obsctl-signals.rules.yaml", "obsctl-gpu.rules.yaml", "obsctl-sources.rules.yaml",
                 "obsctl-saturation.rules.yaml", "obsctl-cost.rules.yaml", "obsctl-training.rules.yaml"):
        (tmp_path / name).write_text(files[name])
        paths.append(str(tmp_path / name))
    tests = []
    for (cls, sig), (recorded, raw) in sorted(cases.items()):
        # 1 when both agree within 1e-9 relative; 2 when both are empty; 0 or nothing otherwise
        expr = (f"(abs(({recorded}) - ({raw})) <= bool (1e-9 * abs({recorded}) + 1e-12))"
                f" or (absent({recorded}) * absent({raw}) * 2)")
        want = 2 if (cls, sig) in NO_DATA else 1
        tests += [{"expr": expr, "eval_time": t, "exp_samples": [{"labels": "{}", "value": want}]} for t in EVAL_TIMES]
    path = tmp_path / "inline_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": paths, "evaluation_interval": f"{STEP}s", "group_eval_order": group_order(spec),
                                    "tests": [{"interval": f"{STEP}s", "input_series": [{"series": s, "values": v} for s, v in inputs()],
                                               "promql_expr_test": tests}]}, sort_keys=False))
    return promtool.test_rules([path])


#: Pairs the sources fill but these inputs give no value (both queries empty: checked so).
NO_DATA: set[tuple[str, str]] = {
    # llama runs on a CPU node: it has a node cost, no GPU work
    ("llama", "tokens_per_gpu_allocated_second"), ("llama", "tokens_per_gpu_busy_second"), ("llama", "tokens_per_joule"),
    # MFU is recorded for classes with an mfu block (train) only: both queries empty elsewhere
    ("chat", "mfu_ratio"), ("llama", "mfu_ratio"), ("sglang", "mfu_ratio"), ("tgi", "mfu_ratio"),
    # no rejection counter in these inputs
    ("serve", "rejected_requests_per_second"), ("train", "rejected_requests_per_second"),
}


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return write_spec(tmp_path_factory.mktemp("spec"), SPEC)


@pytest.fixture(scope="module")
def inlined(spec):
    return pairs(spec)


def test_every_cost_efficiency_and_source_signal_is_inlined(inlined):
    inlined, refused = inlined
    for key in ("usd_per_million_tokens", "usd_per_million_input_tokens", "usd_per_million_output_tokens", "usd_per_request",
                "tokens_per_gpu_busy_second", "tokens_per_gpu_allocated_second", "tokens_per_joule", "tokens_per_second"):
        assert ("chat", key) in inlined, refused.get(("chat", key))
    for key in ("usd_per_sample", "samples_per_gpu_allocated_second", "samples_per_second", "mfu_ratio"):
        assert ("train", key) in inlined, refused.get(("train", key))
    assert ("llama", "usd_per_million_tokens") in inlined  # the node-cost path
    # refusals are only for what the class's source does not fill, or MFU without an mfu block
    assert all("does not fill" in why or "no generated rule records" in why for why in refused.values()), refused
    assert len(inlined) >= 130


def test_inlined_queries_equal_the_recorded_series(tmp_path, spec, inlined):
    result = suite(tmp_path, spec, inlined[0])
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_harness_fails_on_a_wrong_range_or_a_lost_class_matcher(tmp_path, spec, inlined):
    recorded, raw = inlined[0]["chat", "usd_per_million_tokens"]
    assert "[5m]" in raw
    wrong_range = raw.replace("[5m]", "[2m]")
    tokens, raw_tokens = inlined[0]["chat", "tokens_per_second"]
    assert ',model_name="m1"' in raw_tokens
    lost_matcher = raw_tokens.replace(',model_name="m1"', "")  # model m9's tokens summed in
    result = suite(tmp_path, spec, {("chat", "usd_per_million_tokens"): (recorded, wrong_range),
                                    ("chat", "tokens_per_second"): (tokens, lost_matcher)})
    assert result.returncode != 0
    failed = result.stdout + result.stderr
    # both cases fail (promtool prints each failing expression, quoted)
    assert json.dumps(wrong_range)[1:-1] in failed and json.dumps(lost_matcher)[1:-1] in failed
