"""The canonical per-class series: one set whichever server produced the raw metrics.

A workload class names its ``source`` (vllm, tgi, triton, sglang, llamacpp, ray-serve,
sdk, ...); the source's module in :mod:`obsctl.rules.sources` emits recording rules that
fill these series from that server's own metric names. Rules, verdicts, the saturation
state and dashboards read only the names below. Every series carries the
``workload_class`` label; ``CLASS_REQUESTS`` also carries ``outcome``.

Names follow Prometheus' ``level:metric:operations`` convention; rates are per second
over 5 minutes, quantiles come from ``histogram_quantile`` over summed bucket rates
(``:p95_rate5m``), ratios are ratios of sums (``:ratio``). A series is absent when the
source does not provide its input (never 0 as a stand-in).
"""

from __future__ import annotations

# --- throughput (work per second) ---------------------------------------------------
#: Prompt (input) tokens per second.
INPUT_TOKENS = "workload_class:obsctl_input_tokens:rate5m"
#: Generated (output) tokens per second.
OUTPUT_TOKENS = "workload_class:obsctl_output_tokens:rate5m"
#: Prompt tokens per second served from a cache (prefix cache, offloaded KV) instead of
#: computed; a part of ``INPUT_TOKENS`` (filled only by servers that count them).
CACHED_INPUT_TOKENS = "workload_class:obsctl_cached_input_tokens:rate5m"
#: Input + output tokens per second (sources that count only a total fill this alone).
TOKENS = "workload_class:obsctl_tokens:rate5m"
#: Finished requests per second by ``outcome`` (success | error | rejected).
REQUESTS = "workload_class:obsctl_requests:rate5m"
#: Offered load: arrivals per second including rejected and aborted requests (demand).
REQUESTS_OFFERED = "workload_class:obsctl_requests_offered:rate5m"
#: Training / batch samples per second.
SAMPLES = "workload_class:obsctl_samples:rate5m"
#: Optimizer / engine steps per second.
STEPS = "workload_class:obsctl_steps:rate5m"

# --- latency -------------------------------------------------------------------------
QUEUE_WAIT_P95 = "workload_class:obsctl_queue_wait_seconds:p95_rate5m"
TTFT_P50 = "workload_class:obsctl_time_to_first_token_seconds:p50_rate5m"
TTFT_P95 = "workload_class:obsctl_time_to_first_token_seconds:p95_rate5m"
ITL_P95 = "workload_class:obsctl_inter_token_latency_seconds:p95_rate5m"
E2E_P95 = "workload_class:obsctl_request_duration_seconds:p95_rate5m"
#: Mean end-to-end request latency, seconds (sum of durations / number of requests).
E2E_MEAN = "workload_class:obsctl_request_duration_seconds:mean_rate5m"
#: Mean queue wait, seconds (sum of waits / number of waits).
QUEUE_WAIT_MEAN = "workload_class:obsctl_queue_wait_seconds:mean_rate5m"
#: Prefill (prompt processing) time per request, p95, seconds.
PREFILL_P95 = "workload_class:obsctl_prefill_duration_seconds:p95_rate5m"
#: Decode (generation) time per request, p95, seconds.
DECODE_P95 = "workload_class:obsctl_decode_duration_seconds:p95_rate5m"
#: Mean training step time, seconds (sum of step durations / number of steps).
STEP_TIME = "workload_class:obsctl_step_duration_seconds:mean_rate5m"

# --- saturation ----------------------------------------------------------------------
#: Requests being served now (sum over replicas).
REQUESTS_RUNNING = "workload_class:obsctl_requests_running:sum"
#: Requests (or jobs, workloads) waiting now: the class's queue depth.
REQUESTS_WAITING = "workload_class:obsctl_requests_waiting:sum"
#: KV-cache usage, 0-1 (mean over replicas: servers publish a ratio without its totals).
KV_CACHE_USAGE = "workload_class:obsctl_kv_cache_usage:ratio"
#: Prefix-cache hits over prefix-cache lookups, 0-1 (tokens where the server counts both).
PREFIX_CACHE_HIT = "workload_class:obsctl_prefix_cache_hits:ratio"
#: Preempted (swapped or recomputed) requests per second.
PREEMPTIONS = "workload_class:obsctl_preemptions:rate5m"
#: Accelerator busy seconds per second (sum of the attributed GPUs' utilization).
GPU_BUSY = "workload_class:obsctl_gpu_busy_seconds:rate5m"
#: Accelerators attributed to the class now.
GPUS_ALLOCATED = "workload_class:obsctl_gpus_allocated:count"
#: CPU busy seconds per second of the class's processes (stands in for GPU_BUSY on CPU-only nodes).
CPU_BUSY = "workload_class:obsctl_cpu_busy_seconds:rate5m"
#: Busy fraction 0-1 as the serving engine itself reports it (:mod:`obsctl.rules.sources`):
#: 1 while requests wait for the engine's capacity, else the share of its KV cache in use.
ENGINE_BUSY = "workload_class:obsctl_engine_busy:ratio"
#: The saturation state: one series per ``state`` label (saturated | constrained |
#: idle | healthy), 1 for the current state and 0 for the others (kube-state-metrics style).
SATURATION_STATE = "workload_class:obsctl_saturation_state:value"

