"""Guard signals without Prometheus: the zero-variance (constant series) rule of the
change estimate with known answers, the overall verdict precedence, the guards line,
the report's guard table and loading store records written before guards existed."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from scipy import stats as sps

from obsctl.baselining import stats
from obsctl.baselining.models import GuardResult, Initiative, VerificationResult, Window
from obsctl.baselining.report import _guard_table
from obsctl.baselining.verify import guards_line, overall_verdict, verdict_line

UTC = dt.timezone.utc


def verdict(x, y, direction="higher_is_better", d=0.02):
    return stats.decide(stats.relative_change(x, y, 0.95), direction, d)[0]


# --- constant series: the exact rule -----------------------------------------------------


def test_equal_constants_are_no_change_exactly():
    est = stats.relative_change([1.0] * 10, [1.0] * 10, 0.95)
    assert est.exact and (est.change_ratio, est.ci_low, est.ci_high) == (0.0, 0.0, 0.0)
    for direction in ("higher_is_better", "lower_is_better"):
        for d in (0.0, 0.02):
            assert verdict([1.0] * 10, [1.0] * 10, direction, d) == "NO_CHANGE"


def test_zero_and_zero_is_no_change():
    # e.g. an error ratio that is 0 before and after: equal, not "baseline mean 0".
    est = stats.relative_change([0.0] * 10, [0.0] * 10, 0.95)
    assert est.exact and est.change_ratio == 0.0
    assert verdict([0.0] * 10, [0.0] * 10, "lower_is_better") == "NO_CHANGE"


def test_float_rounding_of_a_constant_is_no_change_even_with_zero_margin():
    # Batch means of a constant 0.1 series and a constant computed differently differ in
    # the last ulp; that is not an effect.
    x = stats.summarize([0.1] * 100, 10).batch_means
    y = [0.3 / 3] * 10
    assert 0.3 / 3 != 0.1
    assert verdict(x, y, "higher_is_better", 0.0) == "NO_CHANGE"
    assert verdict(x, y, "lower_is_better", 0.0) == "NO_CHANGE"


@pytest.mark.parametrize(
    ("base", "window", "direction", "d", "expected"),
    [
        (1.0, 0.97, "higher_is_better", 0.02, "REGRESSED"),  # -3 %, past the margin
        (1.0, 0.97, "lower_is_better", 0.02, "IMPROVED"),
        (1.0, 1.03, "higher_is_better", 0.02, "IMPROVED"),
        (1.0, 0.99, "higher_is_better", 0.02, "NO_CHANGE"),  # -1 %: exact but below the margin
        (1.0, 0.99, "higher_is_better", 0.0, "REGRESSED"),  # no margin: any exact change counts
        (100.0, 102.0, "higher_is_better", 0.02, "IMPROVED"),  # exactly the margin: >= d
        (0.0, 0.05, "lower_is_better", 0.02, "REGRESSED"),  # from 0: undefined ratio, sign exact
        (0.0, 0.05, "higher_is_better", 0.02, "IMPROVED"),
    ],
)
def test_different_constants_have_an_exact_verdict(base, window, direction, d, expected):
    assert verdict([base] * 10, [window] * 10, direction, d) == expected


def test_different_constants_known_change():
    est = stats.relative_change([0.95] * 10, [0.855] * 12, 0.95)
    assert est.exact and est.dof is None
    assert est.change_ratio == pytest.approx(-0.1, abs=1e-12)
    assert est.ci_low == est.ci_high == est.change_ratio
    from_zero = stats.relative_change([0.0] * 10, [0.05] * 10, 0.95)
    assert from_zero.exact and from_zero.change_ratio is None and "undefined" in from_zero.reason


def test_constant_baseline_noisy_window_is_a_t_interval():
    # v_x = 0 -> g = 0, dof = k_y - 1: the interval is ybar/xbar -+ t * s_y / (sqrt(k_y) xbar), minus 1.
    y = np.array([10.2, 9.9, 10.4, 10.1, 9.8, 10.3, 10.0, 10.2, 9.9, 10.2])
    est = stats.relative_change([10.0] * 10, y, 0.95)
    assert not est.exact and est.dof == pytest.approx(9)
    half = sps.t.ppf(0.975, 9) * y.std(ddof=1) / math.sqrt(10) / 10.0
    assert est.change_ratio == pytest.approx(y.mean() / 10 - 1)
    assert est.ci_low == pytest.approx(y.mean() / 10 - 1 - half)
    assert est.ci_high == pytest.approx(y.mean() / 10 - 1 + half)


def test_noisy_baseline_constant_window_is_finite():
    x = [10.2, 9.9, 10.4, 10.1, 9.8, 10.3, 10.0, 10.2, 9.9, 10.2]
    est = stats.relative_change(x, [10.05] * 10, 0.95)
    assert not est.exact
    assert all(math.isfinite(v) for v in (est.change_ratio, est.ci_low, est.ci_high, est.dof))
    assert est.ci_low < est.change_ratio < est.ci_high


def test_is_constant():
    assert stats.is_constant([3.0, 3.0]) and stats.is_constant([0.0, 0.0])
    assert stats.is_constant([1.0, 1.0 + 1e-12])
    assert not stats.is_constant([1.0, 1.0 + 1e-6]) and not stats.is_constant([])


# --- overall verdict -----------------------------------------------------------------------


def guard(signal, v, change=None, low=None, high=None, category="quality", exact=False):
    return GuardResult(signal=signal, category=category, unit="ratio", direction="higher_is_better", baseline_id="b",
                       query="q", verdict=v, change_ratio=change, ci_low=low, ci_high=high, exact=exact,
                       baseline_mean=1.0, window_mean=None if change is None else 1.0 + change)


def test_regressed_guard_overrides_an_improvement_and_is_named():
    guards = [guard("usd_per_million_tokens", "IMPROVED", -0.48, -0.5, -0.46, "cost"),
              guard("probe_cosine_similarity", "REGRESSED", -0.031, -0.04, -0.022)]
    v, reason = overall_verdict("IMPROVED", "better", guards, 0.95)
    assert v == "REGRESSED"
    assert reason == ("quality guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %); "
                      "primary was IMPROVED (better)")


@pytest.mark.parametrize("primary", ["NO_CHANGE", "INCONCLUSIVE"])
def test_regressed_guard_also_overrides_no_change_and_inconclusive(primary):
    assert overall_verdict(primary, "r", [guard("q", "REGRESSED", -0.1, -0.11, -0.09)], 0.95)[0] == "REGRESSED"


@pytest.mark.parametrize("primary", ["NO_DATA", "REGRESSED"])
def test_primary_no_data_and_regressed_stand(primary):
    assert overall_verdict(primary, "r", [guard("q", "REGRESSED", -0.1, -0.11, -0.09)], 0.95) == (primary, "r")


def test_no_data_and_inconclusive_non_quality_guards_do_not_change_the_verdict():
    guards = [guard("a", "NO_DATA", category="cost"), guard("b", "INCONCLUSIVE", 0.05, -0.05, 0.15, category="saturation"),
              guard("c", "NO_CHANGE", 0.0, 0.0, 0.0, exact=True)]
    assert overall_verdict("IMPROVED", "r", guards, 0.95) == ("IMPROVED", "r")


@pytest.mark.parametrize("undecided", ["NO_DATA", "INCONCLUSIVE"])
@pytest.mark.parametrize("primary", ["IMPROVED", "NO_CHANGE"])
def test_undecided_quality_guard_caps_the_verdict_unless_optional(primary, undecided):
    # Issue 7: no data is never a pass, for a quality guard too.
    guards = [guard("q", undecided), guard("c", "NO_CHANGE", 0.0, 0.0, 0.0, exact=True)]
    verdict, reason = overall_verdict(primary, "r", guards, 0.95)
    assert verdict == "INCONCLUSIVE" and reason.startswith(f"quality guard q {undecided}") and reason.endswith(f"primary was {primary} (r)")
    assert overall_verdict(primary, "r", guards, 0.95, optional=["q"]) == (primary, "r")
    assert overall_verdict("INCONCLUSIVE", "r", guards, 0.95) == ("INCONCLUSIVE", "r")


def _result(v, primary, guards, evaluated=True):
    w = Window(start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), step_seconds=15)
    return VerificationResult(verdict=v, primary_verdict=primary, guards=guards, guards_evaluated=evaluated, baseline_id="b",
                              signal="tokens_per_second", window=w, baseline_mean=2410.2, window_mean=3133.3, change_ratio=0.3,
                              ci_low=0.25, ci_high=0.35, confidence=0.95, verified_at=w.end)


def test_guards_line_and_overridden_verdict_line():
    guards = [guard("usd_per_million_tokens", "IMPROVED", -0.48, -0.5, -0.46, "cost"), guard("probe_cosine_similarity", "NO_CHANGE", 0.001, -0.01, 0.01),
              guard("gpu_utilization", "NO_DATA", category="utilization")]
    assert guards_line(_result("IMPROVED", "IMPROVED", guards)) == (
        "guards: usd_per_million_tokens IMPROVED -48.0 %, probe_cosine_similarity NO_CHANGE, gpu_utilization NO_DATA")
    assert guards_line(_result("IMPROVED", "IMPROVED", [], evaluated=False)) == "guards: not evaluated"
    assert guards_line(_result("IMPROVED", "IMPROVED", [])).startswith("guards: none")
    regressed = _result("REGRESSED", "IMPROVED", [guard("probe_cosine_similarity", "REGRESSED", -0.031, -0.04, -0.022)])
    assert verdict_line(regressed, "tokens/s") == (
        "REGRESSED: quality guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %); "
        "primary tokens_per_second IMPROVED +30.0 % (95 % CI +25.0 % .. +35.0 %), baseline 2,410 -> window 3,133 tokens/s; alerts fired: none")


def test_report_guard_table_rows():
    table = "\n".join(_guard_table(_result("REGRESSED", "IMPROVED", [
        guard("probe_cosine_similarity", "REGRESSED", -0.031, -0.04, -0.022), guard("quality_ratio", "NO_CHANGE", 0.0, 0.0, 0.0, exact=True),
        guard("gpu_utilization", "NO_DATA", category="utilization")])))
    assert "| `probe_cosine_similarity` | quality | 1 ratio | 0.969 ratio | -3.1 % | -4.0 % .. -2.2 % | **REGRESSED** |" in table
    assert "| `quality_ratio` | quality | 1 ratio | 1 ratio | +0.0 % | exact (both constant) | **NO_CHANGE** |" in table
    assert "| `gpu_utilization` | utilization | 1 ratio | n/a | n/a | undefined | **NO_DATA** |" in table


# --- store compatibility -------------------------------------------------------------------


def test_records_written_before_guards_still_load():
    old_result = {"verdict": "IMPROVED", "baseline_id": "b", "signal": "s",
                  "window": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z", "step_seconds": 15},
                  "baseline_mean": 1.0, "window_mean": 1.3, "change_ratio": 0.3, "ci_low": 0.2, "ci_high": 0.4,
                  "confidence": 0.95, "verified_at": "2026-01-01T01:00:00Z"}
    r = VerificationResult.model_validate(old_result)
    assert r.guards == [] and r.guards_evaluated is False and r.primary_verdict is None
    i = Initiative.model_validate({"id": "i", "name": "i", "lever": "batch-size", "workload_class": "c", "primary_signal": "s",
                                   "baseline_id": "b", "started_at": "2026-01-01T00:00:00Z", "verifications": [old_result]})
    assert i.guard_baseline_ids == {} and i.verifications[0].guards == []
