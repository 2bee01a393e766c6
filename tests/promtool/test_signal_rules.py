"""Rule logic checked by ``promtool test rules``: tests generated from a small spec and
baselines, with expected values computed here in Python, independently of the PromQL.

Scenarios (tokens baseline 100 tokens/s, tolerance 10 %; cost baseline 1.0 USD/1M tokens):
within tolerance (no alert), regression in both directions (alerts), improvement (no
alert), absent data with a baseline, and a class without a baseline.
"""

from __future__ import annotations

import re

import pytest
import yaml

from obsctl.rules import generate as gen
from obsctl.rules import promtool
from support.rules_fixtures import TRICKY, baseline, write_spec

STEP = 15  # seconds between input samples
SVC = 'obsctl_tokens_total{job="w",workload="' + TRICKY.replace("\\", "\\\\").replace('"', '\\"') + '"}'
PRICE = 'obsctl_node_price_usd_per_hour{job="x"}'
BASE_TOKENS, BASE_USD, TOL = 100.0, 1.0, 0.1


def usd_per_million(price_per_hour: float, tokens_per_s: float) -> float:
    """Cost per 1M tokens: USD/s over tokens/s, times 1e6."""
    return price_per_hour / 3600 / tokens_per_s * 1e6


def _render(template: str, labels: dict, value: float) -> str:
    """Render the two template forms the alerts use, as Prometheus would."""
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return out.replace('{{ $value | printf "%.4g" }}', f"{value:.4g}").replace("{{ $value }}", f"{value:g}")


def _expected(rule: dict, labels: dict, value: float = 0.0) -> dict:
    full = {**rule["labels"], **labels}
    return {"exp_labels": full, "exp_annotations": {k: _render(v, full, value) for k, v in rule["annotations"].items()}}


def _scenario(tokens_per_s: float | None, price: float, other_tokens: float = 50.0) -> list[dict]:
    series = [{"series": PRICE, "values": f"{price}x100"},
              {"series": 'obsctl_tokens_total{job="w",workload="other"}', "values": f"0+{other_tokens * STEP}x100"}]
    if tokens_per_s is not None:
        series.append({"series": SVC, "values": f"0+{tokens_per_s * STEP}x100"})
    return series


def _sample(metric: str, labels: dict, value: float) -> dict:
    return {"labels": metric + "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}", "value": value}


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"')


def build_tests(files: dict[str, str]) -> list[dict]:
    absent = _absent_rules(files)
    reg = {r["labels"]["signal"]: r for g in yaml.safe_load(files["obsctl-alerts.rules.yaml"])["groups"] for r in g["rules"]
           if r["alert"] == "ObsctlSignalRegression"}
    svc_tok = {"workload_class": "svc", "signal": "tokens_per_second"}
    svc_usd = {"workload_class": "svc", "signal": "usd_per_million_tokens"}
    tests = []

    # 1. Within tolerance: 95 tokens/s (5 % below), cost 5 % above; values and gaps exact.
    tok, price = 95.0, 1.05 * 95.0 * 3600 / 1e6  # the price that makes the cost 1.05 USD/1M tokens
    usd = usd_per_million(price, tok)
    tests.append({"interval": f"{STEP}s", "input_series": _scenario(tok, price), "promql_expr_test": [
        {"expr": "workload_class:obsctl_tokens:rate1m{workload_class=\"svc\"}", "eval_time": "5m",
         "exp_samples": [_sample("workload_class:obsctl_tokens:rate1m", svc_tok, tok)]},
        {"expr": "workload_class:obsctl_cost_usd_per_million_tokens:ratio_rate1m{workload_class=\"svc\"}", "eval_time": "5m",
         "exp_samples": [_sample("workload_class:obsctl_cost_usd_per_million_tokens:ratio_rate1m", svc_usd, usd)]},
        {"expr": "workload_class:obsctl_signal_target:value", "eval_time": "5m",
         "exp_samples": [_sample("workload_class:obsctl_signal_target:value", svc_tok, BASE_TOKENS * 1.2),
                         _sample("workload_class:obsctl_signal_target:value", svc_usd, 0.8)]},
        {"expr": "workload_class:obsctl_signal_target_gap:ratio", "eval_time": "5m",
         "exp_samples": [_sample("workload_class:obsctl_signal_target_gap:ratio", svc_tok, (tok - 120) / 120),
                         _sample("workload_class:obsctl_signal_target_gap:ratio", svc_usd, (usd - 0.8) / 0.8)]},
    ], "alert_rule_test": [
        {"alertname": "ObsctlSignalRegression", "eval_time": "5m", "exp_alerts": []},
        {"alertname": "ObsctlSignalAbsent", "eval_time": "20m", "exp_alerts": []},
    ]})

    # 2. Regression in both directions: 80 tokens/s (20 % below), cost 1.25 (25 % above).
    tok, price = 80.0, 0.36
    usd = usd_per_million(price, tok)
    assert tok < BASE_TOKENS * (1 - TOL) and usd > BASE_USD * (1 + TOL)
    tests.append({"interval": f"{STEP}s", "input_series": _scenario(tok, price), "alert_rule_test": [
        {"alertname": "ObsctlSignalRegression", "eval_time": "5m", "exp_alerts": [
            _expected(reg["tokens_per_second"], {"workload_class": "svc"}, tok),
            _expected(reg["usd_per_million_tokens"], {"workload_class": "svc"}, usd)]},
    ]})

    # 3. Improvement in both directions: 130 tokens/s, cost 0.77: never a regression.
    tests.append({"interval": f"{STEP}s", "input_series": _scenario(130.0, 0.36),
                  "alert_rule_test": [{"alertname": "ObsctlSignalRegression", "eval_time": "5m", "exp_alerts": []}]})

    # 4. svc has baselines but no data: absent fires (after 10m); class "other" has no baseline.
    tests.append({"interval": f"{STEP}s", "input_series": _scenario(None, 0.36), "alert_rule_test": [
        {"alertname": "ObsctlSignalAbsent", "eval_time": "5m", "exp_alerts": []},
        {"alertname": "ObsctlSignalAbsent", "eval_time": "12m", "exp_alerts": [
            _expected(absent["tokens_per_second"], svc_tok),
            _expected(absent["usd_per_million_tokens"], svc_usd)]},
    ]})
    return tests


