"""The review's rules one by one (baselining/practice/review.py, targets.py, movement.py), with
known answers computed here; the whole review on a real Prometheus is
tests/integration/test_review_live.py."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from obsctl.baselining.practice import movement, targets
from obsctl.baselining.practice import review as rv
from obsctl.baselining.store import Store
from obsctl.baselining.text.present_review import review_lines, review_markdown
from obsctl.records import Initiative, Population, VerificationResult, Window
from obsctl.spec import Signal, Target
from support.benches import load
from support.rules_fixtures import SPEC, write_spec

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def _signal(**kw) -> Signal:
    base = {"name": "s", "category": "throughput", "query": "sum(x{$selector})", "unit": "tokens/s", "direction": "higher_is_better"}
    return Signal(**(base | kw))


def test_review_confidence_is_bonferroni_with_the_model_margin():
    assert movement.review_confidence(0.95, 8) == pytest.approx(1 - 0.05 / (movement.MODEL_MARGIN * 8))
    assert movement.review_confidence(0.95, 1) == pytest.approx(1 - 0.05 / movement.MODEL_MARGIN)


def test_window_step_keeps_a_week_under_the_point_limit():
    start = NOW - dt.timedelta(days=7)
    step = movement.window_step(15, start, NOW)
    assert step % 15 == 0 and 7 * 86400 / step <= movement.MAX_POINTS and 7 * 86400 / (step - 15) > movement.MAX_POINTS


def test_movement_window_is_the_last_period_aligned_to_its_step():
    from support.store_records import make_baseline

    end = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
    b = make_baseline(created=end)  # window ends 12:00:00, step 15 s
    # A week at 15 s is 40,320 points: read at 5 x 15 s = 75 s (movement.MAX_POINTS 10,000); "now" between steps.
    as_of = end + dt.timedelta(days=8, seconds=37, microseconds=250_000)
    start, stop, step = rv.movement_window(b, 7 * 86400, as_of)
    assert step == 75.0
    grid_end = math.floor(as_of.timestamp() / 75) * 75
    assert stop.timestamp() == grid_end and 0 < as_of.timestamp() - grid_end < 75
    assert start == stop - dt.timedelta(days=7)  # a week is 8,064 steps of 75 s: start on the grid too
    # A young baseline: the window starts at its end (already on the grid), ends on the grid.
    young = end + dt.timedelta(seconds=47, microseconds=900_000)
    assert rv.movement_window(b, 7 * 86400, young) == (end, end + dt.timedelta(seconds=45), 15.0)
    # A baseline end off the step grid starts the window at the next step.
    odd = make_baseline(created=end + dt.timedelta(seconds=7))
    assert rv.movement_window(odd, 7 * 86400, young)[0] == end + dt.timedelta(seconds=15)


def test_block_means_drop_blocks_with_less_than_half_their_points():
    t = np.arange(0, 600, 60.0)  # 10 points, block of 5 steps
    v = np.arange(10.0)
    keep = np.r_[0:5, 8:10]  # second block keeps 2 of 5
    bt, bv = movement.block_means(t[keep], v[keep], 300, 60)
    assert bt.tolist() == [0.0] and bv.tolist() == [2.0]


@pytest.mark.timeout(1200)  # CPU-bound (each review fits its cycle): minutes on a loaded 2-core machine, not a hang
def test_drift_calibration_small_seeded():
    # The benchmark's cells at a tenth of their size, fixed seeds: false drift over 8
    # reviews near the stated 5 % and the +-10 % step found within two reviews.
    bench_drift = load("bench_drift")
    cells = bench_drift.table(scale=0.1, only="plain")
    nulls = [c for c in cells if c.step == 0]
    steps = [c for c in cells if c.step != 0]
    assert sum(c.hits for c in nulls) / sum(c.lives for c in nulls) <= 0.10
    assert all(c.rate >= 0.8 for c in steps)


def test_judge_movement_flags_a_step_and_not_a_flat_signal():
    rng = np.random.default_rng(1)
    t = np.arange(1440 * 8) * 60.0
    x = 100 * (1 + 0.02 * rng.standard_normal(t.size))
    base, win = (t[:1440], x[:1440]), (t[1440:], x[1440:])
    flat = movement.judge_movement(base, win, 60, None, "higher_is_better", 0.02)
    moved = movement.judge_movement(base, (win[0], win[1] * 1.1), 60, None, "higher_is_better", 0.02)
    assert flat.verdict == "NO_CHANGE" and moved.verdict == "IMPROVED" and moved.change == pytest.approx(0.1, abs=0.01)


def test_rank_puts_money_first_then_severity():
    f = lambda kind, usd, sev: rv.Finding(kind, "c", None, sev, usd, "s", "a")  # noqa: E731
    ranked = rv.rank([f("a", None, "critical"), f("b", 10.0, "info"), f("c", 300.0, "info"), f("d", None, "warning")])
    assert [x.kind for x in ranked] == ["c", "b", "a", "d"]


def test_class_cadence_precedence(tmp_path):
    data = {**SPEC, "cadence": "monthly", "review": {"weekly_above_usd_per_month": 10000}}
    data["workload_classes"] = [dict(SPEC["workload_classes"][0]), dict(SPEC["workload_classes"][1], cadence="monthly")]
    spec = write_spec(tmp_path, data)
    svc, other = spec.workload_classes
    assert rv.class_cadence(spec, svc, 5000) == "monthly"
    assert rv.class_cadence(spec, svc, 20000) == "weekly"  # above the threshold
    assert rv.class_cadence(spec, other, 20000) == "monthly"  # its own cadence wins
    assert rv.reviews_per_life(spec, 30 * 86400) == 8


def test_required_per_quarter_and_gap_usd_known_answers():
    # 3x in 60 days: 3 ** (91.3125 / 60) - 1
    assert rv.required_per_quarter(1000, 3000, "higher_is_better", 60) == pytest.approx(3 ** (91.3125 / 60) - 1)
    assert rv.required_per_quarter(2.0, 1.6, "lower_is_better", 91.3125) == pytest.approx(0.25)
    assert rv.gap_usd("cost", "lower_is_better", 2.0, 1.6, 10000) == pytest.approx(2000)
    assert rv.gap_usd("throughput", "higher_is_better", 800, 1000, 10000) == pytest.approx(2000)
    assert rv.gap_usd("quality", "higher_is_better", 0.8, 0.9, 10000) is None


def test_team_rate_compounds_promoted_gains_per_quarter():
    def done(change, status="promoted"):
        v = VerificationResult(verdict="IMPROVED", primary_verdict="IMPROVED", baseline_id="b", signal="s",
                               window=Window(start=NOW, end=NOW, step_seconds=15), baseline_mean=1, window_mean=1,
                               change_ratio=change, ci_low=0, ci_high=0, confidence=0.95, verified_at=NOW - dt.timedelta(days=30))
        return Initiative(id=f"i{change}", name="n", lever="batch-size", workload_class="c", primary_signal="s", baseline_id="b",
                          started_at=NOW - dt.timedelta(days=40), status=status, verifications=[v])
    rate = rv.team_rate([done(-0.1), done(-0.1), done(-0.5, "closed")], "s", "lower_is_better", NOW)
    assert rate == pytest.approx(1.21 ** 0.25 - 1)
    assert rv.team_rate([], "s", "lower_is_better", NOW) is None


def test_population_shape_differences():
    two = Population(series_count=2, label_sets=[{"instance": "a", "gpu_model": "H100", "model": "m"},
                                                 {"instance": "b", "gpu_model": "H100", "model": "m"}])
    three = Population(series_count=3, label_sets=[*two.label_sets, {"instance": "c", "gpu_model": "A100", "model": "m"}])
    before, now = rv.PopulationShape.of(two), rv.PopulationShape.of(three)
    assert before.differences(before) == []
    assert before.differences(now) == ["accelerators H100 -> A100, H100", "replicas 2 -> 3"]
    truncated = Population(series_count=500, label_sets=two.label_sets)  # more series than kept: no replica count
    assert rv.PopulationShape.of(truncated).replicas is None


def test_value_bounds_of_impossible_targets():
    from obsctl.spec import value_bound_error

    assert value_bound_error(1.2, _signal(unit="ratio", category="utilization"))
    assert value_bound_error(0.0, _signal(unit="USD/1M tokens", category="cost", direction="lower_is_better"))
    assert value_bound_error(-1, _signal())
    assert value_bound_error(0.9, _signal(unit="ratio", category="utilization")) is None


def test_check_refuses_an_absolute_target_beyond_its_bound(tmp_path):
    from obsctl.errors import SpecError

    data = {**SPEC, "targets": [{"workload_class": "svc", "signal": "usd_per_million_tokens", "absolute": 0, "driver": "d",
                                 "deadline": "2027-01-01"}]}
    with pytest.raises(SpecError, match="cost of zero"):
        write_spec(tmp_path, data)


def test_relative_target_stays_anchored_after_a_promotion(tmp_path):
    from support.rules_fixtures import baseline

    store = Store(tmp_path / "store")
    store.save_baseline(baseline("svc", "tokens_per_second", 1000.0))
    t = Target(workload_class="svc", signal="tokens_per_second", relative=0.2, driver="d", deadline=dt.date(2027, 1, 1))
    first = targets.anchor(store, t, NOW)
    assert (first.anchor_value, first.anchored_at) == (1000.0, NOW)
    store.save_baseline(baseline("svc", "tokens_per_second", 1250.0, created="2026-02-01T00:00:00+00:00"))
    again = targets.anchor(store, t, NOW + dt.timedelta(days=5))
    assert again.anchor_value == 1000.0  # the promoted 1250 does not move the target
    st = targets.state(t, _signal(name="tokens_per_second"), again, 1250.0, None, NOW + dt.timedelta(days=5))
    assert st.value == pytest.approx(1200.0) and st.met and st.progress == pytest.approx(250 / 200)
    edited = t.model_copy(update={"relative": 0.3})
    assert targets.anchor(store, edited, NOW).anchor_value == 1250.0  # an edited target is a new one


def test_target_state_overdue_and_elapsed():
    t = Target(workload_class="c", signal="s", absolute=2000, driver="d", deadline=dt.date(2026, 5, 1))
    rec = targets.TargetRecord(workload_class="c", signal="s", absolute=2000, deadline=t.deadline,
                               anchored_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    st = targets.state(t, _signal(), rec, 1500.0, 1000.0, NOW)
    assert st.overdue and not st.met and st.elapsed > 1 and st.progress == pytest.approx(0.5)


def test_planned_end_is_start_plus_planned_window(tmp_path):
    spec = write_spec(tmp_path)
    i = Initiative(id="i", name="n", lever="batch-size", workload_class="svc", primary_signal="s", baseline_id="b",
                   started_at=NOW, planned_window_seconds=7200)
    assert rv.planned_end(spec, i) == NOW + dt.timedelta(hours=2)


def test_text_and_markdown_escape_untrusted_text():
    f = rv.Finding("owner_missing", "svc", None, "warning", 12345.0, "a *bold* | pipe", "set owner", "team <x>")
    result = rv.ReviewResult(NOW, ["svc"], {"svc": "weekly"}, [f])
    lines = review_lines(result)
    assert lines[1].startswith("WARNING  owner_missing svc [12,345 USD/mo]") and lines[-1].startswith("1 finding(s)")
    md = review_markdown(result)
    assert "a \\*bold\\* \\| pipe" in md and "team \\<x\\>" in md
    assert result.fails("warning") and not result.fails("critical")
    assert math.isclose(result.as_dict()["findings"][0]["usd_per_month"], 12345.0)


def test_placebo_widening_known_answer():
    # Seven 1-day periods of hourly blocks, each day at its own level: the overlapping
    # 1-day means around the grand mean, times m / (m - 1), against the model's variance.
    levels = np.array([0.0, 2.0, -1.0, 3.0, 1.0, -2.0, 4.0])
    means = np.repeat(levels, 24) + 100
    times = np.arange(means.size) * 3600.0
    per, m = 24, 7
    placebos = np.array([means[i:i + per].mean() for i in range(means.size - per + 1)])
    observed = np.mean((placebos - means.mean()) ** 2) * m / (m - 1)
    factor, dof = movement.placebo_widening(times, means, 86400.0, 0.1)
    assert factor == pytest.approx(observed / 0.1) and dof == pytest.approx(1.5 * (m - 1))
    assert movement.placebo_widening(times, means, 86400.0, observed * 2) is None  # the model already wider
    assert movement.placebo_widening(times[:72], means[:72], 86400.0, 0.1) is None  # 3 periods < PLACEBO_MIN


def test_judge_movement_widens_by_the_placebo_periods():
    # A signal with memory on several time scales (the benchmark's multi-scale family):
    # where the window's placebo periods spread more than the model says, the verdict's
    # interval is the model's, widened by exactly their factor and dof.
    bench_drift = load("bench_drift")
    family = bench_drift.FAMILIES["multi-scale (phi 0.5, 0.95, 0.995)"]
    t = np.arange(1440 * 8) * 60.0
    criterion = movement.comparison.Criterion(movement.review_confidence(0.95, 8), "higher_is_better", 0.02)
    for seed in range(40):
        x = bench_drift.path(np.random.default_rng(seed), family, t.size)
        base, win = (t[:1440], x[:1440]), (t[1440:], x[1440:])
        bt, bv = movement.block_means(*base, 3600, 60)
        wt, wv = movement.block_means(*win, 3600, 60)
        model = movement._longer(movement.fit_memory(wt, wv, 3600), movement.pooled_memory([(bt, bv), (wt, wv)], 3600))
        widen = movement.placebo_widening(wt, wv, 86400.0, movement.comparison.baseline_side(bt, bv, 3600, model).side.var_mean)
        plain = movement.comparison.judge((bt, bv), (wt, wv), 3600, model, criterion)
        if widen is not None and plain.low is not None:
            break
    else:
        pytest.fail("no seed widened")
    explicit = movement.comparison.judge((bt, bv), (wt, wv), 3600, model, criterion, widen=widen)
    got = movement.judge_movement(base, win, 60, None, "higher_is_better", 0.02)
    assert (got.low, got.high) == (explicit.low, explicit.high)
    assert got.high - got.low > plain.high - plain.low


def test_progress_phrase_says_moved_away_instead_of_negative_progress():
    def state(start, current, value):
        return targets.TargetState(value, start, current, (current - start) / (value - start), 0.5, False, False, 30)

    assert rv.progress_phrase(state(100.0, 140.0, 200.0), "tokens/s") == "40.0 % done"
    away = rv.progress_phrase(state(100.0, 60.0, 120.0), "tokens/s")  # progress -2.0
    assert away == "moved away from its start (100 -> 60 tokens/s, target 120)" and "%" not in away


def test_a_wobble_the_day_after_the_anchor_is_not_behind_the_same_level_later_is():
    # +6 % target on 1,000 tokens/s (value 1,060), anchored a day before "now", deadline in
    # 165 days; the level dipped 1.3 % (987): progress (987 - 1000) / 60 = -21.7 %.
    def at(elapsed):
        return targets.TargetState(value=1060.0, start=1000.0, current=987.0, progress=-13 / 60, elapsed=elapsed, met=False,
                                   overdue=False, days_left=165.0)

    assert not rv.behind(at(1 / 166), 0.02)  # shortfall 13.4 tokens/s < 2 % of 1,000
    assert rv.behind(at(0.5), 0.02)  # shortfall (0.5 + 0.217) x 60 = 43 > 20
    # At the noise boundary: (e + 13/60) x 60 > 20 <=> e > 7/60.
    assert not rv.behind(at(7 / 60 - 1e-6), 0.02) and rv.behind(at(7 / 60 + 1e-6), 0.02)
    # Progress ahead of the schedule is never behind.
    assert not rv.behind(targets.TargetState(1060.0, 1000.0, 1050.0, 50 / 60, 0.5, False, False, 100.0), 0.02)


def test_a_baseline_is_stale_after_two_cadence_periods_by_default(tmp_path):
    spec = write_spec(tmp_path)
    week = 7 * 86400
    assert rv.max_age_seconds(spec, week) == 2 * week
    assert rv.reviews_per_life(spec, week) == 8  # the drift check's error still spread over baseline_life
    five = write_spec(tmp_path, {**SPEC, "review": {**SPEC.get("review", {}), "stale_periods": 5}})
    assert rv.max_age_seconds(five, 30 * 86400) == 150 * 86400
