"""House style over grafanalib: the only module that imports grafanalib.

grafanalib's core is policy-free and its schema is old (schemaVersion 12, legacy target
and dashboard keys, ``datasource`` as a name). Here we set, in one place: the schema
version, a ``datasource`` template variable (type datasource, plugin prometheus) that
every panel and every query points to, modern panel types only (timeseries, stat,
bargauge, table, row), a grid layout, and the removal of keys Grafana no longer reads.
Functions return grafanalib objects; :func:`dashboard` returns the final JSON dict.

The JSON conforms to Grafana's dashboard schema and each panel's options and field config to
its panel type's schema (grafana-foundation-sdk ``jsonschema/``, vendored in
``tests/fixtures/grafana-schema`` and checked in tests/unit/test_dashboard_schema.py): grafanalib's
legacy keys and ``null`` fields are removed, bargauge's legacy ``fieldOptions`` move to
``fieldConfig.defaults`` / ``reduceOptions``, and the options a schema requires get Grafana's own
defaults. Where the schema and Grafana's own serialization disagree, the JSON follows Grafana
(docs/dashboards.md lists the three places).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import grafanalib.core as G
from grafanalib._gen import DashboardEncoder

#: Grafana 10.x/11.x dashboard schema; Grafana migrates older ones on load.
SCHEMA_VERSION = 39
#: Every panel and query uses the datasource picked in the ``datasource`` variable.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
MODERN_TYPES = frozenset({"timeseries", "stat", "bargauge", "table", "row"})
#: What Grafana's Prometheus variable editor writes into a query variable's ``query``: the refId
#: it always uses, and ``qryType`` 1 = "Label values" (PromVariableQueryType: 0 label names,
#: 1 label values, 2 metrics, 3 query result, 4 series query, 5 classic query).
VARIABLE_REF_ID = "PrometheusVariableQueryEditor-VariableQuery"
LABEL_VALUES = 1

_LEGACY_DASHBOARD_KEYS = ("rows", "style", "sharedCrosshair", "hideControls", "gnetId", "id", "__inputs")
_LEGACY_PANEL_KEYS = ("span", "minSpan", "height", "error", "repeat", "repeatDirection", "maxPerRow", "cacheTimeout",
                      "timeFrom", "timeShift", "editable", "hideTimeOverride")
_LEGACY_TARGET_KEYS = ("query", "target", "metric", "step", "intervalFactor", "hide", "interval")
#: Grafana's defaults for the options its panel schemas require (what Grafana fills in on load).
_REQUIRED_OPTIONS = {
    "timeseries": {"legend": {"showLegend": True, "displayMode": "list", "placement": "bottom", "calcs": []},
                   "tooltip": {"mode": "single", "sort": "none"}},
    "stat": {"wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"},
    "bargauge": {"valueMode": "color", "namePlacement": "auto", "showUnfilled": True, "sizing": "auto", "minVizWidth": 8,
                 "minVizHeight": 16, "maxVizHeight": 300, "orientation": "auto",
                 "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom", "calcs": []}},
    "table": {"frameIndex": 0, "showHeader": True},
}
_REQUIRED_CUSTOM = {"table": {"inspect": False}}
#: Top-level keys of grafanalib's Table that Grafana 7+ reads from fieldConfig, or not at all.
_LEGACY_TABLE_KEYS = ("color", "columns", "fontSize", "mappings")
_UNITS = {"ratio": "percentunit", "seconds": "s", "bytes": "bytes", "watts": "watt", "celsius": "celsius", "joules": "joule"}


def unit(name: str) -> str:
    """A spec unit (``ratio``, ``seconds``, ``tokens/s``...) as a Grafana unit id; free text becomes a suffix."""
    return _UNITS.get(name, f"suffix: {name}" if name else "none")


def query(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table: bool = False) -> G.Target:
    """One PromQL query. ``instant`` for stats/tables; ``table`` returns labels as columns."""
    return G.Target(expr=expr, legendFormat=legend, refId=ref, instant=instant, format="table" if table else "time_series",
                    datasource=DATASOURCE)


def timeseries(title: str, targets: list[G.Target], unit_id: str = "none", description: str = "") -> G.TimeSeries:
    """A time series panel (lines, legend as a table with last/mean)."""
    return G.TimeSeries(title=title, targets=targets, unit=unit_id, description=description or None,
                        legendDisplayMode="table", legendCalcs=["lastNotNull", "mean"], dataSource=DATASOURCE)


def stat(title: str, targets: list[G.Target], unit_id: str = "none", description: str = "",
         ref_units: dict[str, str] | None = None) -> G.Stat:
    """A stat panel showing the last value; ``ref_units`` gives a unit per query refId."""
    overrides = [{"matcher": {"id": "byFrameRefID", "options": ref}, "properties": [{"id": "unit", "value": u}]}
                 for ref, u in sorted((ref_units or {}).items())]
    return G.Stat(title=title, targets=targets, format=unit_id, color={"mode": "thresholds"}, description=description or None, reduceCalc="lastNotNull",
                  graphMode="area", noValue="no data", overrides=overrides, dataSource=DATASOURCE)


def bargauge(title: str, targets: list[G.Target], unit_id: str = "none", max_value: float = 1) -> G.BarGauge:
    """A horizontal bar gauge (one bar per series), 0..``max_value``."""
    return G.BarGauge(title=title, targets=targets, format=unit_id, min=0, max=max_value, calc="lastNotNull",
                      orientation="horizontal", displayMode="gradient", dataSource=DATASOURCE)


def table(title: str, targets: list[G.Target], description: str = "", value_title: str | None = None) -> G.Table:
    """A table of instant query results, one row per series, labels as columns (Time and
    Value hidden; ``value_title`` shows the Value column under that name)."""
    hidden = {"Time": True, "__name__": True, "job": True, "instance": True} if value_title else {"Time": True, "Value": True, "__name__": True}
    options: dict = {"excludeByName": hidden}
    if value_title:
        options["renameByName"] = {"Value": value_title}
    organize = {"id": "organize", "options": options}
    return G.Table(title=title, targets=targets, description=description or None, transformations=[organize],
                   dataSource=DATASOURCE)


def row(title: str) -> G.RowPanel:
    """A row header."""
    return G.RowPanel(title=title)


def _layout(sections: list[tuple[str | None, list[tuple[object, int, int]]]]) -> list:
    """Place panels on Grafana's 24-column grid: each section is (row title or None, [(panel, width, height)])."""
    panels, y = [], 0
    for title, items in sections:
        if title is not None:
            panels.append(G.RowPanel(title=title, gridPos=G.GridPos(h=1, w=24, x=0, y=y)))
            y += 1
        x, row_h = 0, 0
        for panel, w, h in items:
            if x + w > 24:
                x, y, row_h = 0, y + row_h, 0
            panel.gridPos = G.GridPos(h=h, w=w, x=x, y=y)
            panels.append(panel)
            x, row_h = x + w, max(row_h, h)
        y += row_h
    return panels


