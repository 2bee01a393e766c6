"""The rollout controllers' side of obsctl's gates, reproduced for the tests (no controller runs here).

- :func:`validate`: an Argo Rollouts ``AnalysisTemplate`` / ``Rollout`` or a Flagger
  ``MetricTemplate`` / ``Canary`` against its vendored CRD schema (``tests/fixtures/crds``), strict as
  ``kubectl apply --validate=strict`` (:func:`support.kube.crd_schema`'s rule).
- :func:`argo_phase`: Argo Rollouts' ``evaluate.EvaluateResult`` (utils/evaluate/evaluate.go,
  v1.9.1): the measurement phase from ``successCondition`` / ``failureCondition`` and a
  result. The conditions are expr-lang expressions; :func:`eval_condition` evaluates the
  subset the gates use (``result``, ``len(...)``, indexing, numbers, strings, ``==``, ``!=``,
  ``<``, ``<=``, ``>``, ``>=``, ``&&``, ``||``, ``!``, ``-x``, parentheses) by mapping it onto
  Python's grammar and walking the tree with only those nodes allowed: no maintained Python
  implementation of expr-lang exists on PyPI. An index out of range or anything outside the
  subset raises :class:`ExprError` (Argo: the measurement is Error).
- :func:`prometheus_result`: the ``result`` Argo's Prometheus provider passes to the
  conditions for an instant vector (the samples' values, in the answer's order).
- :func:`job_outcome` / :func:`argo_job_phase`: a Kubernetes Job's end from its container's
  exit code under the Job's ``podFailurePolicy`` and ``backoffLimit``, and Argo's job provider
  phase for it (metricproviders/job/job.go: Complete is Successful, Failed is Failed).
- :func:`render`: ``{{args.NAME}}`` (Argo) or ``{{ variables.NAME }}`` (Flagger) substituted.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import click
import jsonschema

from support import kube

CRD_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
#: (apiVersion, kind) -> vendored CRD file.
CRD_FILES = {("argoproj.io/v1alpha1", "AnalysisTemplate"): "analysistemplates.json",
             ("argoproj.io/v1alpha1", "Rollout"): "rollouts.json",
             ("flagger.app/v1beta1", "MetricTemplate"): "metrictemplates.json",
             ("flagger.app/v1beta1", "Canary"): "canaries.json"}


def validate(obj: dict) -> None:
    """Raise jsonschema.ValidationError when ``obj`` is not valid for its vendored CRD."""
    name = CRD_FILES[(obj["apiVersion"], obj["kind"])]
    data = json.loads((CRD_DIR / name).read_text())
    assert f"{data['group']}/{data['version']}" == obj["apiVersion"], (name, obj["apiVersion"])
    kube._check_metadata(obj)
    jsonschema.Draft7Validator(kube._strict(data["openAPIV3Schema"])).validate(obj)


class ExprError(ValueError):
    """An expression outside the evaluated subset, or one that fails at run time."""


_TOKENS = [("&&", " and "), ("||", " or ")]


def _to_python(expression: str) -> str:
    if re.search(r"[;`]|\bnot\b|\band\b|\bor\b|\blambda\b|__", expression):
        raise ExprError(f"not in the evaluated subset: {expression!r}")
    out = expression
    for token, word in _TOKENS:
        out = out.replace(token, word)
    # '!(...)' (not '!='): expr's negation, binding tighter than Python's 'not' does, so only
    # before a parenthesis, where both read the same.
    if re.search(r"!(?![=(])", out):
        raise ExprError(f"'!' only before '(' in the evaluated subset: {expression!r}")
    return re.sub(r"!(?=\()", " not ", out).strip()


def eval_condition(expression: str, result: object) -> bool:
    """Evaluate an Argo Rollouts condition on ``result``; a non-boolean outcome is an error."""
    try:
        tree = ast.parse(_to_python(expression), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"{expression!r}: {exc.msg}") from None
    value = _eval(tree.body, {"result": result})
    if not isinstance(value, bool):
        raise ExprError(f"{expression!r}: expected bool, but got {type(value).__name__}")
    return value


_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _eval(node: ast.AST, env: dict) -> object:
    if isinstance(node, ast.BoolOp):  # short-circuit, as expr's && and ||
        is_and = isinstance(node.op, ast.And)
        for value in node.values:
            got = _eval(value, env)
            if not isinstance(got, bool):
                raise ExprError("&& / || need booleans")
            if got != is_and:
                return got
        return is_and
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        got = _eval(node.operand, env)
        if not isinstance(got, bool):
            raise ExprError("! needs a boolean")
        return not got
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_number(_eval(node.operand, env))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_eval(node.left, env), _eval(node.comparators[0], env))
    if isinstance(node, ast.Subscript):
        seq, index = _eval(node.value, env), _eval(node.slice, env)
        if not isinstance(seq, list) or not isinstance(index, int) or isinstance(index, bool):
            raise ExprError("indexing needs an array and an integer")
        if not -len(seq) <= index < len(seq):
            raise ExprError(f"index out of range: {index} (array of length {len(seq)})")
        return seq[index]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"
            and len(node.args) == 1 and not node.keywords):
        return len(_eval(node.args[0], env))
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool):
        return node.value
    raise ExprError(f"not in the evaluated subset: {ast.dump(node)}")


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError("- needs a number")
    return value


def argo_phase(metric: dict, result: object) -> str:
    """Argo's measurement phase: Successful, Failed, Inconclusive or Error (a condition that fails)."""
    success, failure = metric.get("successCondition", ""), metric.get("failureCondition", "")
    try:
        ok = eval_condition(success, result) if success else False
        bad = eval_condition(failure, result) if failure else False
    except ExprError:
        return "Error"
    if not success and not failure:
        return "Successful"
    if success and not failure:
        bad = not ok
    elif failure and not success:
        ok = not bad
    if bad:
        return "Failed"
    return "Successful" if ok else "Inconclusive"


