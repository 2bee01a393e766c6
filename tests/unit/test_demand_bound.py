"""The demand-bound rule over every signal demand alone moves (obsctl.baselining.designs.demand),
with the expected changes computed here from the values written.

A class that serves everything that arrives: tokens/s = 10 x demand, a fixed price of
USD 12 per hour, so cost per million tokens = 12 / 3600 / tokens * 1e6 falls by exactly
``1 / (1 + demand change) - 1`` when demand alone rises.
"""

from __future__ import annotations

import numpy as np
import pytest

from obsctl.baselining.designs import before_after, demand, judge, run
from obsctl.rules import saturation
from obsctl.spec import Signal, WorkloadClass

T0 = 1_798_761_600
STEP = 15
PRICE_USD_PER_HOUR = 12.0


def _grid(start: int, seconds: int) -> np.ndarray:
    return start + STEP * np.arange(1, seconds // STEP + 1)


def _cost_per_million(tokens_per_second: np.ndarray) -> np.ndarray:
    return PRICE_USD_PER_HOUR / 3600 / tokens_per_second * 1e6


def _periods(n: int, demand_before: float, demand_after: float, queue: bool):
    """Baseline and window loads; ``queue``: saturated (busy 0.97, 6 waiting) instead of healthy (busy 0.5, none)."""
    busy, waiting = (0.97, 6.0) if queue else (0.5, 0.0)
    inputs = {"cpu_busy": [busy] * n, "cpus_allocated": [1.0] * n, "waiting": [waiting] * n}
    states = demand.states_of(inputs, saturation.Thresholds())
    return (demand.period_load("baseline", [demand_before] * n, states),
            demand.period_load("window", [demand_after] * n, states))


def test_pure_demand_rise_on_cost_per_token_is_inconclusive_naming_the_demand_change():
    rng = np.random.default_rng(46)
    tb, tw = _grid(T0, 3600), _grid(T0 + 3600, 3600)
    noise = lambda n: np.exp(rng.normal(0, 0.01, n))  # noqa: E731
    tokens_b, tokens_w = 10 * 100.0 * noise(tb.size), 10 * 146.0 * noise(tw.size)  # demand 100 -> 146 req/s
    cost_b, cost_w = _cost_per_million(tokens_b), _cost_per_million(tokens_w)
    e = before_after.effect(list(zip(tb, cost_b, strict=True)), list(zip(tw, cost_w, strict=True)), 0.95)
    assert e.ratio == pytest.approx(1 / 1.46 - 1, abs=0.003)  # -31.5 %: what the interval alone calls IMPROVED
    before, after = _periods(tb.size, 100.0, 146.0, queue=False)
    load = demand.assess(before, after, "cost", "usd_per_million_tokens", follows_demand=True)
    assert load.demand_change == pytest.approx(0.46, rel=1e-12)
    j = judge.judge(e, "lower_is_better", 0.02, load=load)
    assert j.interval_verdict == "IMPROVED"
    assert j.verdict == "INCONCLUSIVE"
    assert j.reason.startswith("usd_per_million_tokens is demand-bound: demand moved +46.0 % while the class was not "
                               "saturated in the baseline and the window (no queue built)")
    assert "fixed price" in j.reason and "the interval alone said IMPROVED" in j.reason


def test_efficiency_change_under_saturation_is_still_decided():
    # Saturated in both periods: tokens/s is the capacity, +10 % from the change, so the
    # cost per token falls by 1 / 1.1 - 1 = -9.1 % at a fixed price, and that is decided.
    rng = np.random.default_rng(10)
    tb, tw = _grid(T0, 3600), _grid(T0 + 3600, 3600)
    cost_b = _cost_per_million(1000.0 * np.exp(rng.normal(0, 0.01, tb.size)))
    cost_w = _cost_per_million(1100.0 * np.exp(rng.normal(0, 0.01, tw.size)))
    e = before_after.effect(list(zip(tb, cost_b, strict=True)), list(zip(tw, cost_w, strict=True)), 0.95)
    assert e.ratio == pytest.approx(1 / 1.1 - 1, abs=0.003)
    before, after = _periods(tb.size, 150.0, 150.0, queue=True)
    load = demand.assess(before, after, "cost", "usd_per_million_tokens", follows_demand=True)
    assert load.demand_bound is False and load.reason == ""
    j = judge.judge(e, "lower_is_better", 0.02, load=load)
    assert j.verdict == "IMPROVED" and j.interval_verdict == "IMPROVED"


def test_unknown_saturation_names_the_signal_and_keeps_the_verdict():
    n = 10
    before = demand.period_load("baseline", [100.0] * n, [None] * n)
    after = demand.period_load("window", [146.0] * n, [None] * n)
    cost = demand.assess(before, after, "cost", "usd_per_request", follows_demand=True)
    assert cost.demand_bound is None and cost.reason == "saturation state unknown in baseline, window: usd_per_request may measure demand"
    # Throughput keeps the wording verify has always printed.
    thr = demand.assess(before, after, "throughput", "tokens_per_second")
    assert thr.reason == "saturation state unknown in baseline, window: throughput may measure demand"


@pytest.mark.parametrize(("key", "follows"), [
    ("tokens_per_second", True), ("requests_per_second", True), ("error_requests_per_second", True),
    ("usd_per_million_tokens", True), ("usd_per_request", True), ("usd_per_sample", True),
    ("tokens_per_gpu_allocated_second", True), ("samples_per_gpu_allocated_second", True), ("tokens_per_joule", True),
    ("mfu_ratio", True), ("requests_running", True), ("kv_cache_usage_ratio", True),
    ("tokens_per_gpu_busy_second", False), ("prefix_cache_hit_ratio", False), ("ttft_p95_seconds", False),
    ("e2e_mean_seconds", False), ("queue_wait_p95_seconds", False), ("requests_waiting", False),
])
def test_catalogue_signals_say_whether_demand_moves_them(key, follows):
    sig = Signal(name="s", catalogue=key)
    assert demand.follows_demand(sig) is follows


@pytest.mark.parametrize(("category", "unit", "follows"), [
    ("throughput", "tokens/s", True), ("cost", "USD/1M tokens", True), ("utilization", "ratio", True),
    ("utilization", "tokens/CPU-s", False), ("quality", "ratio", False), ("saturation", "seconds", False),
])
def test_spec_query_signals_follow_demand_by_category_and_unit(category, unit, follows):
    sig = Signal(name="s", category=category, unit=unit, direction="higher_is_better", query="sum(x{$selector})")
    assert demand.follows_demand(sig) is follows


def test_rule_does_not_apply_to_a_training_class():
    from types import SimpleNamespace

    spec = SimpleNamespace(signals=[Signal(name="usd_per_sample", catalogue="usd_per_sample")])
    infer = WorkloadClass(name="serve", kind="inference", selector={"job": "x"})
    train = WorkloadClass(name="train", kind="training", selector={"job": "x"})
    assert run._follows_demand(spec, infer, "usd_per_sample", "cost") is True
    assert run._follows_demand(spec, train, "usd_per_sample", "cost") is False
    assert run._follows_demand(spec, infer, "gone_from_the_spec", "cost") is True  # by category


def test_closed_loop_vllm_capacity_gain_is_judged_as_capacity_not_demand():
    """The live vLLM case: fixed client concurrency above the engine's batch, so 4-8
    requests wait for capacity the whole time; ``--max-num-seqs`` 4 -> 8 raises tokens/s
    by 48.6 % and, in a closed loop, the arrivals with it (each finished request is
    replaced): demand +48.4 %. The engine's own queue (``engine_busy`` 1 while requests
    wait for capacity, ``waiting`` 4-8) makes both periods saturated, through the same
    ``period_of`` verify calls, with no CPU or GPU series at all, so the tokens/s gain is
    judged (IMPROVED), not refused as demand-bound."""
    from types import SimpleNamespace

    rng = np.random.default_rng(48)
    tb, tw = _grid(T0, 3600), _grid(T0 + 3600, 3600)
    tokens_b = 100.0 * np.exp(rng.normal(0, 0.01, tb.size))
    tokens_w = 148.6 * np.exp(rng.normal(0, 0.01, tw.size))
    e = before_after.effect(list(zip(tb, tokens_b, strict=True)), list(zip(tw, tokens_w, strict=True)), 0.95)
    spec = SimpleNamespace(saturation=SimpleNamespace(classes={}, **{f: None for f in (
        "busy_ratio", "idle_ratio", "queue_depth", "queue_wait_seconds", "rejected_per_second", "cpu_cores")}))
    wc = WorkloadClass(name="chat", kind="inference", source="vllm", selector={"job": "vllm", "model_name": "tiny-llama"})

    def period(name, times, offered):
        waiting = rng.integers(4, 9, times.size).astype(float)
        inputs = {"engine_busy": [(int(t), 1.0) for t in times], "waiting": list(zip(times.tolist(), waiting, strict=True))}
        return run.period_of(spec, wc, name, inputs, [(int(t), offered) for t in times])

    before, after = period("baseline", tb, 2.5), period("window", tw, 2.5 * 1.484)
    assert before.state == after.state == "saturated" and before.capacity_bound and after.capacity_bound
    load = demand.assess(before, after, "throughput", "tokens_per_second")
    assert load.demand_change == pytest.approx(0.484, rel=1e-9) and load.demand_bound is False
    j = judge.judge(e, "higher_is_better", 0.02, load=load)
    assert j.verdict == "IMPROVED"
    assert "demand +48.4 %" in load.line() and "saturation: baseline saturated, window saturated" in load.line()
    # The same change with no queue (an open loop the engine keeps up with): demand-bound.
    idle = lambda name, times, offered: run.period_of(  # noqa: E731
        spec, wc, name, {"engine_busy": [(int(t), 0.3) for t in times], "waiting": [(int(t), 0.0) for t in times]},
        [(int(t), offered) for t in times])
    free = demand.assess(idle("baseline", tb, 2.5), idle("window", tw, 2.5 * 1.484), "throughput", "tokens_per_second")
    assert free.demand_bound is True and judge.judge(e, "higher_is_better", 0.02, load=free).verdict == "INCONCLUSIVE"
