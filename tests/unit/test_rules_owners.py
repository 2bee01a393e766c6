"""Owners on the generated alerts, the Alertmanager route tree, and the (class, signal)
pairs a class's source can fill."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from obsctl.dashboards import loop_overview
from obsctl.processes import require_binary
from obsctl.rules import generate as gen
from obsctl.rules.canonical import TTFT_P95
from obsctl.rules.loop_series import CLASS_INFO, CLASS_SIGNAL_INFO
from obsctl.rules.routes import UNOWNED, merged_config, route_tree, routes_file
from support.promtool import evaluate
from support.rules_fixtures import SPEC, TRICKY, write_spec

TRICKY_OWNER = 'ops "x"\\y'


def _spec(tmp_path, **changes):
    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][0]["owner"] = TRICKY_OWNER  # svc
    data["workload_classes"][1]["owner"] = "team-other"
    data["targets"][1]["owner"] = "finance"
    data.update(changes)
    return write_spec(tmp_path, data)


def _rules(files, name):
    return [r for g in yaml.safe_load(files[name])["groups"] for r in g["rules"]]


def test_class_info_series_carry_owner_kind_source(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][0]["owner"] = TRICKY_OWNER
    files, _ = gen.generate(write_spec(tmp_path, data), [])
    info = {r["labels"]["workload_class"]: r["labels"] for r in _rules(files, "obsctl-signals.rules.yaml") if r["record"] == CLASS_INFO}
    assert info == {"other": {"workload_class": "other", "kind": "inference", "source": "sdk"},  # no owner: no label
                    "svc": {"workload_class": "svc", "kind": "inference", "source": "sdk", "owner": TRICKY_OWNER}}


def test_every_class_alert_carries_the_owner(tmp_path):
    files, _ = gen.generate(_spec(tmp_path), [])
    alerts = _rules(files, "obsctl-alerts.rules.yaml")
    for a in alerts:
        if a["alert"] in ("ObsctlSignalRegression", "ObsctlSignalAbsent", "ObsctlBaselineMissing"):  # once for every class: the join
            assert a["expr"].endswith(f"* on(workload_class) group_left(owner) {CLASS_INFO}") and "owner" not in a["labels"]
    deadlines = {a["labels"]["signal"]: a["labels"].get("owner") for a in alerts if a["alert"] == "ObsctlTargetDeadlinePassed"}
    assert deadlines == {"tokens_per_second": TRICKY_OWNER, "usd_per_million_tokens": "finance"}  # a target's own owner wins


def test_route_tree_one_receiver_per_owner_and_amtool_accepts_it(tmp_path):
    spec = _spec(tmp_path)
    tree = route_tree(spec)
    assert [r["receiver"] for r in tree["route"]["routes"]] == ["finance", TRICKY_OWNER, "team-other"]
    assert tree["route"]["routes"][1]["matchers"] == ['owner="ops \\"x\\"\\\\y"']
    assert [r["name"] for r in tree["receivers"]] == [UNOWNED, "finance", TRICKY_OWNER, "team-other"]
    path = tmp_path / "routes.yml"
    path.write_text(routes_file(spec))
    assert yaml.safe_load(path.read_text()) == tree
    checked = subprocess.run([require_binary("amtool"), "check-config", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_merged_config_puts_owner_routes_first_and_keeps_user_receivers(tmp_path):
    spec = _spec(tmp_path)
    base = {"route": {"receiver": "oncall", "routes": [{"receiver": "oncall", "matchers": ['severity="critical"']}]},
            "receivers": [{"name": "oncall"}, {"name": "finance", "email_configs": [{"to": "f@example.com", "smarthost": "mail.example.com:25", "from": "obsctl@example.com"}]}]}
    merged = merged_config(base, spec, {"team-other": {"webhook_configs": [{"url": "http://127.0.0.1:1/x"}]}})
    assert [r["receiver"] for r in merged["route"]["routes"]] == ["finance", TRICKY_OWNER, "team-other", "oncall"]
    by_name = {r["name"]: r for r in merged["receivers"]}
    assert by_name["finance"] == base["receivers"][1]  # the user's own receiver is kept as it is
    assert by_name["team-other"]["webhook_configs"][0]["url"] == "http://127.0.0.1:1/x"
    path = tmp_path / "am.yml"
    path.write_text(yaml.safe_dump(merged))
    checked = subprocess.run([require_binary("amtool"), "check-config", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_cli_writes_and_checks_the_route_tree(tmp_path):
    from click.testing import CliRunner

    from obsctl.rules.cli import rules

    spec = _spec(tmp_path)
    out = tmp_path / "out"
    runner = CliRunner()
    assert runner.invoke(rules, ["generate", "--spec", str(spec.path), "--out", str(out)]).exit_code == 0
    routes = out / "alertmanager" / "obsctl-routes.yml"
    assert routes.read_text() == routes_file(spec)
    assert runner.invoke(rules, ["generate", "--spec", str(spec.path), "--out", str(out), "--check"]).exit_code == 0
    routes.write_text(routes.read_text().replace("finance", "nobody"))
    stale = runner.invoke(rules, ["generate", "--spec", str(spec.path), "--out", str(out), "--check"])
    assert stale.exit_code == 1 and "alertmanager/obsctl-routes.yml" in stale.output


def test_committed_route_tree_is_up_to_date():
    from obsctl.rules.routes import ROUTES_FILE
    from obsctl.spec import load_spec

    assert (gen.COMMITTED / ROUTES_FILE).read_text() == routes_file(load_spec(gen.EXAMPLE_SPEC)), "run: make generate"


@pytest.mark.parametrize("owner", ["", " team", "team\n", "a\rb", "x" * 129])
def test_owner_names_are_refused_when_unusable(tmp_path, owner):
    from obsctl.errors import SpecError

    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][0]["owner"] = owner
    with pytest.raises(SpecError, match="owner"):
        write_spec(tmp_path, data)


def test_only_pairs_the_source_fills_get_rules_alerts_and_panels(tmp_path):
    """An SDK class has no time to first token (the SDK does not see the engine); a vLLM
    class has: the catalogue signal gets a rule, a pair series and panels for vllm only."""
    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][1]["source"] = "vllm"
    data["signals"].append({"name": "ttft", "catalogue": "ttft_p95_seconds"})
    data["targets"] = []
    spec = write_spec(tmp_path, data)
    files, _ = gen.generate(spec, [])
    paths = gen.write(tmp_path / "rules", files)
    # Both classes have a canonical TTFT series; only the vllm class (other) can have the signal.
    inputs = [(f'{TTFT_P95}{{workload_class="{c}"}}', "0.25x40") for c in ("svc", "other")]
    svc = TRICKY.replace("\\", "\\\\").replace('"', '\\"')
    inputs += [(f'obsctl_tokens_total{{job="w",workload="{svc}"}}', "0+150x40"), ('obsctl_tokens_total{job="w",workload="other"}', "0+150x40"),
               ('obsctl_node_price_usd_per_hour{job="x"}', "0.36x40")]
    got = evaluate(tmp_path / "t", paths, inputs, {"pairs": CLASS_SIGNAL_INFO, "recorded": '{__name__=~"workload_class:.+",signal!=""}'},
                   "5m")
    pairs = {(s["workload_class"], s["signal"]) for s, _ in got["pairs"]}
    recorded = {(s["workload_class"], s["signal"]) for s, _ in got["recorded"]}
    assert pairs == recorded == {(c, s) for c in ("svc", "other") for s in ("tokens_per_second", "usd_per_million_tokens")} | {("other", "ttft")}
    assert [v for s, v in got["recorded"] if s["signal"] == "ttft"] == [0.25]
    dash = loop_overview.build(spec)
    titles = [p["title"] for p in dash["panels"]]
    assert titles.count("ttft now") == 1 and titles.count("tokens_per_second now") == 1
    data["workload_classes"][1]["source"] = "sdk"  # no class can have ttft: no panel
    assert "ttft now" not in [p["title"] for p in loop_overview.build(write_spec(tmp_path, data))["panels"]]
