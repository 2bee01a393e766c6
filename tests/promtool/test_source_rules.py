"""The source catalogue's recording rules under ``promtool test rules``: one class per
source mapping, plus the quirks (vLLM renames with both spellings at once, old-only and
mixed replicas, the ``ray_vllm:`` prefix, ``-1`` sentinels, ``_created`` series, TGI
counters with and without ``_total``, Triton microsecond counters and stale summary
quantiles, llama.cpp's counter-typed ``n_tokens_max``, SGLang's repeated ``tp_rank``
series, Kueue follower replicas, Slurm's ``_total`` gauge) and absence where a source
lacks a series.

Inputs are synthetic series advancing by fixed amounts per 15 s step, so every rate is
``amount / 15``; the expected quantiles come from :func:`quantile`, an independent
reimplementation of Prometheus' linear interpolation inside the bucket, and every other
expectation is arithmetic on the inputs written here.
"""

from __future__ import annotations

import pytest
import yaml

from obsctl.rules import canonical as c
from obsctl.rules import promtool
from obsctl.rules.render import dump_rule_file
from obsctl.rules.sources import source_groups
from support.rules_fixtures import write_spec

STEP = 15  # seconds between input samples
N = 60  # samples: 15 minutes
EVAL = "10m"


def quantile(q: float, buckets: dict[float, float]) -> float:
    """histogram_quantile over cumulative bucket rates ``{le: rate}`` (``inf`` included)."""
    les = sorted(buckets)
    total = buckets[float("inf")]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le in les:
        if buckets[le] >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / (buckets[le] - prev_count)
        prev_le, prev_count = le, buckets[le]
    raise AssertionError("no bucket reached the rank")


class Inputs:
    """promtool ``input_series`` built from per-step increments and gauge values."""

    def __init__(self) -> None:
        self.series: list[dict] = []

    @staticmethod
    def _name(metric: str, labels: dict) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return f"{metric}{{{inner}}}"

    def counter(self, metric: str, per_step: float, **labels: str) -> Inputs:
        self.series.append({"series": self._name(metric, labels), "values": f"0+{per_step}x{N}"})
        return self

    def gauge(self, metric: str, value: float, **labels: str) -> Inputs:
        self.series.append({"series": self._name(metric, labels), "values": f"{value}x{N}"})
        return self

    def histogram(self, metric: str, per_step: dict[float, float], **labels: str) -> Inputs:
        """Cumulative buckets increasing by ``per_step[le]`` each step, plus _count (and a _sum of 0)."""
        for le, inc in per_step.items():
            le_text = "+Inf" if le == float("inf") else repr(le)
            self.counter(f"{metric}_bucket", inc, **labels, le=le_text)
        self.counter(f"{metric}_count", per_step[float("inf")], **labels)
        return self


INF = float("inf")
# Distinct distributions for the new and the old spelling of one histogram: a rule that
# read the wrong one, or both, gives a different p95.
NEW_ITL = {0.01: 30.0, 0.05: 90.0, 0.1: 100.0, INF: 100.0}
OLD_TPOT = {0.01: 10.0, 0.05: 20.0, 0.1: 60.0, INF: 60.0}


def rate(per_step: float) -> float:
    return per_step / STEP


def per_second(buckets: dict[float, float]) -> dict[float, float]:
    return {le: rate(v) for le, v in buckets.items()}


