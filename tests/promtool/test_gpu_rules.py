"""``workload_class:obsctl_gpu_utilization_ratio:avg`` through ``promtool test rules`` when
GPUs are shared: two classes attributed to one GPU (and a MIG instance) must not make
the join many-to-many. Expected values are computed here from the input utilizations."""

from __future__ import annotations

import yaml

from obsctl.rules import gpu, promtool

UTIL = {"GPU-a": 0.5, "GPU-b": 1.0}
MIG_UTIL = 0.25
# (uuid, gpu_instance or "", class): GPU-a is shared by x and y, GPU-b is x's alone, a MIG
# instance of GPU-c belongs to z.
ATTRIBUTION = [("GPU-a", "", "x"), ("GPU-a", "", "y"), ("GPU-b", "", "x"), ("GPU-c", "1", "z")]


def _expected() -> dict[str, float]:
    util = {**{(u, ""): v for u, v in UTIL.items()}, ("GPU-c", "1"): MIG_UTIL}
    out: dict[str, list[float]] = {}
    for uuid, inst, cls in ATTRIBUTION:
        out.setdefault(cls, []).append(util[(uuid, inst)])
    return {cls: sum(v) / len(v) for cls, v in out.items()}


def _suite(tmp_path, expected: dict[str, float]):
    rules = tmp_path / "gpu.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": gpu.gpu_groups()}))
    series = [{"series": f'obsctl_gpu_utilization_ratio{{uuid="{u}",instance="n1"}}', "values": f"{v}x10"} for u, v in UTIL.items()]
    series.append({"series": 'obsctl_gpu_utilization_ratio{uuid="GPU-c",gpu_instance="1",instance="n1"}', "values": f"{MIG_UTIL}x10"})
    for uuid, inst, cls in ATTRIBUTION:
        extra = f',gpu_instance="{inst}"' if inst else ""
        series.append({"series": f'obsctl_gpu_attribution_info{{uuid="{uuid}"{extra},workload_class="{cls}",instance="n1"}}', "values": "1x10"})
    test = {"interval": "15s", "input_series": series, "promql_expr_test": [{
        "expr": "workload_class:obsctl_gpu_utilization_ratio:avg", "eval_time": "1m",
        "exp_samples": [{"labels": f'workload_class:obsctl_gpu_utilization_ratio:avg{{workload_class="{c}"}}', "value": v}
                        for c, v in sorted(expected.items())]}]}
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "15s", "tests": [test]}))
    return suite


def test_class_gpu_utilization_with_shared_gpus(tmp_path):
    result = promtool.test_rules([_suite(tmp_path, _expected())])
    assert result.returncode == 0, result.stdout + result.stderr


def test_class_gpu_utilization_harness_can_fail(tmp_path):
    wrong = {c: v + 0.1 for c, v in _expected().items()}
    result = promtool.test_rules([_suite(tmp_path, wrong)])
    assert result.returncode != 0
