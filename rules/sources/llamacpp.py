"""llama.cpp's ``llama-server --metrics``, ``llamacpp:*`` metrics (no labels of its own).

Names read from ggml-org/llama.cpp ``tools/server/server.cpp`` /
``server-context.cpp`` (the ``/metrics`` handler; ``examples/server`` before 2025):
counters ``llamacpp:prompt_tokens_total``, ``llamacpp:tokens_predicted_total``,
``llamacpp:prompt_seconds_total``, ``llamacpp:tokens_predicted_seconds_total``,
``llamacpp:n_decode_total``, and in later builds ``llamacpp:prompt_tokens_cached_total``
(prompt tokens reused from the cache; ``prompt_tokens_total`` leaves them out, its help
says "excluding cached tokens") and ``llamacpp:spec_decode_num_*_total`` (speculative
decoding, not read); gauges ``llamacpp:requests_processing``,
``llamacpp:requests_deferred``, ``llamacpp:prompt_tokens_seconds``,
``llamacpp:predicted_tokens_seconds``, ``llamacpp:n_busy_slots_per_decode``; and, in
builds of 2024 only, ``llamacpp:kv_cache_usage_ratio`` and ``llamacpp:kv_cache_tokens``.

Quirk: ``llamacpp:n_tokens_max`` is typed ``counter`` but is the largest sequence length
seen (a running maximum): it is never passed to ``rate()`` and fills nothing.
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Mapping, Source

ON = ("instance", "job")
IN, OUT = ("llamacpp:prompt_tokens_total",), ("llamacpp:tokens_predicted_total",)
CACHED = ("llamacpp:prompt_tokens_cached_total",)


def _input(x) -> str:
    """Every prompt token: evaluated (``prompt_tokens_total`` leaves cache hits out) + reused
    from the cache where the build counts them (0 where it does not)."""
    return q.plus_optional(q.counter_sum(IN, x.sel, x.w, ON), q.counter_sum(CACHED, x.sel, x.w, ON))

SOURCE = Source(
    name="llamacpp",
    title="llama.cpp server",
    versions="llama.cpp llama-server builds b3xxx-b6xxx (2024-2025); kv_cache_* gauges only in 2024 builds",
    mappings=(
        Mapping(c.INPUT_TOKENS, IN + CACHED, _input, "prompt tokens evaluated + reused from the cache (where counted)"),
        Mapping(c.OUTPUT_TOKENS, OUT, lambda x: q.counter_sum(OUT, x.sel, x.w, ON)),
        Mapping(c.CACHED_INPUT_TOKENS, CACHED, lambda x: q.counter_sum(CACHED, x.sel, x.w, ON),
                "builds that count prompt tokens reused from the cache"),
        Mapping(c.TOKENS, IN + CACHED + OUT, lambda x: f"({_input(x)})\n+\n{q.counter_sum(OUT, x.sel, x.w, ON)}"),
        Mapping(c.STEPS, ("llamacpp:n_decode_total",), lambda x: q.counter_sum(("llamacpp:n_decode_total",), x.sel, x.w, ON),
                "llama_decode() calls"),
        Mapping(c.REQUESTS_RUNNING, ("llamacpp:requests_processing",),
                lambda x: q.gauge(("llamacpp:requests_processing",), x.sel, ON), "busy slots"),
        Mapping(c.REQUESTS_WAITING, ("llamacpp:requests_deferred",),
                lambda x: q.gauge(("llamacpp:requests_deferred",), x.sel, ON), "requests deferred for want of a free slot"),
        Mapping(c.KV_CACHE_USAGE, ("llamacpp:kv_cache_usage_ratio",),
                lambda x: q.gauge(("llamacpp:kv_cache_usage_ratio",), x.sel, ON, agg="avg"), "2024 builds only"),
        Mapping(c.ENGINE_BUSY, ("llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio", "llamacpp:requests_processing"),
                lambda x: q.busy_from_queue(q.gauge(("llamacpp:requests_deferred",), x.sel, ON),
                                            f"clamp_max({q.gauge(('llamacpp:kv_cache_usage_ratio',), x.sel, ON, agg='avg')}, 1)\n"
                                            f"or\n{q.gauge(('llamacpp:requests_processing',), x.sel, ON)} == 0"),
                "1 while requests are deferred (every slot busy), else KV usage (2024 builds), else 0 with no slot busy"),
    ),
    lacks="no request counters or outcomes (so no offered load: demand unknown), no latency histograms (TTFT, inter-token, end-to-end, queue wait), "
    "no preemptions; KV-cache usage only from 2024 builds",
    quirks=("n_tokens_max typed counter but a running maximum: never rate()d",),
)
