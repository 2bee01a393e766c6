"""Known answers for the statistics package (baselining/statistics/): each expected value
is computed here independently of the code under test (closed forms, brute force,
published tables)."""

from __future__ import annotations

import math
from itertools import pairwise

import group_sequential as sequential
import numpy as np
import pytest
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.statistics import anytime
from obsctl.baselining.statistics import power as planner
from obsctl.baselining.statistics.comparison import Criterion, LookContext, judge
from obsctl.baselining.statistics.lrv import Side, full_grid_n_eff, side_estimate
from obsctl.baselining.statistics.memory import (
    MemoryModel,
    fit_memory,
    grid_index,
    quadratic_forms,
    scale_dof,
)
from obsctl.baselining.statistics.ratio import (
    estimate_log_ratio,
    estimate_ratio,
    fieller,
)

CRITERION = Criterion(0.95, "higher_is_better", 0.02)  # a +-2 % margin at 95 %, higher is better


def ar1_model(phi: float, variance: float = 1.0, step: float = 15.0, dof: float = 1e6) -> MemoryModel:
    return MemoryModel(step, (phi,), (1.0, phi), variance, 0.0, 10**6, 1e9, "history", dof)


def ar1(rng, phi, n):
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9, 0.95, 0.99])
def test_long_run_variance_of_ar1_is_sigma_e2_over_one_minus_phi_squared(phi):
    # LRV = sigma_e^2 / (1 - phi)^2 with sigma_e^2 = sigma^2 (1 - phi^2): n Var(mean) -> it.
    model = ar1_model(phi, variance=4.0) if phi else MemoryModel(15.0, (), (1.0,), 4.0, 0.0, 10**6, 1e9, "history", 1e6)
    lrv = 4.0 * (1 - phi**2) / (1 - phi) ** 2
    assert model.tau_steps * 4.0 == pytest.approx(lrv, rel=1e-9)
    n = 200_000
    q, _ = quadratic_forms(np.arange(n), model.acf(n))
    assert 4.0 * q / n == pytest.approx(lrv, rel=2e-3)  # n Var(mean) = sigma^2 Q / n
    # A side with the history's scale reports exactly sigma^2 Q / n^2.
    rng = np.random.default_rng(int(phi * 1000))
    x = 2.0 * ar1(rng, phi, 2000)
    side = side_estimate(np.arange(2000) * 15.0, x, 15.0, model)
    q, _ = quadratic_forms(np.arange(2000), model.acf(2000))
    assert side.scale_source == "history" and side.var_mean == pytest.approx(4.0 * q / 2000**2, rel=1e-12)


def test_finite_window_variance_matches_the_exact_ar1_formula():
    # Var(mean of n) = sigma^2/n [(1+phi)/(1-phi) - 2 phi (1 - phi^n) / (n (1-phi)^2)].
    phi, n = 0.95, 240
    exact = ((1 + phi) / (1 - phi) - 2 * phi * (1 - phi**n) / (n * (1 - phi) ** 2)) / n
    q, _ = quadratic_forms(np.arange(n), ar1_model(phi).acf(n))
    assert q / n**2 == pytest.approx(exact, rel=1e-10)
    assert full_grid_n_eff(ar1_model(phi), n, 15.0) == pytest.approx(1 / exact, rel=1e-10)


def test_holes_use_the_exact_quadratic_form():
    rng = np.random.default_rng(3)
    idx = np.sort(rng.choice(400, 150, replace=False))
    idx -= idx[0]
    rho = 0.9 ** np.arange(idx[-1] + 1)
    d = np.abs(idx[:, None] - idx[None, :])
    q, q2 = quadratic_forms(idx, rho)
    assert q == pytest.approx(rho[d].sum(), rel=1e-9)
    assert q2 == pytest.approx((rho[d] ** 2).sum(), rel=1e-9)
    assert grid_index(idx * 15.0 + 1e9, 15.0).tolist() == idx.tolist()


def test_white_noise_scale_dof_is_n_minus_1():
    n = 100
    assert scale_dof(n, float(n), float(n)) == pytest.approx(n - 1)


