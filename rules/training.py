"""Model FLOPs utilization (MFU) per training class, as recording rules.

For a class with an ``mfu:`` block in the spec (:class:`obsctl.spec.MfuConfig`):

* ``workload_class:obsctl_model_flops:rate5m``: achieved model FLOP/s = the engine's own
  estimate where its source fills ``ENGINE_FLOPS_PER_GPU`` with a positive rate (vLLM's
  ``estimated_flops_per_gpu_total``: FLOP/s per GPU x the class's attributed whole GPUs),
  else ``flops_per_token x TOKENS`` (or ``flops_per_sample x SAMPLES``), the canonical
  throughput series the class's source fills (:mod:`obsctl.rules.canonical`);
* ``workload_class:obsctl_gpu_dense_peak_flops_per_second:sum``: the dense peak FLOP/s of
  the whole GPUs attributed to the class (``obsctl_gpu_attribution_info`` on the class's
  ``node_selector``, ``gpu_instance=""``), each GPU's peak looked up by its
  ``obsctl_gpu_info{model}`` and the spec's ``dtype`` in the table of
  :mod:`obsctl.exporters.training.peaks` (published as
  ``model:obsctl_gpu_dense_peak_flops_per_second:value{model,dtype}``, one rule per table
  entry of the dtypes in use), or ``peak_flops_per_second x GPUs`` when the spec gives it;
  absent when any attributed GPU has no table entry (never a partial denominator);
* ``MFU`` (``workload_class:obsctl_model_flops_utilization:ratio``): the ratio, 0-1.

A GPU attributed to two classes counts fully in both (the attribution does not say how
it is shared). MIG instances are not counted: a class on MIG slices has no MFU.
"""

from __future__ import annotations

from obsctl.exporters.training.peaks import DENSE_PEAK_FLOPS
from obsctl.rules import canonical as C
from obsctl.rules.loop_series import class_regex, number, selector, shared_by
from obsctl.spec import Spec, WorkloadClass, promql_matchers

#: Dense peak FLOP/s of one GPU, labels ``model`` (NVML name) and ``dtype``.
PEAK_TABLE = "model:obsctl_gpu_dense_peak_flops_per_second:value"
#: Achieved model FLOP/s of the class.
MODEL_FLOPS = "workload_class:obsctl_model_flops:rate5m"
#: Dense peak FLOP/s of the class's attributed GPUs (sum).
PEAK_FLOPS = "workload_class:obsctl_gpu_dense_peak_flops_per_second:sum"


def _nodes(wc: WorkloadClass, **extra: str) -> str:
    return "{" + ",".join(filter(None, [promql_matchers(wc.node_selector), promql_matchers(extra)])) + "}"


def peak_table_rules(dtypes: set[str]) -> list[dict]:
    """One constant rule per (GPU model, dtype) of the table, for the given dtypes (sorted)."""
    return [
        {"record": PEAK_TABLE, "expr": f"vector({number(flops)})", "labels": {"model": model, "dtype": dtype}}
        for model in sorted(DENSE_PEAK_FLOPS)
        for dtype, flops in sorted(DENSE_PEAK_FLOPS[model].items())
        if dtype in dtypes
    ]


def _mfu_key(wc: WorkloadClass) -> tuple:
    """What the MFU rules read of a class: its ``mfu`` block and its node selector."""
    return (wc.mfu.model_dump_json(), promql_matchers(wc.node_selector))


def shared_rules(members: list[WorkloadClass]) -> list[dict]:
    """``MODEL_FLOPS`` and ``PEAK_FLOPS`` of the classes ``members``, which share one ``mfu``
    block and node selector: one rule each, ``by (workload_class)``."""
    mfu, wc = members[0].mfu, members[0]
    match = class_regex(c.name for c in members)
    matchers = ",".join(filter(None, [promql_matchers(wc.node_selector), match, 'gpu_instance=""']))
    gpus = f"max by (workload_class, uuid) (obsctl_gpu_attribution_info{{{matchers}}})"
    if mfu.flops_per_token is not None:
        flops = f"{number(mfu.flops_per_token)} * sum by (workload_class) ({C.TOKENS}{{{match},signal=\"\"}})"
    else:
        flops = f"{number(mfu.flops_per_sample)} * sum by (workload_class) ({C.SAMPLES}{{{match},signal=\"\"}})"
    # The engine's own FLOP estimate per GPU (vLLM), where it gives one, wins over the spec's.
    engine = (f"sum by (workload_class) ({C.ENGINE_FLOPS_PER_GPU}{{{match},signal=\"\"}})\n"
              f"  * on(workload_class) count by (workload_class) ({gpus})")
    flops = f"(\n  {engine}\n)\nor\n{flops}"
    if mfu.peak_flops_per_second is not None:
        peak = f"{number(mfu.peak_flops_per_second)} * count by (workload_class) ({gpus})"
    else:
        matched = (f"{gpus}\n  * on(uuid) group_left(model) max by (uuid, model) (obsctl_gpu_info{_nodes(wc)})\n"
                   f"  * on(model) group_left() {selector(PEAK_TABLE, dtype=mfu.dtype)}")
        # A GPU without a table entry drops out of the join: then no peak for its class at all.
        peak = (f"sum by (workload_class) (\n  {matched}\n)\nunless on(workload_class) "
                f"(count by (workload_class) ({gpus}) > count by (workload_class) (\n  {matched}\n))")
    return [{"record": MODEL_FLOPS, "expr": flops}, {"record": PEAK_FLOPS, "expr": peak}]


def training_groups(spec: Spec) -> list[dict]:
    """Groups ``obsctl.training.peaks`` (the table, for the dtypes the classes use) and
    ``obsctl.training``: :func:`shared_rules` per distinct ``mfu`` block and node selector,
    then ``MFU`` once for every class; empty without a class with an ``mfu`` block."""
    classes = sorted((wc for wc in spec.workload_classes if wc.mfu is not None), key=lambda c: c.name)
    if not classes:
        return []
    dtypes = {wc.mfu.dtype for wc in classes if wc.mfu.peak_flops_per_second is None}
    groups = [{"name": "obsctl.training.peaks", "rules": peak_table_rules(dtypes)}] if dtypes else []
    rules = [r for _, members in shared_by(classes, _mfu_key) for r in shared_rules(members)]
    rules.append({"record": C.MFU, "expr": f"{MODEL_FLOPS}\n/ {PEAK_FLOPS}"})
    return groups + [{"name": "obsctl.training", "rules": rules}]