SPEC = {
    "store": "store",
    "workload_classes": [
        {"name": "vllm-both", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "m1"}},
        {"name": "vllm-old", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "m0"}},
        {"name": "vllm-idle", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "m2"}},
        {"name": "vllm-mixed", "kind": "inference", "source": "vllm", "selector": {"job": "vllm-fleet"}},
        {"name": "ray-vllm", "kind": "inference", "source": "vllm", "selector": {"job": "ray"}},
        {"name": "tgi", "kind": "inference", "source": "tgi", "selector": {"job": "tgi"}},
        {"name": "triton", "kind": "inference", "source": "triton", "selector": {"job": "triton"}},
        {"name": "sglang", "kind": "inference", "source": "sglang", "selector": {"job": "sglang"}},
        {"name": "llamacpp", "kind": "inference", "source": "llamacpp", "selector": {"job": "llama"}},
        {"name": "serve", "kind": "inference", "source": "ray-serve", "selector": {"job": "ray-serve", "application": "add"}},
        {"name": "serve-new", "kind": "inference", "source": "ray-serve", "selector": {"job": "ray-serve", "application": "hello"}},
        {"name": "sdk", "kind": "training", "selector": {"job": "trainer"},
         "queue": {"source": "kueue", "selector": {"job": "kueue"}, "cluster_queue": "gpu-queue"}},
        {"name": "sdk-local", "kind": "training", "selector": {"job": "trainer2"},
         "queue": {"source": "kueue", "selector": {"job": "kueue"}, "local_queue": "team-a/train"}},
        {"name": "hpc", "kind": "training", "selector": {"job": "hpc"},
         "queue": {"source": "slurm", "selector": {"job": "slurm"}, "partition": "gpu"}},
    ],
    "signals": [{"name": "ttft_p95", "catalogue": "ttft_p95_seconds"}],
}


