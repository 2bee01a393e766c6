"""The spec of one SDK-instrumented workload class (``synthetic``) with four signals over
10 s windows and a node price, as the live alert test drives it and the promtool known
answers check its rules; and a Baseline record for it."""

from __future__ import annotations

import datetime as dt

from obsctl.records import Baseline, Population, Statistics, Window

NODE_PRICE_USD_PER_HOUR = 0.72
BASELINE_TOKENS_PER_SECOND = 500.0
TOLERANCE = 0.2
SELECTOR = {"job": "obsctl-workload", "workload": "synthetic"}


def spec_dict(prom_url: str, store: str) -> dict:
    return {
        "prometheus": {"url": prom_url},
        "store": store,
        "workload_classes": [{"name": "synthetic", "kind": "inference", "selector": SELECTOR}],
        "pricing": {"node_hour_usd": NODE_PRICE_USD_PER_HOUR},
        "signals": [
            {"name": "tokens_per_second", "category": "throughput", "record": "obsctl_tokens:rate10s",
             "query": "sum(rate(obsctl_tokens_total{$selector}[10s]))", "unit": "tokens/s",
             "direction": "higher_is_better", "tolerance_ratio": TOLERANCE, "alert_for": "3s"},
            {"name": "usd_per_million_tokens", "category": "cost", "record": "obsctl_cost_usd_per_million_tokens:ratio_rate10s",
             "query": "(sum(obsctl_node_price_usd_per_hour{$node_selector}) / 3600) / sum(rate(obsctl_tokens_total{$selector}[10s])) * 1e6",
             "unit": "USD/1M tokens", "direction": "lower_is_better"},
            {"name": "queue_wait_p95_seconds", "category": "saturation", "record": "obsctl_queue_wait_seconds:p95_rate10s",
             "query": "histogram_quantile(0.95, sum by (le) (rate(obsctl_queue_wait_seconds_bucket{$selector}[10s])))",
             "unit": "seconds", "direction": "lower_is_better"},
            {"name": "request_error_ratio", "category": "quality", "record": "obsctl_requests_error:ratio_rate10s",
             "query": 'sum(rate(obsctl_requests_total{$selector,outcome="error"}[10s])) / sum(rate(obsctl_requests_total{$selector}[10s]))',
             "unit": "ratio", "direction": "lower_is_better"},
        ],
    }


def baseline(signal: str, mean: float, created: dt.datetime) -> Baseline:
    """A baseline of ``mean`` for ``signal`` whose window ends at ``created``."""
    return Baseline(
        id=f"synthetic.{signal}.test", workload_class="synthetic", signal=signal, unit="tokens/s",
        direction="higher_is_better", query="(test)",
        window=Window(start=created - dt.timedelta(hours=1), end=created, step_seconds=15),
        population=Population(series_count=1),
        stats=Statistics(sample_count=240, mean=mean, median=mean, p5=mean, p95=mean, stddev=0.0, batch_means=[mean] * 10),
        created_at=created,
    )
