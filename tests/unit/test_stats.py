"""Known-answer tests of obsctl.baselining.stats: batch means, summaries, the Fieller
interval of a ratio of means, and the verdict rules. Expected values are computed here
independently (by hand on tiny arrays, or by solving Fieller's quadratic with numpy)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from obsctl.baselining import stats
from obsctl.baselining.stats import ChangeEstimate


def test_batch_means_equal_batches_by_hand():
    assert stats.batch_means([1, 2, 3, 4, 5, 6], 3) == [1.5, 3.5, 5.5]


def test_batch_means_drop_oldest_remainder_and_non_finite():
    # 8 finite values (NaN/Inf dropped) into 3 batches of 2: the 2 oldest are dropped.
    values = [100, float("nan"), 200, 1, 3, float("inf"), 5, 7, 9, 11]
    assert stats.batch_means(values, 3) == [2.0, 6.0, 10.0]


def test_batch_means_too_few_values():
    assert stats.batch_means([1, 2], 3) == []


def test_summarize_known_values():
    values = [float(v) for v in range(1, 21)]  # 1..20
    s = stats.summarize(values, 4)
    assert s.sample_count == 20
    assert s.mean == pytest.approx(10.5)
    assert s.median == pytest.approx(10.5)
    # Type-7 percentile: position (n-1)p = 19*0.05 = 0.95 -> 1 + 0.95 = 1.95; 19*0.95 = 18.05 -> 19.05
    assert s.p5 == pytest.approx(1.95)
    assert s.p95 == pytest.approx(19.05)
    assert s.stddev == pytest.approx(statistics.stdev(values))
    assert s.batch_means == [3.0, 8.0, 13.0, 18.0]


def test_summarize_single_value_and_empty():
    s = stats.summarize([5.0], 1)
    assert (s.mean, s.stddev, s.p5, s.p95) == (5.0, 0.0, 5.0, 5.0)
    with pytest.raises(ValueError):
        stats.summarize([float("nan")], 1)


def _fieller_by_quadratic(x, y, confidence):
    """Independent Fieller: roots of (ybar - r xbar)^2 - t^2 (vy + r^2 vx) = 0."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    xbar, ybar = x.mean(), y.mean()
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    r = ybar / xbar
    dof = (vy + r * r * vx) ** 2 / (vy**2 / (len(y) - 1) + r**4 * vx**2 / (len(x) - 1))
    t = sps.t.ppf(0.5 + confidence / 2, dof)
    # (xbar^2 - t^2 vx) r^2 - 2 xbar ybar r + (ybar^2 - t^2 vy) <= 0
    roots = np.sort(np.roots([xbar**2 - t**2 * vx, -2 * xbar * ybar, ybar**2 - t**2 * vy]).real)
    return r - 1, roots[0] - 1, roots[1] - 1, dof


def test_fieller_interval_matches_quadratic_solution():
    x = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5]
    y = [131.0, 128.0, 130.0, 129.5, 132.0]
    est = stats.relative_change(x, y, 0.95)
    change, low, high, dof = _fieller_by_quadratic(x, y, 0.95)
    assert est.change_ratio == pytest.approx(change)
    assert est.ci_low == pytest.approx(low, rel=1e-9)
    assert est.ci_high == pytest.approx(high, rel=1e-9)
    assert est.dof == pytest.approx(dof)
    # By hand: xbar = 100.0833, ybar = 130.1 -> +29.99 %
    assert est.change_ratio == pytest.approx(130.1 / (600.5 / 6) - 1)
    assert est.ci_low < est.change_ratio < est.ci_high


def test_fieller_close_to_delta_method_for_precise_baseline():
    # With a very precise baseline (g -> 0) Fieller tends to the delta-method interval.
    rng = np.random.default_rng(7)
    x = 1000 + rng.normal(0, 0.01, 20)
    y = 1100 + rng.normal(0, 10, 20)
    est = stats.relative_change(x, y, 0.9)
    se = math.sqrt(np.var(y, ddof=1) / 20) / np.mean(x)
    t = sps.t.ppf(0.95, 19)
    assert est.ci_low == pytest.approx(est.change_ratio - t * se, abs=2e-4)
    assert est.ci_high == pytest.approx(est.change_ratio + t * se, abs=2e-4)


