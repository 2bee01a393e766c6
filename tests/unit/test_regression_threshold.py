"""The regression alert's threshold and floors (:mod:`obsctl.rules.regression`), known answers
computed here from the definition: the farthest of the baseline's p5 (p95), its tolerance and
the signal's absolute floor."""

from __future__ import annotations

import math

import pytest

from obsctl.records import Statistics
from obsctl.rules.regression import alert_floor, regression_threshold
from obsctl.spec import Signal


def _sig(unit: str, direction: str = "lower_is_better", category: str = "saturation", **extra) -> Signal:
    return Signal(name="s", category=category, query="sum(x{$selector})", unit=unit, direction=direction, **extra)


def _stats(mean: float, p5: float, p95: float) -> Statistics:
    return Statistics(sample_count=10, mean=mean, median=mean, p5=p5, p95=p95, stddev=0.0, batch_means=[mean])


@pytest.mark.parametrize(("unit", "direction", "category", "floor"), [
    ("ratio", "lower_is_better", "saturation", 0.02),  # KV cache usage
    ("ratio", "higher_is_better", "utilization", 0.02),  # GPU utilization
    ("ratio", "lower_is_better", "quality", 0.005),  # an error ratio: half a percentage point
    ("%", "lower_is_better", "saturation", 2.0),
    ("seconds", "lower_is_better", "quality", 0.005),
    ("ms", "lower_is_better", "quality", 5.0),
    ("requests/s", "lower_is_better", "quality", 0.01),  # errors per second
    ("requests/s", "higher_is_better", "throughput", 0.0),  # throughput: none
    ("tokens/s", "higher_is_better", "throughput", 0.0),
    ("USD/1M tokens", "lower_is_better", "cost", 0.0),
])
def test_default_floor_by_unit_kind(unit, direction, category, floor):
    assert alert_floor(_sig(unit, direction, category)) == floor


def test_spec_floor_wins():
    assert alert_floor(_sig("ratio", alert_floor=0.1)) == 0.1
    assert alert_floor(_sig("tokens/s", "higher_is_better", "throughput", alert_floor=0)) == 0.0


def test_kv_cache_blip_is_under_the_floor():
    # 0.1 % -> 0.2 % is +100 %, past p95 and the tolerance, but 0.001 in absolute terms.
    t = regression_threshold(_sig("ratio", tolerance_ratio=0.1), _stats(0.001, 0.0008, 0.0012))
    assert t == pytest.approx(0.021) and 0.002 < t


def test_spread_wins_on_a_noisy_signal_and_tolerance_on_a_steady_one():
    tps = _sig("tokens/s", "higher_is_better", "throughput", tolerance_ratio=0.1)
    assert regression_threshold(tps, _stats(100.0, 80.0, 115.0)) == 80.0  # -12 % sits inside the spread
    assert regression_threshold(tps, _stats(100.0, 99.0, 101.0)) == pytest.approx(90.0)
    cost = _sig("USD/1M tokens", "lower_is_better", "cost", tolerance_ratio=0.1)
    assert regression_threshold(cost, _stats(2.0, 1.7, 2.5)) == 2.5
    assert regression_threshold(cost, _stats(2.0, 1.99, 2.01)) == pytest.approx(2.2)


def test_a_missing_quantile_leaves_the_tolerance():
    tps = _sig("tokens/s", "higher_is_better", "throughput", tolerance_ratio=0.1)
    assert regression_threshold(tps, _stats(100.0, math.nan, math.nan)) == pytest.approx(90.0)
