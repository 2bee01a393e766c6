"""The one decision rule (obsctl.baselining.statistics.decision) with known answers: the
primary's rules, the exact rule for constant sides, the guards' non-inferiority rule, and
one wording whatever the design."""

from __future__ import annotations

import pytest

from obsctl.baselining.statistics.decision import Estimate, decide, exact_change
from obsctl.baselining.statistics.summary import is_constant


def _est(change, low, high, confidence=0.95):
    return Estimate(change, low, high, confidence, 10.0, baseline_mean=100.0, window_mean=100.0 * (1 + change))


@pytest.mark.parametrize(
    ("change", "low", "high", "direction", "expected"),
    [
        (0.30, 0.25, 0.35, "higher_is_better", "IMPROVED"),
        (0.30, 0.25, 0.35, "lower_is_better", "REGRESSED"),
        (-0.20, -0.25, -0.15, "lower_is_better", "IMPROVED"),
        (-0.20, -0.25, -0.15, "higher_is_better", "REGRESSED"),
        (0.005, -0.01, 0.015, "higher_is_better", "NO_CHANGE"),
        (0.005, -0.01, 0.015, "lower_is_better", "NO_CHANGE"),
        (0.05, -0.05, 0.15, "higher_is_better", "INCONCLUSIVE"),  # contains 0, reaches past the margin
        (0.015, 0.005, 0.025, "higher_is_better", "INCONCLUSIVE"),  # significant but below the minimum effect
        (0.03, 0.001, 0.06, "higher_is_better", "IMPROVED"),  # above 0, point past the margin
        (-0.03, -0.06, -0.001, "higher_is_better", "REGRESSED"),
        (0.0, -0.02, 0.01, "higher_is_better", "INCONCLUSIVE"),  # touches the margin: not inside it
    ],
)
def test_primary_rules(change, low, high, direction, expected):
    assert decide(_est(change, low, high), direction, 0.02)[0] == expected


def test_zero_margin_never_no_change():
    assert decide(_est(0.0, -0.001, 0.001), "higher_is_better", 0.0)[0] == "INCONCLUSIVE"


def test_no_estimate_is_no_data_and_undefined_is_inconclusive():
    assert decide(None, "higher_is_better", 0.02)[0] == "NO_DATA"
    verdict, reason = decide(Estimate(0.1, None, None, 0.95, reason="Fieller interval unbounded"), "higher_is_better", 0.02)
    assert (verdict, reason) == ("INCONCLUSIVE", "Fieller interval unbounded")


@pytest.mark.parametrize(
    ("base", "window", "direction", "d", "expected"),
    [
        (1.0, 1.0, "higher_is_better", 0.0, "NO_CHANGE"),
        (0.0, 0.0, "lower_is_better", 0.02, "NO_CHANGE"),  # 0 before and after: equal, not "baseline 0"
        (0.1, 0.3 / 3, "higher_is_better", 0.0, "NO_CHANGE"),  # float rounding of one constant is no effect
        (1.0, 0.97, "higher_is_better", 0.02, "REGRESSED"),
        (1.0, 0.97, "lower_is_better", 0.02, "IMPROVED"),
        (1.0, 1.03, "higher_is_better", 0.02, "IMPROVED"),
        (1.0, 0.99, "higher_is_better", 0.02, "NO_CHANGE"),  # exact but below the margin
        (1.0, 0.99, "higher_is_better", 0.0, "REGRESSED"),  # no margin: any exact change counts
        (100.0, 102.0, "higher_is_better", 0.02, "IMPROVED"),  # exactly the margin: >= d
        (0.0, 0.05, "lower_is_better", 0.02, "REGRESSED"),  # from 0: undefined ratio, sign exact
        (0.0, 0.05, "higher_is_better", 0.02, "IMPROVED"),
    ],
)
def test_exact_rule(base, window, direction, d, expected):
    assert decide(exact_change(base, window, 0.95), direction, d)[0] == expected


def test_exact_change_known_values():
    est = exact_change(0.95, 0.855, 0.95)
    assert est.exact and est.dof is None
    assert est.change == pytest.approx(-0.1, abs=1e-12) and est.low == est.high == est.change
    from_zero = exact_change(0.0, 0.05, 0.95)
    assert from_zero.exact and from_zero.change is None and "undefined" in from_zero.reason


@pytest.mark.parametrize(("low", "high", "gain", "expected"), [
    (-0.05, 0.02, -0.01, "NO_CHANGE"),  # non-inferior within 10 %
    (0.01, 0.05, 0.03, "IMPROVED"),  # non-inferior and better by more than d
    (0.001, 0.03, 0.015, "NO_CHANGE"),  # better, but by less than d
    (-0.12, -0.01, -0.06, "REGRESSED"),  # worse, and not shown within the tolerance
    (-0.12, 0.01, -0.05, "INCONCLUSIVE"),  # neither shown
])
def test_guard_rule(low, high, gain, expected):
    assert decide(_est(gain, low, high), "higher_is_better", 0.02, tolerance=0.10)[0] == expected
    # lower_is_better: the same gains with the signs of the change flipped
    assert decide(_est(-gain, -high, -low), "lower_is_better", 0.02, tolerance=0.10)[0] == expected


def test_one_wording_and_no_rounding_to_100_percent():
    _, reason = decide(_est(0.30, 0.25, 0.35, confidence=0.999996), "higher_is_better", 0.02)
    assert reason == "better than baseline at 99.9996 % confidence and by at least 2.0 %"
    _, reason = decide(_est(0.005, -0.01, 0.015), "higher_is_better", 0.02)
    assert reason == "equivalent: the whole 95 % interval lies within ±2.0 % of the baseline"


def test_is_constant():
    assert is_constant([3.0, 3.0]) and is_constant([0.0, 0.0]) and is_constant([0.1, 0.3 / 3])
    assert not is_constant([1.0, 1.0001]) and not is_constant([])
