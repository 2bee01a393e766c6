"""The verdict as one pure function: each design judged from arrays, no server.

Evidence is built from seeded numpy arrays (the records ``verify`` would have read), then
:func:`obsctl.baselining.decide.verdict.decide` judges it. The point estimates are computed here
independently (plain numpy on the same arrays) and must match; the verdicts are the
ones the effects' sizes leave no doubt about (+10 % against a 2 % minimum effect with
1 % noise).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys

import numpy as np
import pytest
import yaml

from obsctl.baselining.decide import verdict
from obsctl.baselining.designs import demand
from obsctl.baselining.designs.branch import Gathered, Setting
from obsctl.baselining.evidence import Evidence, GuardEvidence
from obsctl.baselining.measure.window import Measurement
from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Baseline, Initiative, Memory, Population, Window
from obsctl.spec import load_spec

UTC = dt.UTC
STEP = 15.0
T0 = dt.datetime(2026, 11, 2, tzinfo=UTC)
START = T0 + dt.timedelta(days=1)  # the change; the window is the hour after it
END = START + dt.timedelta(hours=1)
SIGNAL, GUARD = "tokens_per_joule", "probe_cosine_similarity"
LOOK = LookContext(1, 3600.0, None, 0.95)


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return spec_in(tmp_path_factory.mktemp("spec"))


def spec_in(folder):
    """The two-class spec these tests judge with, written to ``folder`` and loaded."""
    path = folder / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "infer", "kind": "inference", "selector": {"job": "infer"}},
                             {"name": "other", "kind": "inference", "selector": {"job": "other"}}],
        "signals": [{"name": SIGNAL, "category": "utilization", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"},
                    {"name": GUARD, "category": "quality", "query": "avg(q{$selector})", "unit": "ratio", "direction": "higher_is_better"}],
        "comparison": {"classes": {"infer": {"variant": {"label": "track", "control": "stable", "treatment": "canary"}}}},
    }))
    return load_spec(path)


def grid(start: dt.datetime, end: dt.datetime) -> np.ndarray:
    """The step grid ``(start, end]`` in unix seconds."""
    return np.arange(start.timestamp() + STEP, end.timestamp() + STEP / 2, STEP)


def pairs(t: np.ndarray, v: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(t.tolist(), v.tolist(), strict=True))


def measurement(query: str, start: dt.datetime, end: dt.datetime, t: np.ndarray, v: np.ndarray) -> Measurement:
    return Measurement(query, Window(start=start, end=end, step_seconds=STEP), pairs(t, v), Population(series_count=1), summarize(v.tolist()),
                       columns=(t, v))


def white_memory(v: np.ndarray) -> Memory:
    """A white-noise memory model of ``v`` (no autocorrelation: each side's mean is its plain mean)."""
    data = MemoryModel(STEP, (), (1.0,), float(v.var()), float(v.mean()), v.size, 3 * 86400.0, "history", 1e6).as_dict()
    data.pop("tau_seconds")
    return Memory(**data)


def baseline(spec, signal: str, start: dt.datetime, end: dt.datetime, t: np.ndarray, v: np.ndarray) -> Baseline:
    sig = spec.signal(signal)
    return Baseline(id=f"infer.{signal}.{start.strftime('%Y%m%dT%H%M%SZ')}", workload_class="infer", signal=signal, unit=sig.unit,
                    direction=sig.direction, query=spec.query_for(sig, spec.workload_class("infer")),
                    window=Window(start=start, end=end, step_seconds=STEP), population=Population(series_count=1),
                    stats=summarize(v.tolist()), created_at=end, samples=pairs(t, v), memory=white_memory(v))


def evidence(spec, design: str, b: Baseline, window: Measurement, series: dict | None = None, loads: int = 2,
             guards: tuple[GuardEvidence, ...] = (), **initiative) -> Evidence:
    i = Initiative(id="faster-kernel-2026-11-03", name="faster kernel", lever="batch-size", workload_class="infer", primary_signal=SIGNAL,
                   baseline_id=b.id, started_at=START, design=design, **initiative)
    unknown = [demand.period_load(name, None, [None]) for name in ("baseline", "window")[:loads]]
    setting = Setting(spec, i, b, window.samples, START.timestamp(), END.timestamp(), STEP, 0.95, spec.workload_class("infer"))
    return Evidence(spec, i, b, window, None, None, LOOK, "", setting, Gathered(series or {}, tuple(unknown)), guards)


def noisy(rng, level: float, n: int, sigma: float = 0.01) -> np.ndarray:
    return level * np.exp(rng.normal(0.0, sigma, n))


def test_before_after_from_arrays(spec):
    rng = np.random.default_rng(2401)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    w = noisy(rng, 110.0, tw.size)
    v = verdict.decide(evidence(spec, "before-after", b, measurement(b.query, START, END, tw, w)))
    expected = w.mean() / np.array([x for _, x in b.samples]).mean() - 1
    assert v.primary.estimate.change == pytest.approx(expected, rel=1e-9)
    assert v.primary.estimate.low < expected < v.primary.estimate.high
    assert (v.verdict, v.decided_by, v.primary.caps, v.regressed) == ("IMPROVED", "statistics", (), ())


def test_seasonal_from_arrays(spec):
    rng = np.random.default_rng(2402)
    tb, tw = grid(T0, START), grid(START, END)
    cycle = lambda t: 1 + 0.3 * np.sin(2 * np.pi * t / 86400.0)  # noqa: E731
    vb = noisy(rng, 100.0, tb.size) * cycle(tb)
    w = noisy(rng, 110.0, tw.size) * cycle(tw)
    b = baseline(spec, SIGNAL, T0, START, tb, vb)
    v = verdict.decide(evidence(spec, "seasonal", b, measurement(b.query, START, END, tw, w)))
    same_hour = dict(zip(tb.tolist(), vb.tolist(), strict=True))
    expected = np.expm1(np.mean(np.log(w) - np.log([same_hour[t - 86400.0] for t in tw.tolist()])))
    assert v.primary.estimate.change == pytest.approx(expected, rel=1e-9)
    assert v.primary.design.context["effect"]["cycles"] == 1
    assert (v.verdict, v.decided_by) == ("IMPROVED", "design")


def test_control_from_arrays(spec):
    rng = np.random.default_rng(2403)
    tb, tw = grid(START - dt.timedelta(hours=2), START), grid(START, END)
    drift = 1.2  # both classes move by the same factor: the difference in differences removes it
    treated_b, control_b = noisy(rng, 100.0, tb.size), noisy(rng, 50.0, tb.size)
    treated_a, control_a = noisy(rng, 110.0 * drift, tw.size), noisy(rng, 50.0 * drift, tw.size)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=2), START, tb, treated_b)
    series = {"treated_history": [], "control_history": [], "control_before": pairs(tb, control_b), "control_after": pairs(tw, control_a)}
    v = verdict.decide(evidence(spec, "control", b, measurement(b.query, START, END, tw, treated_a), series, control_class="other"))
    expected = np.expm1(np.mean(np.log(treated_a / control_a)) - np.mean(np.log(treated_b / control_b)))
    assert v.primary.estimate.change == pytest.approx(expected, rel=1e-9)
    assert v.primary.design.context["control"]["change"] == pytest.approx(control_a.mean() / control_b.mean() - 1, rel=1e-9)
    assert (v.verdict, v.decided_by) == ("IMPROVED", "design")


