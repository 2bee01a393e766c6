"""Selectors with =~, != and !~ (``label: {op: value}`` in the spec): rendered as PromQL matchers with
escaped values, refused with one line when malformed, and selecting the right series in the
generated rules (known answers through promtool test rules)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from obsctl.errors import SpecError
from obsctl.rules import generate as gen
from obsctl.spec import load_spec, promql_matchers
from support import promtool as pt


def _spec(tmp_path: Path, selector: dict) -> Path:
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "version": 1,
        "workload_classes": [{"name": "chat", "kind": "inference", "selector": selector}],
        "signals": [{"name": "tps", "category": "throughput", "record": "obsctl_tokens:rate1m",
                     "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))", "unit": "tokens/s",
                     "direction": "higher_is_better"}]}, sort_keys=False))
    return path


def test_matchers_render_with_their_operators_and_escaped_values():
    selector = {"job": "vllm", "namespace": {"=~": "llm-.*"}, "pod": {"!~": 'canary-\\d+|x"y'}, "env": {"!=": "dev"},
                "team": {"=": "a"}}
    assert promql_matchers(selector) == ('env!="dev",job="vllm",namespace=~"llm-.*",pod!~"canary-\\\\d+|x\\"y",team="a"')


@pytest.mark.parametrize("matcher, message", [
    ({"~=": "x"}, "a matcher is one of"),
    ({"=~": "x", "!=": "y"}, "a matcher is one of"),
    ({"=~": "llm-("}, "is not a regular expression"),
])
def test_malformed_matchers_are_one_line_spec_errors(tmp_path, matcher, message):
    with pytest.raises(SpecError, match=message) as exc:
        load_spec(_spec(tmp_path, {"job": "vllm", "namespace": matcher}))
    assert "obsctl.yaml" in str(exc.value) and "namespace" in str(exc.value)


def test_regex_and_negative_matchers_select_the_right_series(tmp_path):
    spec = load_spec(_spec(tmp_path, {"job": "vllm", "namespace": {"=~": "llm-.*"}, "pod": {"!~": "canary-.*"},
                                      "env": {"!=": "dev"}}))
    files, _ = gen.generate(spec, [])
    rules = tmp_path / "rules"
    paths = gen.write(rules, files)
    counters = [  # (namespace, pod, env, tokens/s): only the first two are the class
        ("llm-a", "web-1", "prod", 10), ("llm-b", "web-2", "prod", 20), ("llm-a", "canary-1", "prod", 400),
        ("llm-a", "web-3", "dev", 800), ("batch", "web-4", "prod", 1600),
    ]
    series = [(pt.series("obsctl_tokens_total", {"job": "vllm", "namespace": ns, "pod": pod, "env": env}),
               pt.values(lambda i, r=rate: r * 15 * i, 40)) for ns, pod, env, rate in counters]
    got = pt.evaluate(tmp_path / "pt", paths, series, {"tps": 'workload_class:obsctl_tokens:rate1m{workload_class="chat"}'},
                      "8m")
    ((labels, value),) = got["tps"]
    assert value == pytest.approx(30.0)
