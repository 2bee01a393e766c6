"""Cost per unit of work, energy cost, idle waste and efficiency: recording rules per class.

Where a price comes from (first that exists, per GPU or per node; ``pricing.prefer: spec``
swaps the two):

1. OpenCost: ``node_gpu_hourly_cost`` (USD per hour of one GPU of the node; only values
   > 0 count, OpenCost writes 0 where it knows no GPU price) and, for classes without
   attributed GPUs, ``node_total_hourly_cost`` of the class's nodes. OpenCost labels a node
   ``node``; obsctl's exporter series must carry that node name in the label
   ``pricing.opencost_node_label`` (add it by relabelling).
2. The spec: ``obsctl_accelerator_price_usd_per_hour{gpu_model}`` and
   ``obsctl_node_price_usd_per_hour``, as the exporter publishes them for its node's
   ``pricing.pricing_model`` (joined to ``obsctl_gpu_info{model}`` on ``job, instance``).

A class's USD per hour (``COST_USD_PER_HOUR``) is the sum over the GPUs attributed to it
(``obsctl_gpu_attribution_info``) of each GPU's price divided by the number of attribution
entries of that GPU (a GPU shared by two classes costs each half; MIG instances of one GPU
share its price equally); a class with no priced GPU costs its nodes (``node_selector``).

Per unit of work, ratios of sums at each instant (never averages of ratios):
``USD/h / 3600 / (work per second)`` x 1e6 for tokens, x 1 for requests (successful ones)
and samples; absent while the work rate is 0. Energy: the attributed GPUs' energy counter
rate (W) x ``obsctl_energy_price_usd_per_kwh`` / 1000 = USD/h. Idle waste: the cost share of
attributed GPUs whose 5 m mean utilization is below ``pricing.idle_utilization_ratio``, per
class; unattributed waste: the price of GPUs no class claims (cluster-wide). Per training
run: the class's USD/h split equally over its active runs (``run`` label on its SDK work
counters with a positive rate); a run's total is :func:`run_cost_usd_query`.
"""

from __future__ import annotations

from obsctl.rules import canonical as C
from obsctl.rules.loop_series import CLASS_INFO, class_regex, number, selector, shared_by
from obsctl.spec import Spec, WorkloadClass, promql_matchers

#: Per GPU (label ``uuid``): USD per hour, OpenCost or spec price.
GPU_COST = "uuid:obsctl_gpu_cost_usd_per_hour:max"
#: Per GPU: attribution entries (classes x MIG instances) that share it.
GPU_ATTRIBUTIONS = "uuid:obsctl_gpu_attributions:count"
#: Per GPU: its USD per hour divided by its attribution entries.
GPU_COST_SHARE = "uuid:obsctl_gpu_cost_share_usd_per_hour:ratio"
#: Per GPU: its energy rate (W) divided by its attribution entries.
GPU_ENERGY_SHARE = "uuid:obsctl_gpu_energy_share_joules:rate5m"
#: Per GPU: the electricity price of its node, USD per kWh.
GPU_ENERGY_PRICE = "uuid:obsctl_gpu_energy_price_usd_per_kwh:max"

WINDOW = "5m"
_RUN_COUNTERS = "obsctl_(samples|steps|tokens)_total"


def _opencost(metric: str, label: str) -> str:
    """OpenCost's per-node series keyed by obsctl's node label (one series per node)."""
    return f'max by ({label}) (label_replace({metric}, "{label}", "$1", "node", "(.+)"))'


def gpu_rules(spec: Spec) -> list[dict]:
    """Fleet rules: per-GPU price, attribution count, cost and energy shares, unattributed waste."""
    p = spec.pricing
    label = p.opencost_node_label
    opencost = (f"max by (uuid) (\n  obsctl_gpu_info * on({label}) group_left()\n"
                f"  {_opencost('node_gpu_hourly_cost > 0', label)}\n)")
    configured = ('max by (uuid) (\n  label_replace(obsctl_gpu_info, "gpu_model", "$1", "model", "(.+)")\n'
                  "  * on(job, instance, gpu_model) group_left() obsctl_accelerator_price_usd_per_hour\n)")
    first, second = (opencost, configured) if p.prefer == "opencost" else (configured, opencost)
    rules = [
        (GPU_COST, f"{first}\nor\n{second}"),
        (GPU_ATTRIBUTIONS, "count by (uuid) (obsctl_gpu_attribution_info)"),
        (GPU_COST_SHARE, f"{GPU_COST} / on(uuid) {GPU_ATTRIBUTIONS}"),
        (GPU_ENERGY_SHARE, f'sum by (uuid) (rate(obsctl_gpu_energy_joules_total{{gpu_instance=""}}[{WINDOW}]))\n'
                           f"/ on(uuid) {GPU_ATTRIBUTIONS}"),
        (GPU_ENERGY_PRICE, "max by (uuid) (obsctl_gpu_info * on(job, instance) group_left() obsctl_energy_price_usd_per_kwh)"),
        (C.UNATTRIBUTED_WASTE_USD_PER_HOUR, f"sum({GPU_COST} unless on(uuid) obsctl_gpu_attribution_info)\n"
                                            f"or 0 * sum({GPU_COST})"),
    ]
    return [{"record": r, "expr": e} for r, e in rules]


