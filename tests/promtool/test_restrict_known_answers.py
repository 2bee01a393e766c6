"""obsctl.rules.inline.restrict against promtool: pushing a matcher into an expression selects
exactly the output series the matcher would, for every construct the push handles.

The reference is the filter that is exact by construction, ``(E) and on(l)
label_replace(vector(1), "l", "v", "", "")`` (a one-series vector with the matcher's label
value); promtool evaluates both on the same inputs and the test compares the label sets and
values it prints. Each case also states whether the push reached the selectors (no
``and on`` in the result) so a silent fallback everywhere would fail it.
"""

from __future__ import annotations

import pytest

from obsctl.rules.inline import restrict
from obsctl.rules.promql_ast import Matcher, parse, quote, render
from support.promtool import evaluate

INPUTS = [('x{a="1",b="p",job="j"}', "1+1x20"), ('x{a="2",b="p",job="j"}', "2+3x20"), ('x{a="1",b="q",job="j"}', "5+2x20"),
          ('y{a="1",job="j"}', "10x20"), ('y{a="2",job="j"}', "20x20"), ('z{a="2",b="q",job="j"}', "7x20"),
          ('w{a="3",b="s",job="j"}', "3x20")]

# (expression, label, value, pushed into the selectors)
CASES = [
    ("sum by (a) (x)", "a", "1", True),
    ("sum by (a) (x)", "b", "p", True),  # dropped label: nothing has b="p"
    ("sum by (a) (x)", "b", "", True),  # dropped label: all of it
    ("sum without (b) (x)", "a", "2", True),
    ("x / on(a) group_left() y", "b", "p", True),
    ("x / on(a) group_left() y", "a", "2", True),
    ('x / on(a) group_left(c) label_replace(y, "c", "k$1", "a", "(.*)")', "c", "k1", False),
    ("y / on(a) group_right() x", "b", "q", True),
    ("topk(1, x)", "a", "1", False),
    ("topk by (a) (1, x)", "a", "1", True),
    ('count_values("v", x)', "v", "3", False),
    ('x or on(a) label_replace(w, "b", "r", "", "")', "b", "r", False),
    ('x or on(a) label_replace(w, "b", "r", "", "")', "a", "3", True),
    ("x or on(a, b) z", "a", "2", True),
    ("x or z", "b", "q", True),
    ("x unless on(a) y", "b", "q", True),
    ("x and on(a) y", "b", "p", True),
    ('label_replace(x, "c", "z", "", "")', "c", "z", True),  # a constant label: decided here
    ('label_replace(x, "c", "z", "", "")', "c", "1", True),
    ('label_replace(x, "c", "$1", "b", "(.*)")', "c", "p", False),
    ('label_replace(x, "c", "$1", "b", "(.*)")', "a", "1", True),
    ("rate(x[2m]) * 60", "a", "2", True),
    ("x > 3", "b", "p", True),
    ("z / on(a) y", "a", "2", True),  # one-to-one on(a): the output keeps a only
    ("z / on(a) y", "b", "q", True),
    ("max_over_time(rate(x[1m])[3m:30s])", "b", "q", True),
]


@pytest.mark.parametrize(("expr", "label", "value", "pushed"), CASES)
def test_restrict_selects_what_the_matcher_selects(tmp_path, expr, label, value, pushed):
    m = Matcher(label, "=", quote(value))
    got = render(restrict(parse(expr), m))
    assert ("and on(" in got and "and on(" not in expr) != pushed, got
    reference = f'({expr}) and on({label}) label_replace(vector(1), "{label}", {quote(value)}, "", "")'
    answers = evaluate(tmp_path, [], INPUTS, {"got": got, "want": reference}, "4m", interval="15s")
    norm = lambda rows: sorted((tuple(sorted(labels.items())), value) for labels, value in rows)  # noqa: E731
    assert norm(answers["got"]) == norm(answers["want"]), got