def inputs() -> list[dict]:
    x = Inputs()
    v = {"job": "vllm", "instance": "v:8000"}
    # vllm-both (model m1): V1 server inside the deprecation window, both spellings at once.
    x.gauge("vllm:kv_cache_usage_perc", 0.4, **v, model_name="m1").gauge("vllm:gpu_cache_usage_perc", 0.9, **v, model_name="m1")
    x.histogram("vllm:inter_token_latency_seconds", NEW_ITL, **v, model_name="m1")
    x.histogram("vllm:time_per_output_token_seconds", OLD_TPOT, **v, model_name="m1")
    x.counter("vllm:prompt_tokens_total", 300, **v, model_name="m1").counter("vllm:generation_tokens_total", 600, **v, model_name="m1")
    # prometheus_client's _created series: a timestamp, never a rate.
    x.gauge("vllm:prompt_tokens_created", 1.7e9, **v, model_name="m1")
    x.counter("vllm:request_success_total", 45, **v, model_name="m1", finished_reason="stop")
    x.counter("vllm:request_success_total", 15, **v, model_name="m1", finished_reason="length")
    x.counter("vllm:request_success_total", 6, **v, model_name="m1", finished_reason="abort")
    x.counter("vllm:request_success_total", 3, **v, model_name="m1", finished_reason="error")
    x.counter("vllm:request_success_total", 12, **v, model_name="m1", finished_reason="repetition")  # an answer
    x.counter("vllm:admission_rejections_total", 4, **v, model_name="m1", reason="max_num_queued_reqs")  # no engine label
    x.gauge("vllm:request_success_created", 1.7e9, **v, model_name="m1", finished_reason="stop")
    x.counter("vllm:prefix_cache_queries_total", 200, **v, model_name="m1").counter("vllm:prefix_cache_hits_total", 50, **v, model_name="m1")
    x.gauge("vllm:num_requests_running", 7, **v, model_name="m1").gauge("vllm:num_requests_waiting", 2, **v, model_name="m1")
    x.counter("vllm:num_preemptions_total", 1.5, **v, model_name="m1")
    x.counter("vllm:iteration_tokens_total_count", 150, **v, model_name="m1")
    # vllm-old (model m0): a V0 server with the old names only.
    x.gauge("vllm:gpu_cache_usage_perc", 0.25, **v, model_name="m0")
    x.histogram("vllm:time_per_output_token_seconds", OLD_TPOT, **v, model_name="m0")
    x.gauge("vllm:gpu_prefix_cache_hit_rate", 0.3, **v, model_name="m0")
    # vllm-idle (model m2): no request in the window; quantiles and means are 0/0.
    x.histogram("vllm:time_to_first_token_seconds", {0.1: 0, INF: 0}, **v, model_name="m2")
    x.counter("vllm:e2e_request_latency_seconds_sum", 0, **v, model_name="m2").counter("vllm:e2e_request_latency_seconds_count", 0, **v, model_name="m2")
    x.counter("vllm:prefix_cache_queries_total", 0, **v, model_name="m2").counter("vllm:prefix_cache_hits_total", 0, **v, model_name="m2")
    x.counter("vllm:prompt_tokens_total", 0, **v, model_name="m2")
    # vllm-mixed: two replicas of one class mid-upgrade, one new (a), one old (b).
    f = {"job": "vllm-fleet", "model_name": "m"}
    x.gauge("vllm:kv_cache_usage_perc", 0.2, **f, instance="a").gauge("vllm:gpu_cache_usage_perc", 0.6, **f, instance="b")
    x.counter("vllm:prompt_tokens_total", 30, **f, instance="a").counter("vllm:prompt_tokens_total", 60, **f, instance="b")
    # ray-vllm: Ray's re-export, old names, the -1 "no data" sentinel.
    r = {"job": "ray", "instance": "head:8080", "model_name": "big", "WorkerId": "w1"}
    x.gauge("ray_vllm:gpu_cache_usage_perc", 0.5, **r).gauge("ray_vllm:gpu_prefix_cache_hit_rate", -1, **r)
    x.counter("ray_vllm:generation_tokens_total", 900, **r)
    # tgi: counters without _total on one router, with _total on another.
    t1, t2 = {"job": "tgi", "instance": "t1"}, {"job": "tgi", "instance": "t2"}
    x.counter("tgi_request_success", 30, **t1).counter("tgi_request_success_total", 15, **t2)
    x.counter("tgi_request_failure", 3, **t1, err="validation").counter("tgi_request_failure", 6, **t1, err="overloaded")
    x.counter("tgi_request_failure", 1.5, **t1, err="dropped")  # the client went away
    x.counter("tgi_request_count", 39, **t1).counter("tgi_request_count_total", 15, **t2)
    x.counter("tgi_request_input_length_sum", 1200, **t1).counter("tgi_request_generated_tokens_sum", 2400, **t1)
    x.histogram("tgi_request_queue_duration", NEW_ITL, **t1)
    x.gauge("tgi_queue_size", 4, **t1).gauge("tgi_queue_size", 1, **t2).gauge("tgi_batch_current_size", 8, **t1)
    # triton: microsecond counters; model "idle" has stale summary quantiles and no traffic.
    tr = {"job": "triton", "instance": "tr", "version": "1"}
    x.counter("nv_inference_request_success", 30, **tr, model="busy").counter("nv_inference_request_success", 0, **tr, model="idle")
    x.counter("nv_inference_request_failure", 3, **tr, model="busy", reason="REJECTED")
    x.counter("nv_inference_request_failure", 1.5, **tr, model="busy", reason="BACKEND")
    x.counter("nv_inference_queue_duration_us", 30 * 1500, **tr, model="busy")  # 1.5 ms per request
    x.counter("nv_inference_request_duration_us", 30 * 20000, **tr, model="busy")  # 20 ms per request
    x.counter("nv_inference_queue_summary_us_count", 30, **tr, model="busy").gauge("nv_inference_queue_summary_us", 2500, **tr, model="busy", quantile="0.95")
    x.counter("nv_inference_queue_summary_us_count", 0, **tr, model="idle").gauge("nv_inference_queue_summary_us", 9e6, **tr, model="idle", quantile="0.95")
    x.gauge("nv_inference_pending_request_count", 5, **tr, model="busy")
    # sglang: two tensor-parallel ranks repeat the scheduler's gauges and counters.
    for rank in ("0", "1"):
        s = {"job": "sglang", "instance": "s", "model_name": "m", "tp_rank": rank}
        x.gauge("sglang:num_running_reqs", 6, **s).gauge("sglang:num_queue_reqs", 3, **s).gauge("sglang:token_usage", 0.7, **s)
        x.counter("sglang:prompt_tokens_total", 150, **s)
    x.histogram("sglang:time_to_first_token_seconds", NEW_ITL, job="sglang", instance="s", model_name="m")
    # llamacpp: n_tokens_max is typed counter but jumps like a maximum; nothing reads it.
    ll = {"job": "llama", "instance": "l"}
    x.counter("llamacpp:prompt_tokens_total", 450, **ll).counter("llamacpp:tokens_predicted_total", 150, **ll)
    x.counter("llamacpp:n_tokens_max", 4096, **ll).counter("llamacpp:n_decode_total", 75, **ll)
    x.counter("llamacpp:prompt_tokens_cached_total", 90, **ll)  # later builds: reused from the cache, not in prompt_tokens_total
    x.gauge("llamacpp:requests_processing", 2, **ll).gauge("llamacpp:requests_deferred", 1, **ll).gauge("llamacpp:kv_cache_usage_ratio", 0.35, **ll)
    # ray-serve: cumulative counts (typed gauge in Ray 2.6), router and replica queues.
    rs = {"job": "ray-serve", "instance": "head", "application": "add", "deployment": "add_Add"}
    x.counter("ray_serve_deployment_request_counter", 60, **rs, replica="r1").counter("ray_serve_deployment_error_counter", 15, **rs, replica="r1")
    x.counter("ray_serve_deployment_request_counter", 30, **{**rs, "application": "hello"}, replica="h1")
    x.gauge("ray_serve_deployment_queued_queries", 4, **rs).gauge("ray_serve_replica_pending_queries", 2, **rs, replica="r1")
    x.gauge("ray_serve_replica_processing_queries", 3, **rs, replica="r1")
    # hello's router queue grows by 2 queries a step (arrivals above what its replica answers).
    x.counter("ray_serve_deployment_queued_queries", 2, **{**rs, "application": "hello"})
    # kueue: ClusterQueue gpu-queue (leader and a follower), another queue, a LocalQueue.
    k = {"job": "kueue", "instance": "kueue"}
    for role, scale in (("leader", 1), ("follower", 10)):
        x.gauge("kueue_pending_workloads", 2 * scale, **k, replica_role=role, cluster_queue="gpu-queue", status="active")
        x.gauge("kueue_pending_workloads", 1 * scale, **k, replica_role=role, cluster_queue="gpu-queue", status="inadmissible")
        x.histogram("kueue_admission_wait_time_seconds", {1.0: 3 * scale, 10.0: 9 * scale, INF: 10 * scale},
                    **k, replica_role=role, cluster_queue="gpu-queue")
    x.gauge("kueue_pending_workloads", 50, **k, replica_role="leader", cluster_queue="cpu-queue", status="active")
    x.gauge("kueue_local_queue_pending_workloads", 4, **k, name="train", namespace="team-a", status="active")
    x.gauge("kueue_local_queue_pending_workloads", 7, **k, name="train", namespace="team-b", status="active")
    # slurm: a gauge named _total; PENDING in partition gpu only.
    sl = {"job": "slurm", "instance": "slurm"}
    x.gauge("slurm_partition_job_state_total", 4, **sl, partition="gpu", state="PENDING")
    x.gauge("slurm_partition_job_state_total", 2, **sl, partition="gpu", state="RUNNING")
    x.gauge("slurm_partition_job_state_total", 9, **sl, partition="cpu", state="PENDING")
    return x.series