def test_constant_series_gives_degenerate_interval():
    est = stats.relative_change([10.0] * 5, [13.0] * 5, 0.95)
    assert (est.change_ratio, est.ci_low, est.ci_high) == (pytest.approx(0.3), pytest.approx(0.3), pytest.approx(0.3))


def test_unbounded_and_zero_baseline_are_undefined():
    wild = stats.relative_change([-100.0, 100.0, -90.0, 95.0], [5.0, 6.0, 5.0, 6.0], 0.95)
    assert wild.ci_low is None and wild.reason
    zero = stats.relative_change([0.0, 0.0, 0.0], [1.0, 2.0, 1.0], 0.95)
    assert zero.change_ratio is None
    assert stats.decide(wild, "higher_is_better", 0.02)[0] == "INCONCLUSIVE"
    assert stats.decide(zero, "higher_is_better", 0.02)[0] == "INCONCLUSIVE"


def _est(change, low, high):
    return ChangeEstimate(100.0, 100.0 * (1 + change), change, low, high, 0.95, 10.0)


@pytest.mark.parametrize(
    ("change", "low", "high", "direction", "expected"),
    [
        (0.30, 0.25, 0.35, "higher_is_better", "IMPROVED"),
        (0.30, 0.25, 0.35, "lower_is_better", "REGRESSED"),
        (-0.20, -0.25, -0.15, "lower_is_better", "IMPROVED"),
        (-0.20, -0.25, -0.15, "higher_is_better", "REGRESSED"),
        (0.005, -0.01, 0.015, "higher_is_better", "NO_CHANGE"),
        (0.005, -0.01, 0.015, "lower_is_better", "NO_CHANGE"),
        (0.05, -0.05, 0.15, "higher_is_better", "INCONCLUSIVE"),  # contains 0, reaches past the margin
        (0.015, 0.005, 0.025, "higher_is_better", "INCONCLUSIVE"),  # significant but below the minimum effect
        (0.03, 0.001, 0.06, "higher_is_better", "IMPROVED"),  # above 0, point past the margin
        (-0.03, -0.06, -0.001, "higher_is_better", "REGRESSED"),
        (0.0, -0.02, 0.01, "higher_is_better", "INCONCLUSIVE"),  # touches the margin: not inside it
    ],
)
def test_verdict_rules(change, low, high, direction, expected):
    assert stats.decide(_est(change, low, high), direction, 0.02)[0] == expected


def test_zero_margin_never_no_change():
    assert stats.decide(_est(0.0, -0.001, 0.001), "higher_is_better", 0.0)[0] == "INCONCLUSIVE"


def test_assess_no_data_when_fewer_samples_than_batches():
    base = stats.summarize(np.arange(100, 140, dtype=float), 10)
    assert stats.assess(base, None, 10, 0.95, "higher_is_better", 0.02)[0] == "NO_DATA"
    few = stats.summarize([100.0] * 9, 10)
    assert stats.assess(base, few, 10, 0.95, "higher_is_better", 0.02)[0] == "NO_DATA"


def test_assess_step_and_noise_seeded():
    rng = np.random.default_rng(42)
    base = stats.summarize(1000 + rng.normal(0, 30, 240), 10)
    step = stats.summarize(1300 + rng.normal(0, 30, 240), 10)
    noise = stats.summarize(1000 + rng.normal(0, 30, 240), 10)
    verdict, _, est = stats.assess(base, step, 10, 0.95, "higher_is_better", 0.02)
    assert verdict == "IMPROVED"
    assert est.ci_low < 0.3 < est.ci_high
    assert stats.assess(base, noise, 10, 0.95, "higher_is_better", 0.02)[0] in ("NO_CHANGE", "INCONCLUSIVE")


def test_summary_uses_the_samples_the_batch_means_use():
    """35 samples in 6 batches: the 5 oldest are dropped for every statistic, so the mean
    equals the mean of the batch means (one number in headline, report and promotion)."""
    import numpy as np

    from obsctl.baselining.stats import summarize

    values = [1000.0] * 5 + [float(v) for v in range(30)]
    summary = summarize(values, 6)
    kept = np.arange(30, dtype=float)
    assert summary.sample_count == 30
    assert summary.mean == pytest.approx(kept.mean())
    assert summary.mean == pytest.approx(np.mean(summary.batch_means))
    assert summary.p95 == pytest.approx(np.percentile(kept, 95))