def _nodes(wc: WorkloadClass, **extra: str) -> str:
    return "{" + ",".join(filter(None, [promql_matchers(wc.node_selector), promql_matchers(extra)])) + "}"


def _per_class(name: str, **labels: str) -> str:
    """``sum by (workload_class) (<name>{signal=""[,labels]})``: a canonical series per class
    (``signal=""``: the source's own series, :data:`obsctl.rules.canonical.OWN_SERIES`)."""
    return f"sum by (workload_class) ({selector(name, signal='', **labels)})"


def tokens_expr() -> str:
    """Tokens per second of each class: ``TOKENS``, else input + output."""
    return f"({_per_class(C.TOKENS)}\n or ({_per_class(C.INPUT_TOKENS)} + {_per_class(C.OUTPUT_TOKENS)}))"


def _node_rules(spec: Spec, nodes: str, members: list[WorkloadClass]) -> list[dict]:
    """The rules that read the attribution and node series of the classes ``members``, which
    share the node selector ``nodes``: one rule each ``by (workload_class)`` for all of them.

    A class without a priced GPU costs its nodes: the node cost (no class label) is given to
    each such class (``classes * on() group_left() cost``)."""
    p = spec.pricing
    sel = lambda **m: "{" + ",".join(filter(None, [nodes, promql_matchers(m)])) + "}"  # noqa: E731
    attributed = f"obsctl_gpu_attribution_info{{{','.join(filter(None, [nodes, class_regex(c.name for c in members)]))}}}"
    gpu_cost = f"sum by (workload_class) ({attributed} * on(uuid) group_left() {GPU_COST_SHARE})"
    label = p.opencost_node_label
    node_opencost = f"sum({_opencost('node_total_hourly_cost', label)} * on({label}) group by ({label}) (up{sel()}))"
    node_spec = f"sum(obsctl_node_price_usd_per_hour{sel()})"
    nodes_first, nodes_second = (node_opencost, node_spec) if p.prefer == "opencost" else (node_spec, node_opencost)
    classes = f"group by (workload_class) ({CLASS_INFO}{{{class_regex(c.name for c in members)}}})"
    node_cost = f"{classes}\n  * on() group_left() ({nodes_first}\n    or {nodes_second})"
    idle = (f"sum by (workload_class) (\n  ({attributed} * on(uuid) group_left() {GPU_COST_SHARE})\n"
            f"  and on(uuid, gpu_instance) (avg_over_time(obsctl_gpu_utilization_ratio{sel()}[{WINDOW}])"
            f" < {number(p.idle_utilization_ratio)})\n)\nor 0 * {gpu_cost}")
    rules = [
        (C.COST_USD_PER_HOUR, f"{gpu_cost}\nor (\n  {node_cost}\n)"),
        (C.IDLE_WASTE_USD_PER_HOUR, idle),
        (C.GPU_ENERGY, f"sum by (workload_class) ({attributed} * on(uuid) group_left() {GPU_ENERGY_SHARE})"),
        (C.ENERGY_COST_USD_PER_HOUR, f"sum by (workload_class) ({attributed} * on(uuid) group_left() "
                                     f"({GPU_ENERGY_SHARE} * on(uuid) {GPU_ENERGY_PRICE})) / 1000"),
    ]
    return [{"record": r, "expr": e} for r, e in rules]


