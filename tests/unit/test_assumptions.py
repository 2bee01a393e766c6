"""Known answers for statistics/assumptions.py: the window checks that the baseline's memory
model still describes the window (docs/verification.md, Assumptions). The Ljung-Box and
score statistics are checked against direct formulas written out here (statsmodels is
not installed), the innovations against an explicit loop, the checks' behaviour on seeded
AR(1) windows whose phi or scale changes and on unchanged ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal as spsignal
from scipy import stats

from obsctl.baselining.statistics import assumptions as A
from obsctl.baselining.statistics.comparison import Criterion, LookContext, judge
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory

STEP = 15.0
CRITERION = Criterion(0.95, "higher_is_better", 0.02)  # a +-2 % margin at 95 %, higher is better


def ar1(rng, phi, n, start=None):
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * (rng.standard_normal() if start is None else start)])[0]


def model_ar1(phi: float, variance: float = 1.0, dof: float = 1e6) -> MemoryModel:
    return MemoryModel(STEP, (phi,), (1.0, phi), variance, 0.0, 10**6, 1e9, "history", dof)


def test_ljung_box_matches_the_direct_formula():
    rng = np.random.default_rng(11)
    e = rng.standard_normal(300) + 0.3 * np.r_[0.0, rng.standard_normal(299)]
    d = e - e.mean()
    n, h = d.size, 10
    r = [float(d[k:] @ d[:-k]) / float(d @ d) for k in range(1, h + 1)]
    q = n * (n + 2) * sum(rk * rk / (n - k) for k, rk in enumerate(r, 1))
    assert A.ljung_box(np.arange(n), e, h) == pytest.approx(q, rel=1e-12)
    # With a hole, n - k becomes the pairs present at lag k.
    pos = np.r_[np.arange(100), np.arange(150, 350)]
    z = np.zeros(350)
    z[pos] = d
    pairs = [sum(1 for i in pos if i + k in set(pos)) for k in range(1, 4)]
    r = [float(z[k:] @ z[:-k]) / float(d @ d) for k in range(1, 4)]
    q = n * (n + 2) * sum(rk * rk / c for rk, c in zip(r, pairs, strict=True))
    assert A.ljung_box(pos, e, 3) == pytest.approx(q, rel=1e-12)


def test_portmanteau_p_value_is_chi_square_with_h_dof():
    rng = np.random.default_rng(12)
    e = rng.standard_normal(400)
    c = A.portmanteau(np.arange(400), e)
    assert c.dof == 20 and c.p_value == pytest.approx(stats.chi2.sf(c.statistic, 20), rel=1e-9)


def test_innovations_are_the_ar_filter_about_the_window_mean():
    rng = np.random.default_rng(13)
    y = 50 + ar1(rng, 0.8, 60)
    m = MemoryModel(STEP, (0.5, 0.2), (1.0, 0.6, 0.5), 1.0, 0.0, 1000, 1e5, "history", 500.0)
    pos, e, _ = A.innovations(np.arange(60) * STEP, y, STEP, m)
    z = y - y.mean()
    want = [z[t] - 0.5 * z[t - 1] - 0.2 * z[t - 2] for t in range(2, 60)]
    assert list(pos) == list(range(2, 60))
    np.testing.assert_allclose(e, want, rtol=1e-12)
    # A hole drops the innovations whose predecessors are missing.
    t = np.r_[np.arange(0, 30), np.arange(31, 60)] * STEP
    pos, e, _ = A.innovations(t, np.delete(y, 30), STEP, m)
    assert 30 not in pos and 31 not in pos and 32 not in pos and len(pos) == 58 - 3
    # A model on a 30 s grid checks a 15 s window on one phase of its grid; a 20 s one is not checked.
    m30 = MemoryModel(30.0, (0.5,), (1.0, 0.5), 1.0, 0.0, 1000, 1e5, "history", 500.0)
    pos, e, _ = A.innovations(np.arange(60) * STEP, y, STEP, m30)
    assert len(e) == 29
    assert A.innovations(np.arange(60) * 20.0, y, 20.0, m30) is None


def test_score_statistic_matches_the_direct_formula():
    rng = np.random.default_rng(14)
    y = ar1(rng, 0.9, 500)
    m = model_ar1(0.8)
    pos, e, z = A.innovations(np.arange(500) * STEP, y, STEP, m)
    g = float(sum(e[i] * z[pos[i] - 1] for i in range(e.size))) / e.size
    own = float(np.mean((y - y.mean()) ** 2))  # the window's own variance: the score is scale-free
    s = e.size * g * g / (own * own * (1 - 0.8 * 0.8))  # Gamma_1 = own variance, sigma_e^2 = own variance (1 - phi rho_1)
    c = A.yule_walker_score(pos, e, z, m)
    assert c.statistic == pytest.approx(s, rel=1e-10) and c.p_value == pytest.approx(stats.chi2.sf(s, 1), rel=1e-9)
    assert c.test == "yule-walker-score" and c.text().startswith("Yule-Walker score") and "Ljung-Box" not in c.text()
    # Scale-free: the same window at a tenth of its spread gives the same statistic.
    pos, e, z = A.innovations(np.arange(500) * STEP, 0.1 * y, STEP, m)
    assert A.yule_walker_score(pos, e, z, m).statistic == pytest.approx(s, rel=1e-9)


def test_variance_ratio_has_about_n_dof():
    rng = np.random.default_rng(15)
    e = rng.standard_normal(1000) * 1.2  # variance 1.44
    c = A.variance_ratio(e, 1.0, math.inf)
    assert c.statistic == pytest.approx(float(np.var(e, ddof=1)), rel=1e-12)
    assert 900 < c.dof <= 999  # kurtosis near 3: about n - 1
    assert not c.passed and c.p_value < 1e-6  # +44 % variance in 1,000 innovations: z about 8
    assert A.variance_ratio(rng.standard_normal(1000), 1.0, math.inf).passed
    heavy = rng.standard_t(5, 1000)
    assert A.variance_ratio(heavy, 5 / 3, math.inf).dof < 600  # kurtosis 9: far fewer dof


def _checked(rng, phi_before, phi_after, steps, sd_after=1.0):
    hist = ar1(rng, phi_before, 17280)
    model = fit_memory(np.arange(hist.size) * STEP, 100 + hist, STEP)
    sd_innov = math.sqrt(1 - phi_after**2)
    w = spsignal.lfilter([1.0], [1.0, -phi_after], rng.standard_normal(steps) * sd_innov, zi=[phi_after * hist[-1]])[0]
    t = np.arange(steps) * STEP
    y = 100 + sd_after * w
    return A.check_window(t, y, STEP, model, side_estimate(t, y, STEP, model)), model, (t, y)


def test_a_changed_phi_is_flagged_an_unchanged_one_mostly_not():
    rng = np.random.default_rng(16)
    changed = [_checked(rng, 0.90, 0.98, 480)[0] for _ in range(20)]
    assert sum(c.failed("memory") or c.failed("scale") for c in changed) >= 18  # the memory tripled: flagged every time
    assert all(c.memory.source == "windows" or "kept" in " ".join(c.notes) for c in changed if not c.reason)
    same = [_checked(rng, 0.90, 0.90, 480)[0] for _ in range(60)]
    alarms = sum(c.failed("memory") or c.failed("scale") for c in same)
    assert alarms <= 2  # two checks at 0.1 %: about 0.1 expected
    assert all(c.memory.source == "history" and not c.notes for c in same if not (c.failed("memory") or c.failed("scale")))


def test_a_noisier_window_is_rescaled_never_narrowed():
    rng = np.random.default_rng(17)
    c, model, (t, y) = _checked(rng, 0.9, 0.9, 960, sd_after=1.3)
    assert c.failed("scale") and not c.failed("memory") and c.checks[1].statistic > 1.4
    assert c.side.scale_source == "own" and c.memory is model and "noisier" in c.notes[0]
    # The model's variance at the window's innovation scale, never below the side's own scale.
    plain = side_estimate(t, y, STEP, model)
    want = plain.var_mean * max(1.0, model.variance * c.checks[1].statistic / plain.sd**2)
    assert c.side.var_mean == pytest.approx(want, rel=1e-12) and c.side.var_mean >= plain.var_mean
    hist = side_estimate(t, y, STEP, model, history_scale=True)
    assert c.side.var_mean >= hist.var_mean


def test_judge_reports_the_check():
    rng = np.random.default_rng(18)
    z = ar1(rng, 0.90, 17280 + 480)
    t = np.arange(z.size) * STEP
    model = fit_memory(t[:17280 + 240], 100 + z[:17280 + 240], STEP)
    base = (t[17280:17280 + 240], 100 + z[17280:17280 + 240])
    # The window after the change: phi 0.98 at the same spread.
    w = ar1(rng, 0.98, 160, start=z[17280 + 239])
    short = judge(base, (t[17520:17680], 100 + w), STEP, model, CRITERION, LookContext())
    assert short.verdict == "INCONCLUSIVE" and short.reason.startswith("assumption failed") and "p = " in short.reason
    # 2 h: enough samples to fit the window's memory, but fewer than 20 of its own fitted
    # lengths (phi 0.98: tau = 99 steps, about 25 min; fitted on 2 h, less): a lower bound, no verdict.
    w = ar1(rng, 0.98, 480, start=z[17280 + 239])
    t_w = t[17520] + np.arange(480) * STEP
    own = fit_memory(t_w, 100 + w, STEP, source="windows")
    assert 480 * STEP < 20 * own.tau_seconds
    two = judge(base, (t_w, 100 + w), STEP, model, CRITERION, LookContext())
    assert two.verdict == "INCONCLUSIVE" and "once the window spans 15 of it; use a window of at least" in two.reason
    # 20 h spans more than 20 of it: judged, the check named in the notes.
    w = ar1(rng, 0.98, 4800, start=z[17280 + 239])
    t_w = t[17520] + np.arange(4800) * STEP
    long = judge(base, (t_w, 100 + w), STEP, model, CRITERION, LookContext())
    assert not long.reason.startswith("assumption failed") and any(n.startswith("assumption check") for n in long.notes)
    same = judge(base, (t_w, 100 + ar1(rng, 0.90, 4800)), STEP, model, CRITERION, LookContext())
    assert not any("assumption" in n for n in same.notes)
