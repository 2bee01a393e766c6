"""obsctl's own workload SDK (:mod:`obsctl.exporters.sdk`), the default source.

Names are the SDK's (this repository): ``obsctl_tokens_total``,
``obsctl_input_tokens_total``, ``obsctl_output_tokens_total``, ``obsctl_samples_total``,
``obsctl_steps_total``, ``obsctl_requests_total{outcome}`` (success | error | rejected),
``obsctl_request_duration_seconds``, ``obsctl_queue_wait_seconds`` and
``obsctl_step_duration_seconds`` (histograms), ``obsctl_queue_depth_requests`` and
``obsctl_requests_running`` (gauges). The SDK's outcome label already is the canonical one.
"""

from __future__ import annotations

from obsctl.rules import canonical as c
from obsctl.rules.sources import promql as q
from obsctl.rules.sources.base import Mapping, Source

ON = ("instance", "job")


def _rate(name: str):
    return lambda x: q.counter_sum((name,), x.sel, x.w, ON)


SOURCE = Source(
    name="sdk",
    title="obsctl SDK",
    versions="obsctl.exporters.sdk (this repository)",
    mappings=(
        Mapping(c.INPUT_TOKENS, ("obsctl_input_tokens_total",), _rate("obsctl_input_tokens_total")),
        Mapping(c.OUTPUT_TOKENS, ("obsctl_output_tokens_total",), _rate("obsctl_output_tokens_total")),
        Mapping(c.TOKENS, ("obsctl_tokens_total",), _rate("obsctl_tokens_total")),
        Mapping(c.REQUESTS, ("obsctl_requests_total",),
                lambda x: f"sum by (outcome) (rate({q.vec('obsctl_requests_total', x.sel)}[{x.w}]))",
                outcomes=("success", "error", "rejected")),
        Mapping(c.REQUESTS_OFFERED, ("obsctl_requests_total",), _rate("obsctl_requests_total"), "every outcome"),
        Mapping(c.SAMPLES, ("obsctl_samples_total",), _rate("obsctl_samples_total")),
        Mapping(c.STEPS, ("obsctl_steps_total",), _rate("obsctl_steps_total")),
        Mapping(c.STEP_TIME, ("obsctl_step_duration_seconds_sum", "obsctl_step_duration_seconds_count"),
                lambda x: q.mean(("obsctl_step_duration_seconds_sum",), ("obsctl_step_duration_seconds_count",), x.sel, x.w, ON)),
        Mapping(c.QUEUE_WAIT_P95, ("obsctl_queue_wait_seconds",),
                lambda x: q.quantile(0.95, ("obsctl_queue_wait_seconds",), x.sel, x.w, ON)),
        Mapping(c.QUEUE_WAIT_MEAN, ("obsctl_queue_wait_seconds_sum", "obsctl_queue_wait_seconds_count"),
                lambda x: q.mean(("obsctl_queue_wait_seconds_sum",), ("obsctl_queue_wait_seconds_count",), x.sel, x.w, ON)),
        Mapping(c.E2E_P95, ("obsctl_request_duration_seconds",),
                lambda x: q.quantile(0.95, ("obsctl_request_duration_seconds",), x.sel, x.w, ON)),
        Mapping(c.E2E_MEAN, ("obsctl_request_duration_seconds_sum", "obsctl_request_duration_seconds_count"),
                lambda x: q.mean(("obsctl_request_duration_seconds_sum",), ("obsctl_request_duration_seconds_count",),
                                 x.sel, x.w, ON)),
        Mapping(c.REQUESTS_RUNNING, ("obsctl_requests_running",), lambda x: q.gauge(("obsctl_requests_running",), x.sel, ON)),
        Mapping(c.REQUESTS_WAITING, ("obsctl_queue_depth_requests",),
                lambda x: q.gauge(("obsctl_queue_depth_requests",), x.sel, ON)),
    ),
    lacks="no time to first token, inter-token latency, KV cache or preemptions (the SDK does not see the engine)",
)
