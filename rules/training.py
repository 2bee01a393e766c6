"""Model FLOPs utilization (MFU) per training class, as recording rules.

For a class with an ``mfu:`` block in the spec (:class:`obsctl.spec.MfuConfig`):

* ``workload_class:obsctl_model_flops:rate5m``: achieved model FLOP/s =
  ``flops_per_token x TOKENS`` (or ``flops_per_sample x SAMPLES``), the canonical
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
from obsctl.rules.loop_series import number, selector
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


def class_rules(wc: WorkloadClass) -> list[dict]:
    """The MFU rules of one class with an ``mfu`` block, in evaluation order."""
    mfu = wc.mfu
    own = {"workload_class": wc.name}
    gpus = f"max by (uuid) (obsctl_gpu_attribution_info{_nodes(wc, workload_class=wc.name, gpu_instance='')})"
    work = {**own, "signal": ""}  # the canonical series only, not a spec signal of the same name (C.OWN_SERIES)
    if mfu.flops_per_token is not None:
        flops = f"{number(mfu.flops_per_token)} * sum({selector(C.TOKENS, **work)})"
    else:
        flops = f"{number(mfu.flops_per_sample)} * sum({selector(C.SAMPLES, **work)})"
    if mfu.peak_flops_per_second is not None:
        peak = f"{number(mfu.peak_flops_per_second)} * count({gpus})"
    else:
        matched = (f"{gpus}\n  * on(uuid) group_left(model) max by (uuid, model) (obsctl_gpu_info{_nodes(wc)})\n"
                   f"  * on(model) group_left() {selector(PEAK_TABLE, dtype=mfu.dtype)}")
        # A GPU without a table entry drops out of the join: then no peak at all.
        peak = f"sum(\n  {matched}\n)\nunless on() (count({gpus}) > count(\n  {matched}\n))"
    rules = [
        (MODEL_FLOPS, flops),
        (PEAK_FLOPS, peak),
        (C.MFU, f"{selector(MODEL_FLOPS, **own)}\n/ {selector(PEAK_FLOPS, **own)}"),
    ]
    return [{"record": r, "expr": e, "labels": dict(own)} for r, e in rules]


def training_groups(spec: Spec) -> list[dict]:
    """Groups ``obsctl.training.peaks`` (the table, for the dtypes the classes use) and
    ``obsctl.training.<class>`` per class with an ``mfu`` block (sorted); empty without one."""
    classes = sorted((wc for wc in spec.workload_classes if wc.mfu is not None), key=lambda c: c.name)
    dtypes = {wc.mfu.dtype for wc in classes if wc.mfu.peak_flops_per_second is None}
    groups = [{"name": "obsctl.training.peaks", "rules": peak_table_rules(dtypes)}] if dtypes else []
    return groups + [{"name": f"obsctl.training.{wc.name}", "rules": class_rules(wc)} for wc in classes]
