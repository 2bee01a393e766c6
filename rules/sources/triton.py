"""NVIDIA Triton Inference Server, ``nv_inference_*`` metrics (per model and version).

Names read from triton-inference-server/server ``docs/user_guide/metrics.md`` and
``src/metrics.cc`` / core ``src/metric_model_reporter.cc`` (r23.x-r25.x): counters
``nv_inference_request_success``, ``nv_inference_request_failure`` (``reason`` label
REJECTED | CANCELED | BACKEND | OTHER from r24.0x), cumulative microsecond counters
``nv_inference_request_duration_us`` and ``nv_inference_queue_duration_us`` (updated by
successful requests), gauge ``nv_inference_pending_request_count``; summaries (on by
default since r23.x) ``nv_inference_request_summary_us`` and
``nv_inference_queue_summary_us``; the optional histogram
``nv_inference_first_response_histogram_ms`` (``--metrics-config
histogram_latencies=true``, decoupled models).

Quirks: counters without ``_total``; durations in microseconds (converted to seconds);
a summary's quantiles cannot be aggregated across replicas, so the p95 series is the
largest per-replica p95 (an upper bound), and a replica whose summary saw no request in
the window is ignored (Triton prints stale quantiles, e.g. ``3`` with ``_count`` 0).
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source

ON = ("instance", "job", "model", "version")
US = 1e-6


def _requests(ctx: Ctx) -> str:
    ok = q.relabel_outcome(f"rate({q.vec('nv_inference_request_success', ctx.sel)}[{ctx.w}])", "", [], "success")
    failed = q.relabel_outcome(f"rate({q.vec('nv_inference_request_failure', ctx.sel)}[{ctx.w}])", "reason",
                               [("rejected", "REJECTED|CANCELED")], "error")
    return q.outcome_sum([f"sum by (outcome) ({ok})", f"sum by (outcome) ({failed})"])


def _finished(ctx: Ctx) -> str:
    return q.plus_optional(q.counter_sum(("nv_inference_request_success",), ctx.sel, ctx.w, ON),
                           q.counter_sum(("nv_inference_request_failure",), ctx.sel, ctx.w, ON))


def _summary_p95(metric: str):
    def build(ctx: Ctx) -> str:
        active = f"rate({q.vec(metric + '_count', ctx.sel)}[{ctx.w}]) > 0"
        p95 = q.vec(metric, ctx.sel, 'quantile="0.95"')
        return f"(max(\n{p95}\nand on({', '.join(ON)})\n{active}\n) >= 0) * {US!r}"
    return build


SOURCE = Source(
    name="triton",
    title="NVIDIA Triton",
    versions="Triton Inference Server r23.x-r25.x (docs/user_guide/metrics.md)",
    mappings=(
        Mapping(c.REQUESTS, ("nv_inference_request_success", "nv_inference_request_failure"), _requests,
                "failure reason REJECTED|CANCELED -> rejected, other or none -> error",
                outcomes=("success", "error", "rejected")),
        Mapping(c.REQUESTS_OFFERED, ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_pending_request_count"),
                lambda x: f"{_finished(x)}\n+\n{q.held_change(('nv_inference_pending_request_count',), x.sel, x.w, ON)}",
                "arrivals: finished (success + failure) + deriv(pending)"),
        Mapping(c.QUEUE_WAIT_P95, ("nv_inference_queue_summary_us",), _summary_p95("nv_inference_queue_summary_us"),
                "largest per-replica summary p95 (summaries do not aggregate), µs -> s"),
        Mapping(c.QUEUE_WAIT_MEAN, ("nv_inference_queue_duration_us", "nv_inference_request_success"),
                lambda x: q.mean(("nv_inference_queue_duration_us",), ("nv_inference_request_success",), x.sel, x.w, ON, US),
                "cumulative µs / successful requests"),
        Mapping(c.TTFT_P50, ("nv_inference_first_response_histogram_ms",),
                lambda x: q.quantile(0.5, ("nv_inference_first_response_histogram_ms",), x.sel, x.w, ON, 1e-3)),
        Mapping(c.TTFT_P95, ("nv_inference_first_response_histogram_ms",),
                lambda x: q.quantile(0.95, ("nv_inference_first_response_histogram_ms",), x.sel, x.w, ON, 1e-3)),
        Mapping(c.E2E_P95, ("nv_inference_request_summary_us",), _summary_p95("nv_inference_request_summary_us"),
                "largest per-replica summary p95, µs -> s"),
        Mapping(c.E2E_MEAN, ("nv_inference_request_duration_us", "nv_inference_request_success"),
                lambda x: q.mean(("nv_inference_request_duration_us",), ("nv_inference_request_success",), x.sel, x.w, ON, US),
                "cumulative µs / successful requests"),
        Mapping(c.REQUESTS_WAITING, ("nv_inference_pending_request_count",),
                lambda x: q.gauge(("nv_inference_pending_request_count",), x.sel, ON)),
        Mapping(c.ENGINE_BUSY, ("nv_inference_pending_request_count", "nv_gpu_utilization"),
                lambda x: q.busy_from_queue(q.gauge(("nv_inference_pending_request_count",), x.sel, ON),
                                            q.gauge(("nv_gpu_utilization",), x.sel, ("instance", "job", "gpu_uuid"), agg="avg")),
                "1 while requests are pending, else the mean utilization of the GPUs Triton reports"),
    ),
    lacks="no token counters (Triton counts inferences), no running-request gauge, no KV cache, "
    "no inter-token latency; TTFT only with histogram_latencies=true",
    series_labels=("model", "version"),
    quirks=("counters without _total", "cumulative microsecond counters and summaries converted to seconds",
            "summary quantiles of replicas with no requests in the window ignored"),
)
