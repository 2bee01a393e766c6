"""The robust location (obsctl.baselining.statistics.robust): the trimmed mean and its
variance (known answers computed here from the definitions), the heavy-tail test, the
choice of location and where the verdict says it, and a small seeded calibration through
the comparison ``verify`` runs (the full table: bench/bench_robust.py)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
import yaml

from obsctl.baselining.decide import verdict
from obsctl.baselining.decide.location import location_for
from obsctl.baselining.measure.tails import tails_of
from obsctl.baselining.statistics import robust
from obsctl.baselining.statistics.comparison import Criterion, LookContext, judge
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.errors import SpecError
from obsctl.records import Baseline, Memory, Population, Tails, Window
from obsctl.spec import load_spec

STEP = 15.0
UTC = dt.UTC


def white(v: np.ndarray) -> MemoryModel:
    return MemoryModel(STEP, (), (1.0,), float(v.var()), float(v.mean()), v.size, 86400.0, "history", 1e6)


def test_winsorize_and_trimmed_mean_known_answers():
    x = np.array([10.0, 1, 9, 2, 8, 3, 7, 4, 6, 5, 100])  # n 11, trim 0.1: g = 1 from each end
    w = robust.winsorize(x, 0.1)
    assert w.tolist() == [10.0, 2, 9, 2, 8, 3, 7, 4, 6, 5, 10]  # order kept, 1 -> 2 and 100 -> 10
    assert robust.trimmed_mean(x, 0.1) == pytest.approx(np.mean([2, 3, 4, 5, 6, 7, 8, 9, 10]))
    assert robust.winsorize(x[:9], 0.1).tolist() == x[:9].tolist()  # floor(0.9) = 0: nothing cut
    with pytest.raises(ValueError, match="trim must be in"):
        robust.winsorize(x, 0.5)


def test_trimmed_side_is_yuens_variance_without_memory():
    """Under white noise: Var(trimmed mean) = s_w^2 / ((1 - 2 trim)^2 n), s_w^2 the winsorised
    sample variance (n - 1 denominator), Yuen (1974); dof shrinks by 1 - 2 trim."""
    rng = np.random.default_rng(7)
    x = rng.standard_t(3, 200) + 50.0
    t = STEP * np.arange(1, x.size + 1)
    w = robust.winsorize(x, 0.1)
    s = robust.trimmed_side(side_estimate(t, w, STEP, white(x), history_scale=False), x, 0.1)
    g = 20
    kept = np.sort(x)[g:-g]
    assert s.mean == pytest.approx(kept.mean(), rel=1e-12)
    assert s.var_mean == pytest.approx(np.var(w, ddof=1) / (0.8**2 * x.size), rel=1e-9)
    assert s.dof == pytest.approx((x.size - 1) * 0.8, rel=1e-9)


def test_tail_test():
    rng = np.random.default_rng(11)
    gauss = 100 + rng.standard_normal(5760)
    assert not robust.tail_test(gauss).heavy
    spiky = gauss.copy()
    spiky[rng.choice(spiky.size, 58, replace=False)] *= 10  # 1 % of x10 samples
    test = robust.tail_test(spiky)
    assert test.heavy and test.outliers == 58 and test.share == pytest.approx(58 / 5760)
    assert "58 of 5,760 samples (1.01 %)" in test.text() and "heavy-tailed" in test.text()
    flat = np.r_[np.full(100, 3.0), 30.0]
    assert not robust.tail_test(flat).heavy and "tails not tested" in robust.tail_test(flat).text()
    few = gauss.copy()
    few[:2] *= 10  # 2 outliers: fewer than MIN_OUTLIERS
    assert not robust.tail_test(few).heavy


@pytest.mark.parametrize(("spiky", "heavy", "kind"), [
    (None, False, "mean"), (None, True, "trimmed"), (True, False, "trimmed"), (False, True, "mean"), (False, False, "mean")])
def test_choose(spiky, heavy, kind):
    test = robust.TailTest(heavy, 10 if heavy else 0, 1000, 0.01 if heavy else 0.0, 1.0)
    loc = robust.choose(spiky, test)
    assert loc.kind == kind
    if spiky is False and heavy:
        assert "not spiky" in loc.text()  # the override is said, never silent


def spiky_series(rng, n: int, effect_from: int | None = None, effect: float = 0.0) -> np.ndarray:
    """AR(1) phi 0.95, sd 5 %, with x10 bursts (one an hour, ~3 steps): bench_robust's burst family."""
    z = np.empty(n)
    z[0] = rng.standard_normal()
    e = rng.standard_normal(n) * math.sqrt(1 - 0.95**2)
    for i in range(1, n):
        z[i] = 0.95 * z[i - 1] + e[i]
    x = 100 * (1 + 0.05 * z)
    for s in np.flatnonzero(rng.random(n) < 1 / 240):
        x[s:s + int(rng.geometric(1 / 3))] *= 10
    if effect_from is not None:
        x[effect_from:] *= 1 + effect
    return x


