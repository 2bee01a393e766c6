"""A small seeded version of bench/bench_regression_alerts.py: on a noisy signal (sd 12 %,
memory about 10 minutes) the spread threshold fires less on noise than mean x (1 - 10 %),
and both still fire on a real -25 % regression in every simulated week."""

from __future__ import annotations

import bench_regression_alerts as bench
import numpy as np


def test_firing_counts_runs_that_outlast_for():
    below = np.array([True] * 3 + [False] + [True] * 5 + [False, True])
    assert bench.firing(below, hold=3) == (2, (1 + 3) / below.size)  # runs of 3 and 5 fire; the run of 1 does not
    assert bench.firing(below, hold=6) == (0, 0.0)


def test_spread_threshold_fires_less_on_noise_and_still_on_regressions():
    names = [name for name, _, _ in bench.RULES]
    spread, mean = names.index("spread, for 10m"), names.index("mean x (1 - tol), for 10m")
    null = bench.cell(0.12, 0.0, 8, seed=41)
    assert null[spread]["per_week"] < null[mean]["per_week"] and null[spread]["share"] < null[mean]["share"]
    drop = bench.cell(0.12, -0.25, 8, seed=51)
    assert drop[spread]["any"] == 1.0 and drop[mean]["any"] == 1.0
