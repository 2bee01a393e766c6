"""Known answers for the comparison designs (obsctl.baselining.designs), computed independently here."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.baselining.designs import (
    before_after,
    canary,
    control,
    cycle,
    demand,
    judge,
    mix,
    seasonal,
)
from obsctl.baselining.text import present
from obsctl.errors import UsageError
from obsctl.rules import saturation

T0 = 1_798_761_600  # midnight UTC
STEP = 15


def _grid(start, seconds):
    return start + STEP * np.arange(1, seconds // STEP + 1)


def _ar1(rng, n, sd, phi=0.8):
    e = np.empty(n)
    x = rng.normal(0, sd)
    for i in range(n):
        x = phi * x + rng.normal(0, sd * np.sqrt(1 - phi**2))
        e[i] = x
    return e


def _s(t, y):
    return list(zip(t.tolist(), y.tolist(), strict=True))


def test_canary_point_is_geometric_mean_of_instant_ratios():
    rng = np.random.default_rng(1)
    t = _grid(T0, 3600)
    c = 1000 * np.exp(_ar1(rng, t.size, 0.03))
    tr = 1.1 * 1000 * np.exp(_ar1(rng, t.size, 0.03))
    e = canary.effect(_s(t, tr), _s(t, c), 0.95)
    expected = np.exp(np.mean(np.log(tr) - np.log(c))) - 1
    assert e.ratio == pytest.approx(expected, rel=1e-9)
    assert e.ci_low < e.ratio < e.ci_high
    assert e.samples == {"window": t.size}


def test_canary_matches_instants_only():
    t = _grid(T0, 600)
    e = canary.effect(_s(t, np.full(t.size, 2.0)), _s(t + 7, np.full(t.size, 1.0)), 0.95)
    assert e.ratio is None and "instant(s)" in e.reason


def test_control_is_difference_in_differences_of_logs():
    rng = np.random.default_rng(2)
    tb, ta = _grid(T0, 7200), _grid(T0 + 7200, 7200)
    common_b, common_a = _ar1(rng, tb.size, 0.05), _ar1(rng, ta.size, 0.05)
    tb_v = 1000 * 1.3 * np.exp(common_b + _ar1(rng, tb.size, 0.02))   # busy hour for both
    cb_v = 500 * 1.3 * np.exp(common_b + _ar1(rng, tb.size, 0.02))
    ta_v = 1000 * 0.8 * 1.1 * np.exp(common_a + _ar1(rng, ta.size, 0.02))  # quiet hour, treated +10 %
    ca_v = 500 * 0.8 * np.exp(common_a + _ar1(rng, ta.size, 0.02))
    e = control.effect(_s(tb, tb_v), _s(tb, cb_v), _s(ta, ta_v), _s(ta, ca_v), 0.95)
    d_b, d_a = np.log(tb_v) - np.log(cb_v), np.log(ta_v) - np.log(ca_v)
    assert e.ratio == pytest.approx(np.exp(d_a.mean() - d_b.mean()) - 1, rel=1e-9)
    assert e.context["control_change"] == pytest.approx(ca_v.mean() / cb_v.mean() - 1, rel=1e-9)
    assert e.context["control_change"] < -0.3  # the control fell with the hour of day ...
    assert e.ci_low < 0.10 < e.ci_high       # ... and the effect is still the +10 %


def test_before_after_is_ratio_of_means():
    rng = np.random.default_rng(3)
    tb, ta = _grid(T0, 3600), _grid(T0 + 3600, 3600)
    b, a = 100 * np.exp(_ar1(rng, tb.size, 0.05)), 120 * np.exp(_ar1(rng, ta.size, 0.05))
    e = before_after.effect(_s(tb, b), _s(ta, a), 0.95)
    assert e.ratio == pytest.approx(a.mean() / b.mean() - 1, rel=1e-9)


def test_seasonal_compares_the_same_hour_a_day_earlier():
    rng = np.random.default_rng(4)
    tb, tw = _grid(T0, 86400), _grid(T0 + 86400, 3600)
    profile = lambda t: 1 + 0.3 * np.sin(2 * np.pi * t / 86400)
    b = 1000 * profile(tb) * np.exp(_ar1(rng, tb.size, 0.03))
    w = 1000 * profile(tw) * np.exp(_ar1(rng, tw.size, 0.03))
    e = seasonal.effect(_s(tb, b), _s(tw, w), "day", 0.95)
    lookup = dict(zip(tb.tolist(), b.tolist(), strict=True))
    ref = np.array([lookup[t - 86400] for t in tw.tolist()])
    assert e.ratio == pytest.approx(np.exp(np.mean(np.log(w) - np.log(ref))) - 1, rel=1e-9)
    assert e.context["cycles"] == 1 and e.context["matched_share"] == 1.0


def test_seasonal_refuses_a_baseline_shorter_than_the_cycle():
    start = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    with pytest.raises(UsageError, match=r"spans 3h, less than one whole day \(1d\)"):
        seasonal.check_span(start, start + dt.timedelta(hours=3), "day")
    with pytest.raises(UsageError, match="15 days"):
        seasonal.check_span(start, start + dt.timedelta(days=2), "week")
    seasonal.check_span(start, start + dt.timedelta(days=1), "day")


def test_seasonal_same_wall_clock_hour_across_daylight_saving():
    # 2027-03-28 02:00 Europe/Berlin: clocks go forward; 12:00 local on the 29th is 23 h after 12:00 on the 28th? no: 24 h of
    # wall clock, 24 h of UTC except across the change, where the day before is 23 h earlier in UTC.
    at = dt.datetime(2027, 3, 28, 12, 0, tzinfo=dt.UTC)  # 14:00 CEST
    ms = np.array([int(at.timestamp() * 1000)])
    back = seasonal.matched_instants(ms, "day", 1, "Europe/Berlin")[0, 0]
    assert (ms[0] - back) / 3_600_000 == 23  # 14:00 CEST today <- 14:00 CET yesterday = 13:00 UTC
    assert (ms[0] - seasonal.matched_instants(ms, "day", 1)[0, 0]) / 3_600_000 == 24


def test_cycle_detected_with_its_amplitude_and_not_in_noise():
    rng = np.random.default_rng(5)
    t = _grid(T0, 86400)
    noise = _ar1(rng, t.size, 0.05, 0.95)
    cyc = cycle.detect(_s(t, 1000 * (1 + 0.3 * np.sin(2 * np.pi * t / 86400)) * np.exp(noise)), 0.02)
    assert cyc.checked and cyc.detected and cyc.amplitude == pytest.approx(0.30, abs=0.04)
    assert "--design seasonal" in cyc.reason and "+-3" in cyc.reason
    flat = cycle.detect(_s(t, 1000 * np.exp(noise)), 0.02)
    assert flat.checked and not flat.detected and flat.reason.startswith("no daily cycle past +-1.0% in the baseline")
    short = cycle.detect(_s(t[:480], 1000 * np.exp(noise[:480])), 0.02)
    assert not short.checked and "less than a day" in short.reason


def test_stored_cycle_fit_gives_the_same_check_and_follows_the_margin():
    # initiative start stores cycle.fit (the baseline's own); verify applies assess with
    # the spec's current min_effect_ratio: the same check as fitting again.
    rng = np.random.default_rng(6)
    t = _grid(T0, 86400)
    samples = _s(t, 1000 * (1 + 0.02 * np.sin(2 * np.pi * t / 86400)) * np.exp(_ar1(rng, t.size, 0.002, 0.5)))
    fits = cycle.fit(samples)
    assert [f.cycle for f in fits] == ["day"]
    for margin in (0.02, 0.1):
        assert cycle.detect(samples, margin, fits) == cycle.detect(samples, margin)
    # A +-2 % cycle is relevant against a 2 % margin (>= half of it), not against 10 %.
    assert cycle.detect(samples, 0.02, fits).detected and not cycle.detect(samples, 0.1, fits).detected
    assert cycle.fit(samples[:480]) is None


def test_demand_bound_only_for_unsaturated_signals_that_follow_demand():
    thr = saturation.Thresholds()
    calm = {"cpu_busy": [0.5] * 10, "cpus_allocated": [1.0] * 10, "waiting": [0.0] * 10}
    busy = {"cpu_busy": [0.97] * 10, "cpus_allocated": [1.0] * 10, "waiting": [6.0] * 10}
    before = demand.period_load("baseline", [100.0] * 10, demand.states_of(calm, thr))
    after = demand.period_load("window", [120.0] * 10, demand.states_of(busy, thr))
    ctx = demand.assess(before, after, "throughput", "tokens_per_second")
    assert ctx.demand_change == pytest.approx(0.2)
    assert ctx.demand_bound and "not saturated in the baseline" in ctx.reason and "efficiency" in ctx.reason
    assert before.state == "healthy" and after.state == "saturated"
    both = demand.assess(after, after, "throughput", "tokens_per_second")
    assert both.demand_bound is False
    assert demand.assess(before, after, "quality", "ttft_p95_seconds").demand_bound is None
    assert demand.assess(before, after, "utilization", "tokens_per_cpu_second").demand_bound is None
    assert demand.assess(before, after, "cost", "usd_per_token").demand_bound  # a fixed price over the tokens that arrived
    assert demand.assess(before, after, "throughput", "t", follows_demand=False).demand_bound is None  # a training class
    unknown = demand.period_load("window", None, [None] * 10)
    assert demand.assess(after, unknown, "throughput", "t").demand_bound is None  # saturated, then unknown
    assert demand.assess(before, unknown, "throughput", "t").demand_bound  # unsaturated in one period is enough


def test_demand_near_float_limit_is_said_in_words_not_nan():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow RuntimeWarning fails the test
        huge = demand.period_load("baseline", [1.7e308] * 50, ["saturated"] * 50)
        inf = demand.period_load("window", [float("inf"), float("nan")], ["saturated"] * 2)
        ctx = demand.assess(huge, inf, "throughput", "t")
    assert huge.demand == pytest.approx(1.7e308)  # a finite mean, not an overflowed sum
    assert inf.demand is None and ctx.demand_change is None
    assert "demand change undefined" in ctx.line() and "nan" not in ctx.line().lower()
    assert "inf" not in ctx.line().lower()


def test_mix_decomposition_known_answer():
    dec = mix.decompose("model", ("a", "b"), [1, 1], [1000, 500], [7, 3], [1000, 500])
    assert dec.total_change == pytest.approx(850 / 750 - 1)
    assert dec.mix_change == pytest.approx(850 / 750 - 1) and dec.rate_change == pytest.approx(0.0, abs=1e-12)
    assert dec.mix_share == pytest.approx(1.0) and dec.dominates(0.02)
    both = mix.decompose("model", ("a", "b"), [1, 1], [1000, 500], [7, 3], [1100, 550])
    assert (1 + both.mix_change) * (1 + both.rate_change) == pytest.approx(1 + both.total_change)
    assert both.rate_change == pytest.approx(0.10)
    assert "a 50% -> 70%" in both.line()


def test_judge_turns_a_cyclic_before_after_into_inconclusive():
    rng = np.random.default_rng(6)
    tb, tw = _grid(T0, 86400), _grid(T0 + 86400 + 6 * 3600, 3600)  # the window at the daily peak
    prof = lambda t: 1 + 0.3 * np.sin(2 * np.pi * t / 86400)
    b = 1000 * prof(tb) * np.exp(_ar1(rng, tb.size, 0.02))
    w = 1000 * prof(tw) * np.exp(_ar1(rng, tw.size, 0.02))
    e = before_after.effect(_s(tb, b), _s(tw, w), 0.95)
    j = judge.judge(e, "higher_is_better", 0.02, cycle=cycle.detect(_s(tb, b), 0.02))
    assert j.verdict == "INCONCLUSIVE" and "use --design seasonal or a control class" in j.reason


def test_a_look_claims_the_sequence_level_not_its_per_look_level():
    # On a sequence of looks the effect is computed at the look's nominal level (here
    # 98.3 %); the interval holds at the sequence's 95 % over all looks, which the text says.
    rng = np.random.default_rng(7)
    tb, tw = _grid(T0, 7200), _grid(T0 + 7200, 7200)
    b = 1000 * np.exp(_ar1(rng, tb.size, 0.02))
    w = 1100 * np.exp(_ar1(rng, tw.size, 0.02))
    e = before_after.effect(_s(tb, b), _s(tw, w), 0.983)
    assert e.confidence == 0.983
    plain = judge.judge(e, "higher_is_better", 0.02)
    on_sequence = judge.judge(e, "higher_is_better", 0.02, level=0.95)
    assert plain.verdict == on_sequence.verdict == "IMPROVED"
    assert "98.3" in plain.reason and "98.3" not in on_sequence.reason and "95" in on_sequence.reason


def _baseline(rng, hours=2):
    from obsctl.baselining.statistics import summary as stats
    from obsctl.records import Baseline, Population, Window

    t = _grid(T0, hours * 3600)
    v = 1000 * np.exp(_ar1(rng, t.size, 0.05, 0.9))
    start, end = (dt.datetime.fromtimestamp(x, dt.UTC) for x in (T0, T0 + hours * 3600))
    return Baseline(id="a.t.x", workload_class="a", signal="t", unit="1", direction="higher_is_better", query="sum(x)",
                    window=Window(start=start, end=end, step_seconds=STEP), population=Population(series_count=1),
                    stats=stats.summarize(v.tolist(), 10), created_at=end, samples=list(zip(t.tolist(), v.tolist(), strict=True)))


def test_planner_accounts_for_the_design():
    from obsctl.baselining.designs.plan import design_plan, factors
    from obsctl.spec import Spec

    spec = Spec.model_validate({"workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "x"}}],
                                "signals": [{"name": "t", "category": "throughput", "query": "sum(x{$selector})", "unit": "1",
                                             "direction": "higher_is_better"}]})
    b = _baseline(np.random.default_rng(9))
    ba = design_plan(spec, b, 0.10, "before-after")
    ctl = design_plan(spec, b, 0.10, "control")
    can = design_plan(spec, b, 0.10, "canary", 0.5)
    small = design_plan(spec, b, 0.10, "canary", 0.1)
    assert factors("canary", 0.5) == (4.0, 0.0) and factors("control") == (2.0, 2.0)
    assert ba.window_seconds < ctl.window_seconds
    assert can.window_seconds < small.window_seconds  # a 10 % canary needs longer than a 50/50 split


@pytest.mark.parametrize("comparison, message", [
    ({"classes": {"a": {"design": "control", "control": "a"}}}, "comparison.classes.a.control 'a' must be another workload class"),
    ({"classes": {"a": {"design": "control"}}}, "design control needs control: <another class>"),
    ({"classes": {"a": {"design": "canary"}}}, "comparison.classes.a: design canary needs variant: {label, control, treatment}"),
    ({"design": "control"}, "comparison.design control needs per-class settings; missing for: a, b"),
    ({"classes": {"a": {"variant": {"label": "track", "control": "x", "treatment": "x"}}}}, "control and treatment must differ"),
    ({"classes": {"zz": {"design": "seasonal"}}}, "comparison.classes.zz: no such workload class"),
    ({"timezone": "Mars/Olympus"}, "not an IANA time zone"),
    ({"design": "sideways"}, "comparison.design"),
])
def test_comparison_spec_errors_are_one_readable_line(tmp_path, comparison, message):
    import yaml

    from obsctl.errors import SpecError
    from obsctl.spec import load_spec

    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "x"}},
                             {"name": "b", "kind": "inference", "selector": {"job": "y"}}],
        "signals": [{"name": "t", "category": "throughput", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}],
        "comparison": comparison}))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text.strip()


def test_context_and_report_lines_show_design_effect_load_and_mix():
    from types import SimpleNamespace

    from obsctl.baselining.designs import run

    calm = demand.period_load("window (whole class)", [15.0] * 4, ["saturated"] * 4)
    load = demand.assess(calm, calm, "utilization", "tokens_per_cpu_second")
    dec = mix.decompose("model", ("a", "b"), [1, 1], [1000, 500], [7, 3], [1000, 500])
    ctx = {"design": "canary", "notes": ["canary: track=canary vs track=stable in the same window", load.line(), dec.line()],
           "effect": {"design": "canary", "ratio": 0.646, "ci_low": 0.564, "ci_high": 0.731, "confidence": 0.95, "log_se": 0.03,
                      "tau_seconds": 20.0, "treatment_mean": 1670.0, "control_mean": 1014.0},
           "load": run._load_context(load), "mix": run._mix_context(dec)}
    lines = present.context_lines(ctx)
    assert lines[0] == "design: canary"
    assert "effect T / C - 1 = +64.6 % (95 % CI +56.4 % .. +73.1 %" in lines[1] and "treatment 1670 vs control 1014" in lines[1]
    assert "demand 15 req/s; saturation: window (whole class) saturated" in lines
    md = "\n".join(present.report_lines(SimpleNamespace(design="canary", design_context=ctx)))
    assert "- Design: **canary**" in md and md.count("| window (whole class) | 15 | saturated | 100% |") == 1
    assert "| a | 50% | 70% |" in md and "the mix explains 100%" in md


def test_the_spec_and_the_design_objects_agree_on_what_a_design_needs():
    from obsctl.baselining.designs.run import BY_NAME
    from obsctl.spec import DESIGN_NEEDS

    assert {d.name for d in BY_NAME.values() if d.needs_control} == {n for n, (f, _) in DESIGN_NEEDS.items() if f == "control"} == {"control"}
    assert {d.name for d in BY_NAME.values() if d.needs_variant} == {n for n, (f, _) in DESIGN_NEEDS.items() if f == "variant"} == {"canary"}


def _design_name_comparisons(path) -> list[str]:
    """``file:line`` of each comparison with a design's name: ``x == "canary"`` or ``x in ("control", "canary")``."""
    import ast

    from obsctl.baselining.designs import DESIGNS

    def names(node) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in DESIGNS
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
            return all(isinstance(e, ast.Constant) and e.value in DESIGNS for e in node.elts)
        return False

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare) and any(names(n) for n in [node.left, *node.comparators]):
            found.append(f"{path}:{node.lineno}")
    return found


def test_no_code_outside_the_design_package_compares_a_designs_name():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    designs = root / "baselining" / "designs"
    files = [p for folder in ("obsctl", "baselining", "rules", "dashboards") for p in (root / folder).rglob("*.py")
             if designs not in p.parents]
    assert len(files) > 50
    assert [hit for p in files for hit in _design_name_comparisons(p)] == []
    assert _design_name_comparisons(designs / "judge.py")  # the check finds one where there is one
