"""The weekly cycle test under slow noise: the periodogram check beside the AR Wald test
(designs/cycle.py, ``_spectral_p_value``)."""

from __future__ import annotations

import numpy as np
import pytest

from obsctl.baselining.designs import cycle
from support.benches import load

STEP = 120.0
WEEK = 7 * 86400.0
DAYS = 21
BENCH = load("bench_drift")


def _slow(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """21 days at 120 s of bench_drift's multi-scale noise (AR(1)s with memories of a minute,
    20 minutes and about 7 hours) as a relative deviation, read every second sample."""
    n = DAYS * 1440
    y = BENCH.path(rng, BENCH.FAMILIES["multi-scale (phi 0.5, 0.95, 0.995)"], n) / BENCH.MU - 1.0
    t = float(rng.integers(0, 7)) * 86400.0 + np.arange(n) * 60.0
    return t[::2], y[::2]


def _weekend(t: np.ndarray) -> np.ndarray:
    # Saturday and Sunday (days 2 and 3 of the Unix week) 10 % lower, in logs.
    return np.where(np.isin(np.floor(t / 86400.0) % 7, (2, 3)), np.log(0.9), 0.0)


def test_slow_noise_without_a_cycle_is_rarely_called_weekly(monkeypatch):
    # 60 seeded histories: the AR test alone rejects at 0.01 far past its level (its model
    # reads the 7-hour part short); with the periodogram check it stays near it.
    rng = np.random.default_rng(20261206)
    histories = [_slow(rng) for _ in range(60)]
    both = sum(cycle.harmonic_test(t, y, WEEK, (86400.0,), STEP)[0] < cycle.ALPHA for t, y in histories)
    monkeypatch.setattr(cycle, "_spectral_p_value", lambda *a: None)
    ar_alone = sum(cycle.harmonic_test(t, y, WEEK, (86400.0,), STEP)[0] < cycle.ALPHA for t, y in histories)
    assert ar_alone >= 8, ar_alone
    assert both <= 3, both


def test_a_weekend_cycle_passes_both_tests():
    rng = np.random.default_rng(7)
    t, y = _slow(rng)
    p, amplitude, _ = cycle.harmonic_test(t, y + _weekend(t), WEEK, (86400.0,), STEP)
    assert p < 1e-4
    assert cycle._spectral_p_value(t, y + _weekend(t), WEEK, (86400.0,)) < 1e-4
    assert amplitude == pytest.approx(0.05, abs=0.02)  # a -10 % weekend: about +-5 % around the mean


def test_an_hour_without_samples_leaves_the_ar_test_alone():
    rng = np.random.default_rng(8)
    t, y = _slow(rng)
    hole = (t >= t[0] + 5 * 86400.0) & (t < t[0] + 5 * 86400.0 + 2 * 3600.0)
    assert cycle._spectral_p_value(t[~hole], y[~hole], WEEK, (86400.0,)) is None
    assert cycle._spectral_p_value(t[:5000], y[:5000], WEEK, (86400.0,)) is None  # under two weeks
