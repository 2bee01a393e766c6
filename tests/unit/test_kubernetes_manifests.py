"""deploy/kubernetes: every object of every kustomize build validated offline.

Core objects against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), the
prometheus-operator custom resources against their vendored CRD schemas (strict field validation),
the PromQL of the PrometheusRules through promtool, the generated PrometheusRules and dashboard
ConfigMaps checked up to date, and every object within client-side ``kubectl apply``'s limit.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from obsctl.cli import cli
from obsctl.dashboards.configmap import to_configmaps
from obsctl.errors import ObsctlError
from obsctl.exporters.main import DEFAULT_LISTEN
from obsctl.kubeobjects import APPLY_LIMIT_BYTES, apply_size
from obsctl.rules.prometheusrule import to_prometheus_rules
from support import kube

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
KPS = KUBE / "overlays" / "kube-prometheus-stack"
SPEC = KUBE / "base" / "obsctl.yaml"
BUILDS = [KUBE / "base", KPS]


@pytest.fixture(scope="module", params=BUILDS, ids=lambda p: str(p.relative_to(KUBE)))
def built(request) -> list[dict]:
    return kube.kustomize_build(request.param)


@pytest.fixture(scope="module")
def kps() -> list[dict]:
    return kube.kustomize_build(KPS)


def _one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]


def test_every_object_validates(built):
    kinds = set()
    for obj in built:
        kube.validate(obj)
        kinds.add(obj["kind"])
    assert {"DaemonSet", "Service", "ServiceMonitor", "CronJob", "ConfigMap", "Secret", "PersistentVolumeClaim"} <= kinds


def test_every_object_fits_client_side_apply(built):
    for obj in built:
        assert apply_size(obj) <= APPLY_LIMIT_BYTES, obj["metadata"]["name"]


def test_overlay_has_rules_and_dashboards_selected_by_kube_prometheus_stack(kps):
    rules = [o for o in kps if o["kind"] == "PrometheusRule"]
    dashboards = [o for o in kps if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"]["labels"]]
    assert len(rules) == 9 and len(dashboards) == 6
    for obj in rules + [_one(kps, "ServiceMonitor")]:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for cm in dashboards:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # a string, as the API requires
        assert cm["metadata"]["annotations"]["grafana_folder"] == "obsctl"
        (key, body), = cm["data"].items()
        assert key == cm["metadata"]["name"] + ".json" and json.loads(body)["uid"] == cm["metadata"]["name"]
    assert all(o["metadata"]["namespace"] == "obsctl" for o in kps if o["kind"] != "Namespace")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) not installed")
def test_prometheusrule_promql_passes_promtool(kps, tmp_path):
    for obj in (o for o in kps if o["kind"] == "PrometheusRule"):
        path = tmp_path / f"{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump({"groups": obj["spec"]["groups"]}))
        result = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def test_daemonset_runs_on_gpu_nodes_with_least_privilege(kps):
    ds = _one(kps, "DaemonSet", "obsctl-exporter")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and not sc["privileged"]
    assert "nvidia.com/gpu" not in json.dumps(container["resources"])  # takes no GPU from the workloads
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert container["readinessProbe"] and container["livenessProbe"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["pod-resources"]["readOnly"] and mounts["pod-resources"]["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert [v for v in volumes.values() if "hostPath" in v] == [volumes["pod-resources"]]  # nothing else of the host
    secret = volumes["web-config"]["secret"]["secretName"]
    assert _one(kps, "Secret", secret)
    args = container["args"]
    assert "--web.config.file=" + mounts["web-config"]["mountPath"] + "/web-config.yml" in args
    assert f"--web.listen-address={DEFAULT_LISTEN}" in args
    assert container["ports"][0]["containerPort"] == int(DEFAULT_LISTEN.rsplit(":", 1)[1])
    assert not pod.get("hostPID") and not pod.get("hostNetwork")


def test_scrape_labels_name_the_node_and_the_job_the_alerts_select(built):
    """Every ServiceMonitor / PodMonitor endpoint sets ``instance`` to the node name (as dcgm-exporter
    users expect, and what the fleet dashboard's $instance lists), not the pod IP; a ServiceMonitor
    without jobLabel gives its targets the Service's name as ``job``, the job ObsctlExporterDown selects."""
    from obsctl.rules.gpu_health import EXPORTER_JOB

    node = {"__meta_kubernetes_pod_node_name", "__meta_kubernetes_endpoint_node_name"}
    monitors = [o for o in built if o["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert monitors
    for monitor in monitors:
        for endpoint in monitor["spec"].get("endpoints", monitor["spec"].get("podMetricsEndpoints", [])):
            sets = [r for r in endpoint.get("relabelings", []) if r.get("targetLabel") == "instance"]
            assert len(sets) == 1, monitor["metadata"]["name"]
            assert len(sets[0]["sourceLabels"]) == 1 and sets[0]["sourceLabels"][0] in node
            assert sets[0].get("action", "replace") == "replace" and "regex" not in sets[0]
    service_monitor = _one(built, "ServiceMonitor", "obsctl-exporter")
    assert "jobLabel" not in service_monitor["spec"]
    service = _one(built, "Service", EXPORTER_JOB)
    assert service["metadata"]["labels"].items() >= service_monitor["spec"]["selector"]["matchLabels"].items()


def test_exporter_args_parse_with_the_real_exporter(kps):
    """The DaemonSet's flags are flags obsctl-exporter has (its own parser, not a copy)."""
    from obsctl.exporters.main import build_parser

    ds = _one(kps, "DaemonSet", "obsctl-exporter")
    build_parser().parse_args(ds["spec"]["template"]["spec"]["containers"][0]["args"])


def test_loop_jobs_read_the_spec_configmap_and_write_the_store(kps):
    spec_cm = next(o for o in kps if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("obsctl-spec"))
    assert yaml.safe_load(spec_cm["data"]["obsctl.yaml"]) == yaml.safe_load(SPEC.read_text())
    for name in ("obsctl-review", "obsctl-publish", "obsctl-snapshot-baseline"):
        cron = _one(kps, "CronJob", name)
        assert cron["spec"]["concurrencyPolicy"] == "Forbid"
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["command"][0] == "obsctl"
        assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["spec"]["configMap"]["name"] == spec_cm["metadata"]["name"]
        assert volumes["store"]["persistentVolumeClaim"]["claimName"] == "obsctl-store"
        assert volumes["credentials"]["secret"]["optional"] is True
        assert {"name": "OBSCTL_SPEC", "value": "/etc/obsctl/obsctl.yaml"} in container["env"]
    assert _one(kps, "CronJob", "obsctl-snapshot-baseline")["spec"]["suspend"] is True
    assert yaml.safe_load(SPEC.read_text())["store"].startswith("/var/lib/obsctl/")


def test_loop_commands_exist_in_the_cli(kps):
    for name in ("obsctl-review", "obsctl-publish", "obsctl-snapshot-baseline"):
        command = _one(kps, "CronJob", name)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
        result = CliRunner().invoke(cli, [*command[1:], "--help"])
        assert result.exit_code == 0, result.output


def test_spec_of_the_deployment_is_valid():
    result = CliRunner().invoke(cli, ["check", "--spec", str(SPEC)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, folder", [
    (["rules", "generate", "--format", "prometheusrule", "--label", "release=kube-prometheus-stack", "--empty-store"], "rules"),
    (["dashboards", "build", "--format", "configmap"], "dashboards"),
])
def test_generated_objects_are_up_to_date(args, folder):
    result = CliRunner().invoke(cli, [*args, "--spec", str(SPEC), "--out", str(KPS / folder), "--check"])
    assert result.exit_code == 0, result.output + " (run make generate)"
    listed = yaml.safe_load((KPS / "kustomization.yaml").read_text())["resources"]
    assert sorted(r for r in listed if r.startswith(folder + "/")) == sorted(f"{folder}/{p.name}" for p in (KPS / folder).glob("*.yaml"))


def test_crd_schema_rejects_what_the_api_server_would():
    """The strict CRD schemas can fail: an unknown field, a non-string label value, a bad duration."""
    good = yaml.safe_load((KPS / "rules" / "obsctl-gpu.prometheusrule.yaml").read_text())
    kube.validate(good)
    unknown = copy.deepcopy(good)
    unknown["spec"]["groups"][0]["rules"][0]["exprr"] = "1"
    number = copy.deepcopy(good)
    number["metadata"]["labels"]["release"] = 1
    duration = copy.deepcopy(good)
    duration["spec"]["groups"][0]["interval"] = "5 minutes"
    for bad in (unknown, number, duration):
        with pytest.raises(jsonschema.ValidationError):
            kube.validate(bad)
    sm = yaml.safe_load((KUBE / "base" / "exporter-servicemonitor.yaml").read_text())
    sm["spec"]["endpoints"][0]["scrapeTimout"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        kube.validate(sm)


def test_core_schema_rejects_unknown_fields():
    ds = yaml.safe_load((KUBE / "base" / "exporter-daemonset.yaml").read_text())
    kube.validate(ds)
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kube.validate(ds)


def test_prometheusrule_labels_are_quoted_strings(tmp_path):
    result = CliRunner().invoke(cli, ["rules", "generate", "--spec", str(SPEC), "--format", "prometheusrule", "--empty-store",
                                      "--label", "release=1", "--label", "enabled=true", "--namespace", "monitoring",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load((tmp_path / "obsctl-gpu.prometheusrule.yaml").read_text())
    assert obj["metadata"]["labels"]["release"] == "1" and obj["metadata"]["labels"]["enabled"] == "true"
    assert obj["metadata"]["namespace"] == "monitoring"
    kube.validate(obj)


@pytest.mark.parametrize("args", [["--label", "release"], ["--label", "bad key=x"], ["--label", "k=" + "v" * 64],
                                  ["--namespace", "Monitoring"]])
def test_bad_labels_are_one_line_usage_errors(args, tmp_path):
    result = CliRunner().invoke(cli, ["rules", "generate", "--spec", str(SPEC), "--format", "prometheusrule", *args,
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_large_rule_files_are_split_by_group_and_dashboards_refused():
    groups = [{"name": f"g{i}", "rules": [{"record": f"r:{i}", "expr": "vector(1)" + " + 1" * 2000}]} for i in range(6)]
    files = {"obsctl-big.rules.yaml": yaml.safe_dump({"groups": groups})}
    out = to_prometheus_rules(files, {"release": "x"}, limit=30_000)
    assert len(out) > 1 and all(apply_size(yaml.safe_load(t)) <= 30_000 for t in out.values())
    split = [g["name"] for t in out.values() for g in yaml.safe_load(t)["spec"]["groups"]]
    assert split == [g["name"] for g in groups]  # every group once, in order
    with pytest.raises(ObsctlError, match="alone is over"):
        to_prometheus_rules(files, {}, limit=5_000)
    with pytest.raises(ObsctlError, match="obsctl-x: its ConfigMap is"):
        to_configmaps({"obsctl-x.json": json.dumps({"uid": "obsctl-x", "panels": ["p" * 10_000]})}, {}, "f", limit=5_000)
