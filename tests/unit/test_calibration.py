"""A seeded, smaller run of bench/bench_calibration.py (docs/verification.md): the same
simulation and the same in-process verdict code, a few hundred replicates, thresholds
with the slack such counts need (about 3 binomial standard errors past each goal). It
fails when the interval stops being honest under autocorrelation (the old fixed 10
batches gave 8-11 % false IMPROVED at phi = 0.95), when power collapses, or when
repeated looks stop spending their error."""

from __future__ import annotations

import bench_calibration
import pytest


@pytest.fixture(scope="module")
def bench():
    return bench_calibration


def test_phi_095_one_hour_null_power_and_coverage(bench):
    res = bench.fixed_cell(0.95, 1.0, 250, seed=71)
    null = res[0.0]
    assert null.n == 250
    assert null.rate("IMPROVED")[0] <= 0.06 and null.rate("REGRESSED")[0] <= 0.06  # goal 5 %, nominal 2.5 %
    covered = null.counts["covered"] / null.counts["interval"]
    assert covered >= 0.90  # goal 92 %
    assert res[0.10].rate("IMPROVED")[0] >= 0.70  # ~80 % expected under the anytime boundary (94 % at one fixed look)
    assert res[-0.10].rate("REGRESSED")[0] >= 0.70


def test_phi_099_one_hour_is_window_too_short(bench):
    res = bench.fixed_cell(0.99, 1.0, 80, seed=72)
    null = res[0.0]
    assert null.rate("too_short")[0] >= 0.8
    assert null.counts.get("IMPROVED", 0) + null.counts.get("REGRESSED", 0) <= 2


def test_repeated_looks_do_not_inflate_false_improved(bench):
    tally, planned = bench.sequential_cell(0.95, 0.0, 12, 60, seed=73)
    assert 6000 <= planned <= 9000  # the planner's window for +10 % at phi 0.95 under the anytime boundary (about 129 min)
    assert tally.counts.get("IMPROVED", 0) <= 4  # goal 5 %: about 1 of 60 expected


def test_looks_every_few_minutes_keep_the_error(bench):
    # 36 cumulative looks (every 10 min for 6 h) on a null: the anytime boundary keeps the
    # chance that any look calls a direction near its level, a fixed 95 % interval at every
    # look does not (it is the contrast that makes the test able to fail both ways).
    tally = bench.peeking_cell(0.95, 10, 6.0, 120, seed=74)
    assert tally.rate("any IMPROVED")[0] + tally.rate("any REGRESSED")[0] <= 0.08  # goal 5 % each
    assert tally.rate("fixed IMPROVED")[0] + tally.rate("fixed REGRESSED")[0] > tally.rate("any IMPROVED")[0] + tally.rate("any REGRESSED")[0]


def test_an_aged_baseline_with_drift_is_not_read_as_the_change(bench):
    # +2 %/day over the 23 h gap: against the aged baseline the drift is read as an
    # improvement well above the nominal 2.5 %; verify compares with the hour before the
    # start (drift there ~0.2 %), so the null stays near nominal.
    tally = bench.aging_cell(0.9, 0.02, 23.0, 150, seed=5001)
    assert tally.rate("without IMPROVED")[1] > 0.05  # the confound is real (Wilson lower bound)
    assert tally.rate("with IMPROVED")[2] <= 0.06 and tally.rate("with REGRESSED")[2] <= 0.06
