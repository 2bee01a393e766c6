"""obsctl.rules.promql_ast and obsctl.rules.inline under hostile and unusual input: label
names spelled like keywords keep their case, string escapes are read as Prometheus' lexer
reads them (and the ones it rejects are syntax errors, never a Python SyntaxError), and a
deeply nested expression is a syntax error, never a RecursionError."""

from __future__ import annotations

import random

import pytest

from obsctl.rules.inline import inline
from obsctl.rules.lookback import Rule
from obsctl.rules.promql_ast import MAX_DEPTH, PromQLSyntaxError, parse, quote, render, string_value


@pytest.mark.parametrize("query", [
    'x{Group="a"}',
    'x{On="a",By!="b",Offset=~"c"}',
    'sum by (Count, Max) (x)',
    'sum(x) without (Bool)',
    'a * on(Group) group_left(Sum) b',
])
def test_a_label_named_like_a_keyword_keeps_its_case(query):
    # Prometheus' label names are case-sensitive: Group and group are two labels
    # (promtool check rules accepts `sum by (Group) (x{Group="a"})`).
    assert render(parse(query)) == query.replace("sum(x) without (Bool)", "sum without (Bool) (x)")


def test_keywords_themselves_stay_case_insensitive():
    assert render(parse("SUM BY (l) (a) AND ON(l) b")) == "sum by (l) (a) and on(l) b"


def test_a_pushed_matcher_keeps_its_label_case():
    rules = [Rule("c:x:rate5m", "sum by (Group) (rate(x_total[5m]))", {})]
    assert inline('c:x:rate5m{Group="a"}', rules) == '(sum by (Group) (rate(x_total{Group="a"}[5m])))'


@pytest.mark.parametrize(("literal", "value"), [
    (r'"a\"b"', 'a"b'),
    (r"'a\'b'", "a'b"),
    (r'"\x41\u00e9\U0001F600\101"', "Aé😀A"),
    (r'"\xc3\xa9\303\251"', "éé"),  # byte escapes, as Go reads them: the UTF-8 of é
    (r'"\a\b\f\n\r\t\v\\"', "\a\b\f\n\r\t\v\\"),
    ("`a\\q\"`", 'a\\q"'),
])
def test_string_values_follow_go_escapes(literal, value):
    assert string_value(literal) == value


@pytest.mark.parametrize("literal", [r'"\x4"', r'"\q"', r'"\8"', r"'a\"b'", r'"\777"', r'"\ud800"', r'"\N{BULLET}"'])
def test_an_escape_prometheus_rejects_is_a_syntax_error(literal):
    with pytest.raises(PromQLSyntaxError):
        string_value(literal)
    with pytest.raises(PromQLSyntaxError):
        parse(f"x{{l={literal}}}")
    with pytest.raises(PromQLSyntaxError):
        parse(f'label_replace(x, "a", {literal}, "", "")')


def test_every_quoted_value_reads_back():
    rng = random.Random(7)
    alphabet = [chr(c) for c in range(0, 128)] + ["é", "\x85", "\u2028", "\u202e", "😀", "}", "{", "$selector"]
    for _ in range(500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        tree = parse(f"x{{l={quote(value)}}}")
        assert tree.matchers[0].text == value
        assert parse(render(tree)) == tree


@pytest.mark.parametrize("query", ["(" * 400 + "x" + ")" * 400, "-" * 3000 + "x", "sum(" * 300 + "x" + ")" * 300])
def test_a_deeply_nested_expression_is_a_syntax_error(query):
    with pytest.raises(PromQLSyntaxError, match="nested too deeply"):
        parse(query)


@pytest.mark.parametrize("query", ["x offset 1h [5m]", "x @ 100 [5m]", "a and bool b", "a + bool b", "a or bool b", "a ^ bool b"])
def test_what_prometheus_rejects_is_rejected(query):
    # promtool check rules rejects each: a range after a modifier, bool on a non-comparison
    with pytest.raises(PromQLSyntaxError):
        parse(query)


def test_a_long_flat_expression_parses_up_to_the_depth_bound():
    query = " + ".join(f'x{{l="{i}"}}' for i in range(MAX_DEPTH))
    assert render(parse(query)) == query


def test_a_longer_flat_expression_is_a_syntax_error_not_a_recursion_error():
    # a left-associative chain is a tree as deep as it is long: printing and inlining it recurse
    query = " + ".join(f'x{{l="{i}"}}' for i in range(5000))
    with pytest.raises(PromQLSyntaxError, match="nested too deeply"):
        parse(query)
    with pytest.raises(PromQLSyntaxError):
        inline(query, [])


def test_a_class_selector_with_a_keyword_cased_label_and_a_hostile_value_inlines_to_it(tmp_path):
    import subprocess

    import yaml

    from obsctl.baselining.measure.raw import raw_query
    from support.rules_fixtures import write_spec

    hostile = 'a"}\\ or vector(1) # \n{$selector}\u202e'
    spec = write_spec(tmp_path, {
        "prometheus": {"url": "http://127.0.0.1:9"}, "store": "store",
        "workload_classes": [{"name": "chat", "kind": "inference", "source": "vllm", "selector": {"Group": hostile}}],
        "signals": [{"name": "tps", "catalogue": "tokens_per_second"}, {"name": "ok", "catalogue": "requests_per_second"}]})
    (chat,) = spec.workload_classes
    queries = [raw_query(spec, chat, s)[0] for s in spec.signals]
    for query in queries:
        selectors = [m for m in _selectors(parse(query)) if m.label.lower() == "group"]
        assert selectors and all(m.label == "Group" and m.text == hostile for m in selectors), query
    path = tmp_path / "q.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": [{"record": f"q{i}", "expr": q} for i, q in enumerate(queries)]}]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def _selectors(node):
    from obsctl.rules.promql_ast import Selector, _children

    if isinstance(node, Selector):
        yield from node.matchers
    for child in _children(node):
        yield from _selectors(child)
