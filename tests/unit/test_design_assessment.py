"""Each design records its own assessment: the memory, effective samples, dof and boundary of
the effect it judged, not the before-after comparison's.

Evidence is built from seeded arrays as in tests/unit/test_verdict_pure.py and judged by
:func:`obsctl.baselining.decide.verdict.decide`. The expected assessment of each design is
computed here from the same arrays with the statistics package's primitives (the memory
model fitted to the series the design judges, the long-run variance of its mean, Welch's
dof written out), the look's boundary from :mod:`obsctl.baselining.statistics.anytime` at a
fixed ``t_min``, and the interval from scipy's t quantile at the recorded level: a design
that recorded the before-after comparison's figures, or computed its interval at another
level than it records, fails.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import numpy as np
import pytest
from scipy import stats as sps

from obsctl.baselining import report, verify
from obsctl.baselining.decide import verdict
from obsctl.baselining.decide.sides import memory_of
from obsctl.baselining.designs import before_after, canary, control, profile, seasonal
from obsctl.baselining.statistics import anytime, comparison
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import fit_memory, pooled_memory
from obsctl.baselining.text.present import statistics_line
from obsctl.records import Assessment, CycleKnowledge
from tests.unit.test_verdict_pure import END, START, STEP, T0, baseline, grid, measurement, noisy, pairs, spec_in
from tests.unit.test_verdict_pure import evidence as _evidence

T_MIN = 0.1
LOOK = comparison.LookContext(1, 3600.0, T_MIN, 0.95)
BOUNDARY = anytime.boundary(T_MIN, 0.05)
LEVEL = anytime.confidence_of(BOUNDARY)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return spec_in(tmp_path_factory.mktemp("spec"))


def evidence(*args, **kwargs):
    """test_verdict_pure's evidence at :data:`LOOK` (a sequence whose ``t_min`` is fixed)."""
    return dataclasses.replace(_evidence(*args, **kwargs), look=LOOK)


def expected(method: str, tau: float, source: str, n_eff_baseline: float | None, n_eff_window: float, dof: float) -> Assessment:
    return Assessment(method=method, tau_seconds=tau, memory_source=source, n_eff_baseline=n_eff_baseline, n_eff_window=n_eff_window,
                      dof=dof, look=1, min_fraction=T_MIN, boundary_z=BOUNDARY, interval_confidence=LEVEL, planned_seconds=3600.0)


def welch(parts: list[tuple[float, float]]) -> float:
    return sum(v for v, _ in parts) ** 2 / sum(v * v / d for v, d in parts)


def assert_same(got: Assessment, want: Assessment) -> None:
    for name, value in want.model_dump().items():
        have = getattr(got, name)
        if isinstance(value, float):
            assert have == pytest.approx(value, rel=1e-9), name
        else:
            assert have == value, name


def assert_interval(v, log_mean: float, var: float, dof: float) -> None:
    """The recorded interval is the t interval at the recorded per-look level (scipy's quantile)."""
    t = sps.t.ppf((1 + LEVEL) / 2, dof)
    assert v.primary.estimate.low == pytest.approx(math.expm1(log_mean - t * math.sqrt(var)), rel=1e-6)
    assert v.primary.estimate.high == pytest.approx(math.expm1(log_mean + t * math.sqrt(var)), rel=1e-6)


def stored(ev, v):
    """The assessment as ``verify`` stores it and ``-o json`` prints it."""
    result = verify.result_of(ev, v)
    assert result.assessment == v.primary.assessment
    return result, result.model_dump(mode="json")["assessment"]


