"""Known-answer tests of the stored summary (obsctl.baselining.statistics.summary): batch
means and summary statistics, computed here by hand on tiny arrays."""

from __future__ import annotations

import statistics

import pytest

from obsctl.baselining.statistics import summary as stats


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


def test_summary_uses_the_samples_the_batch_means_use():
    """35 samples in 6 batches: the 5 oldest are dropped for every statistic, so the mean
    equals the mean of the batch means (one number in headline, report and promotion)."""
    import numpy as np

    from obsctl.baselining.statistics.summary import summarize

    values = [1000.0] * 5 + [float(v) for v in range(30)]
    summary = summarize(values, 6)
    kept = np.arange(30, dtype=float)
    assert summary.sample_count == 30
    assert summary.mean == pytest.approx(kept.mean())
    assert summary.mean == pytest.approx(np.mean(summary.batch_means))
    assert summary.p95 == pytest.approx(np.percentile(kept, 95))
