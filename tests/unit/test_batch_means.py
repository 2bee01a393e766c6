"""The batch-means fallback (baselining/statistics/batch_means.py): known answers computed
independently, the cases without an estimate, a seeded coverage check of the method alone,
and a seeded, smaller run of bench/bench_memory_batches.py through the verdict."""

from __future__ import annotations

import math

import bench_memory_batches
import numpy as np
import pytest
from scipy import stats

from obsctl.baselining.statistics import batch_means
from obsctl.baselining.statistics.batch_means import batch_side

STEP = 15.0


def test_known_answer_on_a_full_grid():
    y = np.random.default_rng(3).normal(100, 5, 40)
    t = 1000 + np.arange(40) * STEP
    side = batch_side(t, y, STEP, 4)
    means = [chunk.mean() for chunk in np.array_split(y, 4)]  # 10 samples each
    assert side.mean == pytest.approx(y.mean())
    assert side.var_mean == pytest.approx(np.var(means, ddof=1) / 4)
    assert side.dof == 3 and side.n == 40 and side.span_seconds == pytest.approx(40 * STEP)
    assert side.n_eff == pytest.approx(min(40, np.var(y, ddof=1) / side.var_mean))


def test_batches_follow_the_grid_not_the_sample_count():
    # 20 samples in the first half of the grid, 4 in the second: batches are stretches of time.
    idx = np.r_[np.arange(20), np.array([20, 25, 30, 39])]
    y = np.arange(idx.size, dtype=float)
    side = batch_side(idx * STEP, y, STEP, 2)
    first, second = y[idx < 20].mean(), y[idx >= 20].mean()
    assert side.var_mean == pytest.approx(np.var([first, second], ddof=1) / 2)


def test_no_estimate_without_a_sample_in_every_batch_or_enough_samples_or_spread():
    t = np.r_[np.arange(10), np.arange(30, 40)] * STEP  # the second of four batches is empty
    assert batch_side(t, np.arange(20.0), STEP, 4) is None
    assert batch_side(np.arange(7) * STEP, np.arange(7.0), STEP, 4) is None
    assert batch_side(np.arange(40) * STEP, np.full(40, 5.0), STEP, 4) is None


def test_t_interval_from_four_batches_covers_an_ar1_mean_at_fourteen_memories():
    # Coverage of the window's true mean (0) by the 95 % t interval with 3 dof; measured 93.5 %
    # at 2,000 replicates (docs/verification.md). 600 replicates: standard error about 1 %.
    rng = np.random.default_rng(7301)
    n, tau = 600, 600 / 14
    phi = (tau - 1) / (tau + 1)
    q = stats.t.ppf(0.975, 3)
    t = np.arange(n) * STEP
    covered = 0
    for _ in range(600):
        z = np.empty(n)
        z[0] = rng.standard_normal()
        e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
        for i in range(1, n):
            z[i] = phi * z[i - 1] + e[i]
        side = batch_side(t, z, STEP)
        covered += abs(side.mean) <= q * side.se
    assert 0.90 <= covered / 600 <= 0.975


def _family():
    return next(f for f in bench_memory_batches.FAMILIES if "0.99" in f.name)


def test_a_lengthened_memory_is_judged_from_batch_means_and_stays_honest():
    # phi 0.90 -> 0.99 at the change, 12 h window: the last look spans about 14.5 of the new
    # memory; documented run (300 replicates): 1 % / 0.7 % false directions, 28 % refused.
    res = bench_memory_batches.family_cell(_family(), 30, seed=7311)
    null = res[0.0]
    assert null.counts.get("any IMPROVED", 0) <= 5 and null.counts.get("any REGRESSED", 0) <= 5  # goal 5 % + about 3 SE
    intervals = sum(t.counts.get("interval 3", 0) for t in res.values())
    assert intervals >= 30
    assert sum(t.counts.get("covered 3", 0) for t in res.values()) >= 0.85 * intervals


def test_the_fallback_is_what_decides_those_windows(monkeypatch):
    # The same replicates without the fallback: most last looks refused on the window's memory.
    with monkeypatch.context() as patched:
        patched.setattr(batch_means, "MIN_SPAN_MEMORIES", math.inf)
        off = bench_memory_batches.family_cell(_family(), 30, seed=7311)[0.0]
    assert off.counts.get("last assumption", 0) >= 12
    on = bench_memory_batches.family_cell(_family(), 30, seed=7311)[0.0]
    assert on.counts.get("last assumption", 0) <= off.counts.get("last assumption", 0) - 6