def test_ar2_autocorrelation_and_tau_closed_forms():
    a1, a2 = 0.6, 0.3
    r1 = a1 / (1 - a2)
    model = MemoryModel(15.0, (a1, a2), (1.0, r1, a1 * r1 + a2), 1.0, 0.0, 10**6, 1e9)
    rho = [1.0, r1]
    for _ in range(2, 400):
        rho.append(a1 * rho[-1] + a2 * rho[-2])
    assert np.allclose(model.acf(400), rho, atol=1e-12)
    assert model.tau_steps == pytest.approx(1 + 2 * sum(rho[1:]), rel=1e-6)


@pytest.mark.parametrize("phi", [0.0, 0.9, 0.95])
def test_fitted_memory_recovers_ar1_tau(phi):
    rng = np.random.default_rng(11)
    x = ar1(rng, phi, 40_000)
    m = fit_memory(np.arange(x.size) * 15.0, x, 15.0)
    assert m.tau_steps == pytest.approx((1 + phi) / (1 - phi), rel=0.15)
    assert m.variance == pytest.approx(1.0, rel=0.15) and m.dof > 500


def test_obrien_fleming_boundaries_match_ldbounds():
    # R ldbounds / DeMets & Lan 1994: five equal looks, alpha = 0.05 two-sided, OBF type.
    assert sequential.boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.05) == pytest.approx([4.8769, 3.3569, 2.6803, 2.2898, 2.0310], abs=2e-4)
    assert sequential.boundaries([1.0], 0.05)[0] == pytest.approx(sps.norm.ppf(0.975), abs=1e-9)


def test_total_crossing_probability_under_the_null_is_alpha():
    f = [(k + 1) / 12 for k in range(12)]
    c = sequential.boundaries(f, 0.05)
    up, lo = sequential.crossing(f, c, 0.0)
    assert sum(up) + sum(lo) == pytest.approx(0.05, abs=2e-4)
    # Against Monte Carlo: Brownian motion at the 12 looks, first crossing.
    rng = np.random.default_rng(5)
    w = np.cumsum(rng.standard_normal((200_000, 12)) * math.sqrt(1 / 12), axis=1)
    z = w / np.sqrt(np.array(f))
    crossed = (np.abs(z) >= np.array(c)).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.003)


def test_fieller_interval_solves_the_quadratic():
    xbar, ybar, vx, vy, c = 10.0, 12.0, 0.3, 0.5, 2.1
    low, high = fieller(xbar, ybar, vx, vy, c)
    # Roots of (ybar - r xbar)^2 = c^2 (vy + r^2 vx), solved with numpy.
    roots = np.sort(np.roots([xbar**2 - c * c * vx, -2 * xbar * ybar, ybar**2 - c * c * vy]).real)
    assert (low + 1, high + 1) == pytest.approx(tuple(roots), rel=1e-10)
    assert fieller(1.0, 1.0, 1.0, 0.1, 2.0) is None  # g >= 1: unbounded


def test_log_ratio_estimate():
    a = Side(10.0, 0.04, 20.0, 100, 10.0, 1500.0, 1.0, "own", 1.0)
    b = Side(12.0, 0.09, 30.0, 100, 10.0, 1500.0, 1.0, "own", 1.0)
    e = estimate_log_ratio(a, b)
    assert e.point == pytest.approx(math.log(1.2))
    assert e.se == pytest.approx(math.sqrt(0.09 / 144 + 0.04 / 100))
    r = estimate_ratio(a, b)
    assert r.change == pytest.approx(0.2) and r.dof > 20


def test_planner_matches_the_normal_formula_at_the_sequence_boundary():
    # White noise, sigma 5 % of the mean, baseline of 240: the window n solving
    # d / sqrt(s^2 (1/n + 1/240)) (1 + d)^-1 = c + z_.9, c the boundary of every look.
    model = MemoryModel(15.0, (), (1.0,), 25.0, 100.0, 10**6, 1e9, "history", 1e6)
    base = Side(100.0, 25.0 / 240, 1e6, 240, 240.0, 3600.0, 5.0, "history", 5.0)
    p = planner.plan(model, base, 15.0, planner.PlanRequest(0.02, 0.95, 0.01, 3600.0, power=0.9))
    c = anytime.boundary(5 / (5 + 240), 0.05)
    assert p.boundary_z == pytest.approx(c, rel=1e-12)
    k = (c + sps.norm.ppf(0.9)) * 1.02 / 0.02
    n = 1 / ((1 / k**2) / 0.05**2 - 1 / 240)
    assert p.window_seconds / 15.0 == pytest.approx(n, abs=1.5)


