"""Cycle knowledge: detection on planted cycles, the profile design's effect, the default
design, the refusal of phases an unknown cycle may move, and a seeded calibration through
``decide`` (bench/bench_cycles.py at a small scale)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
import yaml

from obsctl.baselining.designs import knowledge, profile
from obsctl.baselining.designs import run as designs
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Baseline, CycleKnowledge, Population, Window
from obsctl.spec import load_spec
from support.benches import load

DAY, WEEK = 86400.0, 7 * 86400.0
MONDAY = dt.datetime(2026, 11, 2, tzinfo=dt.UTC).timestamp()  # a Monday 00:00 UTC
END = MONDAY + 3 * WEEK  # the baseline ends here (a Monday 00:00)


def series(days: float, daily: float = 0.0, weekend: float = 0.0, seed: int = 1, step: float = 300.0, sigma: float = 0.03):
    """``days`` of history before :data:`END` at ``step``: 100 x cycles x white log noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(END - days * DAY + step, END + step / 2, step)
    sat_sun = np.isin(((t - MONDAY) // DAY) % 7, (5, 6))
    v = 100 * (1 + daily * np.sin(2 * np.pi * t / DAY)) * np.where(sat_sun, 1 - weekend, 1.0) * np.exp(rng.normal(0, sigma, t.size))
    return t, v


def empty():
    return np.array([]), np.array([])


def test_a_planted_weekly_cycle_is_present_with_its_weekend_in_the_profile():
    k = knowledge.learn(series(16, weekend=0.10), empty(), 0.02)
    assert (k.daily, k.weekly, k.profile_cycle) == ("absent", "present", "week")
    prof = np.asarray(k.profile)
    # Independent answer: the weekend hours sit log(0.9) below the weekday hours.
    assert prof[120:].mean() - prof[:120].mean() == pytest.approx(np.log(0.9), abs=0.01)
    assert min(k.profile_counts) >= 2 and k.profile_variance is not None


def test_a_planted_daily_cycle_on_three_days_leaves_the_week_unknown():
    k = knowledge.learn(series(3, daily=0.15), empty(), 0.02)
    assert (k.daily, k.weekly, k.profile_cycle) == ("present", "unknown", "day")
    prof = np.asarray(k.profile)
    # The hour whose profile peaks: sin peaks at 6:00 UTC (hour 5-6 bins hold the top).
    assert int(np.argmax(prof)) in (5, 6)
    assert k.daily_amplitude == pytest.approx(0.15, abs=0.02)


def test_no_cycle_on_sixteen_days_is_absent_and_no_profile():
    k = knowledge.learn(series(16), empty(), 0.02)
    assert (k.daily, k.weekly, k.profile_cycle, k.profile) == ("absent", "absent", None, [])
    assert not knowledge.present(k)


def test_a_history_shorter_than_two_days_knows_nothing():
    k = knowledge.learn(series(1.5, daily=0.15), empty(), 0.02)
    assert (k.daily, k.weekly) == ("unknown", "unknown")
    assert "needs 2d" in knowledge.describe(k) and "needs 14d" in knowledge.describe(k)


def test_the_profile_design_divides_a_known_weekly_cycle_out():
    # Noise-free: the window (Saturday) against a Friday-afternoon baseline, +10 % truth.
    k = knowledge.learn(series(16, weekend=0.10, sigma=0.0), empty(), 0.0)
    assert k.profile_cycle == "week"
    fri = END - 3 * DAY + 16 * 3600  # Friday 16:00
    tb = np.arange(fri + 60, fri + 3600 + 30, 60.0)
    tw = np.arange(fri + 3600 + 60, fri + 3600 + 24 * 3600 + 30, 60.0)
    weekend = np.isin(((tw - MONDAY) // DAY) % 7, (5, 6))
    vb, vw = np.full(tb.size, 100.0), 110.0 * np.where(weekend, 0.9, 1.0)
    e = profile.effect(list(zip(tb, vb, strict=True)), list(zip(tw, vw, strict=True)), k, 0.95)
    assert e.ratio == pytest.approx(0.10, abs=1e-6)
    # The before-after ratio the cycle would have given instead:
    assert vw.mean() / vb.mean() - 1 < 0.07


def test_phases_of_an_unknown_weekly_cycle_are_refused_with_the_first_mismatched_look():
    k = CycleKnowledge(daily="absent", weekly="unknown", history_seconds=3 * DAY)
    fri = END - 3 * DAY + 16 * 3600
    tb = np.arange(fri + 60, fri + 3600 + 30, 60.0)
    friday = np.arange(fri + 3600 + 60, fri + 5 * 3600, 60.0)
    assert knowledge.phase_check(k, tb, friday, fri + 3600, fri + 3600) is None
    weekend = np.arange(fri + 3600 + 60, fri + 3600 + 30 * 3600, 60.0)
    check = knowledge.phase_check(k, tb, weekend, fri + 3600, fri + 3600)
    assert check.detected and check.refusal == "cycle-unknown" and check.cycle == "week"
    # Independent answer: from Friday 17:00 (samples each minute, Saturday from the 00:00 one on)
    # the cumulative window is past 10 % weekend once its w weekend samples satisfy
    # w / (420 + w) > 0.1, i.e. w = 47: the look ending at Saturday 00:46, 7h46m after the start.
    assert "ends before 2026-11-21T00:46:00Z (7h46m after the start)" in check.reason
    assert "--design control" in check.reason and "history spans 14d" in check.reason


def test_an_unknown_daily_cycle_refuses_hours_far_from_the_baseline():
    k = CycleKnowledge(daily="unknown", weekly="unknown", history_seconds=DAY)
    start = END - 2 * DAY + 14 * 3600  # Saturday 14:00: the same day type throughout
    tb = np.arange(start - 3600 + 60, start + 30, 60.0)
    near = np.arange(start + 60, start + 3 * 3600, 60.0)
    far = np.arange(start + 60, start + 8 * 3600, 60.0)
    assert knowledge.phase_check(k, tb, near, start, start) is None
    assert knowledge.phase_check(k, tb, far, start, start).cycle == "day"


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "infer", "kind": "inference", "selector": {"job": "infer"}}],
        "signals": [{"name": "tps", "category": "utilization", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}],
    }))
    return load_spec(path)


