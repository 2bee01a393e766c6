"""Coverage judgement (baselining/measure/coverage.py) on coverage answers built the way Prometheus
answers the batched queries (gaps: steps without a stored sample, from ``count_over_time``;
latest push time; both from 5 min before the window); the real-Prometheus path
is tests/integration/test_coverage_live.py."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.baselining.decide import caps
from obsctl.baselining.measure import coverage as cov
from obsctl.baselining.text import present
from obsctl.timeutil import rfc3339

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOUR = 3600.0
LOOKBACK = 300.0


def grid(step: float, start=START, end=START + HOUR) -> np.ndarray:
    """The coverage query's grid: from 5 min before the window to its end."""
    return start - LOOKBACK + step * np.arange(1, int((end - start + LOOKBACK) / step) + 1)


def leg(sample_times, step: float, start=START, end=START + HOUR) -> dict[float, float]:
    """What the gap leg answers: 1 at each grid point without a sample in ``(t - step, t]``."""
    times = np.asarray(sample_times, dtype=float)
    out = {}
    for t in grid(step, start, end):
        if not ((times > t - step) & (times <= t)).any():
            out[float(t)] = 1.0
    return out


def push_leg(push_times, step: float, start=START, end=START + HOUR) -> dict[float, float]:
    """What the push leg answers: the latest push time <= t (the Pushgateway serves it all along)."""
    times = np.sort(np.asarray(push_times, dtype=float))
    out = {}
    for t in grid(step, start, end):
        j = np.searchsorted(times, t, side="right") - 1
        if j >= 0:
            out[float(t)] = float(times[j])
    return out


def legs(**per_leg) -> cov.Legs:
    return cov.Legs({0: per_leg})


def test_thirty_second_scrape_at_fifteen_second_step_is_full():
    scrapes = START - 600 + 30 * np.arange(0, 200)
    j = cov.judge(legs(gap=leg(scrapes, 15)), 1, START, START + HOUR, 15)
    c = j.coverage
    assert (c.ratio, c.fresh_points, c.grid_points) == (1.0, 240, 240)
    assert c.input_interval_seconds == 30 and c.real_samples == 120 and c.method == "scrape"
    assert not c.stopped and c.holes == []
    assert caps.coverage_cap(c, 0.9) == (None, "")


def test_stopped_signal_is_no_data_naming_the_last_sample():
    stop = START + 1800
    scrapes = np.arange(START - 600, stop + 1, 15)
    c = cov.judge(legs(gap=leg(scrapes, 15)), 1, START, START + HOUR, 15).coverage
    # Fresh while the latest sample is younger than 1.5 intervals: t - stop < 22.5 -> t <= stop + 15.
    expected = sum(1 for t in START + 15 * np.arange(1, 241) if t <= stop + 15)
    assert c.fresh_points == expected and c.stopped
    assert c.last_real_sample == dt.datetime.fromtimestamp(stop, dt.UTC)
    verdict, why = caps.coverage_cap(c, 0.9)
    assert verdict == "NO_DATA"
    assert why.startswith(f"window: no fresh samples after {rfc3339(c.last_real_sample)}: the signal stopped")


def test_series_that_stopped_before_the_window_has_nothing_fresh():
    # Stale lookback copies of the last baseline sample are not fresh samples.
    scrapes = np.arange(START - 3600, START + 1, 15)
    c = cov.judge(legs(gap=leg(scrapes, 15)), 1, START, START + HOUR, 15).coverage
    assert c.fresh_points == 0 and c.real_samples == 0
    verdict, why = caps.coverage_cap(c, 0.9)
    assert verdict == "NO_DATA" and f"no fresh samples after {rfc3339(dt.datetime.fromtimestamp(START, dt.UTC))}" in why


def test_hole_in_the_middle_is_inconclusive_below_the_threshold_and_named():
    scrapes = [t for t in np.arange(START - 600, START + HOUR + 1, 15) if not START + 1200 < t < START + 2100]
    c = cov.judge(legs(gap=leg(scrapes, 15)), 1, START, START + HOUR, 15).coverage
    unfresh = sum(1 for t in START + 15 * np.arange(1, 241) if not (t <= START + 1200 + 15 or t >= START + 2100))
    assert c.grid_points - c.fresh_points == unfresh
    hole = c.holes[0]
    assert hole.start.timestamp() == START + 1215 and hole.end.timestamp() == START + 2100
    verdict, why = caps.coverage_cap(c, 0.9)
    assert verdict == "INCONCLUSIVE" and "below the 90 % minimum" in why and "largest hole" in why
    assert caps.coverage_cap(c, 0.5) == (None, "")


def test_rolling_restart_is_a_population_change_not_a_hole():
    # Pods a, b replaced by c, d half-way (each new pod up 10 s after the old one stopped):
    # the signal-level latest sample stays fresh; the series count shows the change.
    old = np.arange(START - 600, START + 1800 + 1, 15)
    new = np.arange(START + 1810, START + HOUR + 1, 15)
    latest = leg(np.concatenate([old, new]), 15)
    # count(s) at the start and end, and its extremes (one replacement still within its lookback at the end).
    c = cov.judge(legs(gap=latest, first={0: 2.0}, last={0: 3.0}, min={0: 2.0}, max={0: 4.0}), 1, START, START + HOUR, 15).coverage
    assert c.ratio == 1.0
    assert (c.series_at_start, c.series_at_end, c.series_min, c.series_max) == (2, 3, 2, 4)
    assert "population change" in present.describe(c)


