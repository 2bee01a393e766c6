"""obsctl.baselining.measure.raw: a catalogue signal's query over its source rule's raw series."""

from __future__ import annotations

import subprocess

import yaml

from obsctl.baselining.measure.raw import raw_query
from obsctl.rules.lookback import metric_selectors, recording_rules
from obsctl.rules.promql_ast import parse, render
from obsctl.rules.sources import source_groups
from support.rules_fixtures import write_spec

SPEC = {
    "prometheus": {"url": "http://127.0.0.1:9"}, "store": "store",
    "workload_classes": [{"name": "chat", "kind": "inference", "source": "vllm", "selector": {"namespace": "llm"}},
                         {"name": "emb", "kind": "inference", "selector": {"job": "w"}}],
    "signals": [{"name": "tps", "catalogue": "tokens_per_second"}, {"name": "ok", "catalogue": "requests_per_second"},
                {"name": "cost", "catalogue": "usd_per_million_tokens"}, {"name": "ttft", "catalogue": "ttft_p95_seconds"},
                {"name": "mfu", "catalogue": "mfu_ratio"}, {"name": "per_sample", "catalogue": "usd_per_sample"},
                {"name": "own", "category": "throughput", "query": "sum(rate(x_total{$selector}[1m]))", "unit": "1/s",
                 "direction": "higher_is_better"}],
}


def _rule(spec, wc, record):
    (expr,) = [r["expr"] for g in source_groups(spec) if g["name"] == f"obsctl.sources.{wc}" for r in g["rules"] if r["record"] == record]
    return expr


def test_one_level_signals_inline_their_source_rule(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    chat, emb = spec.workload_classes
    tps, _ = raw_query(spec, chat, spec.signal("tps"))
    inner = render(parse(_rule(spec, "chat", "workload_class:obsctl_tokens:rate5m")))
    # the rule's expression, with its static label set as the rule sets it
    assert tps == f'sum((label_replace(({inner}), "workload_class", "chat", "", "")))'
    ok, _ = raw_query(spec, emb, spec.signal("ok"))
    # outcome passes through sum by (outcome) from the raw counter: pushed into its selector
    assert ok == ('sum((label_replace((sum by (outcome) (rate(obsctl_requests_total{job="w",outcome="success"}[5m]))), '
                  '"workload_class", "emb", "", "")))')
    assert raw_query(spec, emb, spec.signal("own")) == (spec.query_for("own", "emb"), "")


def test_derived_signals_inline_every_level(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    chat, emb = spec.workload_classes
    query, why = raw_query(spec, chat, spec.signal("cost"))
    assert why == "" and query is not None
    recorded = {r.record for r in recording_rules(spec)}
    assert not {s.partition("{")[0] for s in metric_selectors(query)} & recorded  # raw series only
    # chat's token counters and attribution only: the class matcher reached every inner selector
    assert 'vllm:generation_tokens_total{namespace="llm"}' in query and 'job="w"' not in query
    assert 'obsctl_gpu_attribution_info{gpu_instance="",job="obsctl-exporter",workload_class=~"chat|emb",workload_class="chat"}' in query
    # ... and not into a GPU's count of classes (the equal split counts every class on it)
    assert 'count by (uuid) (obsctl_gpu_attribution_info{gpu_instance=""})' in query


def test_signals_that_cannot_be_read_raw_say_why(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    chat, emb = spec.workload_classes
    query, why = raw_query(spec, emb, spec.signal("ttft"))
    assert query is None and why == "the sdk source does not fill workload_class:obsctl_time_to_first_token_seconds:p95_rate5m"
    query, why = raw_query(spec, chat, spec.signal("mfu"))
    assert query is None and why == "no generated rule records workload_class:obsctl_model_flops_utilization:ratio for the class chat"
    query, why = raw_query(spec, chat, spec.signal("per_sample"))
    assert query is None and "computed from workload_class:obsctl_samples:rate5m, which the vllm source does not fill" in why


def test_inlined_queries_parse(tmp_path):
    # promtool as the PromQL parser: each inlined query in a rule file checks clean.
    spec = write_spec(tmp_path, SPEC)
    rules = [{"record": f"check:q{i}:x", "expr": q} for i, (q, _) in
             enumerate(raw_query(spec, wc, s) for wc in spec.workload_classes for s in spec.signals) if q]
    path = tmp_path / "q.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len(rules) == 10  # chat: tps, ok, cost, ttft, own; emb: tps, ok, cost, own, per_sample