def prometheus_result(vector: list[dict]) -> list[float]:
    """Argo's ``result`` for an instant-vector answer (``/api/v1/query`` ``data.result``)."""
    return [float(s["value"][1]) for s in vector]


def flagger_value(vector: list[dict]) -> float | None:
    """Flagger's Prometheus provider: the one value of the answer; None where Flagger reports
    ErrNoValuesFound (no sample, or NaN), which halts the advancement as a failed check."""
    value = None
    for sample in vector:
        value = float(sample["value"][1])
    return None if value is None or math.isnan(value) else value


def flagger_check(value: float | None, threshold_range: dict) -> bool:
    """Whether Flagger's check passes (scheduler_metrics.go: below min or above max halts)."""
    if value is None:
        return False
    return not (("min" in threshold_range and value < threshold_range["min"])
                or ("max" in threshold_range and value > threshold_range["max"]))


def job_outcome(job_spec: dict, container: str, exit_code: int) -> str:
    """``Complete`` or ``Failed`` for a Job whose pod's ``container`` exits with ``exit_code``.

    Exit 0: the pod succeeds, the Job completes. Otherwise the first podFailurePolicy rule
    whose onExitCodes match decides (FailJob: Failed; Ignore / Count: the pod is replaced,
    which this single-run model does not follow and refuses); with no rule matching the
    failure counts against backoffLimit, which must be 0 here.
    """
    if exit_code == 0:
        return "Complete"
    for rule in job_spec.get("podFailurePolicy", {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes is None or codes.get("containerName", container) != container:
            continue
        inside = exit_code in codes["values"]
        if inside == (codes["operator"] == "In"):
            if rule["action"] != "FailJob":
                raise AssertionError(f"exit {exit_code}: rule {rule['action']} replaces the pod")
            return "Failed"
    assert job_spec.get("backoffLimit", 6) == 0, "a counted failure would be retried"
    return "Failed"


def argo_job_phase(outcome: str) -> str:
    """Argo Rollouts' job provider: a Complete Job is Successful, a Failed one Failed."""
    return {"Complete": "Successful", "Failed": "Failed"}[outcome]


_ARGO_ARG = re.compile(r"\{\{\s*args\.([A-Za-z0-9_-]+)\s*\}\}")
_FLAGGER_VAR = re.compile(r"\{\{\s*variables\.([A-Za-z0-9_]+)\s*\}\}")


def argo_args(text: str) -> set[str]:
    """The ``{{args.NAME}}`` names ``text`` uses."""
    return set(_ARGO_ARG.findall(text))


def render(text: str, args: dict[str, str] | None = None, variables: dict[str, str] | None = None) -> str:
    """``text`` with Argo's ``{{args.NAME}}`` and Flagger's ``{{ variables.NAME }}`` substituted
    (a name not given raises KeyError, as a run of the controller would fail to resolve it)."""
    out = _ARGO_ARG.sub(lambda m: (args or {})[m.group(1)], text)
    return _FLAGGER_VAR.sub(lambda m: (variables or {})[m.group(1)], out)


def parse_cli(argv: list[str]) -> click.Context:
    """``obsctl ARGV`` through the real click commands, parsed and converted, never invoked
    (click.UsageError for an unknown command or flag, a bad choice, a missing option)."""
    from obsctl.cli import cli

    command: click.Command = cli
    ctx = None
    rest, name = list(argv), "obsctl"
    while isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name, parent=ctx)
        name, *rest = rest
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r}", ctx)
        command = sub
    return command.make_context(name, rest, parent=ctx)
