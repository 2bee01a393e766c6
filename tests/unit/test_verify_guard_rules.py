"""Guard signals without Prometheus: the overall verdict precedence, the guards line and
the report's guard table."""

from __future__ import annotations

import datetime as dt

import pytest

from obsctl.baselining.decide.verdict import guard_margin, holm, overall_verdict
from obsctl.baselining.report import _guard_table
from obsctl.baselining.text.present import guards_line, verdict_line
from obsctl.records import GuardResult, VerificationResult, Window

UTC = dt.UTC


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
    assert reason == "quality guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %)"


@pytest.mark.parametrize("primary", ["NO_CHANGE", "INCONCLUSIVE"])
def test_regressed_guard_also_overrides_no_change_and_inconclusive(primary):
    assert overall_verdict(primary, "r", [guard("q", "REGRESSED", -0.1, -0.11, -0.09)], 0.95)[0] == "REGRESSED"


@pytest.mark.parametrize("primary", ["NO_DATA", "REGRESSED"])
def test_primary_no_data_and_regressed_stand(primary):
    assert overall_verdict(primary, "r", [guard("q", "REGRESSED", -0.1, -0.11, -0.09)], 0.95) == (primary, "r")


def test_an_undecided_guard_of_any_category_caps_the_verdict_unless_optional():
    guards = [guard("a", "NO_DATA", category="cost"), guard("b", "INCONCLUSIVE", 0.05, -0.05, 0.15, category="saturation"),
              guard("c", "NO_CHANGE", 0.0, 0.0, 0.0, exact=True)]
    verdict, reason = overall_verdict("IMPROVED", "r", guards, 0.95)
    assert verdict == "INCONCLUSIVE" and reason.startswith("cost guard a NO_DATA, saturation guard b INCONCLUSIVE")
    assert overall_verdict("IMPROVED", "r", guards, 0.95, optional=["a", "b"]) == ("IMPROVED", "r")


def test_a_guard_without_a_baseline_is_not_evaluated_and_caps_an_improvement():
    # The default cost guard with no baseline: named as not evaluated, no plain IMPROVED.
    guards = [guard("q", "NO_CHANGE", 0.0, -0.01, 0.01)]
    verdict, reason = overall_verdict("IMPROVED", "better", guards, 0.95, missing=["usd_per_million_tokens"])
    assert (verdict, reason) == ("INCONCLUSIVE", "guard usd_per_million_tokens not evaluated (no baseline) "
                                                 "(not shown within its margin; optional_guards lifts this)")
    assert overall_verdict("NO_CHANGE", "r", guards, 0.95, missing=["c"])[0] == "INCONCLUSIVE"
    # A regression still wins; an optional guard does not cap.
    assert overall_verdict("IMPROVED", "r", [guard("q", "REGRESSED", -0.1, -0.11, -0.09)], 0.95, missing=["c"])[0] == "REGRESSED"
    assert overall_verdict("IMPROVED", "r", guards, 0.95, optional=["c"], missing=["c"]) == ("IMPROVED", "r")
    result = VerificationResult(verdict="INCONCLUSIVE", primary_verdict="IMPROVED", baseline_id="b", signal="s",
                                window=Window(start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC),
                                              step_seconds=15),
                                baseline_mean=1.0, window_mean=1.2, change_ratio=0.2, ci_low=0.1, ci_high=0.3, confidence=0.95,
                                verified_at=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), guards=guards, guards_evaluated=True,
                                guards_missing=["usd_per_million_tokens"])
    assert guards_line(result) == "guards: q NO_CHANGE, usd_per_million_tokens NOT EVALUATED (no baseline)"
    assert "| `usd_per_million_tokens` | | n/a | n/a | n/a | n/a | **NOT EVALUATED** (no baseline) |" in _guard_table(result)


def holm_guard(signal, p):
    from obsctl.records import Assessment

    return guard(signal, "INCONCLUSIVE").model_copy(update={"assessment": Assessment(p_worse=p)})


