"""A real vLLM 0.32 server's ``/metrics`` replayed through the generated rules under
``promtool test rules``, with known answers computed here from the dump alone.

The dump is ``../shared/fixtures/vllm/vllm-0.32-cpu-live.txt`` (its README: a live CPU
server, ``tiny-llama``, after a few dozen completions). Every ``vllm:`` sample becomes one
input series labelled ``job="vllm",instance="127.0.0.1:8000"``: a cumulative one (counter,
histogram ``_bucket``/``_sum``/``_count``) rises by its dump value every 15 s step, so its
rate is ``value / 15``; a gauge keeps its dump value (or a scenario's override). The
expectations: a rate is the dump value / 15, a quantile is the quantile of the dump's own
buckets (:func:`quantile`, Prometheus' linear interpolation written again here; scaling every
bucket does not move it), a ratio is a ratio of dump values.

Scenarios over the same dump: ``as captured`` (nothing waits: idle), ``closed loop`` (a
fixed concurrency above what the engine batches: requests wait for capacity persistently:
saturated), ``deferred`` (requests wait, but not for the engine's capacity: constrained),
``backlog`` (arrivals above what the engine serves: the waiting queue grows by a fixed
amount each step; offered load = finished + refused + that growth per second), and
``flops and price`` (an engine that estimates its FLOPs: the MFU reads it, not the
spec's flops-per-token; one priced GPU attributed and a third of the prompt tokens served
from the prefix cache: the cost splits into USD per million input and output tokens).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from obsctl.dashboards import build as dashboards
from obsctl.rules import canonical as c
from obsctl.rules import promtool
from obsctl.rules.generate import generate
from support.rules_fixtures import write_spec

DUMP = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "vllm" / "vllm-0.32-cpu-live.txt"
STEP, N, EVAL = 15, 60, "10m"
CLASS, MODEL = "chat", "tiny-llama"
TARGET = {"job": "vllm", "instance": "127.0.0.1:8000"}
PEAK = 2.0 ** 44  # FLOP/s of the attributed GPU (the spec's mfu.peak_flops_per_second)
FLOPS_PER_STEP = 2.0 ** 40  # the flops scenario's estimated_flops_per_gpu_total increase per step
GPU_MODEL, GPU_PRICE = "NVIDIA H100 80GB HBM3", 4.0  # USD per GPU-hour (spec price)
OUTPUT_WEIGHT, CACHED_WEIGHT = 4.0, 0.1  # the spec's pricing.output_token_weight, cached_input_token_weight
CACHED_PER_STEP = 32.0  # of the dump's 96 prompt tokens per step, in the priced scenario
GROWTH = 3.0  # requests added to the waiting queue per step in the backlog scenario
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def read_dump() -> tuple[list[tuple[str, dict, float]], dict[str, str]]:
    """(``vllm:`` samples as (name, labels, value), {family: type}), ``_created`` left out."""
    samples, types = [], {}
    for line in DUMP.read_text().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind.strip()
        elif line.startswith("vllm:"):
            m = _SAMPLE.match(line)
            if not m.group(1).endswith("_created"):
                samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples, types


def cumulative(name: str, types: dict[str, str]) -> bool:
    if types.get(name) == "counter":
        return True
    return any(name.endswith(s) and types.get(name[: -len(s)]) == "histogram" for s in ("_bucket", "_sum", "_count"))


def total(name: str, **match: str) -> float:
    values = [v for n, labels, v in read_dump()[0] if n == name and all(labels.get(k) == x for k, x in match.items())]
    assert values, f"{name} {match} not in the dump"
    return sum(values)


def buckets(name: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for n, labels, v in read_dump()[0]:
        if n == f"{name}_bucket":
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            out[le] = out.get(le, 0.0) + v
    return out


def quantile(q: float, cum: dict[float, float]) -> float:
    """Prometheus' histogram_quantile over cumulative buckets ``{le: count}``."""
    rank = q * cum[math.inf]
    prev_le, prev = 0.0, 0.0
    for le in sorted(cum):
        if cum[le] >= rank:
            return prev_le if le == math.inf else prev_le + (le - prev_le) * (rank - prev) / (cum[le] - prev)
        prev_le, prev = le, cum[le]
    raise AssertionError("rank beyond +Inf")


