"""An expression over recorded series, rewritten over the raw series the recording rules read.

:func:`inline` replaces every recorded series a query reads (a name some rule of
:func:`obsctl.rules.lookback.recording_rules` records) by the expression of the rule that
records it, down every level of the chain to the raw series, so that evaluating the result
at an instant gives what the recorded series would hold there (the same label sets and
values; the metric name aside: a rule names its output, the inlined expression's series keep
what the expression leaves them, which matching and aggregation ignore). A reference
``rec{m1, m2}`` becomes:

1. the rules recording ``rec`` whose static ``labels`` agree with the matchers on those
   labels (a static label overrides the expression's; a matcher on it is decided here and
   dropped), joined with ``or`` (no rule left: an empty vector, ``(vector(0) < 0)``);
2. each rule's expression restricted to exactly the series the remaining matchers select
   (:func:`restrict`): a matcher is pushed into the inner selectors wherever its label
   passes through unchanged (``sum by (l)``, ``rate``, one-to-one and set operators,
   the many side of ``group_left``/``group_right``, ``label_replace`` of another label);
   where the expression makes the label (``label_replace`` into it, ``count_values``,
   ``topk`` across groups, a ``group_left`` include), an equality matcher becomes
   ``and on(l) label_replace(vector(1), "l", "v", "", "")`` (a one-series vector with that
   label value: PromQL filters an expression's output labels no other way); a matcher on a
   label the expression drops (``sum`` without it) is decided on the empty value;
3. the rule's static labels set as the rule sets them (``label_replace(e, "l", "v", "", "")``).

Then the parts that select nothing (another class's rule, once the class matcher reached
its ``workload_class=~"a|b"`` selectors) are pruned (:func:`prune`).

Where the result could differ from the recorded series, :class:`NotInlined` says why and
names the rule; no approximate query is returned:

- a recorded series read over a range, a subquery, ``offset`` or ``@`` (the recorded samples
  sit at the rule's evaluation instants, which a range query of the expression does not reproduce);
- a rule that reads a series recorded later in its own group (it reads the previous
  evaluation's value), or a chain that reads itself;
- ``absent`` of a recorded series (its labels come from the selector as written);
- a non-equality matcher on a label the expression makes.

Evaluation timing: rules of one group run in order at one instant, so a rule reading a series
recorded earlier in its group reads that instant's value, as the inlined query does. A rule
reading another group's series reads that group's latest sample, up to one evaluation
interval old; the inlined query reads the raw series at the instant itself, as if the groups
ran in the order of the chain (``promtool test rules`` with ``group_eval_order``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable

from obsctl.rules.lookback import Rule
from obsctl.rules.promql_ast import (
    Aggregate,
    Binary,
    Call,
    Matcher,
    Node,
    Num,
    Paren,
    PromQLSyntaxError,
    Selector,
    Str,
    Subquery,
    Unary,
    parse,
    quote,
    render,
    string_value,
)


class NotInlined(Exception):
    """The query cannot be inlined with the same values; the message says why and names the rule."""


#: Functions whose output keeps the labels of their vector argument (the metric name aside),
#: by the index of that argument.
_KEEP_LABELS: dict[str, int] = {
    **dict.fromkeys(("rate", "irate", "increase", "delta", "idelta", "deriv", "abs", "ceil", "floor", "round", "exp",
                     "ln", "log2", "log10", "sqrt", "sgn", "clamp", "clamp_min", "clamp_max", "avg_over_time",
                     "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "stddev_over_time",
                     "stdvar_over_time", "last_over_time", "present_over_time", "predict_linear", "holt_winters",
                     "resets", "changes", "timestamp", "sort", "sort_desc", "acos", "acosh", "asin", "asinh", "atan",
                     "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "day_of_month", "day_of_week",
                     "day_of_year", "days_in_month", "hour", "minute", "month", "year"), 0),
    "quantile_over_time": 1,
    "histogram_quantile": 1,
}
#: Functions that return a scalar.
_SCALAR_FUNCS = frozenset({"scalar", "time", "pi"})
_ARITH_CMP = frozenset({"+", "-", "*", "/", "%", "^", "atan2", "==", "!=", "<=", ">=", "<", ">"})

#: The empty instant vector.
EMPTY = Paren(Binary("<", Call("vector", [Num("0")]), Num("0")))


def matches(m: Matcher, value: str) -> bool:
    """Whether a label with ``value`` ("" for absent) is selected by ``m`` (regular
    expressions anchored, as Prometheus anchors them).

    Raises:
        NotInlined: a regular expression Python cannot read the way Prometheus (RE2) does.
    """
    if m.op in ("=", "!="):
        return (m.text == value) == (m.op == "=")
    try:
        found = re.fullmatch(m.text, value, re.DOTALL) is not None
    except re.error as exc:
        raise NotInlined(f"the matcher {m.label}{m.op}{m.value} is not a regular expression this check reads: {exc}") from exc
    return found == (m.op == "=~")


def _is_scalar(node: Node) -> bool:
    if isinstance(node, (Num, Str)):
        return True
    if isinstance(node, (Paren, Unary)):
        return _is_scalar(node.expr)
    if isinstance(node, Binary):
        return _is_scalar(node.lhs) and _is_scalar(node.rhs)
    return isinstance(node, Call) and node.func in _SCALAR_FUNCS


def _and_on(node: Node, m: Matcher, where: str) -> Node:
    """``node`` filtered on its output label ``m.label`` (an equality only)."""
    if m.op != "=":
        raise NotInlined(f"{where} makes the label {m.label}; the matcher {m.label}{m.op}{m.value} on it cannot be "
                         "applied exactly (only an equality can)")
    one = Call("label_replace", [Call("vector", [Num("1")]), Str(quote(m.label)), Str(m.value), Str('""'), Str('""')])
    return Paren(Binary("and", Paren(node), one, matching=("on", (m.label,))))


def _absent_label(node: Node, m: Matcher) -> Node:
    """``node`` whose output has no label ``m.label``: all of it or nothing."""
    return node if matches(m, "") else EMPTY


def restrict(node: Node, m: Matcher, where: str = "the expression") -> Node:
    """``node`` restricted to the output series that matcher ``m`` selects (module doc, step 2).

    ``node`` is not modified; ``where`` names the rule in errors.

    Raises:
        NotInlined: ``m`` is not an equality and the expression makes its label.
    """
    if m.label == "__name__":
        raise NotInlined(f"{where}: a matcher on __name__ cannot be pushed into a rule's expression")
    if isinstance(node, Paren):
        return Paren(restrict(node.expr, m, where))
    if isinstance(node, Unary):
        return Unary(node.op, restrict(node.expr, m, where))
    if isinstance(node, Selector):
        out = copy.deepcopy(node)
        out.matchers.append(copy.copy(m))
        return out
    if isinstance(node, Subquery):
        out = copy.copy(node)
        out.expr = restrict(node.expr, m, where)
        return out
    if isinstance(node, Call):
        return _restrict_call(node, m, where)
    if isinstance(node, Aggregate):
        return _restrict_aggregate(node, m, where)
    if isinstance(node, Binary):
        return _restrict_binary(node, m, where)
    raise NotInlined(f"{where}: a scalar has no labels to restrict")  # pragma: no cover - callers pass vectors


def _restrict_call(node: Call, m: Matcher, where: str) -> Node:
    func, args = node.func, node.args
    if func == "vector":
        return _absent_label(node, m)
    if func in ("label_replace", "label_join") and len(args) >= 2 and isinstance(args[1], Str):
        if string_value(args[1].text) != m.label:
            return Call(func, [restrict(args[0], m, where), *args[1:]])
        if func == "label_replace" and _constant_label(args) is not None:
            return node if matches(m, _constant_label(args)) else EMPTY
        return _and_on(node, m, where)
    if func in _KEEP_LABELS and len(args) > _KEEP_LABELS[func]:
        if func == "histogram_quantile" and m.label == "le":
            return _absent_label(node, m)
        i = _KEEP_LABELS[func]
        return Call(func, [*args[:i], restrict(args[i], m, where), *args[i + 1:]])
    return _and_on(node, m, where)


def _constant_label(args: list[Node]) -> str | None:
    """The value ``label_replace(v, dst, "value", "", "")`` sets on every series, else None."""
    if len(args) != 5 or not all(isinstance(a, Str) for a in args[2:]):
        return None
    repl, src, regex = (string_value(a.text) for a in args[2:])  # type: ignore[union-attr]
    if src or regex or "$" in repl:
        return None
    return repl


def _restrict_aggregate(node: Aggregate, m: Matcher, where: str) -> Node:
    kind, labels = node.grouping or ("by", ())
    passes = (m.label in labels) == (kind == "by")
    if node.op == "count_values" and isinstance(node.param, Str) and string_value(node.param.text) == m.label:
        return _and_on(node, m, where)
    if node.op in ("topk", "bottomk"):
        # the output keeps every label of the chosen series; the choice is per group
        return Aggregate(node.op, restrict(node.expr, m, where), node.param, node.grouping) if passes and node.grouping else \
            _and_on(node, m, where)
    if passes:
        return Aggregate(node.op, restrict(node.expr, m, where), node.param, node.grouping)
    return _absent_label(node, m)


def _restrict_binary(node: Binary, m: Matcher, where: str) -> Node:
    lhs_scalar, rhs_scalar = _is_scalar(node.lhs), _is_scalar(node.rhs)
    if lhs_scalar or rhs_scalar:  # vector op scalar: labels of the vector side
        lhs = node.lhs if lhs_scalar else restrict(node.lhs, m, where)
        rhs = node.rhs if rhs_scalar else restrict(node.rhs, m, where)
        return Binary(node.op, lhs, rhs, node.bool, node.matching, node.group)
    kind, labels = node.matching or ("ignoring", ())
    in_signature = (m.label in labels) == (kind == "on")
    both = lambda: Binary(node.op, restrict(node.lhs, m, where), restrict(node.rhs, m, where),  # noqa: E731
                          node.bool, node.matching, node.group)
    if node.op in ("and", "unless"):
        if in_signature:
            return both()
        return Binary(node.op, restrict(node.lhs, m, where), node.rhs, node.bool, node.matching, node.group)
    if node.op == "or":
        return both() if in_signature else _and_on(node, m, where)
    if node.group is None:  # one-to-one: the output keeps only the signature's labels
        return both() if in_signature else _absent_label(node, m)
    side, include = node.group
    if m.label in include:
        return _and_on(node, m, where)
    if side == "group_left":
        return Binary(node.op, restrict(node.lhs, m, where), node.rhs, node.bool, node.matching, node.group)
    return Binary(node.op, node.lhs, restrict(node.rhs, m, where), node.bool, node.matching, node.group)


class _Inliner:
    def __init__(self, rules: Iterable[Rule]):
        self.by_record: dict[str, list[Rule]] = {}
        for rule in rules:
            self.by_record.setdefault(rule.record, []).append(rule)

    def walk(self, node: Node, within: Rule | None, stack: tuple[Rule, ...], ranged: str = "") -> Node:
        """``node`` with every recorded selector inlined; ``ranged`` says why a reference here
        cannot be (inside a subquery)."""
        if isinstance(node, Selector):
            if node.name not in self.by_record:
                return node
            where = f"the rule recording {within.record}" if within else "the query"
            why = ranged or ("a range" if node.range else "") or ("an offset" if node.offset else "") or ("@" if node.at else "")
            if why:
                raise NotInlined(f"{where} reads the recorded series {node.name} through {why}: its samples sit at the "
                                 "rule's evaluation instants, which the inlined expression does not reproduce")
            return self.reference(node, within, stack)
        if isinstance(node, Subquery):
            out = copy.copy(node)
            out.expr = self.walk(node.expr, within, stack, "a subquery")
            return out
        if isinstance(node, Call):
            if node.func in ("absent", "absent_over_time") and any(
                    isinstance(a, Selector) and a.name in self.by_record for a in node.args):
                raise NotInlined(f"{node.func}() of a recorded series takes its labels from the selector as written")
            return Call(node.func, [self.walk(a, within, stack, ranged) for a in node.args])
        if isinstance(node, Aggregate):
            param = self.walk(node.param, within, stack, ranged) if node.param is not None else None
            return Aggregate(node.op, self.walk(node.expr, within, stack, ranged), param, node.grouping)
        if isinstance(node, Binary):
            return Binary(node.op, self.walk(node.lhs, within, stack, ranged), self.walk(node.rhs, within, stack, ranged),
                          node.bool, node.matching, node.group)
        if isinstance(node, (Paren, Unary)):
            out = copy.copy(node)
            out.expr = self.walk(node.expr, within, stack, ranged)
            return out
        return node

    def reference(self, sel: Selector, within: Rule | None, stack: tuple[Rule, ...]) -> Node:
        branches: list[Node] = []
        for rule in self.by_record[sel.name or ""]:
            name = f"the rule recording {rule.record}" + (f" in group {rule.group}" if rule.group else "")
            if rule in stack:
                raise NotInlined(f"{name} reads its own series through the chain {' -> '.join(r.record for r in stack)}")
            rest = []
            for m in sel.matchers:
                if m.label in rule.labels:
                    if not matches(m, rule.labels[m.label]):
                        break
                else:
                    rest.append(m)
            else:
                if within and within.group and within.group == rule.group and rule.position >= within.position:
                    raise NotInlined(f"the rule recording {within.record} in group {within.group} reads {rule.record}, "
                                     "recorded after it in the same group: it reads the previous evaluation's value")
                try:
                    body = parse(rule.expr)
                except PromQLSyntaxError as exc:
                    raise NotInlined(f"{name}: {exc}") from exc
                for m in rest:
                    body = restrict(body, m, name)
                body = self.walk(body, rule, (*stack, rule))
                for label, value in sorted(rule.labels.items()):
                    body = Call("label_replace", [Paren(body), Str(quote(label)), Str(quote(value)), Str('""'), Str('""')])
                branches.append(Paren(body))
        if not branches:
            return EMPTY
        out = branches[0]
        for branch in branches[1:]:
            out = Binary("or", out, branch)
        return Paren(out) if len(branches) > 1 else out


def _contradicts(sel: Selector) -> bool:
    """Whether ``sel``'s matchers select no series at all (an equality another matcher on
    the same label rejects: ``{workload_class=~"a|b",workload_class="c"}``)."""
    for m in sel.matchers:
        if m.op == "=" and any(o.label == m.label and not matches(o, m.text) for o in sel.matchers):
            return True
    return False


def _is_empty(node: Node) -> bool:
    return node == EMPTY or (isinstance(node, Selector) and _contradicts(node)) or (
        isinstance(node, Paren) and _is_empty(node.expr))


def prune(node: Node) -> Node:
    """``node`` without the parts that select no series (a class matcher pushed into another
    class's rule: :func:`_contradicts`); what is left gives the same series and values.

    An empty operand empties an aggregation, a label-keeping function, ``and``, the left of
    ``unless`` and any arithmetic or comparison; it drops out of ``or`` and the right of
    ``unless``. ``absent``, ``scalar`` and the like are left as they are."""
    if isinstance(node, (Paren, Unary)):
        inner = prune(node.expr)
        if _is_empty(inner):
            return EMPTY
        out = copy.copy(node)
        out.expr = inner
        return out
    if isinstance(node, Subquery):
        out = copy.copy(node)
        out.expr = prune(node.expr)
        return out
    if isinstance(node, Aggregate):
        inner = prune(node.expr)
        return EMPTY if _is_empty(inner) else Aggregate(node.op, inner, node.param, node.grouping)
    if isinstance(node, Call):
        # a selector argument stays as written (absent() takes its labels from it)
        args = [a if isinstance(a, Selector) else prune(a) for a in node.args]
        i = _KEEP_LABELS.get(node.func, 0 if node.func in ("label_replace", "label_join") else None)
        if i is not None and len(args) > i:
            arg = args[i].expr if isinstance(args[i], Subquery) else args[i]
            if _is_empty(arg):
                return EMPTY
        return Call(node.func, args)
    if isinstance(node, Binary):
        lhs, rhs = prune(node.lhs), prune(node.rhs)
        if node.op == "or":
            if _is_empty(lhs):
                return rhs
            if _is_empty(rhs):
                return lhs
        elif node.op == "unless":
            if _is_empty(lhs):
                return EMPTY
            if _is_empty(rhs):
                return lhs
        elif _is_empty(lhs) or _is_empty(rhs):
            return EMPTY
        return Binary(node.op, lhs, rhs, node.bool, node.matching, node.group)
    return EMPTY if _is_empty(node) else node


def inline(query: str, rules: Iterable[Rule]) -> str:
    """``query`` with every recorded series it reads replaced, level by level, by the raw
    series behind it (module doc). A query that reads no recorded series comes back as parsed.

    Raises:
        NotInlined: it cannot be done with the same values (module doc); the message names the rule.
        PromQLSyntaxError: ``query`` is not PromQL this parser reads.
    """
    return render(prune(_Inliner(rules).walk(parse(query), None, ())))
