"""Cost per unit of work, idle waste, energy cost and efficiency: known answers through
``promtool test rules`` over the generated rules.

The expected values are computed here in Python from the scenario table (price per GPU,
split over the classes attributed to it, idle below the threshold), independently of the
PromQL. Prices, utilizations and powers are binary fractions so sums are exact in any
order and promtool's exact comparison holds.

OpenCost: the node series come from the public fixture
(``/work/shared/fixtures/opencost/opencost-kubecost-scrape.txt``); that capture has no GPUs
(its ``node_gpu_hourly_cost`` is 0), so the non-zero GPU price of node ``gpu-node-2`` is
**composed** for this test, not captured.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from obsctl.rules import canonical as C
from obsctl.rules import cost as K
from obsctl.rules import promtool
from obsctl.rules.generate import generate
from support.rules_fixtures import write_spec

OPENCOST = Path("/work/shared/fixtures/opencost/opencost-kubecost-scrape.txt")
STEP, N, EVAL = 15, 60, "10m"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
SPEC_PRICE = {H100: 4.0, A100: 2.5}
OC_GPU_NODE = "gke-kc-demo-stage-pool-2-70aa2479-4ric"  # in the fixture, node_gpu_hourly_cost 0
OC_CPU_NODE = "gke-kc-demo-stage-pool-2-70aa2479-r5b7"
COMPOSED_GPU_PRICE = {"gpu-node-2": 3.0}  # composed: the fixture has no GPU prices
ENERGY_USD_PER_KWH = 0.25
# uuid: (model, exporter instance, node label, utilization, power W, classes)
GPUS = {
    "GPU-A": (H100, "n1:9400", "gpu-node-1", 0.0625, 128.0, ["inf"]),
    "GPU-B": (H100, "n1:9400", "gpu-node-1", 0.75, 384.0, ["inf"]),
    "GPU-C": (H100, "n1:9400", "gpu-node-1", 0.03125, 256.0, ["inf", "train"]),
    "GPU-D": (A100, "n1:9400", "gpu-node-1", 0.0, 64.0, []),
    "GPU-E": (H100, "n2:9400", "gpu-node-2", 0.875, 512.0, ["train"]),
    "GPU-F": (H100, "n3:9400", OC_GPU_NODE, 0.5, 320.0, ["train"]),
}
WORK = {"inf": {"input": 1024.0, "output": 256.0, "success": 8.0, "error": 1.0}, "train": {"samples": 64.0},
        "cpu": {"tokens": 512.0}, "occpu": {"tokens": 256.0}}
RUNS = {"r1": 2.0, "r2": 1.0, "r3": 0.0}  # samples/s per run of class train; r3 finished (flat)
CPU_NODE_PRICE = 0.5


def _spec(tmp_path, prefer="opencost"):
    classes = [{"name": n, "kind": "training" if n == "train" else "inference", "selector": {"job": "w", "workload": n},
                "node_selector": {"job": "x"}} for n in ("inf", "train")]
    classes += [{"name": "cpu", "kind": "inference", "selector": {"job": "w", "workload": "cpu"}, "node_selector": {"job": "cpuexp"}},
                {"name": "occpu", "kind": "inference", "selector": {"job": "w", "workload": "occpu"}, "node_selector": {"job": "ocexp"}}]
    sig = {"name": "tokens", "category": "throughput", "query": "sum(rate(t{$selector}[1m]))", "unit": "t/s",
           "direction": "higher_is_better"}
    return write_spec(tmp_path, {"store": "s", "workload_classes": classes, "signals": [sig],
                                 "pricing": {"prefer": prefer, "energy_usd_per_kwh": ENERGY_USD_PER_KWH,
                                             "accelerator_hour_usd": SPEC_PRICE}})


def _opencost_lines(metric: str) -> list[tuple[str, float]]:
    """(labels text, value) of one family in the OpenCost fixture."""
    out = []
    for line in OPENCOST.read_text().splitlines():
        m = re.match(rf"^{metric}(\{{[^}}]*\}}) (\S+)$", line)
        if m:
            out.append((m.group(1), float(m.group(2))))
    return out


def _input_series() -> list[dict]:
    s = lambda series, values: {"series": series, "values": values}  # noqa: E731
    out = []
    for uuid, (model, inst, node, util, watts, classes) in GPUS.items():
        gl = f'job="x",instance="{inst}",node="{node}",gpu="0",uuid="{uuid}"'
        out += [s(f'obsctl_gpu_info{{{gl},model="{model}"}}', f"1x{N}"),
                s(f"obsctl_gpu_utilization_ratio{{{gl}}}", f"{util}x{N}"),
                s(f"obsctl_gpu_energy_joules_total{{{gl}}}", f"0+{watts * STEP}x{N}")]
        out += [s(f'obsctl_gpu_attribution_info{{{gl},workload_class="{c}",owner="o"}}', f"1x{N}") for c in classes]
    for inst in sorted({g[1] for g in GPUS.values()}):
        for model, price in SPEC_PRICE.items():
            out.append(s(f'obsctl_accelerator_price_usd_per_hour{{job="x",instance="{inst}",gpu_model="{model}"}}', f"{price}x{N}"))
        out.append(s(f'obsctl_energy_price_usd_per_kwh{{job="x",instance="{inst}"}}', f"{ENERGY_USD_PER_KWH}x{N}"))
    for labels, value in _opencost_lines("node_gpu_hourly_cost") + _opencost_lines("node_total_hourly_cost"):
        name = "node_gpu_hourly_cost" if (labels, value) in _opencost_lines("node_gpu_hourly_cost") else "node_total_hourly_cost"
        out.append(s(f"{name}{labels}", f"{value}x{N}"))
    for node, price in COMPOSED_GPU_PRICE.items():
        out.append(s(f'node_gpu_hourly_cost{{instance="{node}",node="{node}"}}', f"{price}x{N}"))
    out.append(s('obsctl_node_price_usd_per_hour{job="cpuexp",instance="c1:9400"}', f"{CPU_NODE_PRICE}x{N}"))
    out.append(s('obsctl_node_price_usd_per_hour{job="ocexp",instance="o1:9400"}', f"{CPU_NODE_PRICE}x{N}"))
    out.append(s(f'up{{job="ocexp",instance="o1:9400",node="{OC_CPU_NODE}"}}', f"1x{N}"))
    w = WORK
    out += [s(f'{C.INPUT_TOKENS}{{workload_class="inf"}}', f"{w['inf']['input']}x{N}"),
            s(f'{C.OUTPUT_TOKENS}{{workload_class="inf"}}', f"{w['inf']['output']}x{N}"),
            s(f'{C.REQUESTS}{{workload_class="inf",outcome="success"}}', f"{w['inf']['success']}x{N}"),
            s(f'{C.REQUESTS}{{workload_class="inf",outcome="error"}}', f"{w['inf']['error']}x{N}"),
            s(f'{C.SAMPLES}{{workload_class="train"}}', f"{w['train']['samples']}x{N}"),
            s(f'{C.TOKENS}{{workload_class="cpu"}}', f"{w['cpu']['tokens']}x{N}"),
            s(f'{C.TOKENS}{{workload_class="occpu"}}', f"{w['occpu']['tokens']}x{N}")]
    out += [s(f'obsctl_samples_total{{job="w",workload="train",run="{r}"}}', f"0+{rate * STEP}x{N}") for r, rate in RUNS.items()]
    return out


def expected(prefer: str = "opencost") -> dict[tuple[str, str], float]:
    """{(series, workload_class or ''): value}, from the scenario table alone."""
    opencost = {node: v for labels, v in _opencost_lines("node_gpu_hourly_cost")
                for node in re.findall(r'node="([^"]+)"', labels) if v > 0} | COMPOSED_GPU_PRICE
    price = {}
    for uuid, (model, _, node, *_rest) in GPUS.items():
        price[uuid] = (opencost.get(node, SPEC_PRICE[model]) if prefer == "opencost"
                       else SPEC_PRICE.get(model, opencost.get(node)))
    out: dict[tuple[str, str], float] = {}
    for wc in ("inf", "train"):
        mine = [(u, g) for u, g in GPUS.items() if wc in g[5]]
        cost = sum(price[u] / len(g[5]) for u, g in mine)
        watts = sum(g[4] / len(g[5]) for u, g in mine)
        out[C.COST_USD_PER_HOUR, wc] = cost
        out[C.IDLE_WASTE_USD_PER_HOUR, wc] = sum(price[u] / len(g[5]) for u, g in mine if g[3] < 0.1)
        out[C.GPU_ENERGY, wc] = watts
        out[C.ENERGY_COST_USD_PER_HOUR, wc] = sum(g[4] / len(g[5]) * ENERGY_USD_PER_KWH for u, g in mine) / 1000
        out[C.TOKENS_PER_GPU_ALLOCATED_SECOND if wc == "inf" else C.SAMPLES_PER_GPU_ALLOCATED_SECOND, wc] = (
            (WORK["inf"]["input"] + WORK["inf"]["output"]) if wc == "inf" else WORK["train"]["samples"]) / len(mine)
    inf, tokens = out[C.COST_USD_PER_HOUR, "inf"], WORK["inf"]["input"] + WORK["inf"]["output"]
    out[C.COST_PER_MILLION_TOKENS, "inf"] = inf / 3600 / tokens * 1e6
    # the split: weighted tokens = input + 4 (the default output weight) x output; no cached tokens counted
    weighted = WORK["inf"]["input"] + 4 * WORK["inf"]["output"]
    out[C.COST_PER_MILLION_INPUT_TOKENS, "inf"] = inf / 3600 / weighted * 1e6
    out[C.COST_PER_MILLION_OUTPUT_TOKENS, "inf"] = inf / 3600 / weighted * 1e6 * 4
    out[C.COST_PER_REQUEST, "inf"] = inf / 3600 / WORK["inf"]["success"]
    out[C.TOKENS_PER_GPU_BUSY_SECOND, "inf"] = tokens / sum(g[3] for g in GPUS.values() if "inf" in g[5])
    out[C.TOKENS_PER_JOULE, "inf"] = tokens / out[C.GPU_ENERGY, "inf"]
    out[C.COST_PER_SAMPLE, "train"] = out[C.COST_USD_PER_HOUR, "train"] / 3600 / WORK["train"]["samples"]
    out[C.UNATTRIBUTED_WASTE_USD_PER_HOUR, ""] = sum(price[u] for u, g in GPUS.items() if not g[5])
    out[C.COST_USD_PER_HOUR, "cpu"] = CPU_NODE_PRICE
    out[C.COST_PER_MILLION_TOKENS, "cpu"] = CPU_NODE_PRICE / 3600 / WORK["cpu"]["tokens"] * 1e6
    oc_total = {n: v for labels, v in _opencost_lines("node_total_hourly_cost") for n in re.findall(r'node="([^"]+)"', labels)}
    out[C.COST_USD_PER_HOUR, "occpu"] = oc_total[OC_CPU_NODE] if prefer == "opencost" else CPU_NODE_PRICE
    return out


def _suite(tmp_path, spec, checks: dict[tuple[str, str], float], extra: list[dict] = (), more_series: list[dict] = ()) -> Path:
    files = generate(spec, [])[0]
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    # the rules under test and their inputs (the class info series: a class without priced GPUs costs its nodes)
    for name in ("obsctl-saturation.rules.yaml", "obsctl-cost.rules.yaml", "obsctl-signals.rules.yaml"):
        (rules / name).write_text(files[name])
    tests = []
    for (series, wc), value in sorted(checks.items()):
        sel = f'{{workload_class="{wc}"}}' if wc else ""
        tests.append({"expr": f"{series}{sel}", "eval_time": EVAL, "exp_samples": [{"labels": f"{series}{sel}", "value": value}]})
    suite = tmp_path / "cost_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted(rules.iterdir())], "evaluation_interval": f"{STEP}s",
                                     "tests": [{"interval": f"{STEP}s", "input_series": _input_series() + list(more_series),
                                                "promql_expr_test": tests + list(extra)}]}))
    return suite


def test_fixture_has_no_gpu_prices():
    """Why the GPU price above is composed: every node_gpu_hourly_cost in the capture is 0."""
    assert [v for _, v in _opencost_lines("node_gpu_hourly_cost")] == [0.0, 0.0]
    assert len(_opencost_lines("node_total_hourly_cost")) == 2


@pytest.mark.parametrize("prefer", ["opencost", "spec"])
def test_cost_waste_and_efficiency_known_answers(tmp_path, prefer):
    want = expected(prefer)
    # the scenario exercises every price path: OpenCost > 0, OpenCost 0 -> spec, shared GPU, unattributed
    assert want[C.IDLE_WASTE_USD_PER_HOUR, "inf"] > 0 and want[C.UNATTRIBUTED_WASTE_USD_PER_HOUR, ""] == 2.5
    run_share = want[C.COST_USD_PER_HOUR, "train"] / 2  # r1 and r2 active, r3 finished
    runs = {"expr": f'{C.RUN_COST_USD_PER_HOUR}{{workload_class="train"}}', "eval_time": EVAL, "exp_samples": [
        {"labels": f'{C.RUN_COST_USD_PER_HOUR}{{workload_class="train",run="{r}"}}', "value": run_share} for r in ("r1", "r2")]}
    result = promtool.test_rules([_suite(tmp_path, _spec(tmp_path, prefer), want, [runs])])
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_spec_signal_recording_a_canonical_name_is_not_counted_as_work(tmp_path):
    """``record: obsctl_tokens:rate5m`` on a spec signal writes the canonical name with a
    ``signal`` label; summed in, it doubled the class's tokens (half the cost per token)."""
    want = expected()
    doubles = [{"series": f'{C.TOKENS}{{workload_class="cpu",signal="tokens"}}', "values": f"{WORK['cpu']['tokens']}x{N}"},
               {"series": f'{C.INPUT_TOKENS}{{workload_class="inf",signal="input"}}', "values": f"{WORK['inf']['input']}x{N}"}]
    checks = {k: want[k] for k in [(C.COST_PER_MILLION_TOKENS, "cpu"), (C.COST_PER_MILLION_TOKENS, "inf"),
                                   (C.COST_PER_MILLION_INPUT_TOKENS, "inf")]}
    result = promtool.test_rules([_suite(tmp_path, _spec(tmp_path), checks, more_series=doubles)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_idle_waste_harness_can_fail(tmp_path):
    """A wrong idle-waste answer (counting the shared GPU whole) must fail."""
    wrong = {(C.IDLE_WASTE_USD_PER_HOUR, "inf"): expected()[C.IDLE_WASTE_USD_PER_HOUR, "inf"] + 2.0}
    assert promtool.test_rules([_suite(tmp_path, _spec(tmp_path), wrong)]).returncode != 0


def test_cost_rules_absent_without_work(tmp_path):
    """A class with cost but no token rate has no cost per token (absent, never +Inf)."""
    spec = _spec(tmp_path)
    suite = _suite(tmp_path, spec, {}, [{"expr": f'{C.COST_PER_MILLION_TOKENS}{{workload_class="train"}}', "eval_time": EVAL,
                                         "exp_samples": []}])
    assert promtool.test_rules([suite]).returncode == 0


def test_run_cost_query_shape():
    q = K.run_cost_usd_query("7d", "60s", 60, 'workload_class="train"')
    assert q == (f'sum by (workload_class, run) (sum_over_time({C.RUN_COST_USD_PER_HOUR}{{workload_class="train"}}[7d:60s]))'
                 " * 60.0 / 3600")
