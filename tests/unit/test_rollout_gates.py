"""deploy/rollouts: the Argo Rollouts AnalysisTemplates and the Flagger MetricTemplate / Canary
validated against their vendored CRD schemas (strict), the verify Job's command parsed by the
real CLI and its exit-code mapping tied to verify's, and the conditions' evaluator checked on
its own. The live side (a published verdict in a real Prometheus, a real verify's exit code):
tests/integration/test_rollout_gates_live.py.
"""

from __future__ import annotations

import click
import jsonschema
import kubernetes_validate
import pytest
import yaml

from obsctl.baselining.verify import VERDICT_EXIT_CODES
from support import kube
from support import rollouts as R

REPO = kube.CRD_DIR.parents[2]
ROLLOUTS = REPO / "deploy" / "rollouts"
KUBE = REPO / "deploy" / "kubernetes"


def _load(path) -> dict:
    (obj,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return obj


@pytest.fixture(scope="module")
def verdict_template() -> dict:
    return _load(ROLLOUTS / "argo" / "analysistemplate-verdict.yaml")


@pytest.fixture(scope="module")
def job_template() -> dict:
    return _load(ROLLOUTS / "argo" / "analysistemplate-verify-job.yaml")


def _job_container(template: dict) -> tuple[dict, dict]:
    (metric,) = template["spec"]["metrics"]
    job = metric["provider"]["job"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    return job, container


def test_every_object_of_the_builds_validates_against_its_crd():
    built = kube.kustomize_build(ROLLOUTS / "argo") + kube.kustomize_build(ROLLOUTS / "flagger")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in built) == [
        ("AnalysisTemplate", "obsctl-verdict"), ("AnalysisTemplate", "obsctl-verify"), ("MetricTemplate", "obsctl-verdict")]
    for obj in built + [_load(ROLLOUTS / "flagger" / "canary-example.yaml"), _load(ROLLOUTS / "argo" / "rollout-example.yaml")]:
        R.validate(obj)


def test_the_strict_validation_refuses_a_misspelt_field(verdict_template):
    bad = yaml.safe_load(yaml.safe_dump(verdict_template))
    bad["spec"]["metrics"][0]["sucessCondition"] = bad["spec"]["metrics"][0].pop("successCondition")
    with pytest.raises(jsonschema.ValidationError):
        R.validate(bad)
    canary = _load(ROLLOUTS / "flagger" / "canary-example.yaml")
    canary["spec"]["analysis"]["webhooks"][0]["type"] = "confirm-promote"  # not one of Flagger's hook types
    with pytest.raises(jsonschema.ValidationError):
        R.validate(canary)


def test_the_job_is_a_valid_batch_v1_job(job_template):
    job, _ = _job_container(job_template)
    kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "obsctl-verify"}, "spec": job},
                                 kube.KUBERNETES_VERSION, strict=True)


def test_the_jobs_command_is_obsctl_verify_of_the_initiative(job_template):
    _, container = _job_container(job_template)
    assert container["command"][0] == "obsctl"
    assert R.argo_args(" ".join(container["command"])) == {"initiative"}
    argv = [R.render(a, args={"initiative": "llm-canary-1"}) for a in container["command"][1:]]
    ctx = R.parse_cli(argv)
    assert ctx.command.name == "verify" and ctx.params["initiative_id"] == "llm-canary-1"
    assert ctx.params["end"] == "now" and ctx.params["window"] is None and ctx.params["start"] is None  # the planned window
    assert not ctx.params["no_guards"] and not ctx.params["allow_before_start"]
    declared = {a["name"] for a in job_template["spec"]["args"]}
    assert declared == {"initiative"}


@pytest.mark.parametrize("argv", [["verify", "--initiatve", "x"], ["verify", "--initiative"], ["verfy", "--initiative", "x"]])
def test_the_parse_check_refuses_what_obsctl_would(argv):
    with pytest.raises(click.UsageError):
        R.parse_cli(argv)


