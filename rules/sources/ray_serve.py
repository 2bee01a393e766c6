"""Ray Serve, the ``ray_serve_*`` metrics of Ray's metrics agent (per application,
deployment and replica).

Names read from ray-project/ray ``python/ray/serve/_private/`` (``replica.py``,
``router.py``, ``proxy.py``: ``metrics.Counter``/``Gauge``/``Histogram`` definitions)
and the Serve monitoring docs (Ray 2.6-2.4x): ``ray_serve_deployment_request_counter``
(requests a replica answered), ``ray_serve_deployment_error_counter`` (requests that
raised), ``ray_serve_deployment_queued_queries`` (queued at the handle/router, not yet
assigned to a replica), ``ray_serve_replica_pending_queries`` (queued inside a replica;
Ray < 2.10), ``ray_serve_replica_processing_queries`` (being processed), and the proxy's
``ray_serve_http_request_latency_ms`` histogram (end to end, milliseconds).

Quirks: Ray 2.6 exports its counters typed ``gauge`` and without ``_total``; later Ray
adds ``_total`` (read as a fallback per replica). ``rate()`` does not care about the
declared type, so cumulative "gauges" are rated as counters.
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source

ON = ("instance", "job", "application", "deployment", "replica")
OK = ("ray_serve_deployment_request_counter", "ray_serve_deployment_request_counter_total")
ERR = ("ray_serve_deployment_error_counter", "ray_serve_deployment_error_counter_total")
QUEUED = ("ray_serve_deployment_queued_queries", "ray_serve_replica_pending_queries")


def _requests(ctx: Ctx) -> str:
    ok = q.relabel_outcome(q.first_of(q.rates(OK, ctx.sel, ctx.w), ON), "", [], "success")
    err = q.relabel_outcome(q.first_of(q.rates(ERR, ctx.sel, ctx.w), ON), "", [], "error")
    return q.outcome_sum([f"sum by (outcome) ({ok})", f"sum by (outcome) ({err})"])


def _waiting(ctx: Ctx) -> str:
    # Router-side and replica-side queues are different series (no replica label on the first).
    return "sum(\n" + "\nor\n".join(f"({q.vec(n, ctx.sel)} >= 0)" for n in QUEUED) + "\n)"


PROCESSING = ("ray_serve_replica_processing_queries",)


def _offered(ctx: Ctx) -> str:
    """Arrivals: finished (answered + raised) + the per-second change of the queries held
    (processing in replicas, queued at the router or in replicas) over the window."""
    finished = q.plus_optional(q.counter_sum(OK, ctx.sel, ctx.w, ON), q.counter_sum(ERR, ctx.sel, ctx.w, ON))
    return f"{finished}\n+\n{q.held_change(PROCESSING + QUEUED, ctx.sel, ctx.w, ON)}"


LATENCY = ("ray_serve_http_request_latency_ms",)

SOURCE = Source(
    name="ray-serve",
    title="Ray Serve",
    versions="Ray 2.6-2.4x (python/ray/serve/_private/); fixture from Ray 2.6.1",
    mappings=(
        Mapping(c.REQUESTS, OK + ERR, _requests, "request_counter -> success, error_counter -> error",
                outcomes=("success", "error")),
        Mapping(c.REQUESTS_OFFERED, OK + ERR + PROCESSING + QUEUED, _offered,
                "arrivals: answered + raised (the error counter appears at the first error) + deriv(processing + queued)"),
        Mapping(c.E2E_P95, LATENCY, lambda x: q.quantile(0.95, LATENCY, x.sel, x.w, ON, 1e-3), "proxy latency, ms -> s"),
        Mapping(c.E2E_MEAN, ("ray_serve_http_request_latency_ms_sum", "ray_serve_http_request_latency_ms_count"),
                lambda x: q.mean(("ray_serve_http_request_latency_ms_sum",), ("ray_serve_http_request_latency_ms_count",),
                                 x.sel, x.w, ON, 1e-3)),
        Mapping(c.REQUESTS_RUNNING, ("ray_serve_replica_processing_queries",),
                lambda x: q.gauge(("ray_serve_replica_processing_queries",), x.sel, ON)),
        Mapping(c.REQUESTS_WAITING, QUEUED, _waiting, "queued at the router + pending in replicas"),
    ),
    lacks="no tokens (a vLLM app under Ray Serve: use source vllm for its ray_vllm: series and queue.source ray-serve), "
    "no queue-wait histogram, no TTFT or inter-token latency, no rejection counter",
    series_labels=("application", "deployment", "replica", "route", "handle"),
    quirks=("cumulative counters typed gauge and without _total (Ray 2.6); _total read as a fallback",
            "latency in milliseconds converted to seconds"),
)

#: Ray Serve as a class's queue (``queue: {source: ray-serve, selector: {...}}``), e.g. for
#: a vLLM app served by Ray Serve: the router's and replicas' queued queries.
QUEUE = Source(
    name="ray-serve",
    title="Ray Serve (queue)",
    kind="queue",
    versions=SOURCE.versions,
    mappings=(Mapping(c.REQUESTS_WAITING, QUEUED, _waiting, "queued at the router + pending in replicas"),),
    lacks="no queue-wait histogram",
)
