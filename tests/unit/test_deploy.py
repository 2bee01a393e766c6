"""docker-compose.yml and the configs it mounts: no Docker engine runs here, so check
what can be checked for real: every mounted file exists, Prometheus' and Alertmanager's
configs pass promtool / amtool, Grafana provisioning points at the generated dashboards."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_has_the_stack_and_gpu_profile():
    services = COMPOSE["services"]
    assert {"prometheus", "alertmanager", "grafana", "pushgateway", "obsctl-exporter", "dcgm-exporter"} <= set(services)
    assert services["dcgm-exporter"]["profiles"] == ["gpu"]
    assert all("profiles" not in s for name, s in services.items() if name != "dcgm-exporter")


@pytest.mark.parametrize("service", ["prometheus", "alertmanager", "grafana", "obsctl-exporter"])
def test_bind_mounts_exist(service):
    for volume in COMPOSE["services"][service].get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            assert (REPO / source).exists(), f"{service} mounts missing {source}"


def test_exporter_flags_match_the_exporter():
    from obsctl.exporters.main import build_parser  # noqa: PLC0415

    args = build_parser().parse_args(COMPOSE["services"]["obsctl-exporter"]["command"])
    assert args.gpu_source == "auto"


def test_prometheus_config_is_valid():
    result = subprocess.run(["promtool", "check", "config", str(REPO / "deploy/prometheus/prometheus.yml")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_config_is_valid():
    result = subprocess.run(["amtool", "check-config", str(REPO / "deploy/alertmanager/alertmanager.yml")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_provisioning_points_at_generated_dashboards():
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/obsctl.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    mounts = dict(v.split(":")[:2][::-1] for v in COMPOSE["services"]["grafana"]["volumes"] if v.startswith("."))
    assert Path(mounts[path]) == Path("./dashboards/generated")
    assert list((REPO / "dashboards/generated").glob("*.json")), "no generated dashboards committed"
