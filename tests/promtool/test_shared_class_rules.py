"""Two classes handled by one rule give each class the value its own per-class rule gave.

Rules written once ``by (workload_class)`` (catalogue signals, the saturation state, cost per
unit of work) must not mix classes: two classes with different inputs, evaluated through
``promtool test rules``, must each get the value computed here from that class's inputs
alone (the value the per-class query ``sum(<record>{workload_class="<class>"})`` gave), and
the rule files must hold one rule, not one per class.
"""

from __future__ import annotations

import yaml

from obsctl.rules import canonical as C
from obsctl.rules import generate as gen
from obsctl.rules.loop_series import CLASS_SIGNAL_INFO
from obsctl.rules.saturation import Thresholds, busy_fraction, classify
from support.promtool import evaluate
from support.rules_fixtures import write_spec

#: Per class: canonical tokens/s (two series, summed), input and output tokens/s, waiting
#: requests, attributed GPUs (uuid -> utilization) and the node price (USD/h).
CLASSES = {
    "a": {"tokens": (30.0, 10.0), "waiting": 3.0, "gpus": {"GPU-a0": 0.9, "GPU-a1": 0.7}},
    "b": {"tokens": (5.0, 2.5), "waiting": 0.0, "gpus": {"GPU-b0": 0.02}},
}
SPEC = {
    "store": "store",
    "workload_classes": [{"name": name, "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": name}}
                         for name in CLASSES],
    "signals": [{"name": "tokens", "catalogue": "tokens_per_second"}, {"name": "waiting", "catalogue": "requests_waiting"}],
}


def _inputs() -> list[tuple[str, str]]:
    series = []
    for name, c in CLASSES.items():
        series += [(f'{C.TOKENS}{{workload_class="{name}",replica="{i}"}}', f"{v}x40") for i, v in enumerate(c["tokens"])]
        series.append((f'{C.REQUESTS_WAITING}{{workload_class="{name}"}}', f"{c['waiting']}x40"))
        for uuid, util in c["gpus"].items():
            series += [(f'obsctl_gpu_attribution_info{{job="obsctl-exporter",uuid="{uuid}",gpu_instance="",workload_class="{name}"}}', "1x40"),
                       (f'obsctl_gpu_utilization_ratio{{job="obsctl-exporter",uuid="{uuid}",gpu_instance=""}}', f"{util}x40")]
    return series


def _expected() -> dict[str, dict[str, float | str]]:
    out = {}
    for name, c in CLASSES.items():
        busy = busy_fraction(sum(c["gpus"].values()), len(c["gpus"]))
        out[name] = {"tokens": sum(c["tokens"]), "waiting": c["waiting"], "busy": busy,
                     "state": classify(busy, waiting=c["waiting"], thresholds=Thresholds())}
    return out


def test_two_classes_one_rule_each_get_their_own_values(tmp_path):
    files, _ = gen.generate(write_spec(tmp_path, SPEC), [])
    rules = [r for text in files.values() for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    # one rule for both classes, not one per class
    assert sum(r.get("record") == "workload_class:obsctl_tokens:value" for r in rules) == 1
    assert sum(r.get("record") == C.BUSY_RATIO for r in rules) == 1
    assert sum(r.get("record") == C.SATURATION_STATE for r in rules) == 4  # one per state
    paths = gen.write(tmp_path / "rules", files)
    got = evaluate(tmp_path / "t", paths, _inputs(), {
        "tokens": "workload_class:obsctl_tokens:value", "waiting": "workload_class:obsctl_waiting:value",
        "busy": C.BUSY_RATIO, "state": f"{C.SATURATION_STATE} == 1", "pairs": CLASS_SIGNAL_INFO}, "5m")
    want = _expected()
    assert want["a"]["state"] == "saturated" and want["b"]["state"] == "idle"  # the two classes differ
    for key in ("tokens", "waiting", "busy"):
        values = {s["workload_class"]: v for s, v in got[key]}
        assert values.keys() == want.keys(), key
        for name in want:
            assert abs(values[name] - want[name][key]) < 1e-9, (key, name, values[name])
    assert sorted((s["workload_class"], s["state"]) for s, _ in got["state"]) == [("a", "saturated"), ("b", "idle")]
    assert sorted((s["workload_class"], s["signal"]) for s, _ in got["pairs"]) == [
        ("a", "tokens"), ("a", "waiting"), ("b", "tokens"), ("b", "waiting")]
    # the signals carry exactly the identity labels
    assert all(set(s) == {"__name__", "workload_class", "signal"} for s, _ in got["tokens"] + got["waiting"])