def _clean_panel(panel: dict) -> dict:
    for key in _LEGACY_PANEL_KEYS:
        panel.pop(key, None)
    panel = {k: v for k, v in panel.items() if v is not None}
    panel["datasource"] = DATASOURCE
    for target in panel.get("targets", []):
        for key in _LEGACY_TARGET_KEYS:
            target.pop(key, None)
        target["datasource"] = DATASOURCE
    if panel["type"] == "row":
        return {k: panel[k] for k in ("collapsed", "gridPos", "id", "panels", "title", "type")}
    field_config = panel.setdefault("fieldConfig", {})
    defaults = field_config.setdefault("defaults", {})
    field_config.setdefault("overrides", [])
    options = panel.setdefault("options", {})
    if panel["type"] == "table":
        for key in _LEGACY_TABLE_KEYS:
            value = panel.pop(key, None)
            if key == "mappings" and value:
                defaults["mappings"] = value
    if panel["type"] == "bargauge":  # grafanalib writes the Grafana 6 fieldOptions; Grafana 7+ reads these
        legacy = options.pop("fieldOptions", {})
        for key in ("unit", "min", "max", "decimals"):
            if legacy.get("defaults", {}).get(key) is not None:
                defaults.setdefault(key, legacy["defaults"][key])
        options.setdefault("reduceOptions", {"calcs": legacy.get("calcs", ["lastNotNull"]), "values": bool(legacy.get("values"))})
        for key in ("showThresholdLabels", "showThresholdMarkers"):
            options.pop(key, None)
    for key, value in _REQUIRED_OPTIONS.get(panel["type"], {}).items():
        if isinstance(value, dict):
            options[key] = {**value, **options.get(key, {})}
        else:
            options.setdefault(key, value)
    custom = defaults.setdefault("custom", {})
    for key, value in _REQUIRED_CUSTOM.get(panel["type"], {}).items():
        custom.setdefault(key, value)
    for holder in (defaults, custom):  # "no value" is an absent key in Grafana's schema, never null
        for key in [k for k, v in holder.items() if v is None]:
            del holder[key]
    thresholds = defaults.setdefault("thresholds", {"mode": "absolute", "steps": []})
    steps = [{"color": st["color"], "value": None if st.get("value") in (None, "null") else st["value"]}
             for st in thresholds.get("steps", [])]
    # Grafana needs a base step; its value is null (-Infinity), as Grafana itself serializes it
    thresholds.update({"mode": thresholds.get("mode", "absolute"), "steps": steps or [{"color": "green", "value": None}]})
    return panel


