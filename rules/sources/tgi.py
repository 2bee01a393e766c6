"""Hugging Face text-generation-inference, the router's ``tgi_*`` metrics.

Names read from huggingface/text-generation-inference ``router/src/server.rs`` and
``router/src/infer/`` (``metrics::counter!``/``histogram!``/``gauge!`` calls, 1.x-3.x) and
the docs' "Metrics" reference: counters ``tgi_request_count``, ``tgi_request_success``,
``tgi_request_failure{err}`` (``validation``, ``overloaded`` (concurrency limit reached),
``dropped`` and ``cancelled`` (the client went away), ``generation``,
``incomplete_generation``), ``tgi_batch_inference_count{method}``; gauges
``tgi_queue_size``, ``tgi_batch_current_size``; histograms (seconds)
``tgi_request_duration``, ``tgi_request_queue_duration``,
``tgi_request_mean_time_per_token_duration`` and the length histograms
``tgi_request_input_length``, ``tgi_request_generated_tokens`` (their ``_sum`` is tokens).

Quirk: the Rust ``metrics-exporter-prometheus`` writes counters without ``_total``; the
``_total`` spelling is read as a fallback per target (an exporter that adds it).
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source

ON = ("instance", "job")


def names(base: str) -> tuple[str, ...]:
    """The counter as TGI writes it, then with ``_total``."""
    return (base, f"{base}_total")


def _requests(ctx: Ctx) -> str:
    ok = q.relabel_outcome(q.first_of(q.rates(names("tgi_request_success"), ctx.sel, ctx.w), ON), "", [], "success")
    failed = q.first_of(q.rates(names("tgi_request_failure"), ctx.sel, ctx.w), ON)
    # overloaded: refused at the concurrency limit; dropped/cancelled: aborted by the client.
    failed = q.relabel_outcome(f"({failed})", "err", [("rejected", "overloaded|dropped|cancelled")], "error")
    return q.outcome_sum([f"sum by (outcome) ({ok})", f"sum by (outcome) ({failed})"])


IN = ("tgi_request_input_length_sum",)
OUT = ("tgi_request_generated_tokens_sum",)

SOURCE = Source(
    name="tgi",
    title="Hugging Face TGI",
    versions="text-generation-inference router 1.x-3.x (router/src/server.rs, router/src/infer/)",
    mappings=(
        Mapping(c.INPUT_TOKENS, IN, lambda x: q.counter_sum(IN, x.sel, x.w, ON), "sum of the input-length histogram"),
        Mapping(c.OUTPUT_TOKENS, OUT, lambda x: q.counter_sum(OUT, x.sel, x.w, ON), "sum of the generated-tokens histogram"),
        Mapping(c.TOKENS, IN + OUT, lambda x: f"{q.counter_sum(IN, x.sel, x.w, ON)}\n+\n{q.counter_sum(OUT, x.sel, x.w, ON)}"),
        Mapping(c.REQUESTS, names("tgi_request_success") + names("tgi_request_failure"), _requests,
                "success; failure err=overloaded|dropped|cancelled -> rejected, other err -> error", outcomes=("success", "error", "rejected")),
        Mapping(c.REQUESTS_OFFERED, names("tgi_request_count"), lambda x: q.counter_sum(names("tgi_request_count"), x.sel, x.w, ON)),
        Mapping(c.STEPS, names("tgi_batch_inference_count"),
                lambda x: q.counter_sum(names("tgi_batch_inference_count"), x.sel, x.w, ON), "prefill + decode forward passes"),
        Mapping(c.QUEUE_WAIT_P95, ("tgi_request_queue_duration",),
                lambda x: q.quantile(0.95, ("tgi_request_queue_duration",), x.sel, x.w, ON)),
        Mapping(c.QUEUE_WAIT_MEAN, ("tgi_request_queue_duration_sum", "tgi_request_queue_duration_count"),
                lambda x: q.mean(("tgi_request_queue_duration_sum",), ("tgi_request_queue_duration_count",), x.sel, x.w, ON)),
        Mapping(c.ITL_P95, ("tgi_request_mean_time_per_token_duration",),
                lambda x: q.quantile(0.95, ("tgi_request_mean_time_per_token_duration",), x.sel, x.w, ON),
                "p95 over requests of each request's mean time per output token"),
        Mapping(c.E2E_P95, ("tgi_request_duration",), lambda x: q.quantile(0.95, ("tgi_request_duration",), x.sel, x.w, ON)),
        Mapping(c.E2E_MEAN, ("tgi_request_duration_sum", "tgi_request_duration_count"),
                lambda x: q.mean(("tgi_request_duration_sum",), ("tgi_request_duration_count",), x.sel, x.w, ON)),
        Mapping(c.REQUESTS_RUNNING, ("tgi_batch_current_size",), lambda x: q.gauge(("tgi_batch_current_size",), x.sel, ON),
                "requests in the running batch"),
        Mapping(c.REQUESTS_WAITING, ("tgi_queue_size",), lambda x: q.gauge(("tgi_queue_size",), x.sel, ON)),
        Mapping(c.ENGINE_BUSY, ("tgi_queue_size", "tgi_batch_current_size"),
                lambda x: q.busy_from_queue(q.gauge(("tgi_queue_size",), x.sel, ON),
                                            f"{q.gauge(('tgi_batch_current_size',), x.sel, ON)} == 0"),
                "1 while requests queue, 0 while the batch is empty; absent in between (no capacity gauge)"),
    ),
    lacks="no time-to-first-token histogram, no KV-cache usage, no preemption or prefix-cache counters",
    quirks=("counters without _total (the _total spelling read as a fallback per target)",
            "no model label: the selector picks the router's scrape target"),
)
