"""The plan never promises a window shorter than verify accepts: the query's range selector
makes consecutive samples share input (obsctl.baselining.plan), known answers computed here.

A baseline stored with a white-noise memory (15 s step) of ``sum(rate(x[5m]))``: without
the floor the planner's shortest deciding window is 5 steps (75 s: 5 independent samples),
so a -30 % effect on a quiet signal "needs" 75 s. Samples 15 s apart of a 5 m rate share
19/20 of their input; as an AR(1) with the same integrated time (20 steps, phi = 19/21) a
window needs ``L^2 / Q(L) >= 5`` effective samples with
``Q(L) = L + 2 sum_{k<L} (L - k) phi^k``.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.baselining import plan as planner
from obsctl.baselining.designs.plan import design_plan
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Baseline, Memory, Population, Window
from obsctl.spec import Spec

T0 = 1_798_761_600
STEP = 15.0
N_EFF_MIN = 5.0


def _spec() -> Spec:
    return Spec.model_validate({"workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "x"}}],
                                "signals": [{"name": "t", "category": "throughput", "query": "sum(x{$selector})", "unit": "1",
                                             "direction": "higher_is_better"}]})


def _baseline(query: str) -> Baseline:
    rng = np.random.default_rng(3)
    t = T0 + STEP * np.arange(1, 241)
    v = 1000.0 + rng.normal(0, 1.0, t.size)  # 0.1 % noise: a -30 % effect is plain at any length
    start, end = (dt.datetime.fromtimestamp(x, dt.UTC) for x in (T0, t[-1]))
    white = Memory(step_seconds=STEP, coefficients=[], rho=[1.0], variance=1.0, mean=1000.0, samples=240, span_seconds=3585.0)
    return Baseline(id="a.t.x", workload_class="a", signal="t", unit="1", direction="higher_is_better", query=query,
                    window=Window(start=start, end=end, step_seconds=STEP), population=Population(series_count=1),
                    stats=summarize(v.tolist(), 10), created_at=end, samples=list(zip(t.tolist(), v.tolist(), strict=True)), memory=white)


def _shortest_steps_ar1(phi: float) -> int:
    for steps in range(2, 10_000):
        q = steps + 2 * sum((steps - k) * phi**k for k in range(1, steps))
        if steps * steps / q >= N_EFF_MIN:
            return steps
    raise AssertionError("not found")


@pytest.mark.parametrize(("query", "seconds"), [
    ('sum(rate(obsctl_tokens_total{job="x"}[5m]))', 300.0),
    ('sum(rate(a{job="x"}[1m])) / sum(rate(b{job="x"}[5m])) * 1e6', 300.0),
    ('max_over_time(sum(x{job="x"})[1h:1m])', 3600.0),
    ('sum(rate(x{path="/q[30m]"}[1m]))', 60.0),  # a range inside a label value does not count
    ('sum(x{job="x"})', 0.0),
    ("sum(rate(x[1h30m]))", 5400.0),
])
def test_longest_range_seconds(query, seconds):
    assert planner.longest_range_seconds(query) == seconds


def test_range_floor_is_the_ar1_with_the_ranges_integrated_time():
    floor = planner.memory_for(_baseline('sum(rate(x{job="x"}[5m]))'))
    assert floor.coefficients == pytest.approx((19 / 21,)) and floor.tau_seconds == pytest.approx(300.0)
    # A memory already longer than the range is kept as it is.
    long = planner.range_floor(floor, 60.0, STEP)
    assert long is floor


def test_plan_waits_for_the_ranges_memory_and_is_never_shorter_than_verify_accepts():
    spec = _spec()
    plain = planner.baseline_plan(spec, _baseline('sum(x{job="x"})'), -0.30)
    # White memory: 5 samples are 5 effective samples, and the quiet signal decides at once.
    assert plain.min_window_seconds == 5 * STEP and plain.window_seconds == 5 * STEP

    ranged = planner.baseline_plan(spec, _baseline('sum(rate(obsctl_tokens_total{job="x"}[5m]))'), -0.30)
    expected = _shortest_steps_ar1(19 / 21) * STEP
    assert expected > 300.0  # longer than the range itself: five independent samples of a 5 m average
    assert ranged.tau_seconds == pytest.approx(300.0)
    assert ranged.min_window_seconds == expected and ranged.window_seconds == expected
    for design in ("before-after", "canary", "control"):
        p = design_plan(spec, _baseline('sum(rate(obsctl_tokens_total{job="x"}[5m]))'), -0.30, design)
        assert p.window_seconds >= expected, design


def test_floored_raises_every_window_to_the_range_and_keeps_unreachable():
    spec = _spec()
    p = planner.baseline_plan(spec, _baseline('sum(x{job="x"})'), -0.30)
    b = _baseline('sum(rate(x{job="x"}[20m]))')
    f = planner.floored(p, b)
    assert f.window_seconds == f.min_window_seconds == 1200.0
    assert f.no_change_window_seconds is None or f.no_change_window_seconds >= 1200.0
    unreachable = planner.floored(p.__class__(**{**p.__dict__, "window_seconds": None}), b)
    assert unreachable.window_seconds is None
