"""A seeded, smaller run of bench/bench_stationarity.py (docs/verification.md, "Baselines
that moved inside their window"): the same replicates through the functions snapshot and
verify call, few enough for the unit tier. Each bound is one the documented run clears by a
wide margin and one the rule without the change would miss."""

from __future__ import annotations

import bench_stationarity as bench
import pytest


def test_a_step_inside_the_baseline_is_flagged_and_caps_the_verdict():
    res = bench.cell(bench.MOVED[0], 30, seed=8200, effects=(0.0,), placebo=False)[0.0]
    assert res.counts.get("flagged", 0) >= 14  # 70 % in the documented run; a test that never fires: 0
    capped, uncapped = res.counts.get("any IMPROVED", 0), res.counts.get("uncapped IMPROVED", 0)
    assert capped <= uncapped and capped <= 3
    assert res.counts.get("any REGRESSED", 0) == 0


def test_a_steady_baseline_is_rarely_flagged():
    res = bench.cell(bench.MOVED[3], 30, seed=8201, effects=(0.0,), placebo=False)[0.0]
    assert res.counts.get("flagged", 0) <= 5  # 5 % level: 1.5 expected


def test_a_halved_variance_is_judged_not_refused():
    res = bench.cell(bench.VARIANCE[0], 20, seed=8202, effects=(0.0, bench.EFFECT), placebo=False)
    null, alt = res[0.0], res[bench.EFFECT]
    assert null.counts.get("assumption", 0) <= 5 and alt.counts.get("assumption", 0) <= 5  # 84 % refused before; 11 % now (docs)
    assert alt.counts.get("any IMPROVED", 0) >= 9  # +10 % found in about half the windows or more (the later-part check costs some)
    assert null.counts.get("any IMPROVED", 0) + null.counts.get("any REGRESSED", 0) <= 2


def test_a_step_the_test_misses_is_caught_by_the_later_part_check():
    # The same replicates (seed) with and without the check of decide.later_level: the 1 h
    # baseline's step is flagged in half of them; of the rest, the suggestive ones are judged
    # against their part after the split, which removes the false gains (3 -> 0 here).
    with_check = bench.cell(bench.MOVED[1], 30, seed=8204, effects=(0.0,), placebo=False)[0.0]
    without = bench.cell(bench.MOVED[1], 30, seed=8204, effects=(0.0,), placebo=False, suggestive=0.0)[0.0]
    assert with_check.counts.get("flagged", 0) == without.counts.get("flagged", 0)
    assert without.counts.get("any IMPROVED", 0) >= 2 and without.counts.get("later", 0) == 0
    assert with_check.counts.get("later", 0) >= 2 and with_check.counts.get("any IMPROVED", 0) <= 1
    assert with_check.counts.get("any REGRESSED", 0) == 0


def test_a_ramp_the_later_part_lets_through_is_caught_by_the_lines_end():
    # Two replicates of the 2 h ramp (the seeds, of the first 400, where the two ways differ):
    # its test was suggestive with the trend the likelier move, and the window at the level the
    # ramp reached read a gain against the part after the split (a ramp itself, its mean below
    # that level); against the line's end it does not, and every look is withheld.
    import numpy as np

    for seed in (206, 307):
        part = bench.replicate(np.random.default_rng(seed), bench.MOVED[2], 0.0, placebo=False, line=False)
        line = bench.replicate(np.random.default_rng(seed), bench.MOVED[2], 0.0, placebo=False)
        assert "IMPROVED" in [look[0] for look in part["looks"]], seed
        assert line["later"] and [look[0] for look in line["looks"]] == ["INCONCLUSIVE"] * 3, seed


