"""The step search's long-run variance under slow noise: the history's estimates beside the
window's AR fit (practice/drift.py, ``history_lrv``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from obsctl.baselining.practice import drift
from obsctl.baselining.practice.movement import block_means
from support.benches import load

STEP = 60.0
HOUR, DAY = 3600.0, 86400.0
HISTORY_DAYS, WINDOW_DAYS = 21, 7
NONE = drift.CycleAdjustment(None, True, HISTORY_DAYS * DAY, "")
LEVEL = 0.01
BENCH = load("bench_drift")


def _slow(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """History then window at 60 s, level 100: bench_drift's multi-scale noise (AR(1)s with
    memories of a minute, 20 minutes and about 7 hours)."""
    n = int((HISTORY_DAYS + WINDOW_DAYS) * DAY / STEP)
    x = BENCH.path(rng, BENCH.FAMILIES["multi-scale (phi 0.5, 0.95, 0.995)"], n)
    return np.arange(n) * STEP, x


def _p_values(seed: int, lives: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    alone, beside = [], []
    cut = int(HISTORY_DAYS * DAY / STEP)
    for _ in range(lives):
        t, x = _slow(rng)
        times, means = block_means(t[cut:], x[cut:], HOUR, STEP)
        past = drift.history_lrv((t[:cut:2], x[:cut:2]), HOUR, NONE)  # the history at a coarser step, as review reads it
        alone.append(drift.step_inside(times, means, HOUR)[2])
        beside.append(drift.step_inside(times, means, HOUR, past * float(np.mean(means)) ** 2)[2])
    return alone, beside


def test_the_history_keeps_the_step_search_near_its_level_under_slow_noise():
    # 300 seeded weeks without a step: the window's AR fit alone reads the 7-hour part short
    # and rejects far past the level; with the history's estimates beside it the count stays
    # inside the binomial's 99.9 % range at the level.
    lives = 300
    alone, beside = _p_values(20261206, lives)
    most = int(sps.binom.ppf(0.999, lives, LEVEL))
    assert sum(p < LEVEL for p in alone) > most
    assert sum(p < LEVEL for p in beside) <= most


def test_the_history_estimate_matches_the_long_run_variance_of_its_block_means():
    # Known answer: 90 days of white noise with sd 2 % around 100 at 300 s, hourly blocks:
    # the log block means' long-run variance is their variance, about (0.02)^2 / 12 (12
    # samples an hour); the periodogram's 77 ordinates are within about 11 % of it.
    rng = np.random.default_rng(5)
    t = np.arange(0, 90 * DAY, 300.0)
    x = 100.0 * (1 + 0.02 * rng.standard_normal(t.size))
    truth = float(np.var(np.log(1 + 0.02 * rng.standard_normal(10**6)))) / 12
    assert drift.history_lrv((t, x), HOUR, NONE) == pytest.approx(truth, rel=0.25)


def test_a_history_coarser_than_a_block_gives_no_estimate():
    t = np.arange(0, 3 * DAY, 2 * HOUR)
    assert drift.history_lrv((t, np.full(t.size, 100.0)), HOUR, NONE) is None