# --- training efficiency --------------------------------------------------------------
#: FLOP/s per GPU as the serving engine estimates it (vLLM's ``estimated_flops_per_gpu_total``),
#: mean over the class's engines; read by the MFU rules before the spec's flops-per-token.
ENGINE_FLOPS_PER_GPU = "workload_class:obsctl_engine_flops_per_gpu:rate5m"
#: Model FLOPs utilization, 0-1: achieved model FLOP/s over the GPUs' dense peak.
MFU = "workload_class:obsctl_model_flops_utilization:ratio"

# --- cost and waste --------------------------------------------------------------------
COST_USD_PER_HOUR = "workload_class:obsctl_cost_usd_per_hour:sum"
COST_PER_MILLION_INPUT_TOKENS = "workload_class:obsctl_cost_usd_per_million_input_tokens:ratio"
COST_PER_MILLION_OUTPUT_TOKENS = "workload_class:obsctl_cost_usd_per_million_output_tokens:ratio"
COST_PER_MILLION_TOKENS = "workload_class:obsctl_cost_usd_per_million_tokens:ratio"
COST_PER_REQUEST = "workload_class:obsctl_cost_usd_per_request:ratio"
COST_PER_SAMPLE = "workload_class:obsctl_cost_usd_per_sample:ratio"
ENERGY_COST_USD_PER_HOUR = "workload_class:obsctl_energy_cost_usd_per_hour:sum"
#: USD per hour of accelerators attributed to the class but below the utilization threshold.
IDLE_WASTE_USD_PER_HOUR = "workload_class:obsctl_idle_waste_usd_per_hour:sum"
#: USD per hour of accelerators attributed to no class (cluster level, no workload_class).
UNATTRIBUTED_WASTE_USD_PER_HOUR = "cluster:obsctl_unattributed_waste_usd_per_hour:sum"

# --- efficiency (work per resource) ----------------------------------------------------
TOKENS_PER_GPU_BUSY_SECOND = "workload_class:obsctl_tokens_per_gpu_busy_second:ratio"
TOKENS_PER_GPU_ALLOCATED_SECOND = "workload_class:obsctl_tokens_per_gpu_allocated_second:ratio"
TOKENS_PER_JOULE = "workload_class:obsctl_tokens_per_joule:ratio"
SAMPLES_PER_GPU_ALLOCATED_SECOND = "workload_class:obsctl_samples_per_gpu_allocated_second:ratio"

# --- saturation and cost inputs (filled by rules/saturation.py and rules/cost.py) -----
#: CPU cores the class's processes may use (saturation.cpu_cores, else one per process series).
CPUS_ALLOCATED = "workload_class:obsctl_cpus_allocated:count"
#: Busy fraction 0-1 the saturation state reads: GPU_BUSY / GPUS_ALLOCATED, else ENGINE_BUSY,
#: else CPU_BUSY / CPUS_ALLOCATED.
BUSY_RATIO = "workload_class:obsctl_busy:ratio"
#: 1 when the class's queue builds (waiting, queue wait p95 or rejections over threshold), else 0.
QUEUE_BUILDING = "workload_class:obsctl_queue_building:bool"
#: Energy rate of the class's GPUs, joules per second (W); a shared GPU is split equally.
GPU_ENERGY = "workload_class:obsctl_gpu_energy_joules:rate5m"
#: USD per hour of each training run of the class (labels workload_class, run; the class's cost split over its active runs).
RUN_COST_USD_PER_HOUR = "workload_class_run:obsctl_cost_usd_per_hour:sum"