@pytest.mark.parametrize("family, seeds, withheld", [
    (1, (0, 8, 32), 2),  # a 1 h step the test did not flag: two the later part withholds, one it lets through
    (2, (206, 307), 2),  # a 2 h ramp, the trend the likelier move: both withheld against the line's end
])
def test_the_bench_replicate_is_what_decide_says(tmp_path, family, seeds, withheld):
    # The bench mirrors decide.verdict.judge_primary's caps on arrays; here the same replicates
    # go through decide itself, on Evidence built from the same arrays with the snapshot's own
    # memory fit and stationarity test: the verdict at every look is the bench's.
    import datetime as dt

    import numpy as np
    import yaml

    from obsctl.baselining.decide import verdict
    from obsctl.baselining.designs import demand
    from obsctl.baselining.designs.branch import Gathered, Setting
    from obsctl.baselining.evidence import Evidence
    from obsctl.baselining.measure.stationarity import baseline_stationarity
    from obsctl.baselining.measure.window import Measurement
    from obsctl.baselining.statistics.comparison import LookContext
    from obsctl.baselining.statistics.memory import fit_memory
    from obsctl.baselining.statistics.summary import summarize
    from obsctl.records import Baseline, Initiative, Memory, Population, Window
    from obsctl.spec import load_spec

    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "infer", "kind": "inference", "selector": {"job": "infer"}}],
        "signals": [{"name": "x", "category": "utilization", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}],
    }))
    spec = load_spec(path)
    sc = bench.MOVED[family]
    utc = lambda s: dt.datetime.fromtimestamp(float(s), tz=dt.UTC)  # noqa: E731
    later_seen, kinds = 0, []
    for seed in seeds:
        r = bench.replicate(np.random.default_rng(seed), sc, 0.0, placebo=False)
        later_seen += r["later"]
        b0 = bench.HISTORY_STEPS
        start = b0 + sc.base_steps
        n = start + sc.win_steps
        t = np.arange(n) * bench.STEP
        x = bench.MU * (1 + bench.SD * bench.ar1(np.random.default_rng(seed), bench.PHI, n)) * sc.shape(n, b0, sc.base_steps)
        memory = fit_memory(t[:start], x[:start], bench.STEP)
        stored = Memory(**{k: v for k, v in memory.as_dict().items() if k != "tau_seconds"})
        tb, vb = t[b0:start], x[b0:start]
        b = Baseline(id="infer.x.bench", workload_class="infer", signal="x", unit="1", direction="higher_is_better",
                     query="sum(x{job=\"infer\"})", window=Window(start=utc(tb[0] - bench.STEP), end=utc(tb[-1]), step_seconds=bench.STEP),
                     population=Population(series_count=1), stats=summarize(vb.tolist()), created_at=utc(tb[-1]),
                     samples=list(zip(tb.tolist(), vb.tolist(), strict=True)), memory=stored,
                     stationarity=baseline_stationarity((tb, vb), bench.STEP, stored))
        i = Initiative(id="bench-2026-11-03", name="bench", lever="batch-size", workload_class="infer", primary_signal="x",
                       baseline_id=b.id, started_at=utc(tb[-1]), design="before-after")
        for k, frac in enumerate(bench.LOOK_FRACTIONS, 1):
            end = start + round(sc.win_steps * frac)
            tw, vw = t[start:end], x[start:end]
            m = Measurement(b.query, Window(start=utc(tb[-1]), end=utc(tw[-1]), step_seconds=bench.STEP),
                            list(zip(tw.tolist(), vw.tolist(), strict=True)), Population(series_count=1), summarize(vw.tolist()), columns=(tw, vw))
            setting = Setting(spec, i, b, m.samples, tb[-1], tw[-1], bench.STEP, 0.95, spec.workload_class("infer"))
            loads = tuple(demand.period_load(name, None, [None]) for name in ("baseline", "window"))
            ev = Evidence(spec, i, b, m, None, None, LookContext(k, sc.win_steps * bench.STEP, None, 0.95), "", setting, Gathered({}, loads))
            primary = verdict.decide(ev).primary
            assert primary.verdict == r["looks"][k - 1][0], (seed, k)
            kinds += [c.kind for c in primary.caps]
    assert later_seen == withheld  # the check fired (a test of nothing would pass with none)
    assert kinds.count("baseline-later-level") >= withheld and "baseline-moved" not in kinds
