"""obsctl.rules.promql_ast and obsctl.rules.inline: parsing PromQL back to the same text, and
recorded series replaced by their rules' expressions, restricted to what the matchers select.

That the inlined queries give the recorded values on data is checked against promtool in
tests/promtool/test_raw_inline_known_answers.py; here, the shapes and every refusal.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from obsctl.rules.generate import generate
from obsctl.rules.inline import NotInlined, inline
from obsctl.rules.lookback import Rule
from obsctl.rules.promql_ast import PromQLSyntaxError, parse, render
from support.rules_fixtures import write_spec

AND_ON = 'label_replace(vector(1), "{0}", "{1}", "", "")'


def test_every_generated_rule_parses_and_prints_back(tmp_path):
    from support.rules_fixtures import SPEC

    files = generate(write_spec(tmp_path, SPEC), [])[0]
    exprs = [r["expr"] for text in files.values() for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert len(exprs) > 100
    printed = [render(parse(e)) for e in exprs]
    assert all(parse(p) == parse(e) for p, e in zip(printed, exprs, strict=True))
    path = tmp_path / "printed.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "p", "rules": [{"record": f"p:x{i}:y", "expr": p}
                                                                       for i, p in enumerate(printed)]}]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("text", ['sum by (a) (x) / on(a) group_left(b) y', "-x ^ 2", "max_over_time(rate(x[5m])[1h:1m] offset 5m)",
                                  'topk(3, x{a=~"b|c"})', "x @ end()", "x == bool 1",
                                  "sum without (le) (x)", 'label_replace(x, "a", "$1", "b", "(.*)")'])
def test_round_trip(text):
    assert render(parse(text)) == text
    assert parse("sum(x) without (le)") == parse("sum without (le) (x)")


def test_keywords_and_aggregations_in_any_case():
    assert parse("SUM BY (a) (x) AND ON(a) y") == parse("sum by (a) (x) and on(a) y")


@pytest.mark.parametrize("text", ["sum(", "x{a=1}", "rate(x)[5m]", "x offset", "1 +"])
def test_syntax_errors_name_the_place(text):
    with pytest.raises(PromQLSyntaxError):
        parse(text)


def test_a_matcher_on_a_passed_through_label_goes_into_the_selectors():
    rules = [Rule("job:x:rate5m", "sum by (job) (rate(x_total[5m])) / on(job) group_left() max by (job) (y)", {})]
    assert inline('job:x:rate5m{job="a"}', rules) == \
        '(sum by (job) (rate(x_total{job="a"}[5m])) / on(job) group_left() max by (job) (y))'


def test_a_static_label_picks_the_rule_and_is_set_as_the_rule_sets_it():
    rules = [Rule("c:x:rate5m", "sum(rate(a_total[5m]))", {"workload_class": "a"}),
             Rule("c:x:rate5m", "sum(rate(b_total[5m]))", {"workload_class": "b"})]
    assert inline('sum(c:x:rate5m{workload_class="b"})', rules) == \
        'sum((label_replace((sum(rate(b_total[5m]))), "workload_class", "b", "", "")))'
    both = inline("sum(c:x:rate5m)", rules)
    assert both.count("label_replace") == 2 and " or " in both
    assert inline('sum(c:x:rate5m{workload_class="z"})', rules) == "(vector(0) < 0)"  # no rule: nothing


def test_a_label_the_expression_makes_is_filtered_with_and_on():
    rules = [Rule("c:r:rate5m", 'sum by (outcome) (label_replace(rate(r_total[5m]), "outcome", "ok", "code", "2.."))', {})]
    # outcome passes through the sum by (outcome): filtered below it, where label_replace makes it
    assert inline('c:r:rate5m{outcome="ok"}', rules) == (
        '(sum by (outcome) (((label_replace(rate(r_total[5m]), "outcome", "ok", "code", "2..")) and on(outcome) '
        + AND_ON.format("outcome", "ok") + ")))")
    with pytest.raises(NotInlined, match=r'makes the label outcome; the matcher outcome=~"o.\*"'):
        inline('c:r:rate5m{outcome=~"o.*"}', rules)


def test_a_label_the_expression_drops_is_decided_on_the_empty_value():
    rules = [Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {})]
    assert inline('c:t:rate5m{signal=""}', rules) == "(sum(rate(t_total[5m])))"
    assert inline('c:t:rate5m{signal="x"}', rules) == "(vector(0) < 0)"


def test_two_levels_push_the_class_into_the_inner_rules():
    rules = [Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {"workload_class": "a"}, "src", 0),
             Rule("c:t:rate5m", "sum(rate(u_total[5m]))", {"workload_class": "b"}, "src", 1),
             Rule("c:usd:ratio", "sum by (workload_class) (c:usd:sum) / (sum by (workload_class) (c:t:rate5m) > 0)", {}, "cost", 1),
             Rule("c:usd:sum", "sum by (workload_class) (price * on(uuid) group_left() share)", {}, "cost", 0)]
    out = inline('sum(c:usd:ratio{workload_class="a"})', rules)
    assert "u_total" not in out and "t_total" in out and 'price{workload_class="a"}' in out
    assert "share{" not in out  # the one side of group_left is not filtered


@pytest.mark.parametrize(("expr", "why"), [
    ("max_over_time(c:t:rate5m[10m])", "through a range"),
    ("c:t:rate5m offset 5m", "through an offset"),
    ("max_over_time(c:t:rate5m[10m:1m])", "through a subquery"),
    ("absent(c:t:rate5m)", r"absent\(\) of a recorded series"),
])
def test_what_would_change_the_values_is_refused(expr, why):
    rules = [Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {}), Rule("c:u:x", expr, {})]
    with pytest.raises(NotInlined, match=why):
        inline("c:u:x", rules)


def test_a_rule_reading_a_series_recorded_later_in_its_group_is_refused():
    rules = [Rule("c:u:x", "c:t:rate5m * 2", {}, "g", 0), Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {}, "g", 1)]
    with pytest.raises(NotInlined, match="c:u:x in group g reads c:t:rate5m, recorded after it in the same group"):
        inline("c:u:x", rules)
    rules = [Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {}, "g", 0), Rule("c:u:x", "c:t:rate5m * 2", {}, "g", 1)]
    assert inline("c:u:x", rules) == "((sum(rate(t_total[5m]))) * 2)"


def test_a_cycle_is_refused():
    rules = [Rule("a:x:y", "b:x:y + 1", {}), Rule("b:x:y", "a:x:y + 1", {})]
    with pytest.raises(NotInlined, match="reads its own series"):
        inline("a:x:y", rules)


def test_what_selects_nothing_is_pruned():
    rules = [Rule("c:usd:sum", 'sum by (workload_class) (share{workload_class=~"a|b"})', {}),
             Rule("c:usd:sum", 'sum by (workload_class) (share{workload_class=~"c"}) or sum by (workload_class) (node)', {}),
             Rule("c:t:rate5m", "sum(rate(t_total[5m]))", {})]
    # class a: the second rule's share selector can hold no class a; what is left of it is the node part
    assert inline('sum(c:usd:sum{workload_class="a"})', rules) == (
        'sum(((sum by (workload_class) (share{workload_class=~"a|b",workload_class="a"})) or '
        '(sum by (workload_class) (node{workload_class="a"}))))')
    assert inline('c:usd:sum{workload_class="a"} unless absent(nothing{x="1",x="2"})', rules).endswith(
        'unless absent(nothing{x="1",x="2"})')  # absent() of nothing is not nothing