def test_equal_lengths_no_change_uses_the_boundary_of_a_baseline_that_long():
    # White noise, sigma 5 % of the mean: baseline and window of n each reach NO_CHANGE
    # within +-1 % at 90 % power when 0.01 / sqrt(2 s^2 / n) >= c(n) + z_.95, c(n) the
    # boundary that a baseline of n fixes (t_min = (s^2/n) / (s^2/n + s^2/5) = 5 / (5 + n)).
    model = MemoryModel(15.0, (), (1.0,), 25.0, 100.0, 10**6, 1e9, "history", 1e6)
    base = Side(100.0, 25.0 / 240, 1e6, 240, 240.0, 3600.0, 5.0, "history", 5.0)
    p = planner.plan(model, base, 15.0, planner.PlanRequest(0.02, 0.95, 0.01, 3600.0, power=0.9))
    z = sps.norm.ppf(0.95)
    ok = lambda n: 0.01 / math.sqrt(2 * 0.05**2 / n) >= anytime.boundary(5 / (5 + n), 0.05) + z
    n = round(p.no_change_equal_seconds / 15.0)
    assert ok(n) and not ok(n - 1)
    assert not ok(round(2 * 0.05**2 * ((p.boundary_z + z) / 0.01) ** 2))  # the 1 h baseline's boundary is too low for it


def test_window_too_short_names_the_memory_and_a_length():
    rng = np.random.default_rng(2)
    model = ar1_model(0.995, variance=25.0)
    t = np.arange(480) * 15.0
    x = 100 + 5 * ar1(rng, 0.995, 480)
    j = judge((t[:240], x[:240]), (t[240:], x[240:]), 15.0, model, CRITERION)
    assert j.verdict == "INCONCLUSIVE" and j.low is None
    assert "memory is about 1h40m" in j.reason and "independent samples, fewer than 5" in j.reason and "at least" in j.reason


def test_boundary_near_one_look_never_falls_below_it():
    # A short span (a baseline barely longer than the first deciding window) adds a little
    # crossing probability to one look's, never less: the boundary rises from 1.96 as t_min falls.
    t_mins = [0.99999, 0.9999, 0.999, 0.995, 0.99, 0.985, 0.95, 0.9, 0.66, 0.45]
    cs = [anytime.boundary(t, 0.05) for t in t_mins]
    assert cs[0] == pytest.approx(sps.norm.ppf(0.975), abs=1e-3)
    assert all(b >= a - 1e-9 for a, b in pairwise(cs)) and cs[0] >= sps.norm.ppf(0.975) - 1e-9
    assert all(anytime.crossing(c, math.log(1 / t)) >= 2 * sps.norm.sf(c) for c, t in zip(cs, t_mins, strict=True))


def test_crossing_at_no_span_is_one_look():
    assert anytime.boundary(1.0, 0.05) == pytest.approx(sps.norm.ppf(0.975), rel=1e-12)
    assert anytime.crossing(1.96, 0.0) == pytest.approx(2 * sps.norm.sf(1.96), rel=1e-12)
    with pytest.raises(ValueError):
        anytime.boundary(0.0, 0.05)


@pytest.mark.parametrize("span", [0.8, 3.0])
def test_crossing_matches_a_fine_monte_carlo_of_the_ou_statistic(span):
    # B(t)/sqrt(t) on [exp(-span), 1] is a stationary OU process in s = log t with
    # Cov exp(-|ds|/2): simulated here exactly on a 4,000-step grid (slightly below the
    # continuous probability), against the recursion with Siegmund's correction.
    rng = np.random.default_rng(3)
    c, paths, steps = 2.5, 40_000, 4000
    a = math.exp(-span / steps / 2)
    u = rng.standard_normal(paths)
    hit = np.abs(u) >= c
    for _ in range(steps):
        u = a * u + math.sqrt(1 - a * a) * rng.standard_normal(paths)
        hit |= np.abs(u) >= c
    se = math.sqrt(hit.mean() * (1 - hit.mean()) / paths)
    assert anytime.crossing(c, span) == pytest.approx(hit.mean(), abs=4 * se + 0.002)