def test_seeded_calibration_trimmed_finds_what_the_mean_cannot():
    """40 replicates of x10 bursts, 6 h history + 2 h baseline + 2 h window, one look at the
    planned length: +10 % is found far more often with the trimmed mean (memory fitted on the
    winsorised history, as the snapshot does), and the null stays honest for both."""
    rng = np.random.default_rng(2507)
    hist, base, win = 1440, 480, 480
    n = hist + base + win
    t = STEP * np.arange(1, n + 1)
    trimmed = robust.Location("trimmed", robust.TRIM, "test")
    found = {"mean": 0, "trimmed": 0}
    false = {"mean": 0, "trimmed": 0}
    covered = 0
    reps = 40
    for _ in range(reps):
        for effect in (0.0, 0.10):
            x = spiky_series(rng, n, hist + base, effect)
            b, w = (t[hist:hist + base], x[hist:hist + base]), (t[hist + base:], x[hist + base:])
            raw_memory = fit_memory(t[:hist + base], x[:hist + base], STEP)
            win_memory = fit_memory(t[:hist + base], np.r_[robust.winsorize(x[:hist]), robust.winsorize(x[hist:hist + base])], STEP)
            look = LookContext(1, win * STEP)
            for arm, memory, loc in (("mean", raw_memory, None), ("trimmed", win_memory, trimmed)):
                j = judge(b, w, STEP, memory, Criterion(0.95, "higher_is_better", 0.02), look, location=loc)
                if effect:
                    found[arm] += j.verdict == "IMPROVED"
                    if arm == "trimmed" and j.low is not None:
                        covered += j.low <= effect <= j.high
                else:
                    false[arm] += j.verdict in ("IMPROVED", "REGRESSED")
                if loc is not None:
                    assert j.location.startswith("location: 10 % trimmed mean")
    assert found["trimmed"] >= 0.75 * reps and found["mean"] <= 0.25 * reps, found
    assert false["trimmed"] <= 3 and false["mean"] <= 3, false
    assert covered >= 0.85 * found["trimmed"], covered


def spec_of(tmp_path, spiky):
    sig = {"name": "s", "category": "throughput", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}
    if spiky is not None:
        sig["spiky"] = spiky
    path = tmp_path / f"spec-{spiky}.yaml"
    path.write_text(yaml.safe_dump({"workload_classes": [{"name": "c", "kind": "inference", "selector": {"job": "c"}}], "signals": [sig]}))
    return load_spec(path)


def test_spec_spiky_is_validated(tmp_path):
    with pytest.raises(SpecError, match=r"signals\[0\]\.spiky: Input should be a valid boolean"):
        spec_of(tmp_path, "sometimes")


def baseline_with(x: np.ndarray, tails: Tails | None) -> Baseline:
    t0 = dt.datetime(2026, 11, 2, tzinfo=UTC)
    t = t0.timestamp() + STEP * np.arange(1, x.size + 1)
    data = white(x).as_dict()
    data.pop("tau_seconds")
    from obsctl.baselining.statistics.summary import summarize

    return Baseline(id="c.s.20261102T020000Z", workload_class="c", signal="s", unit="1", direction="higher_is_better", query="q",
                    window=Window(start=t0, end=t0 + dt.timedelta(seconds=x.size * STEP), step_seconds=STEP),
                    population=Population(series_count=1), stats=summarize(x.tolist()), created_at=t0,
                    samples=list(zip(t.tolist(), x.tolist(), strict=True)), memory=Memory(**data), tails=tails)


