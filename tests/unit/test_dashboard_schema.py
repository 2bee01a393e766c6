"""Every generated dashboard against Grafana's own schemas, and the useful rules of Grafana's
dashboard linter (grafana/dashboard-linter: template-datasource-rule, panel-datasource-rule,
target-rate-interval-rule, panel-units-rule, template-on-time-change-reload-rule).

Schemas: grafana-foundation-sdk's JSON Schemas (tests/fixtures/grafana-schema/README.md). Where the
schema and Grafana's own serialization disagree the dashboards follow Grafana; those places are
listed in :data:`GRAFANA_OVER_SCHEMA` (and docs/dashboards.md), and only they are let through.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from obsctl.dashboards import build as builder
from obsctl.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "tests" / "fixtures" / "grafana-schema"
SPECS = [REPO / "examples" / "obsctl.yaml", REPO / "deploy" / "kubernetes" / "base" / "obsctl.yaml"]
PANEL_TYPES = ("timeseries", "stat", "bargauge", "table")

#: (JSON path of an error, why Grafana's serialization wins there).
GRAFANA_OVER_SCHEMA = [
    (r"templating/list/\d+/query",
     "a Prometheus query variable's query is {qryType, query, refId} (a number and strings): Grafana's "
     "Prometheus variable editor writes it so; the schema wants an object of objects"),
    (r"panels/\d+/fieldConfig/overrides/\d+/matcher/options",
     "byFrameRefID / byName matchers take a string ('B'); the schema wants an object"),
    (r"panels/\d+/fieldConfig/overrides/\d+/properties/\d+/value",
     "an override's value is the property's own type (a unit id string); the schema wants an object"),
]


def _load(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.jsonschema.json").read_text())


def _definition(schema: dict, name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator({"definitions": schema["definitions"], "$ref": f"#/definitions/{name}"})


DASHBOARD = jsonschema.Draft7Validator(_load("dashboard"))
PANELS = {t: _load(t) for t in PANEL_TYPES}
UNITS = {d["const"] for d in _load("units")["definitions"].values() if "const" in d}


def _dashboards() -> list[tuple[str, dict]]:
    out = []
    for spec in SPECS:
        for name, text in builder.build(load_spec(spec)).items():
            out.append((f"{spec.parent.name}/{name}", json.loads(text)))
    return out


DASHBOARDS = _dashboards()


def _leaf_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """The errors under the Panel branch of ``panels`` (anyOf Panel | RowPanel), else the error itself."""
    if error.context:
        branch = [e for e in error.context if e.schema_path and e.schema_path[0] == 0]
        return [leaf for e in branch for leaf in _leaf_errors(e)] or [error]
    return [error]


def schema_errors(dashboard: dict) -> list[str]:
    """``path: message`` of every schema error outside :data:`GRAFANA_OVER_SCHEMA`."""
    found = []
    for error in DASHBOARD.iter_errors(dashboard):
        for leaf in _leaf_errors(error):
            path = "/".join(map(str, leaf.absolute_path))
            if not any(re.fullmatch(p, path) for p, _ in GRAFANA_OVER_SCHEMA):
                found.append(f"{path}: {leaf.message[:200]}")
    for panel in dashboard["panels"]:
        schema = PANELS.get(panel["type"])
        if schema is None:
            continue
        checks = [("Options", panel.get("options", {}))]
        if "FieldConfig" in schema["definitions"]:
            checks.append(("FieldConfig", panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})))
        for definition, value in checks:
            found += [f"panel {panel['title']!r} {definition}: {e.message[:200]}" for e in _definition(schema, definition).iter_errors(value)]
    return found


@pytest.mark.parametrize("name, dashboard", DASHBOARDS, ids=[n for n, _ in DASHBOARDS])
def test_dashboard_matches_grafana_schemas(name, dashboard):
    assert schema_errors(dashboard) == []


def test_schema_check_can_fail():
    """The legacy keys this module removes are errors to the check (so it is not vacuous)."""
    _, dashboard = DASHBOARDS[0]
    legacy = json.loads(json.dumps(dashboard))
    legacy["timepicker"]["time_options"] = ["5m"]
    legacy["timepicker"]["nowDelay"] = None
    panel = next(p for p in legacy["panels"] if p["type"] == "timeseries")
    panel["fieldConfig"]["defaults"]["decimals"] = None
    panel["options"]["legend"].pop("showLegend")
    errors = schema_errors(legacy)
    assert any("time_options" in e for e in errors) and any("nowDelay" in e for e in errors)
    assert any("decimals" in e for e in errors) and any("showLegend" in e for e in errors)


def _queries(dashboard: dict):
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel, target


@pytest.mark.parametrize("name, dashboard", DASHBOARDS, ids=[n for n, _ in DASHBOARDS])
def test_linter_datasource_variable_and_panel_datasources(name, dashboard):
    first = dashboard["templating"]["list"][0]
    assert (first["name"], first["type"], first["query"]) == ("datasource", "datasource", "prometheus")
    ref = {"type": "prometheus", "uid": "${datasource}"}
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == ref, panel["title"]
    for panel, target in _queries(dashboard):
        assert target["datasource"] == ref, panel["title"]
    for var in dashboard["templating"]["list"][1:]:
        if var["type"] == "query":
            assert var["datasource"] == ref and var["refresh"] == 2, var["name"]  # reload on time-range change


@pytest.mark.parametrize("name, dashboard", DASHBOARDS, ids=[n for n, _ in DASHBOARDS])
def test_linter_rate_interval(name, dashboard):
    """rate/irate/increase over raw series in panels use $__rate_interval (recording rules own fixed windows)."""
    for panel, target in _queries(dashboard):
        for fn, window in re.findall(r"\b(rate|irate|increase)\s*\([^()\[]*\[([^\]]+)\]", target["expr"]):
            assert window == "$__rate_interval", (panel["title"], fn, window)


@pytest.mark.parametrize("name, dashboard", DASHBOARDS, ids=[n for n, _ in DASHBOARDS])
def test_linter_units(name, dashboard):
    """Graph and value panels have a unit Grafana knows (its unit ids, or a custom 'suffix:' unit);
    tables carry one unit per column and are left out."""
    for panel in dashboard["panels"]:
        if panel["type"] in ("timeseries", "stat", "bargauge"):
            unit = panel["fieldConfig"]["defaults"].get("unit", "")
            assert unit in UNITS or re.fullmatch(r"suffix:.+", unit), (panel["title"], unit)


@pytest.mark.parametrize("name, dashboard", DASHBOARDS, ids=[n for n, _ in DASHBOARDS])
def test_query_variables_in_the_form_grafana_saves(name, dashboard):
    """As Grafana's Prometheus variable editor saves a "Label values" variable: query
    {qryType: 1, query, refId: "PrometheusVariableQueryEditor-VariableQuery"}, the same PromQL as
    the variable's definition, and a multi-value selection as lists (All: text "All", value "$__all")."""
    variables = [v for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert variables
    for var in variables:
        query = var["query"]
        assert query == {"qryType": 1, "query": query["query"], "refId": "PrometheusVariableQueryEditor-VariableQuery"}
        assert query["query"].startswith("label_values(") and var["definition"] == query["query"], var["name"]
        assert var["regex"] == ""
        current = var.get("current")
        if var["multi"] and current:
            assert isinstance(current["text"], list) and isinstance(current["value"], list), var["name"]
            assert "$__all" not in current["text"]
        elif current:
            assert isinstance(current["text"], str) and isinstance(current["value"], str), var["name"]


def test_variable_queries_other_than_label_values_are_refused():
    from obsctl.dashboards import grafana as g

    with pytest.raises(ValueError, match="label_values"):
        g.query_variable("x", "X", "query_result(up)")