def expected() -> dict[tuple[str, str], float | dict[str, float] | None]:
    """``{(class, record): value}``; a dict is per outcome; None means absent."""
    p95 = lambda b: quantile(0.95, per_second(b))
    return {
        ("vllm-both", c.KV_CACHE_USAGE): 0.4,  # new name only, not the old 0.9 too
        ("vllm-both", c.ITL_P95): p95(NEW_ITL),
        ("vllm-both", c.INPUT_TOKENS): rate(300),
        ("vllm-both", c.OUTPUT_TOKENS): rate(600),
        ("vllm-both", c.TOKENS): rate(900),
        # stop + length + repetition; abort + error; refused at admission
        ("vllm-both", c.REQUESTS): {"success": rate(45 + 15 + 12), "error": rate(6 + 3), "rejected": rate(4)},
        ("vllm-both", c.REQUESTS_OFFERED): rate(45 + 15 + 12 + 6 + 3 + 4),  # running and waiting flat: deriv 0
        ("vllm-both", c.ENGINE_BUSY): 1,  # requests waiting (no by-reason split): capacity full
        ("vllm-both", c.PREFIX_CACHE_HIT): 50 / 200,
        ("vllm-both", c.REQUESTS_RUNNING): 7,
        ("vllm-both", c.REQUESTS_WAITING): 2,
        ("vllm-both", c.PREEMPTIONS): rate(1.5),
        ("vllm-both", c.STEPS): rate(150),
        ("vllm-old", c.KV_CACHE_USAGE): 0.25,
        ("vllm-old", c.ITL_P95): p95(OLD_TPOT),
        ("vllm-old", c.PREFIX_CACHE_HIT): 0.3,
        ("vllm-old", c.TTFT_P95): None,
        ("vllm-idle", c.TTFT_P95): None,  # NaN dropped: absent, not NaN
        ("vllm-idle", c.E2E_MEAN): None,
        ("vllm-idle", c.PREFIX_CACHE_HIT): None,
        ("vllm-idle", c.INPUT_TOKENS): 0.0,  # a rate of 0 is a value
        ("vllm-mixed", c.KV_CACHE_USAGE): (0.2 + 0.6) / 2,
        ("vllm-mixed", c.INPUT_TOKENS): rate(90),
        ("ray-vllm", c.KV_CACHE_USAGE): 0.5,
        ("ray-vllm", c.PREFIX_CACHE_HIT): None,  # -1 sentinel
        ("ray-vllm", c.OUTPUT_TOKENS): rate(900),
        ("tgi", c.REQUESTS): {"success": rate(45), "error": rate(3), "rejected": rate(6 + 1.5)},
        ("tgi", c.REQUESTS_OFFERED): rate(54),
        ("tgi", c.INPUT_TOKENS): rate(1200),
        ("tgi", c.OUTPUT_TOKENS): rate(2400),
        ("tgi", c.QUEUE_WAIT_P95): p95(NEW_ITL),
        ("tgi", c.REQUESTS_WAITING): 5,
        ("tgi", c.REQUESTS_RUNNING): 8,
        ("tgi", c.TTFT_P95): None,
        ("tgi", c.KV_CACHE_USAGE): None,
        ("triton", c.REQUESTS): {"success": rate(30), "rejected": rate(3), "error": rate(1.5)},
        ("triton", c.QUEUE_WAIT_MEAN): 1500e-6,
        ("triton", c.E2E_MEAN): 20000e-6,
        ("triton", c.QUEUE_WAIT_P95): 2500e-6,  # the idle model's stale 9 s quantile ignored
        ("triton", c.REQUESTS_WAITING): 5,
        ("triton", c.INPUT_TOKENS): None,
        ("sglang", c.REQUESTS_RUNNING): 6,  # not 12: tp ranks repeat one value
        ("sglang", c.REQUESTS_WAITING): 3,
        ("sglang", c.KV_CACHE_USAGE): 0.7,
        ("sglang", c.INPUT_TOKENS): rate(150),
        ("sglang", c.TTFT_P95): p95(NEW_ITL),
        ("llamacpp", c.INPUT_TOKENS): rate(450 + 90),
        ("llamacpp", c.CACHED_INPUT_TOKENS): rate(90),
        ("llamacpp", c.TOKENS): rate(450 + 90 + 150),
        ("llamacpp", c.ENGINE_BUSY): 1,  # a request deferred: every slot busy
        ("llamacpp", c.OUTPUT_TOKENS): rate(150),
        ("llamacpp", c.STEPS): rate(75),
        ("llamacpp", c.REQUESTS_RUNNING): 2,
        ("llamacpp", c.REQUESTS_WAITING): 1,
        ("llamacpp", c.KV_CACHE_USAGE): 0.35,
        ("llamacpp", c.REQUESTS): None,
        ("serve", c.REQUESTS): {"success": rate(60), "error": rate(15)},
        ("serve", c.REQUESTS_WAITING): 4 + 2,
        ("serve", c.REQUESTS_RUNNING): 3,
        ("serve", c.REQUESTS_OFFERED): rate(75),
        # no error yet: Ray has not created the error counter; offered is answered + held growth
        ("serve-new", c.REQUESTS): {"success": rate(30)},
        ("serve-new", c.REQUESTS_OFFERED): rate(30 + 2),  # answered + the router queue's growth
        ("sdk", c.REQUESTS_WAITING): 2 + 1,  # leader only; cpu-queue not this class's
        ("sdk", c.QUEUE_WAIT_P95): quantile(0.95, {1.0: 3, 10.0: 9, INF: 10}),
        ("sdk-local", c.REQUESTS_WAITING): 4,
        ("hpc", c.REQUESTS_WAITING): 4,
        ("hpc", c.QUEUE_WAIT_P95): None,
    }


