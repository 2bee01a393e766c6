"""SGLang (``--enable-metrics``), ``sglang:*`` metrics.

Names read from sgl-project/sglang ``python/sglang/srt/metrics/collector.py`` and
``docs/references/production_metrics.md`` (0.4.x-0.5.x): counters
``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
``sglang:num_requests_total``, ``sglang:cached_tokens_total`` (prompt tokens served from
the radix cache); gauges ``sglang:num_running_reqs``,
``sglang:num_queue_reqs``, ``sglang:token_usage`` (share of the KV token pool in use),
``sglang:cache_hit_rate`` (radix-cache hit rate); histograms
``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds``,
``sglang:e2e_request_latency_seconds``, ``sglang:queue_time_seconds``.

Quirk: scheduler series carry ``tp_rank``, and the tensor-parallel ranks of one engine
repeat the same value, so they are folded with ``max without(tp_rank)`` before summing
over engines (histograms carry no ``tp_rank``).
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Mapping, Source

ON = ("instance", "job", "model_name")
TP = "tp_rank"


def _counter(name: str):
    return lambda x: f"sum(\nmax without({TP}) ({q.rates((name,), x.sel, x.w)[0]})\n)"


def _gauge(name: str, agg: str = "sum"):
    return lambda x: q.gauge((name,), x.sel, ON, agg=agg, collapse=TP)


IN, OUT = "sglang:prompt_tokens_total", "sglang:generation_tokens_total"

SOURCE = Source(
    name="sglang",
    title="SGLang",
    versions="SGLang 0.4.x-0.5.x (python/sglang/srt/metrics/collector.py); fixture from v0.5.10.post1",
    mappings=(
        Mapping(c.INPUT_TOKENS, (IN,), _counter(IN)),
        Mapping(c.OUTPUT_TOKENS, (OUT,), _counter(OUT)),
        Mapping(c.CACHED_INPUT_TOKENS, ("sglang:cached_tokens_total",), _counter("sglang:cached_tokens_total"),
                "prompt tokens served from the radix cache"),
        Mapping(c.TOKENS, (IN, OUT), lambda x: f"{_counter(IN)(x)}\n+\n{_counter(OUT)(x)}"),
        Mapping(c.REQUESTS_OFFERED, ("sglang:num_requests_total", "sglang:num_running_reqs", "sglang:num_queue_reqs"),
                lambda x: f"{_counter('sglang:num_requests_total')(x)}\n+\n"
                          f"{q.held_change(('sglang:num_running_reqs', 'sglang:num_queue_reqs'), x.sel, x.w, ON, collapse=TP)}",
                "arrivals: finished requests (any outcome) + deriv(running + queued)"),
        Mapping(c.QUEUE_WAIT_P95, ("sglang:queue_time_seconds",),
                lambda x: q.quantile(0.95, ("sglang:queue_time_seconds",), x.sel, x.w, ON)),
        Mapping(c.QUEUE_WAIT_MEAN, ("sglang:queue_time_seconds_sum", "sglang:queue_time_seconds_count"),
                lambda x: q.mean(("sglang:queue_time_seconds_sum",), ("sglang:queue_time_seconds_count",), x.sel, x.w, ON)),
        Mapping(c.TTFT_P50, ("sglang:time_to_first_token_seconds",),
                lambda x: q.quantile(0.5, ("sglang:time_to_first_token_seconds",), x.sel, x.w, ON)),
        Mapping(c.TTFT_P95, ("sglang:time_to_first_token_seconds",),
                lambda x: q.quantile(0.95, ("sglang:time_to_first_token_seconds",), x.sel, x.w, ON)),
        Mapping(c.ITL_P95, ("sglang:inter_token_latency_seconds",),
                lambda x: q.quantile(0.95, ("sglang:inter_token_latency_seconds",), x.sel, x.w, ON)),
        Mapping(c.E2E_P95, ("sglang:e2e_request_latency_seconds",),
                lambda x: q.quantile(0.95, ("sglang:e2e_request_latency_seconds",), x.sel, x.w, ON)),
        Mapping(c.E2E_MEAN, ("sglang:e2e_request_latency_seconds_sum", "sglang:e2e_request_latency_seconds_count"),
                lambda x: q.mean(("sglang:e2e_request_latency_seconds_sum",), ("sglang:e2e_request_latency_seconds_count",),
                                 x.sel, x.w, ON)),
        Mapping(c.REQUESTS_RUNNING, ("sglang:num_running_reqs",), _gauge("sglang:num_running_reqs")),
        Mapping(c.REQUESTS_WAITING, ("sglang:num_queue_reqs",), _gauge("sglang:num_queue_reqs")),
        Mapping(c.ENGINE_BUSY, ("sglang:num_queue_reqs", "sglang:token_usage"),
                lambda x: q.busy_from_queue(_gauge("sglang:num_queue_reqs")(x), f"clamp_max({_gauge('sglang:token_usage', 'avg')(x)}, 1)"),
                "1 while requests queue, else the KV token pool in use"),
        Mapping(c.KV_CACHE_USAGE, ("sglang:token_usage",), _gauge("sglang:token_usage", "avg"), "mean over engines"),
        Mapping(c.PREFIX_CACHE_HIT, ("sglang:cache_hit_rate",), _gauge("sglang:cache_hit_rate", "avg"), "mean over engines"),
    ),
    lacks="no outcome split (num_requests_total counts every finished request), no preemption counter "
    "(num_retracted_reqs is a gauge)",
    series_labels=("model_name", "tp_rank"),
    quirks=("tp_rank duplicates folded with max without(tp_rank)", "plain '#' comment lines in the exposition are ignored by Prometheus"),
)