def test_every_cumulative_look_holds_with_a_shared_baseline_error():
    # Gaussian white noise: a baseline of 240, a window growing to 2,400 with a look every
    # 5 samples from the fifth (480 looks). The boundary keeps P(any look excludes the
    # truth) <= 5 %; a fixed 95 % interval at every look does not.
    rng = np.random.default_rng(7)
    m, n, reps, alpha = 240, 2400, 4000, 0.05
    looks = np.arange(5, n + 1, 5)
    c = anytime.boundary(5 / (5 + m), alpha)
    ex = rng.standard_normal(reps) / math.sqrt(m)
    y = np.cumsum(rng.standard_normal((reps, n)), axis=1)[:, looks - 1] / looks
    d = np.abs(y - ex[:, None]) / np.sqrt(1 / looks + 1 / m)
    assert (d > c).any(axis=1).mean() < 0.05
    assert (d > sps.norm.ppf(0.975)).any(axis=1).mean() > 0.15


def test_a_look_reports_its_boundary_and_level():
    rng = np.random.default_rng(4)
    model = ar1_model(0.5, variance=25.0)
    t = np.arange(960) * 15.0
    x = 100 + 5 * ar1(rng, 0.5, 960)
    j1 = judge((t[:240], x[:240]), (t[240:300], x[240:300]), 15.0, model, CRITERION, LookContext(1, 3600.0 * 3))
    j2 = judge((t[:240], x[:240]), (t[240:], x[240:]), 15.0, model, CRITERION,
               LookContext(2, 3600.0 * 3, j1.min_fraction, 0.95))
    sx = side_estimate(t[:240], x[:240], 15.0, model)
    t_min = sx.var_mean / (sx.var_mean + sx.sd**2 / 5)
    assert j1.min_fraction == j2.min_fraction == pytest.approx(t_min, rel=1e-12)
    assert j1.boundary == j2.boundary == pytest.approx(anytime.boundary(t_min, 0.05)) and j1.boundary > sps.norm.ppf(0.975)
    assert j1.confidence == pytest.approx(1 - 2 * sps.norm.sf(j1.boundary), rel=1e-12)
    # A later edit of the spec's level does not move the sequence's: the look context's wins.
    j3 = judge((t[:240], x[:240]), (t[240:], x[240:]), 15.0, model, Criterion(0.80, "higher_is_better", 0.02), LookContext(3, None, j1.min_fraction, 0.95))
    assert j3.boundary == pytest.approx(j2.boundary)


def test_a_hole_next_to_a_trend_keeps_the_memory_long():
    # 25 h of a +-30 % daily cycle at 15 s with one missing step: the pair-mean
    # autocorrelation at lag 1 exceeds 1 there (not positive definite), which used to stop
    # Levinson-Durbin at AR(0), "no memory" (the designs test that failed at 13:15 UTC).
    # The zero-filled estimate keeps the memory as long as without the hole.
    from obsctl.baselining.statistics.memory import autocovariance, fit_memory

    rng = np.random.default_rng(12)
    t = 1_796_036_895.0 + 15.0 * np.arange(6001)
    y = 1000 * (1 + 0.3 * np.sin(2 * np.pi * t / 86400)) * np.exp(rng.normal(0, 1e-4, t.size))
    holed = np.delete(np.arange(t.size), 5760)
    gamma, _, _ = autocovariance(t[holed], y[holed], 15.0, 3)
    assert gamma[1] > gamma[0]  # the case: r_1 > 1
    whole = fit_memory(t, y, 15.0)
    gap = fit_memory(t[holed], y[holed], 15.0)
    assert len(gap.coefficients) >= 1 and gap.tau_seconds > 86400
    assert 0.5 < gap.tau_seconds / whole.tau_seconds < 2


