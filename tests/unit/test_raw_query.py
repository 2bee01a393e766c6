"""obsctl.baselining.measure.raw: a catalogue signal's query over its source rule's raw series."""

from __future__ import annotations

import subprocess

import yaml

from obsctl.baselining.measure.raw import raw_query
from obsctl.rules.sources import source_groups
from support.rules_fixtures import write_spec

SPEC = {
    "prometheus": {"url": "http://127.0.0.1:9"}, "store": "store",
    "workload_classes": [{"name": "chat", "kind": "inference", "source": "vllm", "selector": {"namespace": "llm"}},
                         {"name": "emb", "kind": "inference", "selector": {"job": "w"}}],
    "signals": [{"name": "tps", "catalogue": "tokens_per_second"}, {"name": "ok", "catalogue": "requests_per_second"},
                {"name": "cost", "catalogue": "usd_per_million_tokens"}, {"name": "ttft", "catalogue": "ttft_p95_seconds"},
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
    assert tps == f"sum(({_rule(spec, 'chat', 'workload_class:obsctl_tokens:rate5m').strip()}))"
    ok, _ = raw_query(spec, emb, spec.signal("ok"))
    inner = _rule(spec, "emb", "workload_class:obsctl_requests:rate5m").strip()
    assert ok == f'sum((({inner}) and on(outcome) label_replace(vector(1), "outcome", "success", "", "")))'
    assert raw_query(spec, emb, spec.signal("own")) == (spec.query_for("own", "emb"), "")


def test_signals_that_cannot_be_read_raw_say_why(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    chat, emb = spec.workload_classes
    query, why = raw_query(spec, chat, spec.signal("cost"))
    assert query is None and "derived from other recorded series" in why and "create-blocks-from rules" in why
    query, why = raw_query(spec, emb, spec.signal("ttft"))
    assert query is None and why == "the sdk source does not fill workload_class:obsctl_time_to_first_token_seconds:p95_rate5m"


def test_inlined_queries_parse(tmp_path):
    # promtool as the PromQL parser: each inlined query in a rule file checks clean.
    spec = write_spec(tmp_path, SPEC)
    rules = [{"record": f"check:q{i}:x", "expr": q} for i, (q, _) in
             enumerate(raw_query(spec, wc, s) for wc in spec.workload_classes for s in spec.signals) if q]
    path = tmp_path / "q.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len(rules) == 7  # chat: tps, ok, ttft, own; emb: tps, ok, own
