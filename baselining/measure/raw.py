"""A catalogue signal read from the raw series its source rule reads: baselines from history.

A catalogue signal (``catalogue: tokens_per_second``) reads the class's canonical
recorded series (``sum(workload_class:obsctl_tokens:rate5m{workload_class="chat",...})``),
which exists only from the moment the generated rules were loaded. Right after install
Prometheus may hold weeks of the serving engine's own series (``vllm:generation_tokens_total``)
and none of the recorded one. :func:`raw_query` inlines the class's source rule
(:func:`obsctl.rules.sources.source_groups`, the same expression the rule records) into
the signal's query, so ``snapshot-baseline --from-raw`` measures past windows from the raw
series. A range query of the rule's expression evaluates at each step exactly what the rule
would have recorded at that instant; the population is then the replicas' input series
behind the recorded one, and coverage is judged on them.

One level only: a canonical series recorded from other recorded series (cost, efficiency,
MFU, saturation: ``level:metric:operations`` names in the rule, Prometheus' naming
convention for recording rules) is not inlined; :func:`raw_query` says why, and those
rules are backfilled with ``promtool tsdb create-blocks-from rules`` (docs/practice.md).

The catalogue's extra matcher on a label the rule's expression produces
(``outcome="success"`` of ``sum by (outcome) (...)``) becomes ``and on(outcome)`` with a
one-series vector carrying that label value: PromQL filters an expression's output labels
no other way.
"""

from __future__ import annotations

import re

from obsctl.escape import promql_string
from obsctl.spec import Signal, Spec, WorkloadClass

#: A recording rule's name by Prometheus' convention ``level:metric:operations``.
_RECORDED = re.compile(r"(?<![\w:])[a-zA-Z_]\w*:[a-zA-Z_]\w*:\w+")
#: One equality matcher ``label="value"`` of the catalogue's extra matchers.
_MATCHER = re.compile(r'^([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"$')


def raw_query(spec: Spec, wc: WorkloadClass, sig: Signal) -> tuple[str | None, str]:
    """The signal's query over the raw series of ``wc``'s source rule (module doc).

    Returns:
        ``(query, "")``; ``(None, why)`` when the signal cannot be read raw (then the
        caller keeps or refuses the recorded query); a spec PromQL signal (no
        ``catalogue:``) is raw already: ``(spec.query_for(sig, wc), "")``.
    """
    if sig.catalogue is None:
        return spec.query_for(sig, wc), ""
    from obsctl.rules.canonical import CATALOGUE_SIGNALS
    from obsctl.rules.sources import source_groups

    record, extra = CATALOGUE_SIGNALS[sig.catalogue][:2]
    rules = [r for g in source_groups(spec) if g["name"] == f"obsctl.sources.{wc.name}" for r in g["rules"] if r["record"] == record]
    if not rules:
        if any(r["record"] == record for g in source_groups(spec) for r in g["rules"]):
            return None, f"the {wc.source} source does not fill {record}"
        return None, (f"{record} is derived from other recorded series, not from the {wc.source} source's own: "
                      "backfill the generated rules with promtool tsdb create-blocks-from rules (docs/practice.md)")
    expr = rules[0]["expr"]
    inner = _RECORDED.search(expr)
    if inner:
        return None, f"{record} reads the recorded series {inner.group(0)}: backfill it with promtool tsdb create-blocks-from rules (docs/practice.md)"
    expr = f"({expr.strip()})"
    for matcher in filter(None, (m.strip() for m in extra.split(","))):
        found = _MATCHER.match(matcher)
        if not found:
            return None, f"the catalogue matcher {matcher} of {sig.catalogue} is not an equality matcher"
        label, value = found.groups()
        expr = f'({expr} and on({label}) label_replace(vector(1), "{label}", "{promql_string(_unquote(value))}", "", ""))'
    return f"sum({expr})", ""


def _unquote(value: str) -> str:
    # A matcher's value as written in PromQL, back to the label value.
    return re.sub(r"\\(.)", r"\1", value)
