"""Self-calibration from placebos (baselining/statistics/placebo.py): known answers computed
here from the history's own tiles, and the two outcomes on simulated nulls."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.statistics.lrv import full_grid_n_eff
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.baselining.statistics.placebo import MIN_PLACEBOS, for_window, placebo_check


def ar1(rng, phi, n):
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


def test_the_ratio_is_the_tiles_mean_square_over_the_models_variance():
    rng = np.random.default_rng(21)
    n = 240 * 12
    t = np.arange(n) * 15.0
    x = 50 + 2 * ar1(rng, 0.5, n)
    model = MemoryModel(15.0, (0.5,), (1.0, 0.5), 4.0, 50.0, n, t[-1], "history", 1e6)
    p = placebo_check(t, x, 15.0, model, 3600.0, 1800.0)
    # 12 h tiled by 1.5 h: 8 disjoint comparisons, window mean minus baseline mean.
    tiles = x[: 8 * 360].reshape(8, 360)
    d = tiles[:, 240:].mean(axis=1) - tiles[:, :240].mean(axis=1)
    var = 4.0 * (1 / full_grid_n_eff(model, 120, 15.0) + 1 / full_grid_n_eff(model, 240, 15.0))
    ratio = float(np.var(d, ddof=1) / var)
    assert (p.starts, p.dof) == (8, 7.0) and p.variance_ratio == pytest.approx(ratio, rel=1e-12)
    assert p.held == int((np.abs(d - d.mean()) <= 1.959963984540054 * math.sqrt(var)).sum())
    assert p.contradicted == (sps.chi2.sf(7 * ratio, 7) < 0.10)
    assert placebo_check(t[: 4 * 360], x[: 4 * 360], 15.0, model, 3600.0, 1800.0) is None  # fewer than MIN_PLACEBOS
    assert MIN_PLACEBOS == 5


def test_a_right_model_stands_and_a_missed_slow_memory_is_widened():
    # Three days at 15 s. AR(1) phi 0.95 fitted by the model: not contradicted at 1 h or 6 h
    # (most seeds); a sum of AR(1)s with a 7 h component the AR fit reads short:
    # contradicted at 6 h against 6 h, where that component dominates.
    n = 3 * 5760
    t = np.arange(n) * 15.0
    stands = widened = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        x = 100 + 5 * ar1(rng, 0.95, n)
        stands += not placebo_check(t, x, 15.0, fit_memory(t, x, 15.0), 3600.0, 3600.0).contradicted
        y = 100 + 5 * (ar1(rng, 0.5, n) + ar1(rng, 0.95, n) + ar1(rng, 0.998, n)) / math.sqrt(3)
        widened += placebo_check(t, y, 15.0, fit_memory(t, y, 15.0), 21600.0, 21600.0).contradicted
    assert stands >= 15  # a 10 % false contradiction per check
    assert widened >= 10


def test_the_check_for_a_window_is_the_next_longer_one():
    rng = np.random.default_rng(3)
    n = 5760
    t = np.arange(n) * 15.0
    x = 10 + ar1(rng, 0.3, n)
    model = fit_memory(t, x, 15.0)
    checks = [placebo_check(t, x, 15.0, model, 3600.0, w) for w in (1800.0, 3600.0, 7200.0)]
    assert for_window(checks, 3000.0).window_seconds == 3600.0
    assert for_window(checks, 3600.0).window_seconds == 3600.0
    assert for_window(checks, 20000.0) is None  # longer than any check: none stands for it
    assert for_window([], 3600.0) is None