def _baseline(cycles):
    at = dt.datetime.fromtimestamp(END, dt.UTC)
    return Baseline(id="infer.tps.20261123T000000Z", workload_class="infer", signal="tps", unit="1", direction="higher_is_better",
                    query="sum(x)", window=Window(start=at - dt.timedelta(hours=1), end=at, step_seconds=60), population=Population(series_count=1),
                    stats=summarize([1.0, 1.0]),
                    created_at=at, cycles=cycles)


def test_the_default_design_is_profile_only_when_a_cycle_is_known(spec):
    known = knowledge.learn(series(16, weekend=0.10), empty(), 0.02)
    choice = designs.choose(spec, "infer", None, None, _baseline(known))
    assert choice.design == "profile" and "weekly cycle" in choice.why
    assert designs.choose(spec, "infer", None, None, _baseline(CycleKnowledge())).design == "before-after"
    assert designs.choose(spec, "infer", "before-after", None, _baseline(known)).design == "before-after"
    named = spec.model_copy(update={"comparison": spec.comparison.model_copy(update={"design": "before-after"})})
    named.comparison.model_fields_set.add("design")
    assert designs.choose(named, "infer", None, None, _baseline(known)).design == "before-after"


def test_profile_is_refused_at_start_on_a_baseline_without_a_cycle(spec):
    from obsctl.errors import UsageError

    with pytest.raises(UsageError, match="--design profile divides out the cycle"):
        designs.check_start(spec, None, "infer", designs.Choice("profile"), _baseline(CycleKnowledge()))
    designs.check_start(spec, None, "infer", designs.Choice("profile"), _baseline(knowledge.learn(series(16, weekend=0.10), empty(), 0.02)))


def test_seeded_calibration_through_decide(spec):
    """The audit's Friday 17:00 null with a 10 % weekend: without cycle knowledge most replicates
    end REGRESSED; with a 10-day history the weekend looks are refused (none decided wrongly);
    with 16 days the profile design finds +10 % within 24 h."""
    bench = load("bench_cycles")
    rng = np.random.default_rng(20261205)
    looks = (6, 24, 72)
    starts = bench.changes(bench.BEFORE, (17,), 6)
    before = [bench.replicate(rng, spec, bench.BEFORE, c, 0.0, looks) for c in starts]
    assert sum(any(v.verdict == "REGRESSED" for v in vs) for vs in before) >= 4
    short = [bench.replicate(rng, spec, bench.FAMILIES["friday-short"], c, 0.0, looks) for c in starts]
    assert not any(v.verdict in ("IMPROVED", "REGRESSED") for vs in short for v in vs)
    assert all(bench._refused(vs[-1]) for vs in short) and all(not bench._refused(vs[0]) for vs in short)
    known = [bench.replicate(rng, spec, bench.FAMILIES["friday-known"], c, 0.10, looks) for c in starts]
    assert all(vs[0].primary.design.design == "profile" for vs in known)
    assert sum(any(v.verdict == "IMPROVED" for v in vs[:2]) for vs in known) >= 4


