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

A class's USD per hour (``COST_USD_PER_HOUR``) is the sum over its attribution entries
(``obsctl_gpu_attribution_info``) of the GPU's price times the entry's share of that GPU
(``ATTRIBUTION_SHARE``, 0-1):

* a MIG instance: its slices over the GPU's slices, ``<k>`` of the profile name ``<k>g.<mem>``
  (``1g.10gb``: 1, ``3g.40gb``: 3; a compute-instance profile ``1c.3g.40gb``: its GPU
  instance's 3) over :data:`MIG_SLICES` of the GPU's model (7 for A100, H100, H200, B200;
  4 for A30), split equally among the classes on that instance. Slices no class claims are
  nobody's cost (a GPU with some instances attributed is not in the unattributed waste).
  A MIG GPU of a model not in the table falls back to an equal split of the GPU;
* a whole GPU: ``pricing.time_slicing_share[class]`` where the spec gives one (the share of
  the time-sliced replicas the class was configured with), the rest split equally among
  the GPU's other classes (no shares given: an equal split; a GPU shared by two classes
  costs each half).

A class with no priced GPU costs its nodes (``node_selector``). The GPUs' energy is shared
the same way.

Per unit of work, ratios of sums at each instant (never averages of ratios):
``USD/h / 3600 / (work per second)`` x 1e6 for tokens, x 1 for requests (successful ones)
and samples; absent while the work rate is 0.

