"""Known answers for statistics/stationarity.py (a step and a trend inside a baseline's
window, under its memory), its stored form, the cap it puts on a verdict, and the window
checks that keep a variance change apart from a memory change (statistics/assumptions.py).

The statistics are checked against loops written out here; the simulation's
autocorrelation against the model's; a planted step and trend must be found where and
as large as planted; steady AR(1) baselines must be flagged at about the stated rate
(and far more often when tested as if they had no memory, which shows the memory is
what the test leans on)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from scipy import signal as spsignal

from obsctl.baselining.decide import caps
from obsctl.baselining.measure.stationarity import baseline_stationarity
from obsctl.baselining.statistics import assumptions as A
from obsctl.baselining.statistics import stationarity as S
from obsctl.baselining.statistics.comparison import Criterion, LookContext, judge
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.records import Baseline, Memory, Population, Statistics, Window

STEP = 15.0
T0 = 1_780_000_000.0


def ar1(rng, phi, n):
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


def model(phi: float, variance: float = 25.0) -> MemoryModel:
    return MemoryModel(STEP, (phi,) if phi else (), (1.0, phi) if phi else (1.0,), variance, 100.0, 10**6, 1e9, "history", 1e6)


def test_statistics_match_loops():
    rng = np.random.default_rng(31)
    x = rng.standard_normal(50) + np.r_[np.zeros(20), np.ones(30)]
    pos = np.arange(50)
    t_step, t_trend, k = S.statistics(x, pos)
    y = x - x.mean()
    ss = float(y @ y)
    best, at = 0.0, 0
    for split in range(5, 46):  # TRIM 0.1 of 50: splits 5..45
        c = abs(y[:split].sum()) / math.sqrt(split * (50 - split) / 50)
        if c > best:
            best, at = c, split
    assert k[0] == at and t_step[0] == pytest.approx(best / math.sqrt((ss - best * best) / 50), rel=1e-12)
    pc = pos - pos.mean()
    lin = abs(float(y @ pc)) / math.sqrt(float(pc @ pc))
    assert t_trend[0] == pytest.approx(lin / math.sqrt((ss - lin * lin) / 50), rel=1e-12)
    # Scale-free: the same statistics at any scale and level.
    again = S.statistics(3 * x + 7, pos)
    assert again[0][0] == pytest.approx(t_step[0]) and again[1][0] == pytest.approx(t_trend[0])


def test_simulation_has_the_models_autocorrelation():
    rng = np.random.default_rng(32)
    rho = model(0.9).acf(400)
    z = S.simulate(rho, 2000, rng)
    assert z.shape == (2000, 400)
    assert np.var(z) == pytest.approx(1.0, abs=0.05)
    for lag in (1, 5, 20):
        r = float(np.mean(z[:, lag:] * z[:, :-lag]))
        assert r == pytest.approx(0.9**lag, abs=0.05)


def test_block_acf_is_the_block_means_autocorrelation():
    phi, b = 0.9, 4
    rho = phi ** np.arange(200)
    got = S.block_acf(rho, b, 5)
    # Direct: Cov(mean of block 0, mean of block L) = sum_i sum_j rho(|L b + j - i|) / b^2.
    cov = [sum(phi ** abs(lag * b + j - i) for i in range(b) for j in range(b)) / b**2 for lag in range(5)]
    np.testing.assert_allclose(got, np.array(cov) / cov[0], rtol=1e-12)


def test_a_planted_step_is_found_where_and_as_large_as_planted():
    rng = np.random.default_rng(33)
    n = 480  # 2 h at 15 s
    x = 100 + 5 * ar1(rng, 0.5, n)
    x[192:] *= 1.10  # +10 % at 40 % of the window
    t = T0 + np.arange(n) * STEP
    st = S.check_baseline(t, x, STEP, model(0.5))
    assert st.moved and st.kind == "step" and st.step_p < 0.005
    assert abs(st.step_at - t[192]) <= 10 * STEP
    assert st.step_ratio == pytest.approx(0.10, abs=0.02)


def test_a_planted_trend_is_found_and_its_size_estimated():
    rng = np.random.default_rng(34)
    n = 480
    x = (100 + 5 * ar1(rng, 0.5, n)) * (1 + 0.12 * np.arange(n) / (n - 1))
    t = T0 + np.arange(n) * STEP
    st = S.check_baseline(t, x, STEP, model(0.5))
    assert st.moved and st.kind == "trend" and st.trend_p < 0.005
    assert st.trend_ratio == pytest.approx(0.12, abs=0.03)


def test_steady_baselines_are_flagged_at_about_the_level_and_only_under_their_memory():
    rng = np.random.default_rng(35)
    n, reps, level = 240, 120, 0.05
    t = T0 + np.arange(n) * STEP
    flagged = white = 0
    for _ in range(reps):
        x = 100 + 5 * ar1(rng, 0.95, n)
        flagged += S.check_baseline(t, x, STEP, model(0.95), level=level, simulations=199).moved
        white += S.check_baseline(t, x, STEP, model(0.0), level=level, simulations=199).moved
    assert flagged <= 14  # 6 expected at 5 %; P(more than 14) < 0.003
    assert white >= 60  # read without its memory a 1 h AR(1) phi 0.95 wanders: most look like a step or trend


def test_holes_and_long_windows():
    rng = np.random.default_rng(36)
    n = 9000  # longer than MAX_GRID: tested on block means
    x = 100 + 5 * ar1(rng, 0.5, n)
    x[6000:] += 4
    t = T0 + np.arange(n) * STEP
    keep = np.ones(n, bool)
    keep[1000:1300] = False  # a hole
    st = S.check_baseline(t[keep], x[keep], STEP, model(0.5), level=0.05, simulations=199)
    assert st.block_seconds == 3 * STEP and st.moved and st.kind == "step"
    assert abs(st.step_at - t[6000]) <= 30 * STEP
    assert S.check_baseline(t[:30], x[:30], STEP, model(0.5)) is None  # too few samples
    assert S.check_baseline(t[:100], np.full(100, 3.0), STEP, model(0.5)) is None  # constant


def _baseline(stationarity) -> Baseline:
    end = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    return Baseline(id="infer.tps.20261201T120000Z", workload_class="infer", signal="tps", unit="1/s", direction="higher_is_better",
                    query="sum(x)", window=Window(start=end - dt.timedelta(hours=2), end=end, step_seconds=STEP),
                    population=Population(series_count=1), stats=Statistics(mean=100.0, median=100.0, p5=90.0, p95=110.0, stddev=5.0,
                                                                          sample_count=480, batch_means=[]),
                    created_at=end, stationarity=stationarity)


def test_stored_form_and_the_cap():
    rng = np.random.default_rng(37)
    end = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC).timestamp()
    t = end - 480 * STEP + STEP + np.arange(480) * STEP
    x = 100 + 5 * ar1(rng, 0.5, 480)
    x[240:] *= 1.10
    mem = Memory(**{k: v for k, v in model(0.5).as_dict().items() if k != "tau_seconds"})
    st = baseline_stationarity((t, x), STEP, mem)
    assert st.moved and st.kind == "step" and st.level == S.LEVEL
    b = _baseline(st)
    assert Baseline.model_validate_json(b.model_dump_json()).stationarity == st
    verdict, reason = caps.stationarity_cap(b)
    assert verdict == "INCONCLUSIVE" and "moved inside its window: a step of +" in reason
    after = (dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC) - st.step_at).total_seconds() + STEP
    from obsctl.durations import format_duration

    assert f"--window {format_duration(after)}" in reason and "--end 2026-12-01T12:00:00Z" in reason
    assert ("INCONCLUSIVE", reason) in caps.caps_for(type("M", (), {"coverage": None, "warnings": [], "partial": False})(), b, 0.9)
    # Steady, untested, or an older record without the field: no cap.
    assert caps.stationarity_cap(_baseline(st.model_copy(update={"moved": False, "kind": ""}))) == (None, "")
    assert caps.stationarity_cap(_baseline(None)) == (None, "")
    data = b.model_dump(mode="json")
    data.pop("stationarity")
    assert Baseline.model_validate(data).stationarity is None
    assert baseline_stationarity((t, x), STEP, None) is None


def _window_check(rng, sd_after: float, effect: float = 0.0, steps: int = 480):
    phi = 0.95
    m = model(phi, variance=1.0)
    y = 100 + (1 + effect) * 0 + sd_after * ar1(rng, phi, steps)
    t = np.arange(steps) * STEP
    return A.check_window(t, y, STEP, m, side_estimate(t, y, STEP, m)), m


def test_a_variance_change_alone_is_not_read_as_a_memory_change():
    rng = np.random.default_rng(38)
    halved = [_window_check(rng, math.sqrt(0.5), steps=960)[0] for _ in range(30)]
    assert not any(c.reason for c in halved)  # judged, never refused
    assert sum(c.failed("memory") for c in halved) <= 1  # the score is scale-free: no memory alarm
    quieter = [c for c in halved if c.failed("scale")]
    assert len(quieter) >= 25 and all("a change of variance, not of memory" in " ".join(c.notes) for c in quieter
                                       if not any(k.test == "predictability" and not k.passed for k in c.checks))
    assert all(any(k.test == "predictability" for k in c.checks) for c in quieter)
    doubled = [_window_check(rng, math.sqrt(2.0), steps=960)[0] for _ in range(30)]
    assert not any(c.reason for c in doubled) and sum(c.failed("memory") for c in doubled) <= 1
    assert sum("noisier" in " ".join(c.notes) for c in doubled) >= 25


def test_the_checks_are_named_for_what_they_are():
    rng = np.random.default_rng(39)
    c, _ = _window_check(rng, 1.0)
    assert c.checks[0].test == "yule-walker-score" and c.checks[0].text().startswith("Yule-Walker score")
    assert c.checks[1].test == "variance-ratio"
    white = A.portmanteau(np.arange(300), rng.standard_normal(300))
    assert white.test == "ljung-box" and white.text().startswith("Ljung-Box")


def test_a_quieter_window_with_unchanged_memory_is_judged():
    rng = np.random.default_rng(40)
    phi, n_hist = 0.95, 17280
    hist = 100 * (1 + 0.05 * ar1(rng, phi, n_hist + 480))
    t = np.arange(n_hist + 960) * STEP
    from obsctl.baselining.statistics.memory import fit_memory

    m = fit_memory(t[:n_hist + 480], hist, STEP)
    w = 110 * (1 + 0.05 * math.sqrt(0.5) * ar1(rng, phi, 480))  # +10 %, variance halved
    j = judge((t[n_hist:n_hist + 480], hist[n_hist:]), (t[n_hist + 480:], w), STEP, m, Criterion(0.95, "higher_is_better", 0.02), LookContext())
    assert j.verdict == "IMPROVED" and j.low <= 0.10 <= j.high
