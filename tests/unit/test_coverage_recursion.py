"""The per-step count from one overlapping range (baselining/measure/coverage.py,
``per_step_counts``): ``c_k = C_k - C_{k-1} + c_{k-m}`` against counts computed here."""

from __future__ import annotations

import numpy as np
import pytest

from obsctl.baselining.measure import coverage as cov


def window_sums(c: np.ndarray, m: int, before: np.ndarray) -> np.ndarray:
    """``C_k = c_k + ... + c_{k-m+1}``, with ``before`` the ``m - 1`` counts ahead of ``c``."""
    padded = np.concatenate([before, c])
    return np.array([padded[k:k + m].sum() for k in range(c.size)])


@pytest.mark.parametrize("seed", range(20))
def test_recursion_recovers_every_per_step_count(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 25))
    size = int(rng.integers(1, 400))
    # Scrapes, bursts and silences: counts 0..4 with runs of zeros.
    c = rng.choice([0, 0, 1, 1, 1, 2, 4], size=size).astype(float)
    c[rng.random(size) < 0.1] = 0
    before = rng.choice([0, 1, 3], size=m - 1).astype(float)
    got = cov.per_step_counts(window_sums(c, m, before), c[:m], m)
    assert np.array_equal(got, c)


def test_window_steps_keep_consecutive_windows_overlapping():
    # W - step covers a scrape interval of step + 300 s: every window holds the previous one's last sample.
    for step in (1.0, 15.0, 30.0, 60.0, 300.0, 3600.0):
        assert (cov.window_steps(step) - 1) * step >= step + cov.OVERLAP_SECONDS


@pytest.mark.parametrize("seed", range(10))
def test_population_is_the_running_sum_of_its_changes_from_the_seed(seed):
    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(1, 300))
    # Series present per grid point: restarts, scale-ups and points with none at all.
    p = np.clip(np.cumsum(rng.choice([-2, -1, 0, 0, 0, 0, 1, 3], size=size)) + 2, 0, None).astype(float)
    changes = np.diff(p, prepend=np.nan)  # changes[0] is never read
    j = int(rng.integers(1, min(size, 9) + 1))
    got = cov.population_from_changes(changes, p[:j])
    assert np.array_equal(got, p)


def test_population_changes_that_disagree_with_the_seed_are_refused():
    p = np.array([3.0, 3.0, 4.0, 2.0, 2.0])
    changes = np.diff(p, prepend=0.0)
    # A seed point the changes do not lead to (two TSDB states), a negative count, no seed.
    assert cov.population_from_changes(changes, np.array([3.0, 3.0, 5.0])) is None
    assert cov.population_from_changes(changes, np.array([0.0])) is None
    assert cov.population_from_changes(changes, np.array([])) is None