USD per million input and per million output tokens are a split of the class's cost, so
that input cost + output cost = the class's cost. The convention is the one hosted-model
price sheets use (e.g. OpenAI's API pricing page: an input price, a cached-input price and
an output price per million tokens; cached input billed at a fraction of input and not
again as input), with the class's cost in place of a list price: weighted tokens per
second ``W = (input - cached) + c x cached + w x output`` (``c`` =
``pricing.cached_input_token_weight``, default 0.1; ``w`` = ``pricing.output_token_weight``,
default 4; ``cached`` = ``CACHED_INPUT_TOKENS`` where the engine counts them (vLLM's
``prompt_tokens_cached_total``, SGLang's ``cached_tokens_total``), else 0), USD per million
input tokens ``= USD/s / W x 1e6`` and per million output tokens ``= w x`` that (a cached
prompt token costs ``c x`` the input price; ``c = 0`` excludes cached tokens). An engine
whose prompt-token counter already leaves cache hits out (llama.cpp) has no correction to
make. Energy: the attributed GPUs' energy counter
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
#: Per GPU: its slices under MIG (:data:`MIG_SLICES` by model).
GPU_MIG_SLICES = "uuid:obsctl_gpu_mig_slices:max"
#: Per attribution entry (the labels of ``obsctl_gpu_attribution_info``): its share 0-1 of the GPU.
ATTRIBUTION_SHARE = "uuid:obsctl_gpu_attribution_share:ratio"
#: Per GPU: its energy rate (W), whole GPU.
GPU_ENERGY_RATE = "uuid:obsctl_gpu_energy_joules:rate5m"
#: GPU slices under MIG by model (NVML name substring): the compute slices of its largest
#: profile (``7g.*`` / ``4g.*``), from NVIDIA's MIG user guide's supported-profile tables.
MIG_SLICES: dict[str, int] = {"A100": 7, "H100": 7, "H200": 7, "H800": 7, "A800": 7, "B200": 7, "A30": 4}
#: Per GPU: the electricity price of its node, USD per kWh.
GPU_ENERGY_PRICE = "uuid:obsctl_gpu_energy_price_usd_per_kwh:max"

WINDOW = "5m"
_RUN_COUNTERS = "obsctl_(samples|steps|tokens)_total"


def _opencost(metric: str, label: str) -> str:
    """OpenCost's per-node series keyed by obsctl's node label (one series per node)."""
    return f'max by ({label}) (label_replace({metric}, "{label}", "$1", "node", "(.+)"))'


def _attribution_share(spec: Spec) -> str:
    """PromQL of :data:`ATTRIBUTION_SHARE`: one series per attribution entry, its share of the GPU."""
    info = "obsctl_gpu_attribution_info"
    # MIG: slices of the profile (k of "kg.*", or of "Nc.kg.*") over the GPU's slices,
    # split among the classes on that instance.
    slices = "\n  or ".join(f'{info}{{gpu_instance!="",mig_profile=~"([0-9]+c\\\\.)?{k}g\\\\..*"}} * {k}' for k in range(1, 9))
    per_instance = f'count by (uuid, gpu_instance) ({info}{{gpu_instance!=""}})'
    # A profile that names no slice count (NVML's "unknown", DCGM without GPU_I_PROFILE) makes
    # its whole GPU fall back to the equal split, like a GPU of unknown slice count: its
    # instances never drop out of the cost.
    unparsed = f'{info}{{gpu_instance!="",mig_profile!~"([0-9]+c\\\\.)?[1-8]g\\\\..*"}}'
    mig = (f"(\n  {slices}\n)\n/ on(uuid) group_left() {GPU_MIG_SLICES}\n/ on(uuid, gpu_instance) group_left() {per_instance}"
           f"\nunless on(uuid) {unparsed}")
    mig_unknown = (f'({info}{{gpu_instance!=""}} unless on(uuid) ({GPU_MIG_SLICES} unless on(uuid) {unparsed}))\n'
                   f'/ on(uuid) group_left() count by (uuid) ({info}{{gpu_instance!=""}})')
    whole = f'{info}{{gpu_instance=""}}'
    shares = spec.pricing.time_slicing_share
    if not shares:
        shared = f"{whole}\n/ on(uuid) group_left() count by (uuid) ({whole})"
    else:
        named = " or ".join(f'{info}{{gpu_instance="",{promql_matchers({"workload_class": c})}}} * {number(v)}'
                            for c, v in sorted(shares.items()))
        rest = f"({whole} unless ({named}))"
        left = f"clamp_min(1 - (sum by (uuid) ({named}) or 0 * count by (uuid) {rest}), 0)"
        shared = f"({named})\nor\n{rest} * on(uuid) group_left() ({left} / count by (uuid) {rest})"
    return f"(\n{mig}\n)\nor\n(\n{mig_unknown}\n)\nor\n(\n{shared}\n)"


def gpu_rules(spec: Spec) -> list[dict]:
    """Fleet rules: per-GPU price, MIG slices, each attribution entry's share, energy rate
    and price, unattributed waste."""
    p = spec.pricing
    label = p.opencost_node_label
    opencost = (f"max by (uuid) (\n  obsctl_gpu_info * on({label}) group_left()\n"
                f"  {_opencost('node_gpu_hourly_cost > 0', label)}\n)")
    configured = ('max by (uuid) (\n  label_replace(obsctl_gpu_info, "gpu_model", "$1", "model", "(.+)")\n'
                  "  * on(job, instance, gpu_model) group_left() obsctl_accelerator_price_usd_per_hour\n)")
    first, second = (opencost, configured) if p.prefer == "opencost" else (configured, opencost)
    slices = "\nor ".join(f'max by (uuid) (obsctl_gpu_info{{model=~".*{m}.*"}}) * 0 + {n}' for m, n in MIG_SLICES.items())
    rules = [
        (GPU_COST, f"{first}\nor\n{second}"),
        (GPU_MIG_SLICES, slices),
        (ATTRIBUTION_SHARE, _attribution_share(spec)),
        (GPU_ENERGY_RATE, f'sum by (uuid) (rate(obsctl_gpu_energy_joules_total{{gpu_instance=""}}[{WINDOW}]))'),
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
    attributed = f"{ATTRIBUTION_SHARE}{{{','.join(filter(None, [nodes, class_regex(c.name for c in members)]))}}}"
    gpu_cost = f"sum by (workload_class) ({attributed} * on(uuid) group_left() {GPU_COST})"
    label = p.opencost_node_label
    node_opencost = f"sum({_opencost('node_total_hourly_cost', label)} * on({label}) group by ({label}) (up{sel()}))"
    node_spec = f"sum(obsctl_node_price_usd_per_hour{sel()})"
    nodes_first, nodes_second = (node_opencost, node_spec) if p.prefer == "opencost" else (node_spec, node_opencost)
    classes = f"group by (workload_class) ({CLASS_INFO}{{{class_regex(c.name for c in members)}}})"
    node_cost = f"{classes}\n  * on() group_left() ({nodes_first}\n    or {nodes_second})"
    idle = (f"sum by (workload_class) (\n  ({attributed} * on(uuid) group_left() {GPU_COST})\n"
            f"  and on(uuid, gpu_instance) (avg_over_time(obsctl_gpu_utilization_ratio{sel()}[{WINDOW}])"
            f" < {number(p.idle_utilization_ratio)})\n)\nor 0 * {gpu_cost}")
    rules = [
        (C.COST_USD_PER_HOUR, f"{gpu_cost}\nor (\n  {node_cost}\n)"),
        (C.IDLE_WASTE_USD_PER_HOUR, idle),
        (C.GPU_ENERGY, f"sum by (workload_class) ({attributed} * on(uuid) group_left() {GPU_ENERGY_RATE})"),
        (C.ENERGY_COST_USD_PER_HOUR, f"sum by (workload_class) ({attributed} * on(uuid) group_left() "
                                     f"({GPU_ENERGY_RATE} * on(uuid) {GPU_ENERGY_PRICE})) / 1000"),
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
    w, cw = number(spec.pricing.output_token_weight), number(spec.pricing.cached_input_token_weight)
    cached = f"({_per_class(C.CACHED_INPUT_TOKENS)} or 0 * {_per_class(C.INPUT_TOKENS)})"
    weighted = (f"({_per_class(C.INPUT_TOKENS)} - (1 - {cw}) * {cached}\n"
                f"   + {w} * {_per_class(C.OUTPUT_TOKENS)})")
    ratios = [
        (C.COST_PER_MILLION_TOKENS, per(tokens, " * 1e6")),
        (C.COST_PER_MILLION_INPUT_TOKENS, per(weighted, " * 1e6")),
        (C.COST_PER_MILLION_OUTPUT_TOKENS, per(weighted, f" * 1e6 * {w}")),
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