def annotation(name: str, expr: str, title: str, text: str, tag_keys: list[str], color: str = "purple",
               step: str = "60s") -> dict:
    """A Prometheus annotation query whose series' value is the event time in milliseconds
    (Grafana's "Series value as timestamp", ``useValueForTime``): each distinct value of a
    series is one point annotation, so a series that repeats its event time on every scrape
    marks that instant once. ``title`` / ``text`` are legend formats (``{{label}}``)."""
    return {"name": name, "datasource": DATASOURCE, "enable": True, "iconColor": color, "expr": expr, "step": step,
            "titleFormat": title, "textFormat": text, "tagKeys": ",".join(tag_keys), "useValueForTime": True}


@dataclass(frozen=True)
class Header:
    """What Grafana lists a dashboard by: its ``title``, ``uid``, ``description`` and ``tags``."""

    title: str
    uid: str
    description: str
    tags: list[str]


def dashboard(header: Header, sections: list[tuple[str | None, list[tuple[object, int, int]]]],
              variables: list[G.Template] | None = None, annotations: list[dict] | None = None,
              repeats: dict[str, str] | None = None, links: list[dict] | None = None) -> dict:
    """The dashboard as Grafana JSON (a dict), house style applied.

    Args:
        header: the title, uid, description and tags (:class:`Header`).
        sections: ``[(row title or None, [(panel, width 1-24, height), ...]), ...]``.
        variables: extra template variables after ``datasource``.
        annotations: annotation queries (:func:`annotation`).
        repeats: ``{row title: variable}``: Grafana repeats that row and its panels once per
            selected value of the variable (the JSON holds one copy, whatever the number of values).
        links: dashboard links (:func:`dashboard_links`).

    Raises:
        ValueError: a panel of a type outside :data:`MODERN_TYPES`.
    """
    title, uid, description, tags = header.title, header.uid, header.description, header.tags
    datasource_var = G.Template(name="datasource", label="Data source", query="prometheus", type="datasource", default="")
    dash = G.Dashboard(
        title=title, uid=uid, description=description, tags=tags, panels=_layout(sections), timezone="utc",
        templating=G.Templating(list=[datasource_var, *(variables or [])]), time=G.Time("now-6h", "now"), refresh="1m",
        graphTooltip=G.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
    ).auto_panel_ids()
    data = json.loads(json.dumps(dash.to_json_data(), cls=DashboardEncoder))
    for key in _LEGACY_DASHBOARD_KEYS:
        data.pop(key, None)
    data["schemaVersion"] = SCHEMA_VERSION
    data["annotations"] = {"list": list(annotations or [])}
    data["panels"] = [_clean_panel(p) for p in data["panels"]]
    for panel in data["panels"]:
        if panel["type"] == "row" and panel["title"] in (repeats or {}):
            panel["repeat"] = repeats[panel["title"]]
    data["links"] = list(links or [])
    bad = sorted({p["type"] for p in data["panels"]} - MODERN_TYPES)
    if bad:
        raise ValueError(f"dashboard {uid}: legacy panel types {bad}; use {sorted(MODERN_TYPES)}")
    timepicker = data.get("timepicker", {})
    for key in [k for k, v in timepicker.items() if v is None or k == "time_options"]:  # time_options: Grafana < 10
        del timepicker[key]
    for var in data["templating"]["list"]:
        for key in ("useTags", "tagsQuery", "tagValuesQuery", "auto", "auto_min", "auto_count"):
            var.pop(key, None)
        for key in [k for k, v in var.items() if v is None]:
            del var[key]
        current = var.pop("current", None)  # the datasource variable's is Grafana's default data source
        if var["type"] != "datasource" and current and "text" in current and "value" in current:
            var["current"] = {k: current[k] for k in ("selected", "text", "value") if k in current}
            if var.get("multi"):  # Grafana saves a multi-value selection as lists, All as text "All"
                var["current"]["text"] = ["All" if t == "$__all" else t for t in _listed(current["text"])]
                var["current"]["value"] = _listed(current["value"])
        if var["type"] == "query":  # as Grafana's Prometheus variable editor saves it
            var["datasource"] = DATASOURCE
            var["definition"] = var["query"]["query"]
            var.setdefault("regex", "")
    return data


