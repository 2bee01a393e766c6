"""A seeded, smaller run of bench/bench_stationarity.py (docs/verification.md, "Baselines
that moved inside their window"): the same replicates through the functions snapshot and
verify call, few enough for the unit tier. Each bound is one the documented run clears by a
wide margin and one the rule without the change would miss."""

from __future__ import annotations

import bench_stationarity as bench


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