def test_canary_from_arrays(spec):
    rng = np.random.default_rng(2404)
    tw = grid(START, END)
    shared = np.exp(0.05 * np.sin(2 * np.pi * tw / 3600.0))  # moves both groups at once: cancels
    treatment, control = noisy(rng, 110.0, tw.size) * shared, noisy(rng, 100.0, tw.size) * shared
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, grid(START - dt.timedelta(hours=1), START), noisy(rng, 100.0, 240))
    series = {"control": pairs(tw, control), "related": []}
    ev = evidence(spec, "canary", b, measurement(b.query, START, END, tw, treatment), series, loads=1,
                  variant={"label": "track", "control": "stable", "treatment": "canary"})
    v = verdict.decide(ev)
    d = np.log(treatment) - np.log(control)
    expected = np.expm1(d.mean())
    assert v.primary.estimate.change == pytest.approx(expected, rel=1e-9)
    # The interval: a t interval of the mean log ratio (white noise: no memory), within 15 % of its width.
    half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)
    low, high = v.primary.estimate.low, v.primary.estimate.high
    assert low < expected < high
    assert np.log1p(high) - np.log1p(low) == pytest.approx(2 * half, rel=0.15)
    assert v.primary.estimate.baseline_mean == pytest.approx(control.mean()) and v.primary.estimate.window_mean == pytest.approx(treatment.mean())
    assert (v.verdict, v.decided_by) == ("IMPROVED", "design")


def test_a_regressed_guard_decides_as_data(spec):
    rng = np.random.default_rng(2405)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    gb = baseline(spec, GUARD, START - dt.timedelta(hours=1), START, tb, noisy(rng, 0.9, tb.size))
    g = GuardEvidence(gb, measurement(gb.query, START, END, tw, noisy(rng, 0.8, tw.size)), LOOK)
    v = verdict.decide(evidence(spec, "before-after", b, measurement(b.query, START, END, tw, noisy(rng, 110.0, tw.size)), guards=(g,)))
    assert (v.verdict, v.decided_by, v.regressed, v.primary.verdict) == ("REGRESSED", "guards", (GUARD,), "IMPROVED")
    assert v.guards[0].verdict == "REGRESSED" and v.reason.startswith(f"quality guard {GUARD} regressed")


