"""docker-compose.yml and the configs it mounts: no Docker engine runs here, so check
what can be checked for real: every mounted file exists, Prometheus' and Alertmanager's
configs pass promtool / amtool, Grafana provisioning points at the generated dashboards."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
_UNSET_DEFAULT = re.compile(r"\$\{([A-Z_]+):-([^}]*)\}")


def _volumes(service: str) -> list[str]:
    """The service's volumes as docker compose reads them with no variables set (``${VAR:-default}`` -> default)."""
    return [_UNSET_DEFAULT.sub(r"\2", v) for v in COMPOSE["services"][service].get("volumes", [])]


def test_compose_has_the_stack_and_gpu_profile():
    services = COMPOSE["services"]
    assert {"prometheus", "alertmanager", "grafana", "pushgateway", "obsctl-exporter", "dcgm-exporter"} <= set(services)
    assert services["dcgm-exporter"]["profiles"] == ["gpu"]
    assert all("profiles" not in s for name, s in services.items() if name != "dcgm-exporter")


@pytest.mark.parametrize("service", ["prometheus", "alertmanager", "grafana", "obsctl-exporter"])
def test_bind_mounts_exist(service):
    for volume in _volumes(service):
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
    mounts = dict(v.split(":")[:2][::-1] for v in _volumes("grafana") if v.startswith("."))
    assert Path(mounts[path]) == Path("./dashboards/generated")
    assert list((REPO / "dashboards/generated").glob("*.json")), "no generated dashboards committed"


def test_compose_mounts_the_users_generated_files():
    """Rules, dashboards and the exporter's spec come from the user's folders when set, the committed example's otherwise."""
    for service, var, target in [("prometheus", "OBSCTL_RULES_DIR", "/etc/prometheus/rules"),
                                 ("grafana", "OBSCTL_DASHBOARDS_DIR", "/var/lib/grafana/dashboards/obsctl"),
                                 ("obsctl-exporter", "OBSCTL_SPEC_FILE", "/etc/obsctl/obsctl.yaml")]:
        assert any(v.startswith("${" + var + ":-") and f"}}:{target}:" in v for v in COMPOSE["services"][service]["volumes"]), service
