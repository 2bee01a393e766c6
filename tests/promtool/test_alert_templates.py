"""Spec text in alert annotations is shown, never run: annotations are Go templates that
Prometheus expands at alert time. Checked by the real ``promtool test rules``, which expands
them as Prometheus does."""

from __future__ import annotations

import copy

import pytest
import yaml

from obsctl import escape
from obsctl.errors import SpecError
from obsctl.rules import generate as gen
from obsctl.rules import promtool
from support.rules_fixtures import SPEC, TRICKY, baseline, write_spec

STEP = 15
UNIT = 'tokens {{ query "up" }} / s {'  # a template action if copied raw; the trailing '{' too
DRIVER = "cut {{ cost"  # unbalanced: breaks the template if copied raw
WORKLOAD = TRICKY.replace("\\", "\\\\").replace('"', '\\"')
SVC = f'obsctl_tokens_total{{job="w",workload="{WORKLOAD}"}}'


def _spec(tmp_path, **changes):
    data = copy.deepcopy(SPEC)
    data["signals"][0]["unit"] = UNIT
    data["targets"][0]["driver"] = DRIVER
    data.update(changes)
    return write_spec(tmp_path, data)


def _suite(tmp_path, files: dict[str, str], tests: list[dict]):
    paths = gen.write(tmp_path / "rules", files)
    suite = {"rule_files": [str(p) for p in sorted(paths)], "evaluation_interval": f"{STEP}s", "tests": tests}
    path = tmp_path / "suite_test.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def test_unit_with_template_braces_is_rendered_literally_by_promtool(tmp_path):
    spec = _spec(tmp_path)
    files, _ = gen.generate(spec, [baseline("svc", "tokens_per_second", 100.0),
                                   baseline("svc", "usd_per_million_tokens", 1.0)])
    assert promtool.check_rules(gen.write(tmp_path / "check", files)).returncode == 0
    # 80 tokens/s against a baseline of 100 with a 10 % tolerance: the regression alert fires.
    series = [{"series": SVC, "values": f"0+{80 * STEP}x100"},
              {"series": 'obsctl_node_price_usd_per_hour{job="x"}', "values": "0.288x100"},  # cost at its baseline: no second alert
              {"series": 'up{job="leak"}', "values": "1x100"}]
    description = (f"tokens_per_second ({UNIT}, higher_is_better) of workload class svc is 80, below its baseline's "
                   f"spread (p5-p95), more than 10 % below its mean, for 1m. It fires only while the class is saturated or "
                   f"constrained, or its saturation state is unknown: on a class that serves what arrives this signal "
                   f"follows demand, and a dip there is the demand's.")
    alert = {"exp_labels": {"alertname": "ObsctlSignalRegression", "severity": "warning", "signal": "tokens_per_second",
                            "workload_class": "svc"},
             "exp_annotations": {"summary": "tokens_per_second of svc regressed past its baseline",
                                 "description": description,
                                 "runbook_url": "docs/runbooks.md#obsctlsignalregression"}}
    tests = [{"interval": f"{STEP}s", "input_series": series, "alert_rule_test": [
        {"alertname": "ObsctlSignalRegression", "eval_time": "5m", "exp_alerts": [alert]}]}]
    result = promtool.test_rules([_suite(tmp_path, files, tests)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_driver_with_template_braces_passes_promtool_check(tmp_path):
    files, _ = gen.generate(_spec(tmp_path), [])
    result = promtool.check_rules(gen.write(tmp_path / "out", files))
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = yaml.safe_load(files["obsctl-alerts.rules.yaml"])["groups"][1]["rules"]
    deadline = [r for r in alerts if r["alert"] == "ObsctlTargetDeadlinePassed" and r["labels"]["signal"] == "tokens_per_second"]
    assert '{{ "{{" }} cost' in deadline[0]["annotations"]["description"]


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,x", "file:///etc/passwd",
                                 "https://wiki.example/run books", "https://wiki.example/\nx"])
def test_runbook_base_url_must_be_http_or_relative(tmp_path, url):
    with pytest.raises(SpecError, match="runbook_base_url"):
        _spec(tmp_path, runbook_base_url=url)


@pytest.mark.parametrize("url", ["https://wiki.example.com/obsctl/runbooks", "http://wiki:8080/r", "docs/runbooks.md"])
def test_runbook_base_url_accepts_http_and_relative(tmp_path, url):
    assert _spec(tmp_path, runbook_base_url=url).runbook_base_url == url


def test_line_break_in_spec_file_name_stays_in_the_comment(tmp_path):
    folder = tmp_path / "spec"
    folder.mkdir()
    spec = write_spec(folder, copy.deepcopy(SPEC))
    hostile = folder / "x\ngroups: []\ninjected: 1\n#.yaml"
    spec.path.rename(hostile)
    from obsctl.spec import load_spec

    files, _ = gen.generate(load_spec(hostile), [])
    for text in files.values():
        lines = text.splitlines()
        assert lines[0].startswith("#") and lines[1].startswith("# Source: x\\ngroups") and lines[2].startswith("groups:")
        assert set(yaml.safe_load(text)) == {"groups"}


HOSTILE_VALUES = ['plain', 'a"b\\c', 'line\nbreak', 'cr\rtab\t', 'esc\x1b[31m', 'nul\x00', 'c1\x85', 'sep\u2028', '{{ x }}']


def test_promql_string_parses_in_promtool(tmp_path):
    """Every hostile value, escaped, is one valid label matcher to the real PromQL parser."""
    rules = [{"record": f"x:y{i}:z", "expr": f'up{{a="{escape.promql_string(t)}"}}'} for i, t in enumerate(HOSTILE_VALUES)]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": rules}]}))
    result = promtool.check_rules([path])
    assert result.returncode == 0, result.stdout + result.stderr


def test_owner_with_template_actions_stays_literal_in_alert_labels(tmp_path):
    """Alert labels are templates too: a target's owner (the deadline alert's label) and a
    class's owner (joined into the regression alert from the class info series) come out of
    the real promtool exactly as written, not as the value of ``query "up"``."""
    from support.promtool import evaluate

    target_owner, class_owner = '{{ query "up" }}', 'ops { {{ query "up" }} }'
    data = copy.deepcopy(SPEC)
    data["targets"] = [{**data["targets"][0], "deadline": "1970-01-01", "owner": target_owner}]
    data["workload_classes"][0]["owner"] = class_owner
    spec = write_spec(tmp_path, data)
    files, _ = gen.generate(spec, [baseline("svc", "tokens_per_second", 100.0)])
    paths = gen.write(tmp_path / "rules", files)
    # 80 tokens/s against a target of 120 (20 % above the baseline), long after the deadline
    # day: 1970-01-02 00:00 UTC plus the alert's hour.
    inputs = [(SVC, f"0+{80 * 60}x1700"), ('up{job="leak"}', "42x1700")]
    got = evaluate(tmp_path / "t", paths, inputs, {"a": 'ALERTS{alertstate="firing"}'}, "1700m", interval="1m")["a"]
    owners = {(s["alertname"], s.get("owner")) for s, _ in got}
    assert ("ObsctlTargetDeadlinePassed", target_owner) in owners, owners
    assert ("ObsctlSignalRegression", class_owner) in owners, owners
