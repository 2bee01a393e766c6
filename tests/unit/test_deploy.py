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


def _image(service: str) -> tuple[str, str]:
    name, _, tag = COMPOSE["services"][service]["image"].rpartition(":")
    return name, tag


def _version(tag: str) -> tuple[int, ...]:
    return tuple(int(p) for p in tag.lstrip("v").split("."))


def test_images_pin_current_releases():
    """Exact versions (no floating tag), at least the generation docs/versions.md names."""
    assert _image("prometheus")[0] == "prom/prometheus" and _version(_image("prometheus")[1]) >= (3, 0, 0)
    assert _image("alertmanager")[0] == "prom/alertmanager" and _version(_image("alertmanager")[1]) >= (0, 28, 0)
    assert _image("pushgateway")[0] == "prom/pushgateway" and _version(_image("pushgateway")[1]) >= (1, 11, 0)
    name, tag = _image("grafana")
    assert name == "grafana/grafana" and _version(tag)[0] == 12
    # dcgm-exporter: <DCGM version>-<dcgm-exporter version>-<variant>, 4.10 or later
    name, tag = _image("dcgm-exporter")
    assert name == "nvcr.io/nvidia/k8s/dcgm-exporter"
    m = re.fullmatch(r"(\d+\.\d+\.\d+)-(\d+\.\d+\.\d+)-(ubuntu\d+\.\d+|distroless)", tag)
    assert m, tag
    assert _version(m.group(2)) >= (4, 10, 0)
    versions_doc = (REPO / "docs/versions.md").read_text()
    for service in ("prometheus", "alertmanager", "pushgateway", "grafana", "dcgm-exporter"):
        assert COMPOSE["services"][service]["image"] in versions_doc, f"docs/versions.md does not name {service}'s image"


#: Feature flags Prometheus 3.0 removed (made default or replaced by a flag): migration guide.
REMOVED_IN_PROMETHEUS_3 = {"promql-at-modifier", "promql-negative-offset", "new-service-discovery-manager",
                           "expand-external-labels", "no-default-scrape-port", "agent",
                           "remote-write-receiver", "auto-gomemlimit"}


def test_prometheus_flags_exist_in_prometheus_3():
    command = COMPOSE["services"]["prometheus"]["command"]
    features = {f for arg in command if arg.startswith("--enable-feature=")
                for f in arg.split("=", 1)[1].split(",")}
    assert not features & REMOVED_IN_PROMETHEUS_3
    flags = {arg.split("=", 1)[0] for arg in command}
    assert flags <= {"--config.file", "--storage.tsdb.path", "--storage.tsdb.retention.time",
                     "--web.enable-lifecycle", "--enable-feature", "--web.enable-remote-write-receiver", "--agent"}