def _close(record: str, cls: str, value: float, **labels: str) -> dict:
    """A case: the series equals ``value`` within 1e-9 relative (rates carry float noise
    from Prometheus' extrapolation) and carries exactly the labels given."""
    matchers = ",".join(f'{k}="{v}"' for k, v in {"workload_class": cls, **labels}.items())
    tol = 1e-9 * max(1.0, abs(value))
    return {"expr": f"abs({record}{{{matchers}}} - {value!r}) <= bool {tol!r}", "eval_time": EVAL,
            "exp_samples": [{"labels": f"{{{matchers}}}", "value": 1}]}


def build_tests(exp: dict) -> list[dict]:
    cases = []
    for (cls, record), value in sorted(exp.items(), key=lambda kv: kv[0]):
        if value is None:
            cases.append({"expr": f'{record}{{workload_class="{cls}"}}', "eval_time": EVAL, "exp_samples": []})
        elif isinstance(value, dict):
            cases += [_close(record, cls, v, outcome=o) for o, v in sorted(value.items())]
            cases.append({"expr": f'count({record}{{workload_class="{cls}"}})', "eval_time": EVAL,
                          "exp_samples": [{"labels": "{}", "value": len(value)}]})
        else:
            cases.append(_close(record, cls, value))
    return [{"interval": f"{STEP}s", "input_series": inputs(), "promql_expr_test": cases}]