#: Scenario -> gauge overrides {(name, reason label or ""): value} and counter overrides per step.
SCENARIOS = {
    "as captured": {},
    "closed loop": {("vllm:num_requests_running", ""): 8.0, ("vllm:num_requests_waiting", ""): 5.0,
                    ("vllm:num_requests_waiting_by_reason", "capacity"): 5.0, ("vllm:kv_cache_usage_perc", ""): 0.5},
    "backlog": {("vllm:num_requests_running", ""): 8.0, ("vllm:num_requests_waiting", ""): ("grows", GROWTH),
                ("vllm:num_requests_waiting_by_reason", "capacity"): ("grows", GROWTH)},
    "deferred": {("vllm:num_requests_running", ""): 2.0, ("vllm:num_requests_waiting", ""): 3.0,
                 ("vllm:num_requests_waiting_by_reason", "deferred"): 3.0, ("vllm:kv_cache_usage_perc", ""): 0.25},
    "flops and price": {("vllm:estimated_flops_per_gpu_total", ""): FLOPS_PER_STEP,
                        ("vllm:prompt_tokens_cached_total", ""): CACHED_PER_STEP},
}


def input_series(scenario: str) -> list[dict]:
    samples, types = read_dump()
    override = SCENARIOS[scenario]
    out = []
    for name, labels, value in samples:
        value = override.get((name, labels.get("reason", "")), value)
        inner = ",".join(f'{k}="{v}"' for k, v in {**labels, **TARGET}.items())
        rises = cumulative(name, types) or isinstance(value, tuple)
        value = value[1] if isinstance(value, tuple) else value
        out.append({"series": f"{name}{{{inner}}}", "values": f"0+{value!r}x{N}" if rises else f"{value!r}x{N}"})
    if scenario == "flops and price":  # one whole priced GPU attributed to the class
        exporter = 'job="obsctl-exporter",instance="n1:9400"'
        gpu = f'{exporter},gpu="0",uuid="GPU-1"'
        out += [{"series": f'obsctl_gpu_attribution_info{{{gpu},gpu_instance="",workload_class="{CLASS}",owner="o"}}', "values": f"1x{N}"},
                {"series": f'obsctl_gpu_info{{{gpu},model="{GPU_MODEL}"}}', "values": f"1x{N}"},
                {"series": f'obsctl_accelerator_price_usd_per_hour{{{exporter},gpu_model="{GPU_MODEL}"}}', "values": f"{GPU_PRICE!r}x{N}"}]
    return out


def spec(tmp_path):
    wc = {"name": CLASS, "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": MODEL},
          "mfu": {"flops_per_token": 1.0e9, "peak_flops_per_second": PEAK}}
    return write_spec(tmp_path, {"store": "s", "workload_classes": [wc],
                                 "signals": [{"name": "tokens", "catalogue": "tokens_per_second"}],
                                 "pricing": {"accelerator_hour_usd": {GPU_MODEL: GPU_PRICE}, "output_token_weight": OUTPUT_WEIGHT,
                                             "cached_input_token_weight": CACHED_WEIGHT}})