def _absent_rules(files: dict[str, str]) -> dict[str, dict]:
    return {r["labels"]["signal"]: r for g in yaml.safe_load(files["obsctl-alerts.rules.yaml"])["groups"]
            for r in g["rules"] if r["alert"] == "ObsctlSignalAbsent"}


def write_suite(tmp_path, tests: list[dict], files: dict[str, str]):
    gen.write(tmp_path / "rules", files)
    suite = {"rule_files": [str(tmp_path / "rules" / n) for n in sorted(files)], "evaluation_interval": f"{STEP}s", "tests": tests}
    path = tmp_path / "suite_test.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


@pytest.fixture
def generated(tmp_path):
    spec = write_spec(tmp_path)
    files, _ = gen.generate(spec, [baseline("svc", "tokens_per_second", BASE_TOKENS),
                                   baseline("svc", "usd_per_million_tokens", BASE_USD)])
    return files


def test_loop_rules_pass_promtool(tmp_path, generated):
    result = promtool.test_rules([write_suite(tmp_path, build_tests(generated), generated)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_baseline_missing_fires_once_per_class_without_baseline(tmp_path, generated):
    """Class ``other`` has neither of its two signals baselined: one info alert, value 2;
    ``svc`` has both: none. One rule serves every class (the class comes from the series)."""
    (rule,) = [r for g in yaml.safe_load(generated["obsctl-alerts.rules.yaml"])["groups"] for r in g["rules"]
               if r["alert"] == "ObsctlBaselineMissing"]
    tests = [{"interval": f"{STEP}s", "input_series": _scenario(100.0, 0.36), "alert_rule_test": [
        {"alertname": "ObsctlBaselineMissing", "eval_time": "10m", "exp_alerts": []},
        {"alertname": "ObsctlBaselineMissing", "eval_time": "16m",
         "exp_alerts": [_expected(rule, {"workload_class": "other"}, 2.0)]},
    ]}]
    result = promtool.test_rules([write_suite(tmp_path, tests, generated)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_harness_fails_on_wrong_expectation(tmp_path, generated):
    """The same harness with one expected value off by 1 % must fail: the tests can fail."""
    tests = build_tests(generated)
    sample = tests[0]["promql_expr_test"][0]["exp_samples"][0]
    sample["value"] *= 1.01
    result = promtool.test_rules([write_suite(tmp_path, tests, generated)])
    assert result.returncode != 0
    assert "workload_class:obsctl_tokens:rate1m" in result.stdout + result.stderr


def test_committed_rules_pass_promtool_check_and_unit_tests():
    committed = sorted(gen.COMMITTED.glob("obsctl-*.rules.yaml"))
    check = promtool.check_rules(committed)
    assert check.returncode == 0, check.stdout + check.stderr
    suites = sorted((gen.REPO / "tests" / "rules").glob("*.yaml"))
    assert suites
    result = promtool.test_rules(suites)
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_rules_with_baselines_pass_promtool_check(tmp_path, generated):
    paths = gen.write(tmp_path / "out", generated)
    result = promtool.check_rules(paths)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_check_command_reports_promtool_in_json(tmp_path, generated):
    import json

    from click.testing import CliRunner

    from obsctl.rules.cli import rules

    out = tmp_path / "out"
    gen.write(out, generated)
    good = CliRunner().invoke(rules, ["check", str(out), "-o", "json"])
    assert good.exit_code == 0, good.output
    report = json.loads(good.stdout)
    assert report["ok"] is True and len(report["files"]) == len(list(out.glob("*.yaml"))) and "SUCCESS" in report["promtool"]
    (out / "broken.yaml").write_text("groups:\n- name: x\n  rules:\n  - record: 'not a name'\n    expr: up\n")
    bad = CliRunner().invoke(rules, ["check", str(out), "-o", "json"])
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert report["ok"] is False and "broken.yaml" in report["promtool"]
    assert "promtool check rules failed" in bad.stderr