def test_a_guard_carries_its_anytime_p_value_of_being_worse():
    # A guard 0.25 % worse: p_worse is the crossing probability of its z on the worse side,
    # z = -change / (sqrt(V_y + R^2 V_x) / xbar), computed here from the two sides.
    rng = np.random.default_rng(9)
    model = ar1_model(0.5, variance=1.0)
    t = np.arange(960) * 15.0
    x = 100 + ar1(rng, 0.5, 960)
    y = x[480:] * 0.9975
    guard = Criterion(0.95, "higher_is_better", 0.02, guard_tolerance=0.05, guard_alpha=0.05)
    j = judge((t[:480], x[:480]), (t[480:], y), 15.0, model, guard, LookContext(1, 7200.0))
    sx, sy = side_estimate(t[:480], x[:480], 15.0, model), side_estimate(t[480:], y, 15.0, model)
    r = sy.mean / sx.mean
    z = (1 - r) / (math.sqrt(sy.var_mean + r * r * sx.var_mean) / sx.mean)
    assert j.p_worse == pytest.approx(anytime.crossing(z, math.log(1 / j.min_fraction)), rel=1e-9)
    assert 0 < j.p_worse < 1
    better = judge((t[:480], x[:480]), (t[480:], x[480:] * 1.03), 15.0, model, guard, LookContext(1, 7200.0))
    assert better.p_worse == 1.0


def test_no_verdict_without_an_honest_memory():
    # The same +20 % window: decided with a memory fitted on 20+ of its own lengths of
    # history; INCONCLUSIVE, saying how much history is needed, with less history or with
    # none (the windows alone); a one-off comparison (the drift check) is not capped.
    rng = np.random.default_rng(12)
    t = np.arange(960) * 15.0
    x = 100 + ar1(rng, 0.5, 960)
    base, window = (t[:480], x[:480]), (t[480:], x[480:] * 1.2)
    tau = 3 * 15.0  # (1 + phi) / (1 - phi) steps
    enough = MemoryModel(15.0, (0.5,), (1.0, 0.5), 1.0, 100.0, 1000, 20 * tau, "history", 1e6)
    short = MemoryModel(15.0, (0.5,), (1.0, 0.5), 1.0, 100.0, 100, 19 * tau, "history", 1e6)
    assert judge(base, window, 15.0, enough, CRITERION, LookContext()).verdict == "IMPROVED"
    j = judge(base, window, 15.0, short, CRITERION, LookContext())
    assert j.verdict == "INCONCLUSIVE" and j.low is None
    assert "fitted on 14m15s of history, fewer than 20 of its own lengths" in j.reason and "at least 15m of history" in j.reason
    none = judge(base, window, 15.0, None, CRITERION, LookContext())
    assert none.verdict == "INCONCLUSIVE" and none.reason.startswith("no history before the baseline to fit the signal's memory")
    assert judge(base, window, 15.0, short, CRITERION).verdict == "IMPROVED"


def test_plan_text_says_a_memory_from_the_baseline_alone_cannot_carry_a_verdict():
    from dataclasses import replace

    from obsctl.baselining.statistics.memory import MIN_MEMORIES
    from obsctl.baselining.text.present import plan_lines
    from obsctl.durations import format_duration

    model = MemoryModel(15.0, (), (1.0,), 25.0, 100.0, 10**6, 1e9, "history", 1e6)
    base = Side(100.0, 25.0 / 240, 1e6, 240, 240.0, 3600.0, 5.0, "history", 5.0)
    p = planner.plan(model, base, 15.0, planner.PlanRequest(0.02, 0.95, 0.01, 3600.0, power=0.9))
    assert not any("re-snapshot the baseline with at least" in line for line in plan_lines(p, "c/s"))
    alone = plan_lines(replace(p, memory_source="windows", tau_seconds=24.0), "c/s")
    need = format_duration(MIN_MEMORIES * 24.0)
    assert alone[1] == (f"no verdict can rest on a memory fitted on the baseline alone: re-snapshot the baseline with at least {need} "
                        "of history before it (verification.memory_history) before the change")