def expected(scenario: str) -> dict[str, float | dict[str, float] | None]:
    """{record: value (dict: per ``outcome`` or ``state``; None: absent)} from the dump alone."""
    rate = lambda v: v / STEP  # noqa: E731
    ok = sum(total("vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "repetition"))
    failed = sum(total("vllm:request_success_total", finished_reason=r) for r in ("abort", "error"))
    want: dict[str, float | dict[str, float] | None] = {
        c.INPUT_TOKENS: rate(total("vllm:prompt_tokens_total")),
        c.OUTPUT_TOKENS: rate(total("vllm:generation_tokens_total")),
        c.TOKENS: rate(total("vllm:prompt_tokens_total") + total("vllm:generation_tokens_total")),
        c.CACHED_INPUT_TOKENS: rate(total("vllm:prompt_tokens_cached_total")),
        c.REQUESTS: {"success": rate(ok), "error": rate(failed), "rejected": rate(total("vllm:admission_rejections_total"))},
        # arrivals: finished + refused; running and waiting flat in the window (deriv 0)
        c.REQUESTS_OFFERED: rate(ok + failed + total("vllm:admission_rejections_total")),
        c.PREFILL_P95: quantile(0.95, buckets("vllm:request_prefill_time_seconds")),
        c.DECODE_P95: quantile(0.95, buckets("vllm:request_decode_time_seconds")),
        c.TTFT_P95: quantile(0.95, buckets("vllm:time_to_first_token_seconds")),
        c.E2E_MEAN: total("vllm:e2e_request_latency_seconds_sum") / total("vllm:e2e_request_latency_seconds_count"),
        c.PREFIX_CACHE_HIT: total("vllm:prefix_cache_hits_total") / total("vllm:prefix_cache_queries_total"),
        c.STEPS: rate(total("vllm:iteration_tokens_total_count")),
        c.REQUESTS_RUNNING: total("vllm:num_requests_running"),
        c.REQUESTS_WAITING: total("vllm:num_requests_waiting"),
        c.ENGINE_BUSY: total("vllm:kv_cache_usage_perc"),
        c.ENGINE_FLOPS_PER_GPU: None,  # the CPU build estimates no FLOPs: 0, dropped
        c.SATURATION_STATE: {"saturated": 0, "constrained": 0, "idle": 1, "healthy": 0},
    }
    if scenario == "closed loop":
        want |= {c.REQUESTS_RUNNING: 8.0, c.REQUESTS_WAITING: 5.0, c.ENGINE_BUSY: 1.0,
                 c.SATURATION_STATE: {"saturated": 1, "constrained": 0, "idle": 0, "healthy": 0}}
    elif scenario == "backlog":
        waiting = GROWTH * (10 * 60 // STEP)  # the gauge at the evaluation time
        want |= {c.REQUESTS_RUNNING: 8.0, c.REQUESTS_WAITING: waiting, c.ENGINE_BUSY: 1.0,
                 c.REQUESTS_OFFERED: rate(ok + failed + total("vllm:admission_rejections_total") + GROWTH),
                 c.SATURATION_STATE: {"saturated": 1, "constrained": 0, "idle": 0, "healthy": 0}}
    elif scenario == "deferred":
        want |= {c.REQUESTS_RUNNING: 2.0, c.REQUESTS_WAITING: 3.0, c.ENGINE_BUSY: 0.25,
                 c.SATURATION_STATE: {"saturated": 0, "constrained": 1, "idle": 0, "healthy": 0}}
    elif scenario == "flops and price":
        usd_per_s = GPU_PRICE / 3600
        prompt, out = total("vllm:prompt_tokens_total"), total("vllm:generation_tokens_total")
        weighted = rate(prompt - CACHED_PER_STEP + CACHED_WEIGHT * CACHED_PER_STEP + OUTPUT_WEIGHT * out)
        want |= {c.ENGINE_FLOPS_PER_GPU: rate(FLOPS_PER_STEP), c.MFU: rate(FLOPS_PER_STEP) / PEAK,
                 c.CACHED_INPUT_TOKENS: rate(CACHED_PER_STEP), c.COST_USD_PER_HOUR: GPU_PRICE,
                 c.COST_PER_MILLION_TOKENS: usd_per_s / rate(prompt + out) * 1e6,
                 c.COST_PER_MILLION_INPUT_TOKENS: usd_per_s / weighted * 1e6,
                 c.COST_PER_MILLION_OUTPUT_TOKENS: usd_per_s / weighted * 1e6 * OUTPUT_WEIGHT}
    return want


def _close(expr: str, value: float) -> dict:
    """A promtool check that ``expr`` (one series) is within 1e-9 (relative) of ``value``."""
    tol = 1e-9 * max(1.0, abs(value))
    return {"expr": f"count(abs({expr} - {value!r}) <= {tol!r})", "eval_time": EVAL, "exp_samples": [{"labels": "{}", "value": 1}]}


def checks(want: dict) -> list[dict]:
    out = []
    for record, value in want.items():
        sel = f'{record}{{workload_class="{CLASS}",signal=""}}'
        if value is None:
            out.append({"expr": sel, "eval_time": EVAL, "exp_samples": []})
        elif isinstance(value, dict):
            label = "state" if record == c.SATURATION_STATE else "outcome"
            out += [_close(f'{record}{{workload_class="{CLASS}",{label}="{k}"}}', v) for k, v in value.items()]
            out.append({"expr": f"count({sel})", "eval_time": EVAL, "exp_samples": [{"labels": "{}", "value": len(value)}]})
        else:
            out.append(_close(sel, value))
    return out


def panel_checks(spec_) -> list[dict]:
    """The dashboards' saturation-state and busy-fraction queries each return data."""
    out = []
    for text in dashboards.build(spec_).values():
        for panel in json.loads(text).get("panels", []):
            if not panel.get("title", "").startswith(("Saturation state", "Busy fraction")):
                continue
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$workload_class", CLASS)
                assert "$" not in expr, expr
                out.append({"expr": f"count({expr}) > 0", "eval_time": EVAL, "exp_samples": [{"labels": "{}", "value": 1}]})
    assert len(out) >= 6, out  # inference and verification: state table, state history, busy; training: busy
    return out


def suite(tmp_path: Path, scenario: str, want: dict) -> Path:
    sp = spec(tmp_path)
    files = generate(sp, [])[0]
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    for name, text in files.items():
        if name.endswith(".rules.yaml") and "alert" not in name:
            (rules / name).write_text(text)
    tests = checks(want) + panel_checks(sp)
    if c.COST_PER_MILLION_INPUT_TOKENS in want:  # the split adds up to the class's cost (USD/h)
        own = f'{{workload_class="{CLASS}",signal=""}}'
        spent = (f"({c.COST_PER_MILLION_INPUT_TOKENS}{own} * ({c.INPUT_TOKENS}{own} - {1 - CACHED_WEIGHT!r} * {c.CACHED_INPUT_TOKENS}{own})"
                 f" + {c.COST_PER_MILLION_OUTPUT_TOKENS}{own} * {c.OUTPUT_TOKENS}{own}) / 1e6 * 3600")
        tests.append(_close(spent, GPU_PRICE))
    path = tmp_path / "replay_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted(rules.iterdir())], "evaluation_interval": f"{STEP}s",
                                    "tests": [{"interval": f"{STEP}s", "input_series": input_series(scenario),
                                               "promql_expr_test": tests}]}))
    return path


