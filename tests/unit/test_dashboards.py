"""Unit tests of the dashboards: modern panels, datasource variable everywhere, house
style, committed copy up to date, CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from obsctl.dashboards import build as builder
from obsctl.dashboards import grafana
from obsctl.dashboards.cli import dashboards
from obsctl.spec import load_spec
from support.rules_fixtures import write_spec


@pytest.fixture(scope="module")
def built():
    return {name: json.loads(text) for name, text in builder.build(load_spec(builder.EXAMPLE_SPEC)).items()}


def test_six_dashboards(built):
    assert sorted(built) == ["obsctl-cost.json", "obsctl-gpu-fleet.json", "obsctl-inference.json", "obsctl-loop-overview.json",
                             "obsctl-training.json", "obsctl-verification.json"]


def test_verification_dashboard_shows_design_context(built):
    """Saturation, demand, the primary signal against its baseline and treated vs control; canary rows only
    for classes with a variant, and only for signals the variant label can split ($selector queries)."""
    from obsctl.rules import canonical as C
    from obsctl.rules.loop_series import BASELINE_VALUE
    from obsctl.spec import ClassComparison, Comparison, Variant

    spec = load_spec(builder.EXAMPLE_SPEC)
    dash = built["obsctl-verification.json"]
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p.get("targets", []))
    assert all(s in exprs for s in (C.SATURATION_STATE, C.REQUESTS_OFFERED, BASELINE_VALUE, 'workload_class="$control_class"'))
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["signal"]["current"]["value"] == spec.targets[0].signal
    assert variables["signal"]["query"].split(",") == sorted(s.name for s in spec.signals)
    assert variables["control_class"]["multi"] is False and variables["control_class"]["includeAll"] is False
    assert not any("canary" in p["title"] for p in dash["panels"])  # the example spec configures no variant

    classes = {"embed-online": ClassComparison(design="canary", variant=Variant(label="track", control="stable", treatment="canary")),
               "finetune-batch": ClassComparison(design="control", control="embed-online")}
    canary = json.loads(builder.build(spec.model_copy(update={"comparison": Comparison(classes=classes)}))["obsctl-verification.json"])
    rows = [p["title"] for p in canary["panels"] if p["type"] == "row"]
    assert rows[-1] == "embed-online: canary track=canary vs stable" and len(rows) == 4
    split = sorted(s.name for s in spec.signals if "$selector" in s.query)
    titles = [p["title"] for p in canary["panels"] if p["title"].endswith(": treatment / control - 1")]
    assert titles == [f"{name}: treatment / control - 1" for name in split] and "gpu_utilization" not in split
    by_track = next(p for p in canary["panels"] if p["title"].startswith("tokens_per_second (") and "by track" in p["title"])
    assert [('track="stable"' in t["expr"], 'track="canary"' in t["expr"]) for t in by_track["targets"]] == [(True, False), (False, True)]
    control = {v["name"]: v for v in canary["templating"]["list"]}["control_class"]
    assert control["current"]["value"] == "embed-online"  # the configured control


def test_workload_dashboards_read_canonical_series(built):
    """Inference, training and cost dashboards show their issue-8 panels, each per class."""
    from obsctl.rules import canonical as C

    want = {"obsctl-inference.json": [C.SATURATION_STATE, C.TOKENS, C.TTFT_P95, C.KV_CACHE_USAGE, C.REQUESTS_WAITING],
            "obsctl-training.json": [C.SAMPLES, C.STEP_TIME, C.MFU, C.RUN_COST_USD_PER_HOUR],
            "obsctl-cost.json": [C.COST_USD_PER_HOUR, C.COST_PER_MILLION_TOKENS, C.IDLE_WASTE_USD_PER_HOUR,
                                 C.UNATTRIBUTED_WASTE_USD_PER_HOUR, C.COST_PER_SAMPLE]}
    for name, series in want.items():
        exprs = " ".join(t["expr"] for p in built[name]["panels"] for t in p.get("targets", []))
        assert all(s in exprs for s in series), name
        variables = [v["name"] for v in built[name]["templating"]["list"]]
        assert "workload_class" in variables


def test_house_style(built):
    for dash in built.values():
        assert dash["schemaVersion"] == grafana.SCHEMA_VERSION
        assert "rows" not in dash and "style" not in dash
        ds = [v for v in dash["templating"]["list"] if v["name"] == "datasource"]
        assert ds and ds[0]["type"] == "datasource" and ds[0]["query"] == "prometheus"
        ids = [p["id"] for p in dash["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dash["panels"]:
            assert panel["type"] in grafana.MODERN_TYPES
            assert 0 <= panel["gridPos"]["x"] and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"]
            for target in panel["targets"]:
                assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                assert target["expr"] and target["refId"]


def test_loop_overview_covers_every_class_and_signal(built):
    """One row that Grafana repeats per selected class; in it every signal's panels, read through the variable."""
    spec = load_spec(builder.EXAMPLE_SPEC)
    dash = built["obsctl-loop-overview.json"]
    rows = [(p["title"], p.get("repeat")) for p in dash["panels"] if p["type"] == "row"]
    assert rows == [("Review and ledger", None), ("$workload_class", "workload_class")]
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "workload_class", "signal"]
    exprs = [t["expr"] for p in dash["panels"] if p["type"] == "timeseries" for t in p["targets"]]
    for sig in spec.signals:
        assert f'{sig.record_name}{{workload_class=~"$workload_class"}}' in exprs
    assert not any(wc.name in json.dumps(dash) for wc in spec.workload_classes)  # no class is written into the JSON
    # the one target of examples/obsctl.yaml is drawn, with its gap in the stat
    stat = next(p for p in dash["panels"] if p["title"] == "usd_per_million_tokens now")
    assert [t["refId"] for t in stat["targets"]] == ["A", "B"]
    assert stat["fieldConfig"]["overrides"][0]["properties"] == [{"id": "unit", "value": "percentunit"}]
    assert dash["links"][0]["includeVars"] is True and dash["links"][0]["tags"] == ["obsctl"]


def test_units():
    assert grafana.unit("ratio") == "percentunit"
    assert grafana.unit("seconds") == "s"
    assert grafana.unit("tokens/s") == "suffix: tokens/s"


def test_committed_dashboards_are_up_to_date():
    files = builder.build(load_spec(builder.EXAMPLE_SPEC))
    assert builder.check(builder.COMMITTED, files) == [], "run: python -m obsctl.dashboards.build"


def test_build_is_deterministic(tmp_path):
    spec = write_spec(tmp_path)
    assert builder.build(spec) == builder.build(spec)


def test_cli_build_and_check(tmp_path):
    write_spec(tmp_path)
    runner = CliRunner()
    args = ["build", "--spec", str(tmp_path / "obsctl.yaml"), "--out", str(tmp_path / "out")]
    assert runner.invoke(dashboards, args).exit_code == 0
    assert runner.invoke(dashboards, [*args, "--check"]).exit_code == 0
    (tmp_path / "out" / "obsctl-gpu-fleet.json").write_text("{}")
    stale = runner.invoke(dashboards, [*args, "--check"])
    assert stale.exit_code == 1 and "obsctl-gpu-fleet.json" in stale.output
    missing = runner.invoke(dashboards, ["build", "--spec", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "not found" in missing.output
