"""The drift check under cycles and with a step inside the review period (practice/drift.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal as spsignal

from obsctl.baselining.practice import drift, movement
from support.benches import load

DAY, WEEK = 86400.0, 7 * 86400.0
RULE = drift.Rule("higher_is_better", 0.02, 0.95, 8)


def _weekend(t: np.ndarray, level: float = -0.10) -> np.ndarray:
    # Days 2 and 3 of the Unix week (Saturday, Sunday UTC) at 1 + level.
    day = np.floor(t / DAY).astype(np.int64) % 7
    return np.where((day == 2) | (day == 3), 1.0 + level, 1.0)


def _ar1(rng: np.random.Generator, n: int, phi: float = 0.95, sd: float = 0.05) -> np.ndarray:
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return sd * spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


def test_profile_is_the_centred_log_cycle_and_deseasonalising_removes_it():
    # Noiseless: two weeks of a weekend 10 % lower and a daily sine; the hour-of-week
    # profile is the mean of log(cycle) in each hour, centred (computed here on a finer grid).
    t = np.arange(0, 2 * WEEK, 60.0)
    cycle = _weekend(t) * (1 + 0.1 * np.sin(2 * np.pi * t / DAY))
    profile = drift.fit_profile((t, 50 * cycle), "week")
    hour = np.floor(np.mod(t, WEEK) / 3600).astype(int)
    expected = np.array([np.log(cycle[hour == h]).mean() for h in range(168)])
    expected -= expected.mean()
    assert profile.shape == (168,) and profile == pytest.approx(expected, abs=1e-12)
    flat = drift.deseasonalise(t, 50 * cycle, profile, "week")
    # Left: the within-hour part of the sine (at most 2 pi / 24 x 10 % of the level) and the level.
    assert np.ptp(flat) / flat.mean() < 0.03
    assert np.ptp(drift.deseasonalise(t, 50 * cycle, drift.fit_profile((t, 50 * cycle), "day"), "day")) / 50 > 0.09  # a daily profile leaves the weekend


def test_known_cycle_finds_the_week_and_says_when_it_cannot_know_one():
    rng = np.random.default_rng(3)
    t = np.arange(0, 16 * DAY, 120.0)
    noise = 1 + _ar1(rng, t.size, 0.9, 0.03)
    weekly = drift.known_cycle((t, 100 * _weekend(t) * noise), 0.02)
    assert weekly.cycle == "week" and weekly.weekly_known and "weekly cycle" in weekly.note
    flat = drift.known_cycle((t, 100 * noise), 0.02)
    assert flat.cycle is None and flat.weekly_known and "no daily or weekly cycle" in flat.note
    short = drift.known_cycle((t[t < 5 * DAY], 100 * noise[t < 5 * DAY]), 0.02)
    assert short.cycle is None and not short.weekly_known and "cannot be ruled out" in short.note
    daily = drift.known_cycle((t[t < 5 * DAY], 100 * (1 + 0.1 * np.sin(2 * np.pi * t / DAY)) [t < 5 * DAY] * noise[t < 5 * DAY]), 0.02)
    assert daily.cycle == "day" and not daily.weekly_known
    assert drift.known_cycle(None, 0.02).cycle is None


def test_step_inside_finds_the_step_and_its_block():
    rng = np.random.default_rng(5)
    times = np.arange(168) * 3600.0
    means = 100 + rng.standard_normal(168)
    index, stat, p = drift.step_inside(times, means + np.where(np.arange(168) >= 100, 5.0, 0.0), 3600.0)
    assert abs(index - 100) <= 2 and p < 1e-6
    # Independent known answer: white noise of variance 1 around 100 has a CUSUM max of
    # order sqrt(n); its Kolmogorov p-value is not small.
    _, stat0, p0 = drift.step_inside(times, means, 3600.0)
    s = np.cumsum(means - means.mean())[:-1]
    assert stat0 == pytest.approx(np.abs(s[5:162]).max() / math.sqrt(168 * np.var(means)), rel=0.35)
    assert p0 > 0.01
    assert drift.step_inside(times[:10], means[:10], 3600.0) is None


def _life_window(seed: int, step: float, at_day: float, days: float, cycle: bool):
    # 16 days of history, a 1-day baseline on a Tuesday, then the window.
    rng = np.random.default_rng(seed)
    n = int((17 + days) * DAY / 60)
    t = 5 * DAY + np.arange(n) * 60.0  # day 5 of the Unix week: a Tuesday
    x = 100 * (1 + _ar1(rng, n)) * (_weekend(t) if cycle else 1.0)
    x[t >= t[0] + (17 + at_day) * DAY] *= 1 + step
    end = int(17 * DAY / 60)
    return (t[:end], x[:end]), (t[end - 1440:end], x[end - 1440:end]), (t[end:], x[end:])


def test_a_weekly_cycle_is_compared_like_with_like():
    # A -10 % step on day 1 of a weekly review: under the weekend cycle the plain test,
    # widened by the spread of its placebo days, misses it; compared like with like it is found.
    history, base, window = _life_window(11, -0.10, 1.0, 7, cycle=True)
    plain = movement.judge_movement(base, window, 60, None, "higher_is_better", 0.02, 0.95, 8)
    got = drift.judge_drift(base, window, 60, None, RULE, history=history)
    assert got.adjustment.cycle == "week" and "like with like" in got.adjustment.note
    assert got.judgement.verdict == "REGRESSED" and got.judgement.change == pytest.approx(-0.09, abs=0.03)
    assert plain.verdict != "REGRESSED"
    history, base, window = _life_window(12, 0.0, 0.0, 7, cycle=True)
    assert drift.judge_drift(base, window, 60, None, RULE, history=history).judgement.verdict not in movement.MOVED_VERDICTS


def test_a_step_inside_a_month_is_found_with_its_time():
    history, base, window = _life_window(13, 0.15, 21.3, 30, cycle=False)
    every = slice(None, None, 5)  # a month is read at 300 s
    got = drift.judge_drift(base, (window[0][every], window[1][every]), 300, None, RULE, history=history)
    truth = history[0][-1] + 60 + 21.3 * DAY
    assert got.step is not None and abs(got.step.at - truth) <= 2 * 3600
    assert got.judgement.verdict == "IMPROVED" and got.judgement.change == pytest.approx(0.15, abs=0.03)
    assert got.moved_by_step and got.whole.verdict not in movement.MOVED_VERDICTS


def test_without_two_weeks_of_history_a_weekend_is_not_a_step():
    # 3 days of history: a weekly cycle cannot be known, so the weekend of a weekly review
    # (a short later part) is never judged as a step.
    history, base, window = _life_window(14, 0.0, 0.0, 7, cycle=True)
    short = (history[0][-3 * 1440:], history[1][-3 * 1440:])
    got = drift.judge_drift(base, window, 60, None, RULE, history=short)
    assert not got.adjustment.weekly_known and not got.moved_by_step
    assert got.step is None or got.step.judgement is None


def _three_weeks(seed: int, step: float, at_day: float):
    # Three weeks of a weekend 10 % lower at the history query's 120 s step, a step of
    # ``step`` at ``at_day``; the same noise with and without the step.
    rng = np.random.default_rng(seed)
    t = 3 * DAY + np.arange(0, 21 * DAY, 120.0)
    clean = 100 * (1 + _ar1(rng, t.size, 0.9, 0.03)) * _weekend(t)
    return t, clean, clean * np.where(t >= t[0] + at_day * DAY, 1 + step, 1.0)


def test_a_step_in_the_history_is_set_aside_before_the_profile_is_fitted():
    # The history before a review period holds a -10 % step (an earlier period that
    # drifted). Fitted as it is, the hour-of-week profile keeps the part of the step its
    # hours absorbed; set aside, the profile is the one the same noise gives without the
    # step (known answer: that profile, fitted on the step-free series).
    t, clean, stepped = _three_weeks(21, -0.10, 15.3)
    truth = drift.fit_profile((t, clean), "week")
    got = drift.known_cycle((t, stepped), 0.02)
    assert got.cycle == "week" and got.history_step is not None
    assert got.history_step.change == pytest.approx(-0.10, abs=0.025)
    assert abs(got.history_step.at - (t[0] + 15.3 * DAY)) <= 1.5 * DAY
    assert "set aside" in got.note and "before the review period" in got.note
    absorbed = np.abs(drift.fit_profile((t, stepped), "week") - truth).mean()
    left = np.abs(got.profile - truth).mean()
    # Absorbed: a third of the step in the 81 % of hours the last 5.7 days hold, then centred: about 1 %.
    assert absorbed > 0.008 and left < absorbed / 3, (absorbed, left)
    # Without a step nothing is set aside and the profile is the plain one.
    plain = drift.known_cycle((t, clean), 0.02)
    assert plain.history_step is None and "set aside" not in plain.note
    assert plain.profile == pytest.approx(truth, abs=1e-12)


def test_the_cycle_is_read_from_the_history_before_the_review_period():
    # Three days before a Tuesday baseline, weekly reviews: by review 3 the 17 days before
    # its period (the baseline and reviews 1-2 included) show the weekend, and a -10 %
    # step early in review 3's week is found; the days before the baseline alone cannot.
    rng = np.random.default_rng(17)
    t = 2 * DAY + np.arange(int(25 * DAY / 60)) * 60.0
    x = 100 * (1 + _ar1(rng, t.size)) * _weekend(t)
    start = t[0] + 18 * DAY  # review 3's period: 3 days of history, a 1-day baseline, two weeks
    x[t >= start + 1.5 * DAY] *= 0.90
    base = (t[(t >= t[0] + 3 * DAY) & (t < t[0] + 4 * DAY)], x[(t >= t[0] + 3 * DAY) & (t < t[0] + 4 * DAY)])
    window = (t[t >= start], x[t >= start])
    before = (t[t < start][::2], x[t < start][::2])
    got = drift.judge_drift(base, window, 60, None, RULE, history=before)
    assert got.adjustment.cycle == "week" and got.adjustment.weekly_known
    assert got.judgement.verdict == "REGRESSED"
    upto = before[0] < base[0][-1] + 60
    old = drift.judge_drift(base, window, 60, None, RULE, history=(before[0][upto], before[1][upto]))
    assert not old.adjustment.weekly_known and old.judgement.verdict != "REGRESSED"


def test_drift_under_cycles_calibration_small_seeded():
    # The benchmark's cycle, monthly and short-history cells, a few lives each with fixed
    # seeds: a life's false drift is rare and the steps are found (they are not without
    # the adjustment, nor with the cycle learnt from the days before the baseline alone).
    bench = load("bench_drift")
    ar = "AR(1) phi 0.95"
    null = bench.run_cell(ar, 0, 0.0, 12, 7001, "weekly", 16)
    step = bench.run_cell(ar, 0, -0.10, 10, 7002, "weekly + daily", 16)
    month = bench.run_cell(ar, 0, 0.15, 6, 7003, "none", 3, 30)
    # Three days of history before the baseline: the weekly cycle is learnt from the
    # earlier review periods (found about 4 % of the time from the days before the baseline alone).
    short = bench.run_cell(ar, 0, -0.10, 10, 7004, "weekly", 3)
    assert null.hits <= 1
    assert step.hits >= 8
    assert month.hits_same >= 5
    assert short.hits >= 8


def test_the_finding_says_which_cycle_and_when_the_step_was():
    import datetime as dt
    from types import SimpleNamespace

    from obsctl.baselining.practice import review

    at = dt.datetime(2026, 3, 4, 5, 0, tzinfo=dt.UTC)
    adj = drift.CycleAdjustment("week", True, 16 * DAY, "compared like with like under the weekly cycle found in 16d of history")
    mv = movement.Movement("b1", "chat", "tokens_per_second", at, at, "IMPROVED", True, 0.15, 0.12, 0.18, 0.998, 8, 100.0, 115.0,
                           "r", cycle=adj, step_at=at, moved_by_step=True)
    text = review._drift_text("chat/tokens_per_second", mv, SimpleNamespace(id="b1"))
    assert "after a step at 2026-03-04T05:00:00Z" in text and "under the weekly cycle" in text
    d = mv.as_dict()
    assert d["cycle_adjusted"] == "week" and d["step_at"] == at.isoformat() and d["moved_after_step"] is True
    plain = movement.Movement("b1", "chat", "x", at, at, "NO_CHANGE", False, 0.0, -0.01, 0.01, 0.998, 8, 100.0, 100.0, "r")
    assert "cycle_adjusted" not in plain.as_dict()  # verify's aging check reads no history
