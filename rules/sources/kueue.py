"""Kueue (Kubernetes job queueing): pending workloads and admission wait of the
ClusterQueue or LocalQueue a class is mapped to (``queue: {source: kueue, ...}``).

Names read from kubernetes-sigs/kueue ``pkg/metrics/metrics.go`` and
``site/content/en/docs/reference/metrics.md`` (v0.6-v0.14): gauge
``kueue_pending_workloads{cluster_queue, status=active|inadmissible}`` and histogram
``kueue_admission_wait_time_seconds{cluster_queue, priority_class}``; with the
LocalQueue metrics enabled (``LocalQueueMetrics`` feature gate, v0.10+)
``kueue_local_queue_pending_workloads{name, namespace, status}`` and
``kueue_local_queue_admission_wait_time_seconds{name, namespace}``.

Quirk: since v0.11 every series carries ``replica_role`` (leader | follower | standalone);
only one replica's view is wanted, so follower series are dropped
(``replica_role!="follower"`` also matches series without the label).
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source
from obsctl.spec import escape_label_value

ON = ("instance", "job")
NOT_FOLLOWER = 'replica_role!="follower"'


def _scope(ctx: Ctx) -> tuple[str, str]:
    """(metric prefix, extra matchers) for the class's ClusterQueue or LocalQueue."""
    opts = ctx.options
    if getattr(opts, "local_queue", None):
        namespace, _, name = opts.local_queue.partition("/")
        return "kueue_local_queue_", f'namespace="{escape_label_value(namespace)}",name="{escape_label_value(name)}",{NOT_FOLLOWER}'
    return "kueue_", f'cluster_queue="{escape_label_value(opts.cluster_queue)}",{NOT_FOLLOWER}'


def _pending(ctx: Ctx) -> str:
    prefix, extra = _scope(ctx)
    return q.gauge((f"{prefix}pending_workloads",), ctx.sel, ON, extra=extra)


def _wait_p95(ctx: Ctx) -> str:
    prefix, extra = _scope(ctx)
    return q.quantile(0.95, (f"{prefix}admission_wait_time_seconds",), ctx.sel, ctx.w, ON, extra=extra)


def _wait_mean(ctx: Ctx) -> str:
    prefix, extra = _scope(ctx)
    base = f"{prefix}admission_wait_time_seconds"
    return q.mean((f"{base}_sum",), (f"{base}_count",), ctx.sel, ctx.w, ON, extra=extra)


SOURCE = Source(
    name="kueue",
    title="Kueue",
    kind="queue",
    versions="Kueue v0.6-v0.14 (pkg/metrics/metrics.go); LocalQueue metrics v0.10+ behind LocalQueueMetrics",
    mappings=(
        Mapping(c.REQUESTS_WAITING, ("kueue_pending_workloads", "kueue_local_queue_pending_workloads"), _pending,
                "pending workloads, active + inadmissible"),
        Mapping(c.QUEUE_WAIT_P95, ("kueue_admission_wait_time_seconds", "kueue_local_queue_admission_wait_time_seconds"),
                _wait_p95, "time from creation (or requeue) to admission"),
        Mapping(c.QUEUE_WAIT_MEAN, ("kueue_admission_wait_time_seconds", "kueue_local_queue_admission_wait_time_seconds"),
                _wait_mean),
    ),
    lacks="queue depth and wait only; the work itself comes from the class's source",
    quirks=("replica_role follower series dropped", "duplicate HELP/TYPE blocks per resource are harmless to Prometheus"),
)
