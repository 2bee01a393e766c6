"""A store with a history of initiatives for the ledger tests, built through the real
promote and close paths.

Class ``embed-online``, signal ``tokens_per_second`` (higher is better), times from
:data:`T0` (2026-01-05 12:00 UTC):

======================  ==========================  ========================  ==========
initiative              window (verification)       verdict, change, CI       outcome
======================  ==========================  ========================  ==========
batch size 32           T0+1h .. T0+2h, mean 1500   IMPROVED +50 % [40, 60]   promoted
scheduler tweak         T0+3h .. T0+4h, mean 1800   IMPROVED +20 % [10, 30]   promoted
int8 weights            T0+5h .. T0+6h, mean 1782   NO_CHANGE -1 % [-3, +1]   closed
======================  ==========================  ========================  ==========

The origin baseline (a snapshot, T0-1h .. T0) has mean 1000, so the staircase is 1000 ->
1500 -> 1800: steps +50 % and +20 %, cumulative +80 %; the verified changes compound to
1.5 x 1.2 - 1 = +80 %.
"""

from __future__ import annotations

import datetime as dt

from obsctl.baselining.initiative import close_initiative
from obsctl.baselining.promote import promote
from obsctl.baselining.store import Store
from obsctl.records import Initiative, Statistics, VerificationResult, Window
from support.store_records import T0, make_baseline

CLASS, SIGNAL = "embed-online", "tokens_per_second"
HOUR = dt.timedelta(hours=1)
#: (id, name, lever, start offset in hours, window mean, change, ci low, ci high, verdict)
PLAN = [
    ("batch-size-32", "batch size 32", "batch-size", 1, 1500.0, 0.5, 0.4, 0.6, "IMPROVED"),
    ("scheduler-tweak", "scheduler tweak", "scheduling", 3, 1800.0, 0.2, 0.1, 0.3, "IMPROVED"),
    ("int8-weights", "int8 weights", "quantization", 5, 1782.0, -0.01, -0.03, 0.01, "NO_CHANGE"),
]
LESSONS = {"batch-size-32": "Batching | *amortizes* <b>the</b> [tokenizer](x)", "int8-weights": "int8 gains nothing on CPU"}
EFFORT = {"batch-size-32": "2 engineer-days"}


def _stats(mean: float) -> Statistics:
    return Statistics(sample_count=240, mean=mean, median=mean, p5=mean, p95=mean, stddev=1.0, batch_means=[mean] * 4)


def build(store: Store, spec) -> dict[str, Initiative]:
    """Fill ``store`` with the table above; returns the initiatives as stored."""
    store.save_baseline(make_baseline(CLASS, SIGNAL, 1000.0, T0))
    out = {}
    for iid, name, lever, start_h, mean, change, low, high, verdict in PLAN:
        base = store.current_baseline(CLASS, SIGNAL)
        start = T0 + start_h * HOUR
        result = VerificationResult(
            verdict=verdict, primary_verdict=verdict, baseline_id=base.id, signal=SIGNAL,
            window=Window(start=start, end=start + HOUR, step_seconds=15),
            baseline_mean=base.stats.mean, window_mean=mean, change_ratio=change, ci_low=low, ci_high=high,
            confidence=0.95, window_stats=_stats(mean), population=base.population, query=base.query,
            verified_at=start + HOUR, reason="test")
        store.add_initiative(Initiative(id=iid, name=name, lever=lever, workload_class=CLASS, primary_signal=SIGNAL,
                                        expected_impact_ratio=0.3, baseline_id=base.id, started_at=start,
                                        status="verified", verifications=[result], effort=EFFORT.get(iid, "")))
        if verdict == "IMPROVED":
            out[iid] = promote(spec, store, iid, lesson=LESSONS.get(iid, ""))[0]
        else:
            out[iid] = close_initiative(store, iid, "no gain", lesson=LESSONS.get(iid, ""), effort="1 engineer-day")
    return out
