"""Slurm, as rivosinc/prometheus-slurm-exporter publishes it: pending jobs of the
partition a class is mapped to (``queue: {source: slurm, partition: gpu}``).

Names read from rivosinc/prometheus-slurm-exporter ``exporter/jobs.go`` (v1.x):
``slurm_partition_job_state_total{partition, state}`` is a *gauge* (jobs per partition
per state now, despite the ``_total`` suffix), with ``state`` as squeue reports it
(``PENDING``, ``RUNNING``, ...).

The exporter has no queue-wait metric, so the class's queue wait stays absent.
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source
from obsctl.spec import escape_label_value

ON = ("instance", "job")
NAME = "slurm_partition_job_state_total"


def _pending(ctx: Ctx) -> str:
    extra = f'partition="{escape_label_value(ctx.options.partition)}",state=~"(?i)pending"'
    return q.gauge((NAME,), ctx.sel, ON, extra=extra)


SOURCE = Source(
    name="slurm",
    title="Slurm (rivosinc/prometheus-slurm-exporter)",
    kind="queue",
    versions="rivosinc/prometheus-slurm-exporter v1.x (exporter/jobs.go)",
    mappings=(Mapping(c.REQUESTS_WAITING, (NAME,), _pending, "jobs in state PENDING in the partition (a gauge named _total)"),),
    lacks="no queue-wait time (the exporter publishes none)",
    quirks=("slurm_partition_job_state_total is a gauge: read as is, never rate()d", "state matched case-insensitively"),
)
