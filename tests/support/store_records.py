"""Store records as ``snapshot-baseline`` and ``initiative start`` write them, for the
store tests."""

from __future__ import annotations

import datetime as dt

from obsctl.baselining.store import Store
from obsctl.records import (
    Baseline,
    Initiative,
    Population,
    Statistics,
    Window,
)

T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


def make_baseline(cls="embed-online", sig="tokens_per_second", mean=2400.0, created=T0, bid=None) -> Baseline:
    return Baseline(
        id=bid or f"{cls}.{sig}.{created.strftime('%Y%m%dT%H%M%SZ')}",
        workload_class=cls, signal=sig, unit="tokens/s", direction="higher_is_better",
        query=f'sum(rate(obsctl_tokens_total{{workload="{cls}"}}[1m]))',
        window=Window(start=created - dt.timedelta(hours=1), end=created, step_seconds=15),
        population=Population(series_count=1, label_sets=[{"__name__": "obsctl_tokens_total", "workload": cls}]),
        stats=Statistics(sample_count=4, mean=mean, median=mean, p5=mean - 1, p95=mean + 1, stddev=1.0, batch_means=[mean - 1, mean + 1]),
        created_at=created, samples=[(created.timestamp() - 15, mean - 1), (created.timestamp(), mean + 1)],
    )


def make_initiative(store: Store, cls="embed-online", iid="batch-size-tuning-20260105") -> Initiative:
    return Initiative(id=iid, name="batch size tuning", lever="batch-size", workload_class=cls,
                      primary_signal="tokens_per_second", baseline_id="x", started_at=T0)
