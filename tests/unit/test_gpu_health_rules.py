"""The GPU health alerts and the fleet dashboard's health row read what obsctl-exporter
publishes: metric names, label names and label values from the exporter's catalogue and
sources, and the scrape job the deployments give it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from obsctl.dashboards import gpu_fleet
from obsctl.exporters.gpu import catalogue, dcgm_fields, nvml_fields
from obsctl.rules import gpu, gpu_health

REPO = Path(__file__).resolve().parents[2]
_METRIC = re.compile(r"\b(obsctl_[a-z_]+)\b")
_MATCHER = re.compile(r'(\w+)(=~|!~|=|!=)"([^"]*)"')


def _alerts() -> list[dict]:
    return [r for group in gpu.gpu_groups() for r in group["rules"] if "alert" in r]


def _health_exprs() -> list[str]:
    names = {r["alert"] for r in gpu_health.gpu_health_rules()}
    return [r["expr"] for r in _alerts() if r["alert"] in names]


def _panel_exprs() -> list[str]:
    dash = gpu_fleet.build()
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    start = next(p["gridPos"]["y"] for p in rows if p["title"] == "GPU health")
    end = min(p["gridPos"]["y"] for p in rows if p["gridPos"]["y"] > start)
    return [t["expr"] for p in dash["panels"] if start < p["gridPos"]["y"] < end for t in p["targets"]]


def _label_values(name: str) -> set[str]:
    """Values the exporter's sources give label ``name`` of the health series."""
    if name == "reason":
        return set(catalogue.CLOCK_EVENT_REASONS)
    if name == "error_type":
        return {dict(f.extra)["error_type"] for f in dcgm_fields.FIELDS.values() if "error_type" in dict(f.extra)}
    raise AssertionError(f"no known values for label {name}")


def _dcgm_error_types(canonical: str) -> set[str]:
    """``error_type`` values the DCGM mapping gives series ``canonical``."""
    return {dict(f.extra)["error_type"] for f in dcgm_fields.FIELDS.values() if f.canonical == canonical}


def test_health_series_are_in_the_exporter_catalogue():
    exprs = _health_exprs() + _panel_exprs()
    metrics = {m for e in exprs for m in _METRIC.findall(e)}
    assert metrics and metrics <= set(catalogue.BY_NAME) | {"obsctl_exporter_scrape_collector_success"}, metrics - set(catalogue.BY_NAME)
    for expr in exprs:
        for label, op, value in _MATCHER.findall(expr):
            if label in ("instance", "job", "xid"):
                continue
            used = set(value.split("|")) if op.endswith("~") else {value}
            assert used <= _label_values(label), (expr, used - _label_values(label))
            assert any(label in d.labels for d in catalogue.CATALOGUE)


def test_nvml_and_dcgm_fill_the_same_ecc_labels():
    labels = nvml_fields.GpuLabels({"gpu": "0", "uuid": "GPU-x"})
    assert {lab["error_type"] for lab in labels.ecc} == _dcgm_error_types("obsctl_gpu_ecc_errors_total") \
        == {"corrected", "uncorrected"}


def test_nvml_and_dcgm_fill_the_same_nvlink_error_labels():
    labels = nvml_fields.GpuLabels({"gpu": "0", "uuid": "GPU-x"})
    nvml = {lab["error_type"] for lab in labels.nvlink_errors}
    assert nvml == _dcgm_error_types("obsctl_gpu_nvlink_errors_total") == {"crc_flit", "crc_data", "replay", "recovery"}
    assert len(nvml_fields.NVML_FI_NVLINK_ERROR_TOTALS) == len(catalogue.NVLINK_ERROR_TYPES)


def test_fatal_and_ignored_xids_are_disjoint_codes():
    assert not set(gpu_health.XID_FATAL) & set(gpu_health.XID_IGNORED)
    assert all(code.isdigit() for code in gpu_health.XID_FATAL + gpu_health.XID_IGNORED)
    assert {"48", "79", "95"} <= set(gpu_health.XID_FATAL)


def test_exporter_job_is_the_scrape_job_of_every_deployment():
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert gpu_health.EXPORTER_JOB in {c["job_name"] for c in prometheus["scrape_configs"]}
    service = yaml.safe_load((REPO / "deploy" / "kubernetes" / "base" / "exporter-service.yaml").read_text())
    assert service["metadata"]["name"] == gpu_health.EXPORTER_JOB


def test_every_health_alert_has_house_style_and_a_runbook_section():
    headings = {line[3:].strip() for line in (REPO / "docs" / "runbooks.md").read_text().splitlines() if line.startswith("## ")}
    documented = (REPO / "docs" / "rules.md").read_text()
    rules = gpu_health.gpu_health_rules()
    assert len({r["alert"] for r in rules}) == len(rules)
    for rule in rules:
        assert rule["alert"] in headings and f"`{rule['alert']}`" in documented
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
        for text in (rule["annotations"]["summary"], rule["annotations"]["description"]):
            # only {{ $labels.NAME }} and {{ $value | ... }} actions, nothing else run at alert time
            actions = re.findall(r"\{\{(.*?)\}\}", text)
            assert all(re.fullmatch(r" \$labels\.\w+ | \$value( \| (humanizeDuration|printf \"%\.\d[fg]\"))? ", a) for a in actions), text
    assert json.dumps(rules) == json.dumps(gpu_health.gpu_health_rules())  # deterministic