def test_the_dump_is_the_live_capture():
    """What the README of the fixtures says it holds (a different file would make the answers moot)."""
    names = {n for n, _, _ in read_dump()[0]}
    assert {"vllm:admission_rejections_total", "vllm:num_requests_waiting_by_reason", "vllm:prompt_tokens_cached_total",
            "vllm:estimated_flops_per_gpu_total", "vllm:request_prefill_time_seconds_bucket",
            "vllm:request_decode_time_seconds_bucket"} <= names
    assert total("vllm:request_success_total", finished_reason="length") == 12


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_live_vllm_dump_through_the_generated_rules(tmp_path, scenario):
    result = promtool.test_rules([suite(tmp_path, scenario, expected(scenario))])
    assert result.returncode == 0, result.stdout + result.stderr


def test_replay_can_fail(tmp_path):
    """repetition counted as an error, or the closed loop read as idle, must fail."""
    want = expected("as captured") | {c.REQUESTS: {"success": 0.0, "error": 0.8, "rejected": 0.0}}
    assert promtool.test_rules([suite(tmp_path, "as captured", want)]).returncode != 0
    want = expected("closed loop") | {c.SATURATION_STATE: {"saturated": 0, "constrained": 0, "idle": 1, "healthy": 0}}
    assert promtool.test_rules([suite(tmp_path, "closed loop", want)]).returncode != 0