def test_the_job_completes_on_improved_only_and_never_retries_a_look(job_template):
    """Every verdict's exit code (verify's own table) and every error through the Job's
    podFailurePolicy: IMPROVED completes the Job (Argo: Successful), anything else fails it at
    the first exit (Argo: Failed), never a second pod (a second look)."""
    job, container = _job_container(job_template)
    assert job["backoffLimit"] == 0 and job["template"]["spec"]["restartPolicy"] == "Never"
    phases = {verdict: R.argo_job_phase(R.job_outcome(job, container["name"], code)) for verdict, code in VERDICT_EXIT_CODES.items()}
    assert phases == {"IMPROVED": "Successful", "NO_CHANGE": "Failed", "INCONCLUSIVE": "Failed", "REGRESSED": "Failed",
                      "NO_DATA": "Failed"}
    for error in (1, 2, 3, 137):
        assert R.job_outcome(job, container["name"], error) == "Failed"
    verdict_rule, error_rule = job["podFailurePolicy"]["rules"]
    assert sorted(verdict_rule["onExitCodes"]["values"]) == sorted(c for c in VERDICT_EXIT_CODES.values() if c)
    assert sorted(error_rule["onExitCodes"]["values"]) == sorted(VERDICT_EXIT_CODES.values())
    (metric,) = job_template["spec"]["metrics"]
    assert metric["count"] == 1 and metric["failureLimit"] == 0


def test_the_job_runs_as_the_loops_jobs_do(job_template):
    """Same image, store claim, spec mount and environment as CronJob/obsctl-publish of the base,
    the least privilege of the loop's pods."""
    base = kube.kustomize_build(KUBE / "base")
    cron = next(o for o in base if o["kind"] == "CronJob" and o["metadata"]["name"] == "obsctl-publish")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (loop,) = pod["containers"]
    job, container = _job_container(job_template)
    mine = job["template"]["spec"]
    assert container["image"] == loop["image"] and container["env"] == loop["env"]
    assert container["volumeMounts"] == loop["volumeMounts"] and container["securityContext"] == loop["securityContext"]
    volumes = {v["name"]: v for v in mine["volumes"]}
    base_volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes.keys() == base_volumes.keys()
    for name in ("credentials", "store", "tmp"):
        assert volumes[name] == base_volumes[name], name
    assert base_volumes["spec"]["configMap"]["name"].startswith(volumes["spec"]["configMap"]["name"] + "-")  # base adds its hash
    for key in ("serviceAccountName", "automountServiceAccountToken", "securityContext", "restartPolicy"):
        assert mine[key] == pod[key], key


def test_the_verdict_template_reads_the_published_state_set(verdict_template):
    from obsctl.baselining.practice.publish import VERDICTS
    from obsctl.rules.loop_series import INITIATIVE_VERDICT

    (metric,) = verdict_template["spec"]["metrics"]
    query = metric["provider"]["prometheus"]["query"]
    assert query.count(INITIATIVE_VERDICT + "{") == 2
    declared = {a["name"]: a.get("value") for a in verdict_template["spec"]["args"]}
    assert R.argo_args(query + metric["provider"]["prometheus"]["address"]) == declared.keys()
    assert set(declared["failing-verdicts"].split("|")) <= set(VERDICTS)
    # An undecided verdict keeps measuring, a failing one aborts at once, the first IMPROVED ends it.
    assert metric["failureLimit"] == 0 and metric["consecutiveSuccessLimit"] == 1
    assert metric["inconclusiveLimit"] == metric["count"] - 1


@pytest.mark.parametrize("result, phase", [
    ([1.0], "Successful"), ([-1.0], "Failed"), ([0.0], "Inconclusive"), ([], "Inconclusive"),
    ([1.0, 1.0], "Inconclusive"),  # the same initiative in two pushed groups: not one answer
])
def test_verdict_conditions_give_the_phase(verdict_template, result, phase):
    (metric,) = verdict_template["spec"]["metrics"]
    assert R.argo_phase(metric, result) == phase