def test_a_partial_window_caps_as_typed_data(spec):
    rng = np.random.default_rng(2406)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    m = measurement(b.query, START, END, tw, noisy(rng, 110.0, tw.size))
    m.warnings.append("remote read failed")
    m.partial = True
    v = verdict.decide(evidence(spec, "before-after", b, m))
    assert v.verdict == "INCONCLUSIVE"
    assert [(r.kind, r.text) for r in v.primary.caps] == [("cap", "window: Prometheus answered partially (remote read failed)")]


def test_a_chosen_guard_without_a_baseline_caps_as_data(spec):
    # The missing guard comes from the evidence; the decision reads no store.
    rng = np.random.default_rng(2407)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    ev = evidence(spec, "before-after", b, measurement(b.query, START, END, tw, noisy(rng, 110.0, tw.size)))
    assert verdict.decide(ev).verdict == "IMPROVED"
    v = verdict.decide(dataclasses.replace(ev, guards_missing=(GUARD,)))
    assert (v.verdict, v.decided_by, v.open_guards, v.primary.verdict) == ("INCONCLUSIVE", "open-guards", (GUARD,), "IMPROVED")
    assert v.reason.startswith(f"guard {GUARD} not evaluated (no baseline)")
    optional = spec.model_copy(update={"verification": spec.verification.model_copy(update={"optional_guards": [GUARD]})})
    assert verdict.decide(dataclasses.replace(ev, spec=optional, guards_missing=(GUARD,))).verdict == "IMPROVED"


@pytest.mark.parametrize("module, forbidden", [
    ("obsctl.baselining.decide.verdict", ("obsctl.promapi", "obsctl.baselining.measure", "obsctl.baselining.store", "obsctl.baselining.evidence")),
    ("obsctl.baselining.designs.run", ("obsctl.promapi", "obsctl.baselining.measure", "obsctl.baselining.store", "obsctl.baselining.workers")),
    ("obsctl.baselining.snapshot", ("obsctl.baselining.designs.", "obsctl.baselining.decide.verdict")),  # no design module
])
def test_import_closure(module, forbidden):
    """The decision loads no Prometheus client, measurement or store; a snapshot loads no design (a fresh interpreter)."""
    code = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith({forbidden!r})))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_a_baseline_that_moved_inside_its_window_caps_the_verdict(spec):
    from obsctl.records import Stationarity

    rng = np.random.default_rng(2410)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, noisy(rng, 100.0, tb.size))
    moved = Stationarity(step_p_value=0.001, trend_p_value=0.02, moved=True, kind="step", step_at=START - dt.timedelta(minutes=20),
                         step_ratio=0.081, trend_ratio=0.05, level=0.05, simulations=999, samples=240, block_seconds=STEP)
    w = measurement(b.query, START, END, tw, noisy(rng, 110.0, tw.size))
    v = verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": moved}), w))
    assert v.verdict == "INCONCLUSIVE" and [c.kind for c in v.primary.caps] == ["baseline-moved"]
    assert "moved inside its window: a step of +8.1 % at 2026-11-02T23:40:00Z" in v.reason
    assert "--window 20m15s" in v.reason and "the statistics alone said IMPROVED" in v.reason
    # The reason in plain words; the tests behind it a typed note (verify --verbose, JSON, report).
    assert "p = " not in v.reason and "simulations" not in v.reason
    moved_note = v.notes[0]
    assert moved_note.kind == "baseline-moved" and "step test p = 0.001" in moved_note.detail and "p = " not in moved_note.plain
    steady = moved.model_copy(update={"moved": False, "kind": ""})
    assert verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": steady}), w)).verdict == "IMPROVED"
    # A guard's baseline that moved: its reason plain, its tests a note of its own.
    gb = baseline(spec, GUARD, START - dt.timedelta(hours=1), START, tb, noisy(rng, 0.9, tb.size))
    g = GuardEvidence(gb.model_copy(update={"stationarity": moved}), measurement(gb.query, START, END, tw, noisy(rng, 0.9, tw.size)), LOOK)
    guarded = verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": steady}), w, guards=(g,))).guards[0]
    assert guarded.verdict == "INCONCLUSIVE" and "moved inside its window" in guarded.reason and "p = " not in guarded.reason
    assert [(n.kind, n.subject) for n in guarded.notes][:1] == [("baseline-moved", GUARD)] and "step test p = 0.001" in guarded.notes[0].detail
    # An aged baseline is replaced by the period before the start, which carries no test.
    replaced, cap, _ = verdict.before_start(spec, evidence(spec, "before-after", b, w).initiative,
                                            b.model_copy(update={"stationarity": moved}), w)
    assert replaced.stationarity is None and cap == (None, "")