def run_suite(tmp_path, spec, tests: list[dict]):
    rules = tmp_path / "obsctl-sources.rules.yaml"
    rules.write_text(dump_rule_file(source_groups(spec), "test"))
    suite = tmp_path / "sources_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": f"{STEP}s", "tests": tests}, sort_keys=False))
    return promtool.test_rules([suite])


@pytest.fixture
def spec(tmp_path):
    return write_spec(tmp_path, SPEC)


def test_every_source_mapping_and_quirk_passes_promtool(tmp_path, spec):
    result = run_suite(tmp_path, spec, build_tests(expected()))
    assert result.returncode == 0, result.stdout + result.stderr


WRONG = {  # the answers a double count or a missed rename would give
    ("vllm-both", c.KV_CACHE_USAGE): (0.4 + 0.9) / 2,  # both spellings averaged
    ("vllm-both", c.ITL_P95): None,  # absent: the new name not read
    ("sglang", c.REQUESTS_RUNNING): 12,  # tp ranks summed
    ("sdk", c.REQUESTS_WAITING): 33,  # Kueue follower counted
}


def test_harness_fails_on_a_double_count_or_a_missing_series(tmp_path, spec):
    """Each wrong answer fails, and nothing else does (one suite, one case per answer)."""
    result = run_suite(tmp_path, spec, build_tests(WRONG))
    out = result.stdout + result.stderr
    assert result.returncode != 0
    failed = out.count("expr:")
    assert failed == len(WRONG), out
    for cls, record in WRONG:
        assert f'{record}{{workload_class=\\"{cls}\\"}}' in out, (cls, record)
