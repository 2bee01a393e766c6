"""Shared builders for the rules tests: a small spec (with a label value that needs
escaping) and Baseline records, as the store would hold them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from obsctl.records import Baseline, Population, Statistics, Window
from obsctl.spec import Spec, load_spec

#: A selector value with a double quote and a backslash: must be escaped in PromQL.
TRICKY = 'svc "a"\\b'

SPEC = {
    "store": "store",
    "workload_classes": [
        {"name": "svc", "kind": "inference", "selector": {"job": "w", "workload": TRICKY}, "node_selector": {"job": "x"}},
        {"name": "other", "kind": "inference", "selector": {"job": "w", "workload": "other"}, "node_selector": {"job": "x"}},
    ],
    "signals": [
        {"name": "tokens_per_second", "category": "throughput", "record": "obsctl_tokens:rate1m",
         "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))", "unit": "tokens/s",
         "direction": "higher_is_better", "tolerance_ratio": 0.1, "alert_for": "1m"},
        {"name": "usd_per_million_tokens", "category": "cost", "record": "obsctl_cost_usd_per_million_tokens:ratio_rate1m",
         "query": "(sum(obsctl_node_price_usd_per_hour{$node_selector}) / 3600) / sum(rate(obsctl_tokens_total{$selector}[1m])) * 1e6",
         "unit": "USD/1M tokens", "direction": "lower_is_better", "tolerance_ratio": 0.1, "alert_for": "1m"},
    ],
    "targets": [
        {"workload_class": "svc", "signal": "tokens_per_second", "relative": 0.2, "driver": 'Q1 "capacity"', "deadline": "2027-03-31"},
        {"workload_class": "svc", "signal": "usd_per_million_tokens", "absolute": 0.8, "driver": "budget", "deadline": "2027-03-31"},
    ],
}


def write_spec(tmp_path: Path, data: dict | None = None) -> Spec:
    """Write ``data`` (default :data:`SPEC`) as obsctl.yaml in ``tmp_path`` and load it."""
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data or SPEC))
    return load_spec(path)


def baseline(workload_class: str, signal: str, mean: float, created: str = "2026-01-10T12:00:00+00:00") -> Baseline:
    """A Baseline as ``snapshot-baseline`` stores it (window 2026-01-10 10:00-11:00 UTC)."""
    return Baseline(
        id=f"{workload_class}.{signal}.{created[:19].replace(':', '')}",
        workload_class=workload_class, signal=signal, unit="u", direction="higher_is_better", query="q",
        window=Window(start=dt.datetime(2026, 1, 10, 10, tzinfo=dt.UTC),
                      end=dt.datetime(2026, 1, 10, 11, tzinfo=dt.UTC), step_seconds=15),
        population=Population(series_count=3),
        stats=Statistics(sample_count=240, mean=mean, median=mean, p5=mean, p95=mean, stddev=0.0, batch_means=[mean] * 10),
        created_at=dt.datetime.fromisoformat(created),
    )
