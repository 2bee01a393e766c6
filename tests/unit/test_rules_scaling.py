"""The generated rules and dashboards do not grow with the number of workload classes,
except where a rule reads raw series through a class's own selector.

Raw server metrics carry no ``workload_class`` label, so a class's source rules, its PromQL
signals over ``$selector``, its CPU inputs and its run cost stay one rule per class; every
other rule reads series that carry the class and is written once ``by (workload_class)``.
The measured spec is ``fleet`` of bench/bench_rules_scaling.py; the table is in docs/rules.md.
"""

from __future__ import annotations

import yaml
from bench_rules_scaling import SIGNALS, fleet

from obsctl.dashboards.build import build
from obsctl.rules import canonical as C
from obsctl.rules.generate import generate
from obsctl.rules.loop_series import CLASS_INFO, TARGET_INFO, TARGET_VALUE
from obsctl.rules.sources import SOURCES
from obsctl.spec import load_spec

#: What may stay one rule per class: series read through the class's selector.
SELECTOR_BOUND = ({m.record for s in SOURCES.values() for m in s.mappings} | {C.CPU_BUSY, C.CPUS_ALLOCATED, C.RUN_COST_USD_PER_HOUR}
                  | {f"workload_class:obsctl_{s['name']}:value" for s in SIGNALS if "query" in s} | {CLASS_INFO})


def _generated(tmp_path, n: int):
    path = tmp_path / f"fleet{n}" / "obsctl.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(fleet(n)))
    spec = load_spec(path)
    files, _ = generate(spec, [])
    rules = [r for text in files.values() for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    return rules, build(spec)


def _per_class(rules: list[dict]) -> list[dict]:
    """Rules written for one class: the class is a label of the rule, not of its result."""
    return [r for r in rules if "workload_class" in r.get("labels", {})]


def test_rules_written_once_do_not_grow_with_the_classes(tmp_path):
    small, _ = _generated(tmp_path, 8)
    large, _ = _generated(tmp_path, 24)
    shared = lambda rules: sorted(r.get("record") or r["alert"] for r in rules if r not in _per_class(rules))  # noqa: E731
    assert shared(small) == shared(large)
    # per class only what reads the class's selector; per target (the fleet has one per class) its
    # constants and its deadline alert
    per_class = {r.get("record") or r["alert"] for r in _per_class(large)}
    per_target = {TARGET_VALUE, TARGET_INFO, "ObsctlTargetDeadlinePassed"}
    assert per_class - SELECTOR_BOUND == per_target, per_class - SELECTOR_BOUND
    per_class_count = lambda rules: len(_per_class(rules))  # noqa: E731
    # 16 more classes add their selector-bound rules and nothing else
    added = per_class_count(large) - per_class_count(small)
    assert len(large) - len(small) == added


def test_dashboards_do_not_grow_with_the_classes(tmp_path):
    _, small = _generated(tmp_path, 4)
    _, large = _generated(tmp_path, 40)
    assert {name: len(text) for name, text in small.items()} == {name: len(text) for name, text in large.items()}
    assert max(len(text.encode()) for text in large.values()) < 2**20 // 8  # far below a ConfigMap's 1 MiB