def _listed(value: str | list[str]) -> list[str]:
    return list(value) if isinstance(value, list) else [value]


def _variable_query(name: str, promql: str) -> dict:
    """A query variable's ``query`` object as Grafana saves it (label_values queries only).

    Raises:
        ValueError: ``promql`` is not a ``label_values(...)`` query.
    """
    if not promql.startswith("label_values(") or not promql.endswith(")"):
        raise ValueError(f"variable {name}: only label_values(...) queries are supported, got {promql!r}")
    return {"qryType": LABEL_VALUES, "query": promql, "refId": VARIABLE_REF_ID}


def query_variable(name: str, label: str, promql: str) -> G.Template:
    """A multi-value query variable (label_values...) with All = ``.*``, for ``=~"$name"`` matchers."""
    return G.Template(name=name, label=label, query=_variable_query(name, promql), type="query",
                      multi=True, includeAll=True, allValue=".*", default="$__all", refresh=G.REFRESH_ON_TIME_RANGE_CHANGE)


def single_variable(name: str, label: str, promql: str, default: str = "") -> G.Template:
    """A single-value query variable (no All), e.g. the one control class to compare against."""
    return G.Template(name=name, label=label, query=_variable_query(name, promql), type="query",
                      multi=False, includeAll=False, default=default, refresh=G.REFRESH_ON_TIME_RANGE_CHANGE)


def custom_variable(name: str, label: str, values: list[str], default: str) -> G.Template:
    """A single-value custom variable over fixed ``values`` (e.g. the spec's signal names)."""
    options = [{"text": v, "value": v, "selected": v == default} for v in values]
    return G.Template(name=name, label=label, query=",".join(values), type="custom", default=default, options=options)


def dashboard_links(tags: list[str], title: str = "obsctl dashboards") -> list[dict]:
    """A dropdown of the dashboards tagged ``tags`` that carries the time range and the
    variables (``$workload_class``, ``$signal``) over: one class's view in every dashboard."""
    return [{"title": title, "type": "dashboards", "icon": "external link", "tooltip": "", "tags": tags, "asDropdown": True,
             "targetBlank": False, "includeVars": True, "keepTime": True}]