def test_before_after_records_the_comparison_it_judged(spec):
    rng = np.random.default_rng(2411)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, "tokens_per_joule", START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    w = noisy(rng, 110.0, tw.size)
    ev = evidence(spec, "before-after", b, measurement(b.query, START, END, tw, w))
    v = verdict.decide(ev)
    criterion = comparison.Criterion(0.95, "higher_is_better", spec.verification.min_effect_ratio)
    j = comparison.judge((tb, np.array([x for _, x in b.samples])), (tw, w), STEP, memory_of(b), criterion, LOOK)
    # The verdict adds the placebo line of the baseline's history (none here) to the comparison's figures.
    assert v.primary.assessment.model_dump(exclude={"placebo"}) == Assessment(**j.details()).model_dump(exclude={"placebo"})
    assert v.primary.assessment.placebo.startswith("not checked")
    assert v.primary.assessment.method == comparison.METHOD
    assert (v.primary.assessment.boundary_z, v.primary.assessment.interval_confidence) == pytest.approx((BOUNDARY, LEVEL))
    assert v.primary.assessment.n_eff_baseline == pytest.approx(tb.size, rel=0.05)  # white noise: every sample independent
    result, js = stored(ev, v)
    assert js["method"] == comparison.METHOD
    assert "(Fieller interval from the long-run variance" in report.render_markdown(ev.initiative, ev.baseline, result, "figure.png")