def test_location_for_names_every_choice(tmp_path):
    rng = np.random.default_rng(3)
    x = spiky_series(rng, 480)
    t = STEP * np.arange(1, x.size + 1)
    history = list(zip((t - x.size * STEP).tolist(), spiky_series(rng, 480).tolist(), strict=True))
    tails = tails_of(history, STEP, STEP, list(zip(t.tolist(), x.tolist(), strict=True)), (t, x), None)
    assert tails.heavy and tails.memory is not None  # the snapshot fitted the winsorised memory
    clean = 100 + rng.standard_normal(480)
    assert tails_of(history[:0], STEP, STEP, list(zip(t.tolist(), clean.tolist(), strict=True)), None, None).memory is None
    b = baseline_with(x, tails)
    loc, memory = location_for(spec_of(tmp_path, None), b, None)
    assert loc.robust and "heavy-tailed" in loc.text() and memory.variance == tails.memory.variance
    loc, _ = location_for(spec_of(tmp_path, False), b, None)
    assert not loc.robust and "the spec marks the signal not spiky" in loc.text()
    # Marked spiky after a snapshot that fitted no winsorised memory: the mean, and why.
    loc, _ = location_for(spec_of(tmp_path, True), baseline_with(x, None), None)
    assert not loc.robust and "re-snapshot the baseline" in loc.text()
    # Older records (no tails) load and judge the mean without a word.
    old = baseline_with(x, None)
    assert Baseline.model_validate_json(old.model_dump_json(exclude={"tails"})).tails is None
    assert location_for(spec_of(tmp_path, None), old, None)[0].text() == "location: mean"


def test_the_verdict_says_which_location_it_judged(tmp_path):
    """Through judge_signal (what decide runs for the primary): a heavy-tailed baseline is
    judged by its trimmed mean and the judgement and its record say so; the plain mean of
    an ordinary baseline adds nothing."""
    from obsctl.baselining.measure.window import Measurement
    from obsctl.baselining.statistics.summary import summarize
    from obsctl.baselining.text import present
    from obsctl.records import VerificationResult

    rng = np.random.default_rng(5)
    x = spiky_series(rng, 960)
    t = STEP * np.arange(1, x.size + 1)
    history = list(zip((t - 2 * x.size * STEP).tolist(), spiky_series(rng, 960).tolist(), strict=True))
    tails = tails_of(history, STEP, STEP, list(zip(t[:480].tolist(), x[:480].tolist(), strict=True)), (t[:480], x[:480]), None)
    b = baseline_with(x[:480], tails)
    wt = b.window.end.timestamp() + STEP * np.arange(1, 481)
    wx = x[480:] * 1.1
    m = Measurement("q", Window(start=b.window.end, end=b.window.end + dt.timedelta(hours=2), step_seconds=STEP),
                    list(zip(wt.tolist(), wx.tolist(), strict=True)), Population(series_count=1), summarize(wx.tolist()), columns=(wt, wx))
    spec = spec_of(tmp_path, None)
    v, _, est, j = verdict.judge_signal(spec, b, m, LookContext(1, 7200.0, None, 0.95))
    assert j.location.startswith("location: 10 % trimmed mean (cut from each tail), because the baseline is heavy-tailed")
    expected = robust.trimmed_mean(wx) / robust.trimmed_mean(x[:480]) - 1
    assert est.change == pytest.approx(expected, rel=1e-12)
    a = verdict.assessment_of(j)
    assert a.location == j.location
    fields = VerificationResult.model_fields
    assert "assessment" in fields
    lines = present.verification_lines(type("R", (), {"coverage": None, "warnings": [], "partial": False, "guards": [], "assessment": a})())
    assert j.location in lines
    plain = baseline_with(100 + rng.standard_normal(480), None)
    assert verdict.judge_signal(spec, plain, m, LookContext(1, 7200.0, None, 0.95))[3].location is None


def test_a_tampered_tails_memory_finer_than_the_window_is_refused():
    """Like the baseline's own memory: a trimmed mean's memory on a finer step than the
    window's would make every verify build a huge grid."""
    x = 100 + np.random.default_rng(1).standard_normal(60)
    data = white(x).as_dict()
    data.pop("tau_seconds")
    fine = Memory(**{**data, "step_seconds": 1.0})
    ok = baseline_with(x, Tails(heavy=True, memory=Memory(**data)))
    with pytest.raises(ValueError, match=r"tails\.memory\.step_seconds 1 is below the window's step 15"):
        Baseline.model_validate({**ok.model_dump(), "tails": {"heavy": True, "memory": fine.model_dump()}})