def test_condition_evaluator_follows_argo():
    """Argo's EvaluateResult rules and expr's semantics on the subset, computed by hand."""
    assert R.eval_condition("result[0] >= 0.95", [0.97]) is True
    assert R.eval_condition("!(len(result) == 0) && result[0] != 2", [3.0]) is True
    assert R.eval_condition("len(result) == 0 || result[0] < 0", []) is True  # short-circuit: no index error
    assert R.eval_condition("result[-1] == -1", [0.0, -1.0]) is True
    with pytest.raises(R.ExprError, match="index out of range"):
        R.eval_condition("result[0] == 1", [])
    with pytest.raises(R.ExprError, match="expected bool"):
        R.eval_condition("result[0]", [1.0])
    for hostile in ("!len(result) == 0", "__import__('os')", "result.__class__", "[x for x in result]", "open('f')"):
        with pytest.raises(R.ExprError):
            R.eval_condition(hostile, [1.0])
    assert R.argo_phase({"successCondition": "result[0] == 1"}, [0.0]) == "Failed"  # no failureCondition: not success is failure
    assert R.argo_phase({"failureCondition": "result[0] == 1"}, [0.0]) == "Successful"
    assert R.argo_phase({}, [5.0]) == "Successful"
    assert R.argo_phase({"successCondition": "result[0] == 1", "failureCondition": "result[0] == 1"}, [1.0]) == "Failed"
    assert R.argo_phase({"successCondition": "result[0] == 1"}, []) == "Error"


def test_flagger_metric_and_webhook_name_the_template_and_its_variables():
    template = _load(ROLLOUTS / "flagger" / "metrictemplate-verdict.yaml")
    canary = _load(ROLLOUTS / "flagger" / "canary-example.yaml")
    (metric,) = canary["spec"]["analysis"]["metrics"]
    assert metric["templateRef"]["name"] == template["metadata"]["name"]
    rendered = R.render(template["spec"]["query"], variables=metric["templateVariables"])
    assert "{{" not in rendered and 'initiative="llm-serving-canary"' in rendered
    assert metric["thresholdRange"] == {"min": 0}
    assert R.flagger_check(-1.0, metric["thresholdRange"]) is False and R.flagger_check(0.0, metric["thresholdRange"])
    assert R.flagger_check(None, metric["thresholdRange"]) is False  # no values: Flagger halts
    (hook,) = canary["spec"]["analysis"]["webhooks"]
    assert hook["type"] == "confirm-promotion" and hook["metadata"]["type"] == "bash"
    assert 'initiative="llm-serving-canary"' in hook["metadata"]["cmd"]


def test_the_rollout_example_runs_the_verdict_gate_with_its_arguments():
    """Every analysis step of the example names a template of deploy/rollouts/argo and gives the
    arguments it needs (those without a default), none it does not declare; the pods of each
    side carry the label the canary design splits on."""
    rollout = _load(ROLLOUTS / "argo" / "rollout-example.yaml")
    templates = {o["metadata"]["name"]: o for o in kube.kustomize_build(ROLLOUTS / "argo")}
    canary = rollout["spec"]["strategy"]["canary"]
    steps = [s["analysis"] for s in canary["steps"] if "analysis" in s]
    assert steps
    for step in steps:
        given = {a["name"] for a in step.get("args", [])}
        for ref in step["templates"]:
            args = templates[ref["templateName"]]["spec"]["args"]
            assert {a["name"] for a in args if "value" not in a} <= given <= {a["name"] for a in args}
    assert canary["stableMetadata"]["labels"].keys() == canary["canaryMetadata"]["labels"].keys() == {"track"}
    assert [s["setWeight"] for s in canary["steps"] if "setWeight" in s] == [50, 100]