def test_a_suggestive_baseline_is_judged_against_its_later_part_too(spec):
    # A +8 % step at the middle of the baseline that its test did not flag (p = 0.1): the whole
    # baseline's mean sits 4 % below the level it ended at, so a window at that level reads a
    # gain; against the part after the split it reads none, and the verdict is withheld.
    from obsctl.records import Stationarity

    rng = np.random.default_rng(2411)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    split = START - dt.timedelta(minutes=30)
    vb = noisy(rng, 100.0, tb.size) * np.where(tb >= split.timestamp(), 1.08, 1.0)
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, vb)
    w = measurement(b.query, START, END, tw, noisy(rng, 108.0, tw.size))
    st = Stationarity(step_p_value=0.1, trend_p_value=0.3, moved=False, kind="", step_at=split, step_ratio=0.08, trend_ratio=0.05,
                      level=0.05, simulations=999, samples=tb.size, block_seconds=STEP)
    whole = verdict.decide(evidence(spec, "before-after", b, w))
    assert whole.verdict == "IMPROVED" and whole.primary.estimate.change == pytest.approx(
        w.stats.mean / vb.mean() - 1, rel=1e-9)  # +4 %, well outside the 1 % noise's interval
    v = verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": st}), w))
    assert v.verdict == "INCONCLUSIVE" and [c.kind for c in v.primary.caps] == ["baseline-later-level"]
    later = vb[tb >= split.timestamp()]
    assert f"from {split.strftime('%Y-%m-%dT%H:%M:%SZ')} on ({later.size} samples" in v.reason
    assert "not IMPROVED" in v.reason and "--window 30m15s" in v.reason and "the statistics alone said IMPROVED" in v.reason
    # Not suggestive (p above the threshold): the whole baseline alone decides.
    calm = st.model_copy(update={"step_p_value": 0.6, "trend_p_value": 0.7})
    assert verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": calm}), w)).verdict == "IMPROVED"
    # A real +10 % is shown against both: the verdict stands.
    big = measurement(b.query, START, END, tw, noisy(rng, 118.8, tw.size))
    assert verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": st}), big)).verdict == "IMPROVED"


def test_a_suggestive_ramp_is_judged_against_the_level_its_line_reached(spec):
    # A +16 % ramp over the baseline that its test did not flag, the trend the likelier move
    # (p = 0.1 against the step's 0.3), the window at the level the ramp reached. The part after
    # the middle split is itself a ramp, its mean 4 % below that level: against it the window
    # still read a gain. Against the line's end (its variance under the memory model) it reads
    # none, and the verdict is withheld, with the trend named and the trend's remedy.
    from obsctl.records import Stationarity

    rng = np.random.default_rng(2412)
    tb, tw = grid(START - dt.timedelta(hours=1), START), grid(START, END)
    noise = noisy(rng, 100.0, tb.size)
    vb = noise * (1 + 0.16 * (tb - tb[0]) / (tb[-1] - tb[0]))
    b = baseline(spec, SIGNAL, START - dt.timedelta(hours=1), START, tb, vb).model_copy(update={"memory": white_memory(noise)})
    w = measurement(b.query, START, END, tw, noisy(rng, 116.0, tw.size))
    split = START - dt.timedelta(minutes=30)
    st = Stationarity(step_p_value=0.3, trend_p_value=0.1, moved=False, kind="", step_at=split, step_ratio=0.08, trend_ratio=0.16,
                      level=0.05, simulations=999, samples=tb.size, block_seconds=STEP)
    later = vb[tb >= split.timestamp()]
    assert w.stats.mean / later.mean() - 1 > 0.03  # the later part alone would let a +3.5 % gain through
    v = verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": st}), w))
    assert v.verdict == "INCONCLUSIVE" and [c.kind for c in v.primary.caps] == ["baseline-later-level"]
    assert f"against the level its straight-line trend reached at its end (+16.0 % over the window, fitted on {tb.size} samples)" in v.reason
    assert "not IMPROVED" in v.reason and "re-snapshot a shorter window in which the signal is steady" in v.reason
    note = next(n for n in v.notes if n.kind == "baseline-later-level")
    assert "trend test p = 0.1" in note.detail and "least-squares line reaches at its end" in note.detail
    # A real +10 % on top of the level the ramp reached is shown against the line's end too.
    big = measurement(b.query, START, END, tw, noisy(rng, 127.6, tw.size))
    assert verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": st}), big)).verdict == "IMPROVED"
    # The step the likelier move: judged against the later part as before (which lets this ramp through).
    stepwise = st.model_copy(update={"step_p_value": 0.05, "trend_p_value": 0.3})
    assert verdict.decide(evidence(spec, "before-after", b.model_copy(update={"stationarity": stepwise}), w)).verdict == "IMPROVED"
