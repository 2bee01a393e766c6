"""snapshot-baseline --from-raw on a real Prometheus that holds a vLLM class's raw series,
the exporter's GPU series, and none of obsctl's recorded ones (the rules were never
loaded): a baseline from history right after install, cost per token included (three
levels of rules: the GPU price and attribution share, the class's USD/h, the ratio).
Expected values are computed here from the counters' slopes and the GPU table."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import snapshot_baseline
from obsctl.baselining.store import Store
from support.prometheus import served_history

#: The history ends at this fixed instant (no wall clock); 2 h at 15 s before it.
END = 1_796_107_200
STEP, POINTS = 15, 2 * 3600 // 15 + 1
#: Two replicas of the class: (pod, prompt tokens/s, generation tokens/s, successes/s, aborts/s).
REPLICAS = [("chat-0", 120.0, 480.0, 2.0, 0.5), ("chat-1", 80.0, 320.0, 1.5, 0.25)]
OTHER = ("other-0", 999.0, 999.0, 9.0, 9.0)  # another namespace: not the class's
H100, PRICE = "NVIDIA H100 80GB HBM3", 4.0  # USD per GPU-hour (the spec's price, as the exporter publishes it)
#: uuid: the classes the exporter attributes it to (GPU-B is shared: half of it is chat's).
GPUS = {"GPU-A": ["chat"], "GPU-B": ["chat", "batch"], "GPU-C": ["batch"]}
CHAT_USD_PER_HOUR = PRICE * (1 + 1 / 2)


def _history() -> str:
    lines = []
    series = {"vllm:prompt_tokens": [], "vllm:generation_tokens": [], "vllm:request_success": []}
    for namespace, (pod, prompt, gen, ok, abort) in [("llm-chat", r) for r in REPLICAS] + [("batch", OTHER)]:
        base = f'namespace="{namespace}",pod="{pod}",model_name="m"'
        series["vllm:prompt_tokens"].append((base, prompt))
        series["vllm:generation_tokens"].append((base, gen))
        series["vllm:request_success"] += [(f'{base},finished_reason="stop"', ok), (f'{base},finished_reason="abort"', abort)]
    start = END - (POINTS - 1) * STEP
    for name, rows in series.items():
        lines.append(f"# TYPE {name} counter")
        for labels, slope in rows:
            lines += [f"{name}_total{{{labels}}} {slope * STEP * i} {start + STEP * i}" for i in range(POINTS)]
    exporter = 'job="obsctl-exporter",instance="n1:9400"'
    gauges = {"obsctl_gpu_info": [], "obsctl_gpu_attribution_info": [],
              "obsctl_accelerator_price_usd_per_hour": [(f'{exporter},gpu_model="{H100}"', PRICE)]}
    for k, (uuid, classes) in enumerate(GPUS.items()):
        gpu = f'{exporter},gpu="{k}",uuid="{uuid}"'
        gauges["obsctl_gpu_info"].append((f'{gpu},model="{H100}"', 1))
        gauges["obsctl_gpu_attribution_info"] += [(f'{gpu},gpu_instance="",workload_class="{c}"', 1) for c in classes]
    for name, rows in gauges.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in rows:
            lines += [f"{name}{{{labels}}} {value} {start + STEP * i}" for i in range(POINTS)]
    return "\n".join(lines + ["# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with served_history(tmp_path_factory.mktemp("raw"), _history()) as served:
        yield served


@pytest.fixture
def spec_path(prometheus, tmp_path):
    data = {"prometheus": {"url": prometheus.url}, "store": str(tmp_path / "store"),
            "workload_classes": [{"name": "chat", "kind": "inference", "source": "vllm", "selector": {"namespace": {"=~": "llm-.*"}}}],
            "signals": [{"name": "tokens_per_second", "catalogue": "tokens_per_second"},
                        {"name": "requests_per_second", "catalogue": "requests_per_second"},
                        {"name": "usd_per_million_tokens", "catalogue": "usd_per_million_tokens"},
                        {"name": "usd_per_sample", "catalogue": "usd_per_sample"}]}
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(spec_path, *extra):
    end = dt.datetime.fromtimestamp(END, dt.UTC).isoformat()
    args = ["--spec", str(spec_path), "--window", "1h", "--end", end, "--output", "json", *extra]
    return CliRunner().invoke(snapshot_baseline, args)


def test_recorded_series_are_missing_and_the_message_says_from_raw(spec_path):
    result = _run(spec_path, "--signal", "tokens_per_second")
    assert result.exit_code == 1, result.output
    (outcome,) = json.loads(result.stdout)["outcomes"]
    assert outcome["status"] == "no_data" and "--from-raw" in outcome["reason"]


def test_from_raw_gives_the_replicas_sum_and_their_population(spec_path, tmp_path):
    result = _run(spec_path, "--from-raw")
    # Stored but partly refused (vLLM counts no samples): its own exit code, the pairs named.
    assert result.exit_code == 4, result.output
    assert "partly refused: 1 class x signal(s) not stored: chat/usd_per_sample" in result.stderr
    refused = json.loads(result.stdout)["refused"]
    assert [(r["workload_class"], r["signal"]) for r in refused] == [("chat", "usd_per_sample")]
    outcomes = {o["signal"]: o for o in json.loads(result.stdout)["outcomes"]}
    assert outcomes["tokens_per_second"]["status"] == "stored"
    assert outcomes["requests_per_second"]["status"] == "stored"
    assert outcomes["usd_per_million_tokens"]["status"] == "stored"
    per_sample = outcomes["usd_per_sample"]
    assert per_sample["status"] == "refused" and "which the vllm source does not fill" in per_sample["reason"]

    store = Store(tmp_path / "store")
    tokens = store.current_baseline("chat", "tokens_per_second")
    assert tokens.stats.mean == pytest.approx(sum(p + g for _, p, g, _, _ in REPLICAS), rel=1e-9)
    # The population is the replicas' raw counters, not one recorded series.
    pods = {(s["__name__"], s["pod"]) for s in tokens.population.label_sets}
    assert pods == {(n, pod) for n in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total") for pod, *_ in REPLICAS}
    assert "workload_class:" not in tokens.query and "vllm:generation_tokens_total" in tokens.query
    # finished_reason "stop" is a success, "abort" is not.
    ok = store.current_baseline("chat", "requests_per_second")
    assert ok.stats.mean == pytest.approx(sum(s for *_, s, _ in REPLICAS), rel=1e-9)


def test_from_raw_baselines_cost_per_token_through_every_rule_level(spec_path, tmp_path):
    result = _run(spec_path, "--from-raw", "--signal", "usd_per_million_tokens")
    assert result.exit_code == 0, result.output
    cost = Store(tmp_path / "store").current_baseline("chat", "usd_per_million_tokens")
    # chat's GPUs: GPU-A whole and half of GPU-B, over chat's tokens (the other namespace's not counted)
    tokens = sum(p + g for _, p, g, _, _ in REPLICAS)
    assert cost.stats.mean == pytest.approx(CHAT_USD_PER_HOUR / 3600 / tokens * 1e6, rel=1e-9)
    assert cost.stats.stddev == pytest.approx(0, abs=1e-9)
    assert "workload_class:" not in cost.query and "uuid:" not in cost.query
    names = {s["__name__"] for s in cost.population.label_sets}
    assert {"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "obsctl_gpu_attribution_info"} <= names
