"""Shared pieces of the per-class dashboards: the ``$workload_class`` variable and per-class queries.

Canonical series (:mod:`obsctl.rules.canonical`) may carry labels beyond ``workload_class``
(``outcome``, ``state``, a source's own), so every query aggregates ``by (workload_class)``
plus the labels it shows.
"""

from __future__ import annotations

from obsctl.dashboards import grafana as g
from obsctl.rules.loop_series import CLASS_INFO, INITIATIVE_EVENT
from obsctl.spec import Spec

#: Matcher every per-class query carries (Grafana substitutes the selected classes).
CLASS = 'workload_class=~"$workload_class"'


def class_variable(spec: Spec, kind: str | None = None) -> object:
    """Multi-value ``$workload_class`` variable over the classes the rules publish (of ``kind``
    if given), read from the class info series: the JSON does not list the classes, so its
    size does not grow with them."""
    matchers = f'{{kind="{kind}"}}' if kind else ""
    return g.query_variable("workload_class", "Workload class", f"label_values({CLASS_INFO}{matchers}, workload_class)")


def by_class(series: str, *, matchers: str = "", by: str = "", agg: str = "sum") -> str:
    """``<agg> by (workload_class[, by]) (series{workload_class=~"$workload_class"[, matchers]})``;
    ``agg="max"`` for quantiles and ratios, which must not be added."""
    labels = ", ".join(filter(None, ["workload_class", by]))
    inner = ",".join(filter(None, [CLASS, matchers]))
    return f"{agg} by ({labels}) ({series}{{{inner}}})"


#: The initiatives' events of the selected classes, value in ms (``obsctl publish`` pushes
#: the time in seconds): start, each look, verdict, promote, close.
INITIATIVE_EVENTS_EXPR = f"max by (workload_class, initiative, lever, event, look, verdict) ({INITIATIVE_EVENT}{{{CLASS}}}) * 1000"


def initiative_annotations() -> list[dict]:
    """The class dashboards' annotation of initiatives (start, looks, verdict, promote,
    close) from :data:`INITIATIVE_EVENTS_EXPR`: no Grafana API access needed."""
    return [g.annotation("obsctl initiatives", INITIATIVE_EVENTS_EXPR, "{{event}} {{initiative}}",
                         "{{lever}} on {{workload_class}} {{verdict}}", ["workload_class", "lever", "event", "verdict"])]
