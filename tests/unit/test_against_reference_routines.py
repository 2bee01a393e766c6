"""verify's numerics and range decoding against reference routines.

Each routine is checked against the library routine or validating code that computes the
same thing independently: scipy.signal.lfilter for the AR autocorrelation's
continuation, scipy.optimize.brentq for the sequential boundaries, scipy.stats for the
quantiles, and promapi's per-pair validation for the range-answer fast path.
"""

from __future__ import annotations

import math

import group_sequential as sequential
import numpy as np
import pytest
from scipy import optimize, signal, stats

from obsctl import promapi
from obsctl.baselining.statistics.memory import ar_continue


@pytest.mark.parametrize("order", [1, 2, 3, 6])
def test_ar_continue_matches_lfilter(order):
    rng = np.random.default_rng(order)
    for _ in range(5):
        coef = -np.poly(rng.uniform(-0.99, 0.99, order))[1:]  # stationary: roots inside the unit circle
        start = rng.uniform(-1, 1, order)
        count = int(rng.integers(1, 3000))
        a = np.concatenate(([1.0], -coef))
        expected, _ = signal.lfilter([1.0], a, np.zeros(count), zi=signal.lfiltic([1.0], a, y=start))
        assert np.allclose(ar_continue(coef, start, count), expected, rtol=0, atol=1e-11)


def test_boundaries_match_brentq():
    # The same recursion solved with brentq, from the module's own crossing function.
    fractions, alpha = [0.2, 0.45, 0.7, 1.0], 0.05
    got = sequential.boundaries(fractions, alpha)
    expected, density, grid, weights, t_prev = [], None, None, None, 0.0
    for t in fractions:
        target = sequential.spending(t, alpha) - sequential.spending(t_prev, alpha)
        dt = t - t_prev
        if density is None:
            c = float(stats.norm.isf(target / 2))
        else:
            def excess(c, density=density, grid=grid, weights=weights, dt=dt, t=t, target=target):
                return sum(sequential._cross(density, grid, weights, dt, 0.0, c * math.sqrt(t))) - target

            c = optimize.brentq(excess, 1e-6, 40.0, xtol=1e-12)
        new_grid, new_weights = sequential._grid(min(c, 12.0) * math.sqrt(t))
        density = sequential._step(density, grid, weights, dt, 0.0, new_grid)
        grid, weights, t_prev = new_grid, new_weights, t
        expected.append(c)
    assert got == pytest.approx(expected, abs=1e-8)


def test_range_pairs_fast_path_equals_validating_path():
    values = [[1700000000 + 60 * i, f"{1000 + i * 0.37:.6f}"] for i in range(500)]
    values[3][1], values[4][1], values[5][0] = "NaN", "-Inf", 1700000180.5
    got = promapi._pairs(values, "v")
    expected = [promapi._pair(v, "v") for v in values]
    assert [(t, v if math.isfinite(v) else str(v)) for t, v in got] == [(t, v if math.isfinite(v) else str(v)) for t, v in expected]


@pytest.mark.parametrize("values, message", [
    ([[1, "1"], [2, "x"]], "v[1] value 'x' is not a number"),
    ([[1, "1"], [float("nan"), "1"]], "v[1] time is nan"),
    ([[True, "1"]], "v[0] time is bool"),
    ([[1, "1"], "12"], "v[1] is not a [time, value] pair"),
    ([{"1": 0, "2": 0}], "v[0] is not a [time, value] pair"),
    ([[1, "1", 2]], "v[0] is not a [time, value] pair"),
])
def test_range_pairs_malformed_keep_their_named_errors(values, message):
    with pytest.raises(promapi._Malformed, match=message.replace("[", r"\[").replace("]", r"\]")):
        promapi._pairs(values, "v")