def test_canary_records_its_paired_log_ratio(spec):
    rng = np.random.default_rng(2412)
    tw = grid(START, END)
    shared = np.exp(0.05 * np.sin(2 * np.pi * tw / 3600.0))
    treatment, ctrl = noisy(rng, 110.0, tw.size) * shared, noisy(rng, 100.0, tw.size) * shared
    tb = grid(START - dt.timedelta(hours=1), START)
    b = baseline(spec, "tokens_per_joule", START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    ev = evidence(spec, "canary", b, measurement(b.query, START, END, tw, treatment), {"control": pairs(tw, ctrl), "related": []},
                  loads=1, variant={"label": "track", "control": "stable", "treatment": "canary"})
    v = verdict.decide(ev)
    d = np.log(treatment) - np.log(ctrl)
    model = pooled_memory([(tw, d)], STEP)  # no history: pooled over the window's log ratio
    s = side_estimate(tw, d, STEP, model, history_scale=False)
    assert_same(v.primary.assessment, expected(canary.METHOD, model.tau_seconds, "windows", None, s.n_eff, s.dof))
    assert_interval(v, d.mean(), s.var_mean, s.dof)
    # Not the before-after comparison of the treatment window with the baseline (240 / 240 effective samples).
    assert verdict.assessment_of(v.primary.judgement).n_eff_baseline is not None
    # Nor its notes: the before-after checks' findings are not the canary's.
    before_after = {n.kind for n in verdict.notes_of(v.primary.judgement)}
    assert before_after and not before_after & {n.kind for n in v.notes}, (before_after, v.notes)
    result, js = stored(ev, v)
    assert js["method"].startswith("canary:") and js["n_eff_baseline"] is None
    # The text describes the canary's series: its memory and the paired series' effective samples.
    assert f"(from the windows only: a lower bound), {s.n_eff:.1f} effective samples (window), {s.dof:.0f} dof" in statistics_line(result)
    text = report.render_markdown(ev.initiative, ev.baseline, result, "figure.png")
    assert f"- Method: {canary.METHOD}" in text and "(the design's interval on the log scale" in text and "Fieller" not in text


def test_control_records_its_difference_in_differences(spec):
    rng = np.random.default_rng(2413)
    tb, tw = grid(START - dt.timedelta(hours=2), START), grid(START, END)
    treated_b, control_b = noisy(rng, 100.0, tb.size), noisy(rng, 50.0, tb.size)
    treated_a, control_a = noisy(rng, 132.0, tw.size), noisy(rng, 60.0, tw.size)
    b = baseline(spec, "tokens_per_joule", START - dt.timedelta(hours=2), START, tb, treated_b)
    series = {"treated_history": [], "control_history": [], "control_before": pairs(tb, control_b), "control_after": pairs(tw, control_a)}
    ev = evidence(spec, "control", b, measurement(b.query, START, END, tw, treated_a), series, control_class="other")
    v = verdict.decide(ev)
    db, da = np.log(treated_b / control_b), np.log(treated_a / control_a)
    model = pooled_memory([(tb, db), (tw, da)], STEP)  # one model for both periods, no history
    sb, sa = side_estimate(tb, db, STEP, model), side_estimate(tw, da, STEP, model)
    dof = welch([(sa.var_mean, sa.dof), (sb.var_mean, sb.dof)])
    assert_same(v.primary.assessment, expected(control.METHOD, model.tau_seconds, "windows", sb.n_eff, sa.n_eff, dof))
    assert_interval(v, da.mean() - db.mean(), sa.var_mean + sb.var_mean, dof)
    assert stored(ev, v)[1]["method"].startswith("control:")


def test_seasonal_records_the_paired_series_and_the_baselines_memory(spec):
    rng = np.random.default_rng(2414)
    tb, tw = grid(T0, START), grid(START, END)
    cyc = lambda t: 1 + 0.3 * np.sin(2 * np.pi * t / 86400.0)  # noqa: E731
    vb, w = noisy(rng, 100.0, tb.size) * cyc(tb), noisy(rng, 110.0, tw.size) * cyc(tw)
    b = baseline(spec, "tokens_per_joule", T0, START, tb, vb)
    ev = evidence(spec, "seasonal", b, measurement(b.query, START, END, tw, w))
    v = verdict.decide(ev)
    same_hour = dict(zip(tb.tolist(), vb.tolist(), strict=True))
    d = np.log(w) - np.log([same_hour[t - 86400.0] for t in tw.tolist()])
    # The memory of the baseline around its cycle (the design's documented memory input), fitted as history.
    ht, hv = seasonal.deseasonalized(tb * 1000.0, vb, "day")
    model = fit_memory(ht, hv, STEP, source="history")
    s = side_estimate(tw, d, STEP, model, history_scale=False)
    assert_same(v.primary.assessment, expected(seasonal.METHOD, model.tau_seconds, "history", None, s.n_eff, s.dof))
    assert_interval(v, d.mean(), s.var_mean, s.dof)


def test_profile_records_both_periods_with_the_cycle_divided_out(spec):
    rng = np.random.default_rng(2415)
    tb, tw = grid(START - dt.timedelta(hours=6), START), grid(START, END)
    hours = np.arange(24)
    prof = 0.2 * np.sin(2 * np.pi * hours / 24.0)
    prof -= prof.mean()
    cycles = CycleKnowledge(daily="present", weekly="absent", history_seconds=16 * 86400.0, daily_p=0.001, daily_amplitude=0.2,
                            weekly_p=0.5, weekly_amplitude=0.01, profile_cycle="day", profile=prof.tolist(), profile_counts=[14.0] * 24)
    hour = lambda t: ((t % 86400) // 3600).astype(int)  # noqa: E731  (UTC)
    vb, w = noisy(rng, 100.0, tb.size) * np.exp(prof[hour(tb)]), noisy(rng, 110.0, tw.size) * np.exp(prof[hour(tw)])
    b = baseline(spec, "tokens_per_joule", START - dt.timedelta(hours=6), START, tb, vb).model_copy(update={"cycles": cycles})
    ev = evidence(spec, "profile", b, measurement(b.query, START, END, tw, w))
    v = verdict.decide(ev)
    yb, yw = vb * np.exp(-prof[hour(tb)]), w * np.exp(-prof[hour(tw)])
    model = pooled_memory([(tb, yb), (tw, yw)], STEP)
    sb, sw = side_estimate(tb, yb, STEP, model), side_estimate(tw, yw, STEP, model)
    rb, rw = sb.var_mean / sb.mean**2, sw.var_mean / sw.mean**2
    dof = welch([(rw, sw.dof), (rb, sb.dof)])
    assert v.primary.estimate.change == pytest.approx(yw.mean() / yb.mean() - 1, rel=1e-9)
    assert_same(v.primary.assessment, expected(profile.METHOD, model.tau_seconds, "windows", sb.n_eff, sw.n_eff, dof))
    assert_interval(v, math.log(yw.mean() / yb.mean()), rw + rb, dof)


def test_every_design_names_its_method():
    from obsctl.baselining.designs.run import BY_NAME

    assert all(d.method.startswith(f"{d.name}: ") for d in BY_NAME.values())
    assert before_after.DESIGN.method == before_after.METHOD