def _run_rule(spec: Spec, wc: WorkloadClass) -> dict:
    """``RUN_COST_USD_PER_HOUR`` of one class: its runs are read through its ``selector``
    (raw SDK counters carry no class label to group by), so one rule per class."""
    run = spec.pricing.run_label
    runs = (f'group by (run) (label_replace(rate({{__name__=~"{_RUN_COUNTERS}",{promql_matchers(wc.selector)},{run}!=""}}'
            f'[{WINDOW}]) > 0, "run", "$1", "{run}", "(.+)"))')
    cost = f"sum({selector(C.COST_USD_PER_HOUR, workload_class=wc.name, signal='')})"
    return {"record": C.RUN_COST_USD_PER_HOUR, "expr": f"{runs}\n* on() group_left() ({cost} / count({runs}))",
            "labels": {"workload_class": wc.name}}


def class_rules(spec: Spec) -> list[dict]:
    """The classes' cost, waste, per-unit cost, run cost and efficiency rules, in evaluation
    order: attribution and node rules once per node selector (:func:`_node_rules`), the
    run cost per class (:func:`_run_rule`), and the ratios once for every class."""
    classes = sorted(spec.workload_classes, key=lambda c: c.name)
    rules: list[dict] = []
    for nodes, members in shared_by(classes, lambda c: promql_matchers(c.node_selector)):
        rules += _node_rules(spec, nodes, members)
    usd_per_s = f"{_per_class(C.COST_USD_PER_HOUR)} / 3600"
    tokens = tokens_expr()
    per = lambda work, scale="": f"{usd_per_s}\n/ ({work} > 0){scale}"  # noqa: E731
    ratios = [
        (C.COST_PER_MILLION_TOKENS, per(tokens, " * 1e6")),
        (C.COST_PER_MILLION_INPUT_TOKENS, per(_per_class(C.INPUT_TOKENS), " * 1e6")),
        (C.COST_PER_MILLION_OUTPUT_TOKENS, per(_per_class(C.OUTPUT_TOKENS), " * 1e6")),
        (C.COST_PER_REQUEST, per(_per_class(C.REQUESTS, outcome="success"))),
        (C.COST_PER_SAMPLE, per(_per_class(C.SAMPLES))),
    ]
    rules += [{"record": r, "expr": e} for r, e in ratios]
    rules += [_run_rule(spec, wc) for wc in classes]
    efficiency = [
        (C.TOKENS_PER_GPU_BUSY_SECOND, f"{tokens}\n/ ({_per_class(C.GPU_BUSY)} > 0)"),
        (C.TOKENS_PER_GPU_ALLOCATED_SECOND, f"{tokens}\n/ {_per_class(C.GPUS_ALLOCATED)}"),
        (C.TOKENS_PER_JOULE, f"{tokens}\n/ ({_per_class(C.GPU_ENERGY)} > 0)"),
        (C.SAMPLES_PER_GPU_ALLOCATED_SECOND, f"{_per_class(C.SAMPLES)}\n/ {_per_class(C.GPUS_ALLOCATED)}"),
    ]
    return rules + [{"record": r, "expr": e} for r, e in efficiency]


def cost_groups(spec: Spec) -> list[dict]:
    """Rule groups ``obsctl.cost.gpu`` (fleet) and ``obsctl.cost.classes`` (:func:`class_rules`)."""
    groups = [{"name": "obsctl.cost.gpu", "rules": gpu_rules(spec)}]
    return groups + ([{"name": "obsctl.cost.classes", "rules": class_rules(spec)}] if spec.workload_classes else [])


def run_cost_usd_query(period: str, step: str = "60s", step_seconds: str | float = 60, matchers: str = "") -> str:
    """PromQL for each run's cost in USD over ``period``: the integral of
    ``RUN_COST_USD_PER_HOUR`` sampled every ``step`` (a subquery), one series per
    ``(workload_class, run)``; a run active for part of the period counts only that part.

    Args:
        period: PromQL duration (``7d``) or Grafana's ``$__range``.
        step: subquery step (``60s`` or Grafana's ``$__interval``).
        step_seconds: the step in seconds (a number, or ``$__interval_ms / 1000``).
        matchers: label matchers inside the braces, e.g. ``workload_class="train"``.
    """
    rate = f"{C.RUN_COST_USD_PER_HOUR}{{{matchers}}}" if matchers else C.RUN_COST_USD_PER_HOUR
    seconds = number(step_seconds) if isinstance(step_seconds, (int, float)) else f"({step_seconds})"
    return f"sum by (workload_class, run) (sum_over_time({rate}[{period}:{step}])) * {seconds} / 3600"