def test_holm_walks_down_the_p_values_and_stops_at_the_first_above_its_level():
    # Three guards, family alpha 0.1: levels 0.1/3, 0.1/2, 0.1 in the order of their p-values.
    # p = 0.04, 0.2, 0.001: 0.001 <= 0.0333 (judged at Bonferroni already), 0.04 <= 0.05
    # (judged again at 0.05), 0.2 > 0.1 (the walk stops; it keeps its Bonferroni judgement).
    results = [holm_guard("a", 0.04), holm_guard("b", 0.2), holm_guard("c", 0.001)]
    calls = []

    def again(name):
        return lambda level: calls.append((name, level)) or guard(name, "REGRESSED", -0.1, -0.2, -0.05)

    out = holm(results, [again("a"), again("b"), again("c")], 0.1)
    assert calls == [("a", pytest.approx(0.05))]
    assert [g.verdict for g in out] == ["REGRESSED", "INCONCLUSIVE", "INCONCLUSIVE"]
    # A first p-value above alpha / m stops the walk before anything is judged again.
    calls.clear()
    assert holm([holm_guard("a", 0.04), holm_guard("b", 0.05)], [again("a"), again("b")], 0.05) == [holm_guard("a", 0.04), holm_guard("b", 0.05)]
    assert calls == []


def test_a_guard_margin_is_its_own_not_the_alert_tolerance(tmp_path):
    from obsctl.spec import load_spec

    path = tmp_path / "obsctl.yaml"
    path.write_text(SPEC)
    spec = load_spec(str(path))
    assert guard_margin(spec, "quality") == 0.01 and guard_margin(spec, "cost") == 0.05  # own, then verification's default
    assert spec.signal("cost").tolerance_ratio == 0.3


SPEC = """
prometheus: {url: http://127.0.0.1:9090}
workload_classes:
  - {name: chat, kind: inference, selector: {namespace: chat}}
signals:
  - {name: quality, category: quality, query: "avg(q{$selector})", unit: ratio, direction: higher_is_better, guard_margin_ratio: 0.01}
  - {name: cost, category: cost, query: "sum(c{$selector})", unit: USD/h, direction: lower_is_better, tolerance_ratio: 0.3}
"""


@pytest.mark.parametrize("undecided", ["NO_DATA", "INCONCLUSIVE"])
@pytest.mark.parametrize("primary", ["IMPROVED", "NO_CHANGE"])
def test_undecided_quality_guard_caps_the_verdict_unless_optional(primary, undecided):
    # No data is never a pass, for a quality guard too.
    guards = [guard("q", undecided), guard("c", "NO_CHANGE", 0.0, 0.0, 0.0, exact=True)]
    verdict, reason = overall_verdict(primary, "r", guards, 0.95)
    assert verdict == "INCONCLUSIVE" and reason.startswith(f"quality guard q {undecided}") and "primary" not in reason
    assert reason.endswith("(not shown within its margin; optional_guards lifts this)")
    assert overall_verdict(primary, "r", guards, 0.95, optional=["q"]) == (primary, "r")
    assert overall_verdict("INCONCLUSIVE", "r", guards, 0.95) == ("INCONCLUSIVE", "r")


def _result(v, primary, guards, evaluated=True, reason=""):
    w = Window(start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), step_seconds=15)
    return VerificationResult(verdict=v, primary_verdict=primary, reason=reason, guards=guards, guards_evaluated=evaluated, baseline_id="b",
                              signal="tokens_per_second", window=w, baseline_mean=2410.2, window_mean=3133.3, change_ratio=0.3,
                              ci_low=0.25, ci_high=0.35, confidence=0.95, verified_at=w.end)


def test_guards_line_and_overridden_verdict_line():
    guards = [guard("usd_per_million_tokens", "IMPROVED", -0.48, -0.5, -0.46, "cost"), guard("probe_cosine_similarity", "NO_CHANGE", 0.001, -0.01, 0.01),
              guard("gpu_utilization", "NO_DATA", category="utilization")]
    assert guards_line(_result("IMPROVED", "IMPROVED", guards)) == (
        "guards: usd_per_million_tokens IMPROVED -48.0 %, probe_cosine_similarity NO_CHANGE, gpu_utilization NO_DATA")
    assert guards_line(_result("IMPROVED", "IMPROVED", [], evaluated=False)) == "guards: not evaluated"
    assert guards_line(_result("IMPROVED", "IMPROVED", [])).startswith("guards: none")
    regressing = [guard("probe_cosine_similarity", "REGRESSED", -0.031, -0.04, -0.022)]
    verdict, reason = overall_verdict("IMPROVED", "better", regressing, 0.95)
    regressed = _result(verdict, "IMPROVED", regressing, reason=reason)
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
