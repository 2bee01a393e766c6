"""vLLM's OpenAI-compatible server (``vllm:`` metrics), also re-exported by Ray (``ray_vllm:``).

Metric names and versions, read from vllm-project/vllm ``vllm/engine/metrics.py`` (V0
engine), ``vllm/v1/metrics/loggers.py`` (V1 engine) and ``docs/usage/metrics.md``:

- both engines: ``num_requests_running``, ``num_requests_waiting`` (gauges),
  ``prompt_tokens_total``, ``generation_tokens_total``, ``num_preemptions_total``,
  ``request_success_total{finished_reason=stop|length|abort}`` (counters),
  ``time_to_first_token_seconds``, ``e2e_request_latency_seconds``,
  ``request_queue_time_seconds`` and ``iteration_tokens_total`` (histograms; the last
  is a histogram whose name ends in ``_total``: its ``_count`` is engine steps);
- renamed by V1 (vLLM 0.10/0.11; both spellings are published during the deprecation
  window, the old ones only with ``--show-hidden-metrics-for-version``):
  ``gpu_cache_usage_perc`` -> ``kv_cache_usage_perc`` and
  ``time_per_output_token_seconds`` -> ``inter_token_latency_seconds``;
- V0's ``gpu_prefix_cache_hit_rate`` gauge (``-1`` means "no lookups yet") became V1's
  ``prefix_cache_queries_total`` / ``prefix_cache_hits_total`` counters (tokens).

- V1 engine of vLLM 0.32 (read from a live server's ``/metrics``,
  ``../shared/fixtures/vllm/vllm-0.32-cpu-live.txt``): ``finished_reason`` of
  ``request_success_total`` is one of ``stop``, ``length``, ``repetition`` (a repetition
  detector ended the output: a finished answer), ``abort``, ``error``;
  ``admission_rejections_total{reason=max_num_queued_reqs|max_num_queued_tokens}`` (requests
  refused at the front door, labelled ``model_name`` but no ``engine``);
  ``num_requests_waiting_by_reason{reason=capacity|deferred}`` (the split of
  ``num_requests_waiting``: ``capacity`` waits for KV blocks or a batch slot, ``deferred``
  for something else, e.g. a KV transfer); ``prompt_tokens_cached_total`` (prompt tokens
  served from a cache, also ``..._by_source``) beside ``prompt_tokens_by_source_total``;
  ``estimated_flops_per_gpu_total`` (the engine's FLOP estimate, 0 where it does not
  estimate, e.g. the CPU build); ``request_prefill_time_seconds`` and
  ``request_decode_time_seconds`` histograms.

Under Ray Serve LLM (Ray 2.4x with vLLM) the same names carry a ``ray_vllm:`` prefix and
Ray's ``Component``/``NodeAddress``/``WorkerId`` labels.

A target (instance, job, model_name) that publishes several spellings of one series is
read by the first of: new name, ``ray_vllm:`` new name, old name, ``ray_vllm:`` old name
(:func:`~obsctl.rules.sources.promql.first_of`), so the deprecation window never
double counts and an old server still counts.
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Ctx, Mapping, Source

#: One replica: the scrape target and the model it serves.
ON = ("instance", "job", "model_name")
PREFIXES = ("vllm:", "ray_vllm:")


def names(*bases: str) -> tuple[str, ...]:
    """Every spelling, in preference order: each base (newest first) under each prefix."""
    return tuple(f"{p}{b}" for b in bases for p in PREFIXES)


#: ``finished_reason`` values of a request that produced its answer.
SUCCESS_REASONS = ("stop", "length", "repetition")
REJECTIONS = names("admission_rejections_total")


def _requests(ctx: Ctx) -> str:
    rate = q.first_of(q.rates(names("request_success_total"), ctx.sel, ctx.w), ON)
    # stop/length/repetition: an answer; abort (the client went away or the server dropped
    # it), error and any other value: no answer.
    labelled = q.relabel_outcome(f"({rate})", "finished_reason", [("success", "|".join(SUCCESS_REASONS))], "error")
    rejected = q.relabel_outcome(f"({q.first_of(q.rates(REJECTIONS, ctx.sel, ctx.w), ON)})", "", [], "rejected")
    return q.outcome_sum([f"sum by (outcome) ({labelled})", f"sum by (outcome) ({rejected})"])


def _offered(ctx: Ctx) -> str:
    """Arrivals: finished + refused at admission + the change of the requests in the engine
    (running + waiting; ``deriv``, per second) over the window."""
    finished = q.counter_sum(names("request_success_total"), ctx.sel, ctx.w, ON)
    refused = q.counter_sum(REJECTIONS, ctx.sel, ctx.w, ON)
    inside = [f"deriv({q.vec(n, ctx.sel)}[{ctx.w}])" for n in names("num_requests_running", "num_requests_waiting")]
    held = f"(sum(\n{q.first_of(inside[:2], ON)}\n) or vector(0)) + (sum(\n{q.first_of(inside[2:], ON)}\n) or vector(0))"
    return f"{q.plus_optional(finished, refused)}\n+\n{held}"


def _engine_busy(ctx: Ctx) -> str:
    """1 while requests wait for the engine's capacity (vLLM queues a request only when the
    scheduler cannot fit it: no KV blocks or batch slot), else the mean KV-cache usage.
    Waiting for another reason (``deferred``) does not make the engine busy."""
    capacity = q.gauge(names("num_requests_waiting_by_reason"), ctx.sel, ON, extra='reason="capacity"')
    waiting = q.gauge(names("num_requests_waiting"), ctx.sel, ON)
    kv = q.gauge(names("kv_cache_usage_perc", "gpu_cache_usage_perc"), ctx.sel, ON, agg="avg")
    return q.busy_from_queue(f"({capacity}) or ({waiting} unless {capacity})", f"clamp_max({kv}, 1)")


def _prefix_hit(ctx: Ctx) -> str:
    hits = q.counter_sum(names("prefix_cache_hits_total"), ctx.sel, ctx.w, ON)
    queries = q.counter_sum(names("prefix_cache_queries_total"), ctx.sel, ctx.w, ON)
    old = q.gauge(names("gpu_prefix_cache_hit_rate"), ctx.sel, ON, agg="avg")
    return f"(({hits}\n/\n{queries}) >= 0)\nor\n{old}"  # no lookups in the window: NaN, dropped


TOKENS_IN = names("prompt_tokens_total")
TOKENS_OUT = names("generation_tokens_total")

SOURCE = Source(
    name="vllm",
    title="vLLM",
    versions="V0 engine (vllm/engine/metrics.py, 0.4-0.9) and V1 engine (vllm/v1/metrics/loggers.py, 0.8+, "
    "live-checked on 0.32); "
    "Ray re-export with the ray_vllm: prefix (Ray 2.4x)",
    mappings=(
        Mapping(c.INPUT_TOKENS, TOKENS_IN, lambda x: q.counter_sum(TOKENS_IN, x.sel, x.w, ON)),
        Mapping(c.OUTPUT_TOKENS, TOKENS_OUT, lambda x: q.counter_sum(TOKENS_OUT, x.sel, x.w, ON)),
        Mapping(c.TOKENS, TOKENS_IN + TOKENS_OUT,
                lambda x: f"{q.counter_sum(TOKENS_IN, x.sel, x.w, ON)}\n+\n{q.counter_sum(TOKENS_OUT, x.sel, x.w, ON)}",
                "prompt + generation tokens"),
        Mapping(c.CACHED_INPUT_TOKENS, names("prompt_tokens_cached_total"),
                lambda x: q.counter_sum(names("prompt_tokens_cached_total"), x.sel, x.w, ON),
                "prompt tokens served from a cache (a part of the input tokens)"),
        Mapping(c.REQUESTS, names("request_success_total") + REJECTIONS, _requests,
                "finished_reason stop|length|repetition -> success, abort, error or other -> error; "
                "admission_rejections_total -> rejected",
                outcomes=("success", "error", "rejected")),
        Mapping(c.REQUESTS_OFFERED, names("request_success_total", "admission_rejections_total", "num_requests_running",
                                          "num_requests_waiting"), _offered,
                "finished + refused at admission + deriv(running + waiting): arrivals"),
        Mapping(c.STEPS, names("iteration_tokens_total_count"),
                lambda x: q.counter_sum(names("iteration_tokens_total_count"), x.sel, x.w, ON), "engine steps"),
        Mapping(c.QUEUE_WAIT_P95, names("request_queue_time_seconds"),
                lambda x: q.quantile(0.95, names("request_queue_time_seconds"), x.sel, x.w, ON)),
        Mapping(c.QUEUE_WAIT_MEAN, names("request_queue_time_seconds_sum", "request_queue_time_seconds_count"),
                lambda x: q.mean(names("request_queue_time_seconds_sum"), names("request_queue_time_seconds_count"), x.sel, x.w, ON)),
        Mapping(c.TTFT_P50, names("time_to_first_token_seconds"),
                lambda x: q.quantile(0.5, names("time_to_first_token_seconds"), x.sel, x.w, ON)),
        Mapping(c.TTFT_P95, names("time_to_first_token_seconds"),
                lambda x: q.quantile(0.95, names("time_to_first_token_seconds"), x.sel, x.w, ON)),
        Mapping(c.ITL_P95, names("inter_token_latency_seconds", "time_per_output_token_seconds"),
                lambda x: q.quantile(0.95, names("inter_token_latency_seconds", "time_per_output_token_seconds"), x.sel, x.w, ON),
                "new name preferred per replica, old name as fallback"),
        Mapping(c.E2E_P95, names("e2e_request_latency_seconds"),
                lambda x: q.quantile(0.95, names("e2e_request_latency_seconds"), x.sel, x.w, ON)),
        Mapping(c.E2E_MEAN, names("e2e_request_latency_seconds_sum", "e2e_request_latency_seconds_count"),
                lambda x: q.mean(names("e2e_request_latency_seconds_sum"), names("e2e_request_latency_seconds_count"), x.sel, x.w, ON)),
        Mapping(c.PREFILL_P95, names("request_prefill_time_seconds"),
                lambda x: q.quantile(0.95, names("request_prefill_time_seconds"), x.sel, x.w, ON)),
        Mapping(c.DECODE_P95, names("request_decode_time_seconds"),
                lambda x: q.quantile(0.95, names("request_decode_time_seconds"), x.sel, x.w, ON)),
        Mapping(c.REQUESTS_RUNNING, names("num_requests_running"), lambda x: q.gauge(names("num_requests_running"), x.sel, ON)),
        Mapping(c.REQUESTS_WAITING, names("num_requests_waiting"), lambda x: q.gauge(names("num_requests_waiting"), x.sel, ON)),
        Mapping(c.KV_CACHE_USAGE, names("kv_cache_usage_perc", "gpu_cache_usage_perc"),
                lambda x: q.gauge(names("kv_cache_usage_perc", "gpu_cache_usage_perc"), x.sel, ON, agg="avg"),
                "mean over replicas; new name preferred per replica"),
        Mapping(c.PREFIX_CACHE_HIT, names("prefix_cache_hits_total", "prefix_cache_queries_total", "gpu_prefix_cache_hit_rate"),
                _prefix_hit, "V1: hit tokens / queried tokens; else V0's gauge, -1 (no lookups) dropped"),
        Mapping(c.PREEMPTIONS, names("num_preemptions_total"), lambda x: q.counter_sum(names("num_preemptions_total"), x.sel, x.w, ON)),
        Mapping(c.ENGINE_BUSY, names("num_requests_waiting_by_reason", "num_requests_waiting", "kv_cache_usage_perc",
                                     "gpu_cache_usage_perc"), _engine_busy,
                "1 while requests wait for capacity (waiting_by_reason capacity, else all waiting), else KV-cache usage"),
        Mapping(c.ENGINE_FLOPS_PER_GPU, names("estimated_flops_per_gpu_total"),
                lambda x: f"avg(\n{q.first_of(q.rates(names('estimated_flops_per_gpu_total'), x.sel, x.w), ON)}\n) > 0",
                "mean over engines; 0 (no estimate, e.g. the CPU build) dropped"),
    ),
    lacks="no training series; rejections only from 0.3x (admission_rejections_total), cached prompt tokens, "
    "prefill/decode times and FLOP estimates only from the V1 engine",
    series_labels=("model_name", "engine", "Component", "NodeAddress", "SessionName", "Version", "WorkerId"),
    quirks=(
        ("gpu_cache_usage_perc -> kv_cache_usage_perc and time_per_output_token_seconds -> inter_token_latency_seconds: "
         "first spelling per replica, never both"),
        "ray_vllm: prefix read as a further spelling",
        "gpu_prefix_cache_hit_rate -1 (no data) dropped",
        "iteration_tokens_total is a histogram: only its _count is read",
        "_created series never matched (exact names only)",
        "finished_reason repetition is a success (the answer ended on a repetition detector)",
        "admission_rejections_total has no engine label: summed per (instance, job, model_name) like the rest",
    ),
)