def test_pushgateway_values_are_fresh_only_while_push_time_moves():
    # Pushed every 60 s until 40 min in; the Pushgateway keeps serving the last push.
    pushes = np.arange(START - 600, START + 2400 + 1, 60)
    # Every series is served by the Pushgateway: no scraped input, a gap at every point.
    c = cov.judge(legs(push=push_leg(pushes, 15), gap=leg([], 15)), 1, START, START + HOUR, 15).coverage
    assert c.method == "push_time" and c.input_interval_seconds == 60
    expected = sum(1 for t in START + 15 * np.arange(1, 241) if t - pushes[pushes <= t].max() < 90)
    assert c.fresh_points == expected and c.stopped
    assert caps.coverage_cap(c, 0.9)[0] == "NO_DATA"


def test_latest_score_gauge_counts_value_changes_only():
    points = START + 15 * np.arange(1, 241)
    changes = {float(t): (1.0 if (t - START) % 600 == 0 and t <= START + 1800 else 0.0) for t in grid(15)}
    c = cov.judge(legs(gap=leg(np.arange(START - 600, START + HOUR + 1, 15), 15), change=changes), 1,
                  START, START + HOUR, 15, on_change=True).coverage
    assert c.method == "value_change" and c.input_interval_seconds == 600
    # Changes at the window start and at 10, 20, 30 min; fresh for 1.5 * 600 s after each
    # (the change at the start is the first point's current value: within one interval).
    expected = sum(1 for t in points if t < START + 1800 + 900)
    assert c.fresh_points == expected and c.real_samples == 3


def test_two_selectors_need_both_and_an_absent_one_is_left_out():
    full = leg(np.arange(START - 600, START + HOUR + 1, 15), 15)
    half = leg(np.arange(START - 600, START + 1800 + 1, 15), 15)
    both = cov.judge(cov.Legs({0: {"gap": full}, 1: {"gap": half}}), 2, START, START + HOUR, 15).coverage
    alone = cov.judge(cov.Legs({0: {"gap": half}, 1: {"gap": full}}), 2, START, START + HOUR, 15).coverage
    assert both.fresh_points == alone.fresh_points == cov.judge(legs(gap=half), 1, START, START + HOUR, 15).coverage.fresh_points
    absent = cov.judge(cov.Legs({0: {"gap": full}}), 2, START, START + HOUR, 15).coverage
    assert absent.ratio == 1.0
    none = leg([], 15)
    nothing = cov.judge(cov.Legs({0: {"gap": none}, 1: {"gap": none}}), 2, START, START + HOUR, 15).coverage
    assert nothing.fresh_points == 0 and caps.coverage_cap(nothing, 0.9)[0] == "NO_DATA"


def test_time_batches_equal_count_batches_without_holes_and_skip_empty_stretches():
    rng = np.random.default_rng(3)
    grid = START + 15 * np.arange(1, 241)
    values = rng.normal(100, 5, grid.size)
    samples = list(zip(grid.tolist(), values.tolist(), strict=True))
    by_count = [float(np.mean(values[j * 24:(j + 1) * 24])) for j in range(10)]
    assert cov.time_batch_means(samples, START, START + HOUR, 10) == pytest.approx(by_count, rel=1e-12)
    holed = [(t, v) for t, v in samples if not START + 720 < t <= START + 1080]  # batch 2 empty, batch 3 half
    means = cov.time_batch_means(holed, START, START + HOUR, 10)
    assert len(means) == 9
    assert means[2] == pytest.approx(float(np.mean(values[72:96])), rel=1e-12)
    assert means[1] == pytest.approx(float(np.mean(values[24:48])), rel=1e-12)


def test_caps_combine_no_data_first_then_inconclusive_keeps_the_statistics_word():
    assert caps.apply_caps("IMPROVED", "better", []) == ("IMPROVED", "better")
    assert caps.apply_caps("IMPROVED", "better", [("INCONCLUSIVE", "window: partial")]) == (
        "INCONCLUSIVE", "window: partial; the statistics alone said IMPROVED (better)")
    assert caps.apply_caps("NO_DATA", "none", [("INCONCLUSIVE", "x")]) == ("NO_DATA", "none")
    assert caps.apply_caps("REGRESSED", "worse", [("INCONCLUSIVE", "x"), ("NO_DATA", "stopped")]) == ("NO_DATA", "stopped")
    assert caps.partial_cap(["PromQL info: metric might not be a counter", "remote read failed: store-2"], True) == (
        "INCONCLUSIVE", "window: Prometheus answered partially (remote read failed: store-2)")
    assert caps.partial_cap(["PromQL info: x"], False) == (None, "")


def test_fresh_samples_match_a_grid_with_microseconds_at_prometheus_millisecond_times():
    start, step = 1796124039.766317, 2.0
    grid = np.array([start + step * k for k in range(1, 6)])
    mask = np.array([True, False, True, True, True])
    judgement = cov.Judgement(coverage=None, grid=grid, mask=mask)
    samples = [(round(t, 3), float(k)) for k, t in enumerate(grid.tolist())]
    assert [v for _, v in cov.fresh_samples(samples, judgement)] == [0.0, 2.0, 3.0, 4.0]

def test_all_fresh_fast_path_with_microseconds():
    start, step = 1796124039.766317, 2.0
    grid = np.array([start + step * k for k in range(1, 6)])
    judgement = cov.Judgement(coverage=None, grid=grid, mask=np.ones(5, bool))
    samples = [(round(t, 3), float(k)) for k, t in enumerate(grid.tolist())]
    assert len(cov.fresh_samples(samples, judgement)) == 5