#: Matcher every reader of a canonical series adds: a spec signal may record under the
#: same name (``record: obsctl_tokens:rate5m``); its series carry a ``signal`` label and
#: would otherwise be summed in with the source's (double tokens, half the cost per token).
OWN_SERIES = 'signal=""'


# --- catalogue signals ------------------------------------------------------------------
# A spec signal may say ``catalogue: <key>`` instead of a query: it then reads the
# class's canonical series (``sum(<record>{workload_class="<class>"[,outcome=...],signal=""})``), and
# category, unit and direction default to the values below.
#: key -> (record, extra matcher or "", category, unit, direction)
CATALOGUE_SIGNALS: dict[str, tuple[str, str, str, str, str]] = {
    "input_tokens_per_second": (INPUT_TOKENS, "", "throughput", "tokens/s", "higher_is_better"),
    "output_tokens_per_second": (OUTPUT_TOKENS, "", "throughput", "tokens/s", "higher_is_better"),
    "cached_input_tokens_per_second": (CACHED_INPUT_TOKENS, "", "throughput", "tokens/s", "higher_is_better"),
    "tokens_per_second": (TOKENS, "", "throughput", "tokens/s", "higher_is_better"),
    "requests_per_second": (REQUESTS, 'outcome="success"', "throughput", "requests/s", "higher_is_better"),
    "error_requests_per_second": (REQUESTS, 'outcome="error"', "quality", "requests/s", "lower_is_better"),
    "rejected_requests_per_second": (REQUESTS, 'outcome="rejected"', "saturation", "requests/s", "lower_is_better"),
    "offered_requests_per_second": (REQUESTS_OFFERED, "", "throughput", "requests/s", "higher_is_better"),
    "samples_per_second": (SAMPLES, "", "throughput", "samples/s", "higher_is_better"),
    "steps_per_second": (STEPS, "", "throughput", "steps/s", "higher_is_better"),
    "step_time_seconds": (STEP_TIME, "", "throughput", "seconds", "lower_is_better"),
    "queue_wait_p95_seconds": (QUEUE_WAIT_P95, "", "saturation", "seconds", "lower_is_better"),
    "queue_wait_mean_seconds": (QUEUE_WAIT_MEAN, "", "saturation", "seconds", "lower_is_better"),
    "ttft_p50_seconds": (TTFT_P50, "", "quality", "seconds", "lower_is_better"),
    "ttft_p95_seconds": (TTFT_P95, "", "quality", "seconds", "lower_is_better"),
    "itl_p95_seconds": (ITL_P95, "", "quality", "seconds", "lower_is_better"),
    "e2e_p95_seconds": (E2E_P95, "", "quality", "seconds", "lower_is_better"),
    "e2e_mean_seconds": (E2E_MEAN, "", "quality", "seconds", "lower_is_better"),
    "prefill_p95_seconds": (PREFILL_P95, "", "quality", "seconds", "lower_is_better"),
    "decode_p95_seconds": (DECODE_P95, "", "quality", "seconds", "lower_is_better"),
    "requests_running": (REQUESTS_RUNNING, "", "saturation", "requests", "higher_is_better"),
    "requests_waiting": (REQUESTS_WAITING, "", "saturation", "requests", "lower_is_better"),
    "kv_cache_usage_ratio": (KV_CACHE_USAGE, "", "saturation", "ratio", "lower_is_better"),
    "prefix_cache_hit_ratio": (PREFIX_CACHE_HIT, "", "utilization", "ratio", "higher_is_better"),
    "preemptions_per_second": (PREEMPTIONS, "", "saturation", "preemptions/s", "lower_is_better"),
    # Efficiency and cost per unit of work (rules/cost.py, ratios of sums). Which of them
    # demand alone moves on an unsaturated class: DEMAND_SCALED below.
    "tokens_per_gpu_busy_second": (TOKENS_PER_GPU_BUSY_SECOND, "", "utilization", "tokens/GPU-s", "higher_is_better"),
    "tokens_per_gpu_allocated_second": (TOKENS_PER_GPU_ALLOCATED_SECOND, "", "utilization", "tokens/GPU-s", "higher_is_better"),
    "samples_per_gpu_allocated_second": (SAMPLES_PER_GPU_ALLOCATED_SECOND, "", "utilization", "samples/GPU-s", "higher_is_better"),
    "tokens_per_joule": (TOKENS_PER_JOULE, "", "utilization", "tokens/J", "higher_is_better"),
    "usd_per_million_tokens": (COST_PER_MILLION_TOKENS, "", "cost", "USD/1M tokens", "lower_is_better"),
    "usd_per_million_input_tokens": (COST_PER_MILLION_INPUT_TOKENS, "", "cost", "USD/1M tokens", "lower_is_better"),
    "usd_per_million_output_tokens": (COST_PER_MILLION_OUTPUT_TOKENS, "", "cost", "USD/1M tokens", "lower_is_better"),
    "usd_per_request": (COST_PER_REQUEST, "", "cost", "USD/request", "lower_is_better"),
    "usd_per_sample": (COST_PER_SAMPLE, "", "cost", "USD/sample", "lower_is_better"),
    # Model FLOPs utilization (rules/training.py): only for a class with an ``mfu:`` block.
    "mfu_ratio": (MFU, "", "utilization", "ratio", "higher_is_better"),
}


