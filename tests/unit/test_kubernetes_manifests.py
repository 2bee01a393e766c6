"""deploy/kubernetes: every object of every kustomize build validated offline.

Core objects against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), the
prometheus-operator custom resources against their vendored CRD schemas (strict field validation),
the PromQL of the PrometheusRules through promtool, the generated PrometheusRules and dashboard
ConfigMaps checked up to date, and every object within client-side ``kubectl apply``'s limit.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import click
import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from obsctl.cli import cli
from obsctl.dashboards.configmap import to_configmaps
from obsctl.errors import ObsctlError
from obsctl.exporters.main import DEFAULT_LISTEN
from obsctl.kubeobjects import APPLY_LIMIT_BYTES, apply_size, parse_labels
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


def _pod(cron: dict) -> dict:
    return cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _containers(pod: dict) -> list[dict]:
    """Init containers first, in the order they run, then the containers."""
    return [*pod.get("initContainers", []), *pod["containers"]]


def _obsctl_containers(objects: list[dict]) -> list[tuple[str, dict]]:
    """``(CronJob name, container)`` of every container that runs obsctl."""
    return [(o["metadata"]["name"], c) for o in objects if o["kind"] == "CronJob"
            for c in _containers(_pod(o)) if c["command"][0] == "obsctl"]


def _parse(argv: list[str]) -> click.Context:
    """``obsctl ARGV`` through the real click commands, converted as a run would, never invoked
    (raises click.UsageError for an unknown flag, a bad choice, a missing required option)."""
    command: click.Command = cli
    ctx = None
    rest = list(argv)
    name = "obsctl"
    while isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name, parent=ctx)
        name, *rest = rest
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r}", ctx)
        command = sub
    return command.make_context(name, rest, parent=ctx)


def test_loop_jobs_read_the_spec_configmap_and_write_the_store(kps):
    spec_cm = next(o for o in kps if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("obsctl-spec"))
    assert yaml.safe_load(spec_cm["data"]["obsctl.yaml"]) == yaml.safe_load(SPEC.read_text())
    for name in ("obsctl-review", "obsctl-publish", "obsctl-snapshot-baseline"):
        cron = _one(kps, "CronJob", name)
        assert cron["spec"]["concurrencyPolicy"] == "Forbid"
        pod = _pod(cron)
        container = next(c for c in _containers(pod) if c["command"][0] == "obsctl")  # the job's own step
        assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["spec"]["configMap"]["name"] == spec_cm["metadata"]["name"]
        assert volumes["store"]["persistentVolumeClaim"]["claimName"] == "obsctl-store"
        assert volumes["credentials"]["secret"]["optional"] is True
        assert {"name": "OBSCTL_SPEC", "value": "/etc/obsctl/obsctl.yaml"} in container["env"]
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert not mounts["store"].get("readOnly") and mounts["credentials"]["readOnly"]
    assert _one(kps, "CronJob", "obsctl-snapshot-baseline")["spec"]["suspend"] is True
    assert yaml.safe_load(SPEC.read_text())["store"].startswith("/var/lib/obsctl/")


def test_every_loop_container_runs_as_non_root_with_a_read_only_root(built):
    for cron in (o for o in built if o["kind"] == "CronJob"):
        pod = _pod(cron)
        assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        for container in _containers(pod):
            sc = container["securityContext"]
            assert sc["capabilities"] == {"drop": ["ALL"]}, (cron["metadata"]["name"], container["name"])
            assert sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False
            image = container["image"]
            assert ":" in image and not image.endswith(":latest"), image  # pinned


def test_loop_commands_parse_with_the_real_cli(built):
    """Every obsctl step's command is accepted by the CLI's own parser: the flags exist, choices and
    required options are right (parsed and converted, nothing run)."""
    steps = _obsctl_containers(built)
    assert {n for n, _ in steps} >= {"obsctl-review", "obsctl-publish", "obsctl-snapshot-baseline"}
    for name, container in steps:
        try:
            _parse(container["command"][1:])
        except click.ClickException as exc:
            raise AssertionError(f"{name}/{container['name']}: {' '.join(container['command'])}: "
                                 f"{exc.format_message()}") from None


def test_publish_job_pushes_hourly_to_a_valid_pushgateway_url(built):
    from obsctl.httpconfig import validate_url

    cron = _one(built, "CronJob", "obsctl-publish")
    (container,) = _pod(cron)["containers"]
    ctx = _parse(container["command"][1:])
    assert ctx.command.name == "publish" and ctx.params["textfile"] is None and not ctx.params["no_review"]
    validate_url(ctx.params["pushgateway"], "Pushgateway")  # what publish checks before it pushes
    minute, *rest = cron["spec"]["schedule"].split()
    assert minute.isdigit() and rest == ["*", "*", "*", "*"]


@pytest.mark.parametrize("argv", [
    ["publish", "--pushgatway", "http://pushgateway:9091"],           # misspelt flag
    ["publish", "--output", "yaml"],                                  # not a choice
    ["rules", "generate", "--format", "prometheusrules", "--out", "/rules"],
    ["rules", "generate", "--format", "prometheusrule"],              # --out is required
    ["rules", "generat", "--out", "/rules"],
])
def test_the_parse_check_refuses_what_obsctl_would(argv):
    with pytest.raises(click.UsageError):
        _parse(argv)


def _rules_steps(kps: list[dict], cron_name: str) -> tuple[dict, list[dict]]:
    """The pod of a CronJob and its steps from ``obsctl rules generate`` on."""
    pod = _pod(_one(kps, "CronJob", cron_name))
    steps = _containers(pod)
    first = next(i for i, c in enumerate(steps) if c["command"][1:3] == ["rules", "generate"])
    return pod, steps[first:]


def test_rules_job_generates_then_applies_the_prometheusrules(kps):
    pod, steps = _rules_steps(kps, "obsctl-rules")
    assert steps == _containers(pod) and [c["name"] for c in pod["initContainers"]] == ["generate"]
    generate, apply = steps
    out = _parse(generate["command"][1:]).params
    assert out["fmt"] == "prometheusrule" and not out["empty_store"] and not out["check_only"]
    command = apply["command"]
    assert command[:2] == ["/bin/kubectl", "apply"] and "--server-side" in command
    assert "--prune" not in " ".join(command)  # pruning needs delete, which the Role does not grant
    assert f"--filename={out['out']}" in command
    gen_mounts = {m["mountPath"]: m for m in generate["volumeMounts"]}
    apply_mounts = {m["mountPath"]: m for m in apply["volumeMounts"]}
    assert gen_mounts[str(out["out"])]["name"] == apply_mounts[str(out["out"])]["name"]
    assert apply_mounts[str(out["out"])]["readOnly"]
    store = next(m for m in generate["volumeMounts"] if m["name"] == "store")
    assert store["readOnly"] and yaml.safe_load(SPEC.read_text())["store"].startswith(store["mountPath"] + "/")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["store"]["persistentVolumeClaim"] == {"claimName": "obsctl-store", "readOnly": True}
    assert "credentials" not in volumes  # no Prometheus query: no Prometheus secrets
    _, *fields = apply["image"].partition(":")
    assert apply["image"].startswith("registry.k8s.io/kubectl:v") and fields[1].count(".") == 2


def test_only_the_apply_step_holds_the_kubernetes_token(kps):
    """The rules ServiceAccount's token is projected into the kubectl container alone: obsctl's
    containers (and every other pod) hold no Kubernetes credentials."""
    holders = []
    for cron in (o for o in kps if o["kind"] == "CronJob"):
        pod = _pod(cron)
        assert pod["automountServiceAccountToken"] is False
        projected = {v["name"] for v in pod["volumes"]
                     if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
        for container in _containers(pod):
            if any(m["name"] in projected for m in container.get("volumeMounts", [])):
                holders.append((cron["metadata"]["name"], container["name"], pod["serviceAccountName"]))
    assert sorted(holders) == [("obsctl-rules", "apply", "obsctl-rules"), ("obsctl-snapshot-baseline", "apply", "obsctl-rules")]


def test_rules_role_grants_only_what_server_side_apply_of_prometheusrules_needs(kps):
    role = _one(kps, "Role", "obsctl-rules")
    assert role["rules"] == [{"apiGroups": ["monitoring.coreos.com"], "resources": ["prometheusrules"],
                              "verbs": ["get", "list", "create", "patch", "update"]}]
    binding = _one(kps, "RoleBinding", "obsctl-rules")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "obsctl-rules"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "obsctl-rules", "namespace": "obsctl"}]
    assert _one(kps, "ServiceAccount", "obsctl-rules")["automountServiceAccountToken"] is False
    assert not [o for o in kps if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    bindings = [o for o in kps if o["kind"] == "RoleBinding"]
    assert bindings == [binding]  # the loop's other jobs and the exporter get no API access
    # The namespace the Role is in is the one the apply step writes to (its own, from the downward API).
    apply = _rules_steps(kps, "obsctl-rules")[1][-1]
    assert "--namespace=$(POD_NAMESPACE)" in apply["command"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in apply["env"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "obsctl"


def test_rules_steps_label_what_the_overlays_prometheus_selects(kps):
    """The jobs' --label release= is the release the overlay's objects carry, so Prometheus keeps
    selecting the PrometheusRules after the jobs re-apply them."""
    selected = {o["metadata"]["labels"]["release"] for o in kps if o["kind"] in ("PrometheusRule", "ServiceMonitor")}
    assert selected == {"kube-prometheus-stack"}
    for name in ("obsctl-rules", "obsctl-snapshot-baseline"):
        generate = _rules_steps(kps, name)[1][0]
        labels = _parse(generate["command"][1:]).params["labels"]
        assert parse_labels(labels) == {"release": "kube-prometheus-stack"}, name


def test_snapshot_job_then_runs_the_rules_steps(kps):
    """On the overlay the snapshot Job is the snapshot, then the very steps of CronJob/obsctl-rules."""
    pod, steps = _rules_steps(kps, "obsctl-snapshot-baseline")
    (snapshot,) = pod["initContainers"][: -len(steps) + 1]
    assert snapshot["command"][1] == "snapshot-baseline"
    rules_pod, rules_steps = _rules_steps(kps, "obsctl-rules")
    assert steps == rules_steps
    assert pod["serviceAccountName"] == rules_pod["serviceAccountName"] == "obsctl-rules"
    volumes = {v["name"]: v for v in pod["volumes"]}
    rules_volumes = {v["name"]: v for v in rules_pod["volumes"]}
    for name in ("rules", "kube-api-access", "spec"):
        assert volumes[name] == rules_volumes[name], name
    # A failed apply fails the Job at once: a retry would take a second snapshot.
    job = _one(kps, "CronJob", "obsctl-snapshot-baseline")["spec"]["jobTemplate"]["spec"]
    assert job["podFailurePolicy"]["rules"] == [{"action": "FailJob", "onExitCodes": {
        "containerName": "apply", "operator": "NotIn", "values": [0]}}]


def test_snapshot_job_of_the_base_only_snapshots():
    base = kube.kustomize_build(KUBE / "base")
    pod = _pod(_one(base, "CronJob", "obsctl-snapshot-baseline"))
    assert "initContainers" not in pod and pod["serviceAccountName"] == "obsctl-loop"
    assert not [o for o in base if o["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]


def _tree(path: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(path)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(path.rglob("*"))}


def test_rules_step_regenerates_from_the_store_without_writing_it(kps, tmp_path):
    """The generate step, run as the job runs it against a store holding a baseline: the objects
    are the overlay's (same names and labels, so apply updates them), they carry the baseline, and
    the store is left as it was (it is mounted read-only)."""
    from obsctl.baselining.store import Store
    from support.rules_fixtures import baseline

    spec = yaml.safe_load(SPEC.read_text())
    spec["store"] = str(tmp_path / "store")
    spec_path = tmp_path / "obsctl.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    Store(tmp_path / "store").save_baseline(baseline("llm-serving", "tokens_per_second", 1234.5))
    before = _tree(tmp_path / "store")

    generate = _rules_steps(kps, "obsctl-rules")[1][0]
    argv = generate["command"][1:]
    out = _parse(argv).params["out"]
    argv[argv.index("--out") + 1] = str(tmp_path / "rules")
    env = {e["name"]: e["value"] for e in generate["env"] if "value" in e}
    assert env["OBSCTL_SPEC"] == "/etc/obsctl/obsctl.yaml" and str(out) == "/rules"
    result = CliRunner().invoke(cli, argv, env={**env, "OBSCTL_SPEC": str(spec_path), "HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output

    assert _tree(tmp_path / "store") == before
    written = {p.name: yaml.safe_load(p.read_text()) for p in (tmp_path / "rules").iterdir()}
    committed = {o["metadata"]["name"]: o for o in kps if o["kind"] == "PrometheusRule"}
    assert sorted(o["metadata"]["name"] for o in written.values()) == sorted(committed)
    for obj in written.values():
        kube.validate(obj)
        assert obj["metadata"]["labels"] == committed[obj["metadata"]["name"]]["metadata"]["labels"]
        assert "namespace" not in obj["metadata"]  # the apply step's --namespace decides
    baselines = json.dumps(written["obsctl-baselines.prometheusrule.yaml"]["spec"])
    assert "1234.5" in baselines and "1234.5" not in json.dumps(committed["obsctl-baselines"]["spec"])


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


KPM = KUBE / "overlays" / "kube-prometheus-stack-podmonitor"


@pytest.fixture(scope="module")
def kpm() -> list[dict]:
    return kube.kustomize_build(KPM)


def test_podmonitor_overlay_swaps_only_the_monitor(kps, kpm):
    """The PodMonitor option: every object validates against its schema (the PodMonitor against the
    vendored CRD), and it is the kube-prometheus-stack overlay with the ServiceMonitor replaced."""
    for obj in kpm:
        kube.validate(obj)
    assert not [o for o in kpm if o["kind"] == "ServiceMonitor"]
    monitor = _one(kpm, "PodMonitor", "obsctl-exporter")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["metadata"]["namespace"] == "obsctl"
    assert monitor["metadata"]["labels"]["app.kubernetes.io/part-of"] == "obsctl"
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    rest = sorted((o for o in kpm if o["kind"] != "PodMonitor"), key=key)
    assert rest == sorted((o for o in kps if o["kind"] != "ServiceMonitor"), key=key)


def test_podmonitor_scrapes_the_daemonset_as_the_servicemonitor_does(kps, kpm):
    """Same pods, port, path, cadence and relabelings; job and instance as the alerts and the
    dashboards expect (job from the pods' label, instance the node name)."""
    from obsctl.rules.gpu_health import EXPORTER_JOB

    monitor = _one(kpm, "PodMonitor", "obsctl-exporter")["spec"]
    service_monitor = _one(kps, "ServiceMonitor", "obsctl-exporter")["spec"]
    pod = _one(kpm, "DaemonSet", "obsctl-exporter")["spec"]["template"]
    assert pod["metadata"]["labels"].items() >= monitor["selector"]["matchLabels"].items()
    assert pod["metadata"]["labels"][monitor["jobLabel"]] == EXPORTER_JOB
    (endpoint,) = monitor["podMetricsEndpoints"]
    (container,) = pod["spec"]["containers"]
    assert endpoint["port"] in {p["name"] for p in container["ports"]}
    (sm_endpoint,) = service_monitor["endpoints"]
    assert {k: v for k, v in endpoint.items() if k != "port"} == {k: v for k, v in sm_endpoint.items() if k != "port"}
    instance = [r for r in endpoint["relabelings"] if r["targetLabel"] == "instance"]
    assert instance == [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance", "action": "replace"}]


def test_podmonitor_crd_schema_rejects_a_misspelt_field(kpm):
    monitor = copy.deepcopy(_one(kpm, "PodMonitor", "obsctl-exporter"))
    kube.validate(monitor)
    monitor["spec"]["podMetricsEndpoints"][0]["scrapeTimout"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        kube.validate(monitor)
    monitor = copy.deepcopy(_one(kpm, "PodMonitor", "obsctl-exporter"))
    monitor["spec"]["podMetricEndpoints"] = monitor["spec"].pop("podMetricsEndpoints")
    with pytest.raises(jsonschema.ValidationError):
        kube.validate(monitor)


# --- security defaults: digests, NetworkPolicy, web config, Pod Security ---------------------

#: The documented placeholder of the image you build (deploy/kubernetes/overlays/kube-prometheus-stack).
OBSCTL_PLACEHOLDER = "obsctl@sha256:" + "0" * 64
DIGEST = re.compile(r"^[a-z0-9./:_-]+@sha256:[0-9a-f]{64}$")


def _pods(objects: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for o in objects:
        if o["kind"] == "DaemonSet":
            out.append((o["metadata"]["name"], o["spec"]["template"]["spec"]))
        elif o["kind"] == "CronJob":
            out.append((o["metadata"]["name"], _pod(o)))
    return out


def test_the_overlay_pins_every_image_by_digest(kps):
    """A tag can be moved to other content, a digest cannot: every container of the production
    overlay names its image by digest; the only digest no registry has is the documented
    placeholder of the image the user builds (all zeros: nothing is pulled until it is set)."""
    images = {c["image"] for _, pod in _pods(kps) for c in _containers(pod)}
    assert images and not [i for i in images if not DIGEST.match(i)], images
    assert {i for i in images if i.startswith("obsctl")} == {OBSCTL_PLACEHOLDER}


@pytest.mark.parametrize("image", ["obsctl:0.1.0", "registry.k8s.io/kubectl:v1.34.1", "obsctl", "obsctl@sha256:abc"])
def test_the_digest_check_refuses_tags(image):
    assert not DIGEST.match(image)


def test_network_policy_admits_only_prometheus_to_the_metrics_port(built):
    policy = _one(built, "NetworkPolicy", "obsctl-exporter")
    ds = _one(built, "DaemonSet", "obsctl-exporter")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]  # one peer with both selectors: Prometheus pods AND the monitoring namespace
    assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    (port,) = rule["ports"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert port == {"port": "metrics", "protocol": "TCP"} and container["ports"][0]["name"] == "metrics"


def _web_config(objects: list[dict]) -> tuple[str, dict]:
    secret = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].startswith("obsctl-exporter-web-config"))
    return base64.b64decode(secret["data"]["web-config.yml"]).decode(), secret


def test_exporter_serves_tls_with_basic_auth_and_refuses_to_start_unfilled(kps, tmp_path):
    """The shipped web config is refused by the real exporter's loader, naming the field to fill
    (it never serves without authentication); filled in as documented (a bcrypt hash, the TLS
    Secret's files) it loads with TLS and basic auth required."""
    import bcrypt

    from obsctl.exporters.webconfig import load_web_config
    from support.openssl_certs import make_pki

    text, _ = _web_config(kps)
    shipped = tmp_path / "shipped.yml"
    shipped.write_text(text)
    with pytest.raises(ObsctlError, match=r"basic_auth_users"):
        load_web_config(shipped)
    config = yaml.safe_load(text)
    ds = _one(kps, "DaemonSet", "obsctl-exporter")
    pod = ds["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    tls = config["tls_server_config"]
    assert {tls["cert_file"], tls["key_file"]} == {mounts["tls"] + "/tls.crt", mounts["tls"] + "/tls.key"}
    assert volumes["tls"]["secret"]["secretName"] == "obsctl-exporter-tls" and "optional" not in volumes["tls"]["secret"]
    pki = make_pki(tmp_path / "pki", "DNS:obsctl-exporter.obsctl.svc")
    config["tls_server_config"].update(cert_file=str(pki.server[0]), key_file=str(pki.server[1]))
    config["basic_auth_users"]["prometheus"] = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    filled = tmp_path / "filled.yml"
    filled.write_text(yaml.safe_dump(config))
    active = load_web_config(filled)
    assert active.ssl_context is not None and active.auth_required


def test_prometheus_scrapes_over_tls_with_the_documented_secrets(built):
    monitor = _one(built, "ServiceMonitor", "obsctl-exporter")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": "obsctl-exporter-tls", "key": "ca.crt"}
    assert endpoint["tlsConfig"]["serverName"] == "obsctl-exporter.obsctl.svc" and "insecureSkipVerify" not in endpoint["tlsConfig"]
    auth = endpoint["basicAuth"]
    assert auth["username"]["name"] == auth["password"]["name"] == "obsctl-exporter-scrape-auth"
    text, _ = _web_config(built)
    for name in ("obsctl-exporter-tls", "obsctl-exporter-scrape-auth", "obsctl-exporter.obsctl.svc"):
        assert name in text  # documented where the user fills them in


def test_namespace_enforces_the_strictest_level_the_exporter_runs_under(built):
    """privileged, because of exactly one thing baseline forbids: the exporter's hostPath (the
    kubelet's pod-resources socket); no pod has any other baseline violation, and audit and
    warn stay at restricted."""
    labels = _one(built, "Namespace", "obsctl")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/audit"] == labels["pod-security.kubernetes.io/warn"] == "restricted"
    baseline_caps = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                     "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
    host_paths = []
    for name, pod in _pods(built):
        assert not (pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC")), name
        host_paths += [(name, v["hostPath"]["path"]) for v in pod.get("volumes", []) if "hostPath" in v]
        for c in _containers(pod):
            sc = c.get("securityContext", {})
            assert not sc.get("privileged") and set(sc.get("capabilities", {}).get("add", [])) <= baseline_caps, name
            assert not [p for p in c.get("ports", []) if p.get("hostPort")], name
    assert host_paths == [("obsctl-exporter", "/var/lib/kubelet/pod-resources")]