def _ar_daily(days: float, end: float, seed: int, step: float = 60.0, phi: float = 0.81, sigma: float = 0.05, daily: float = 0.15):
    """``days`` before ``end`` at ``step``: 100 x (1 + daily sin) x exp(AR(1)), ``phi`` per step, marginal sd ``sigma``."""
    from scipy import signal as spsignal

    rng = np.random.default_rng(seed)
    t = np.arange(end - days * DAY + step, end + step / 2, step)
    e = rng.normal(0.0, sigma * np.sqrt(1 - phi**2), t.size)
    e[0] = rng.normal(0.0, sigma)
    noise = spsignal.lfilter([1.0], [1.0, -phi], e)
    return t, 100 * (1 + daily * np.sin(2 * np.pi * (t - 6 * 3600) / DAY)) * np.exp(noise)


def test_the_profile_designs_memory_is_fitted_with_the_cycle_divided_out():
    """Fitted to the raw history, a +-15 % daily cycle reads as long memory; with the profile
    divided out the memory is the noise's: AR(1) with phi = 0.81 per 60 s step has the
    integrated autocorrelation time (1 + phi) / (1 - phi) steps = 572 s."""
    from obsctl.baselining.measure.history import fit_history
    from obsctl.baselining.snapshot import with_cycle_memory

    t, v = _ar_daily(16, END, seed=3)
    hist5 = (t <= END - 3600) & (np.mod(t, 300.0) == 0)
    base = t > END - 3600
    mem = (t > END - 3600 - 3 * DAY) & ~base
    tb, vb = t[base], v[base]
    k = knowledge.learn((t[hist5], v[hist5]), (tb, vb), 0.02)
    assert k.profile_cycle == "day" and k.memory is None
    pairs = list(zip(t[mem].tolist(), v[mem].tolist(), strict=True))
    raw = fit_history(pairs, 60.0, 60.0, list(zip(tb.tolist(), vb.tolist(), strict=True)), (tb, vb))
    k = with_cycle_memory(k, pairs, 60.0, 60.0, (tb, vb))
    assert k.memory is not None and k.memory.source == "history"
    assert k.memory.tau_seconds == pytest.approx(1.81 / 0.19 * 60, rel=0.2)
    assert raw.tau_seconds > 5 * k.memory.tau_seconds  # the cycle read as memory
    # The design uses it (not a model pooled over the two compared hours).
    assert profile.memory_of(k).tau_seconds == pytest.approx(k.memory.tau_seconds)
    # Without a profile nothing is fitted.
    none = knowledge.learn(series(16), empty(), 0.02)
    assert with_cycle_memory(none, pairs, 60.0, 60.0, (tb, vb)) is none


def test_the_profile_designs_look_boundary_rests_on_its_own_baseline(spec):
    """The sequence's t_min of a profile design is its own comparison's, not the before-after
    comparison's of the raw series (whose memory reads the cycle as long memory: t_min near
    0.8, a boundary that barely corrects for repeated looks). Independent answer for a 1 h
    baseline of 60 AR(1) samples (phi 0.81): V_b = sigma^2 Q / n^2 with
    Q = n + 2 sum_k (n - k) phi^k = 526.7, i.e. 0.146 sigma^2; the profile's error at the
    baseline hour ~0.010 sigma^2 (12 five-minute samples an hour, phi^5, over ~16 days);
    one sample sigma^2 / 5: t_min = 0.156 / (0.156 + 0.2) = 0.44."""
    bench = load("bench_cycles")
    fam = bench.FAMILIES["daily-known"]
    change = bench.changes(fam, (9,), 1)[0]
    vs = bench.replicate(np.random.default_rng(11), spec, fam, change, 0.0, (1, 24))
    for v in vs:
        a = v.primary.design.assessment
        assert v.primary.design.design == "profile" and a.memory_source == "history"
        assert a.min_fraction == pytest.approx(0.44, abs=0.08)
        assert a.tau_seconds == pytest.approx(572, rel=0.25)