#: Catalogue signals whose value demand alone moves on a class that is not saturated
#: (the demand-bound rule reads it through :func:`obsctl.baselining.designs.demand.follows_demand`).
#: Each is one of:
#:
#: * a count per wall-clock second (tokens, requests, samples, steps, errors, rejections,
#:   preemptions per second; seconds per step): on a class that serves what arrives, the
#:   arrival rate;
#: * a fixed amount over the work that arrived: the hourly price (cost per token, request,
#:   sample), the allocated accelerators (work per allocated GPU-second, MFU), the power
#:   an accelerator draws whatever it serves (work per joule);
#: * a level that concurrency sets (requests running, KV cache in use: arrivals x latency).
#:
#: Not in it: latencies and queue waits (a queue that did not build stays empty), work per
#: *busy* accelerator-second (the busy time follows the work; a larger batch at higher
#: load still raises it somewhat: a limit docs/verification-designs.md names), the prefix
#: cache hit ratio.
DEMAND_SCALED: frozenset[str] = frozenset({
    "input_tokens_per_second", "output_tokens_per_second", "tokens_per_second", "requests_per_second",
    "error_requests_per_second", "rejected_requests_per_second", "offered_requests_per_second", "samples_per_second",
    "cached_input_tokens_per_second", "usd_per_million_input_tokens",
    "steps_per_second", "step_time_seconds", "requests_running", "kv_cache_usage_ratio", "preemptions_per_second",
    "tokens_per_gpu_allocated_second", "samples_per_gpu_allocated_second", "tokens_per_joule", "usd_per_million_tokens",
    "usd_per_million_output_tokens", "usd_per_request", "usd_per_sample", "mfu_ratio",
})


_TOKENS_ANY = ((TOKENS,), (INPUT_TOKENS, OUTPUT_TOKENS))
#: Derived records (rules/cost.py, rules/training.py) -> the alternative sets of canonical
#: series one of which a class's sources must fill for the record to exist; a catalogue
#: signal over a derived record is offered to a class only then (``obsctl check``).
DERIVED_FROM: dict[str, tuple[tuple[str, ...], ...]] = {
    COST_PER_MILLION_TOKENS: _TOKENS_ANY,
    COST_PER_MILLION_INPUT_TOKENS: ((INPUT_TOKENS, OUTPUT_TOKENS),),
    COST_PER_MILLION_OUTPUT_TOKENS: ((INPUT_TOKENS, OUTPUT_TOKENS),),
    COST_PER_REQUEST: ((REQUESTS,),),
    COST_PER_SAMPLE: ((SAMPLES,),),
    TOKENS_PER_GPU_BUSY_SECOND: _TOKENS_ANY,
    TOKENS_PER_GPU_ALLOCATED_SECOND: _TOKENS_ANY,
    TOKENS_PER_JOULE: _TOKENS_ANY,
    SAMPLES_PER_GPU_ALLOCATED_SECOND: ((SAMPLES,),),
    MFU: _TOKENS_ANY + ((SAMPLES,),),
}


def catalogue_query(key: str) -> str:
    """The PromQL template of catalogue signal ``key`` (``$class`` is filled per class)."""
    record, extra, *_ = CATALOGUE_SIGNALS[key]
    matchers = ",".join(m for m in ('workload_class="$class"', extra, OWN_SERIES) if m)
    return f"sum({record}{{{matchers}}})"
