"""``--config.file``: what the exporter reads from a file (optional; zero config works).

Two shapes are accepted:

1. The obsctl spec (``obsctl.yaml``, recognised by its ``workload_classes``/``signals``
   keys): it is validated with :func:`obsctl.spec.load_spec` and only its ``pricing``
   section is used, so one file drives the CLI and every node's exporter.
2. A small exporter file::

       spec: obsctl.yaml                 # prices from the spec (one source of prices); or pricing:
       pricing:
         node_hour_usd: 0.40
         accelerator_hour_usd: {"NVIDIA H100 80GB HBM3": 4.10}
       dcgm:                             # the dcgm-exporter the dcgm source reads (optional)
         url: https://127.0.0.1:9400/metrics   # --dcgm.url overrides it; no user:password@ in it
         tls_config: {ca_file: dcgm-ca.crt, cert_file: client.crt, key_file: client.key}
         basic_auth: {username: obsctl, password_file: dcgm-password}   # or authorization:
         authorization: {type: Bearer, credentials_file: dcgm-token}
         http_headers: {X-Tenant: a}
       attribution:
         static:                       # GPU UUID (or "UUID/<gpu_instance>") -> class
           GPU-5f...: {workload_class: llm-serving, owner: team-a}
         kubernetes:
           class_label: label_obsctl_workload_class   # a label on dcgm-exporter's series
           namespace_classes: {ray-llm: llm-serving}  # namespace -> class
         slurm:
           workload_class: hpc-training  # class of every Slurm job on this node
         process_env: true               # read OBSCTL_WORKLOAD_CLASS from GPU processes
         cache_ttl_seconds: 60           # how long one process's answer is reused
         refresh_interval_seconds: 15    # background GPU -> process -> class resolution

With ``spec:`` (relative to this file's folder) the prices, and the namespaces the spec's
classes select, come from the obsctl spec, so the exporter file holds only what the spec
has no place for (the dcgm client, attribution); giving ``pricing:`` as well is an error.

Any problem (missing file, YAML error, unknown key, wrong type) raises an
:class:`ObsctlError` subclass whose message names the file, the line and the field; the
exporter prints it and exits 2.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from obsctl import yamlio
from obsctl.errors import UsageError
from obsctl.httpconfig import HTTPClientConfig, validate_url
from obsctl.spec import Pricing, load_spec

_SPEC_KEYS = {"workload_classes", "signals", "targets", "prometheus", "verification", "store", "cadence"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StaticAttribution(_Model):
    """A fixed GPU -> workload mapping (``workload_class`` required, ``owner`` optional)."""

    workload_class: str = Field(min_length=1)
    owner: str = ""


class KubernetesAttribution(_Model):
    """Opt-in mapping from the pod dcgm-exporter attaches to a GPU onto a workload class.

    Attributes:
        class_label: name of a label on dcgm-exporter's series whose value is the class
            (e.g. a pod label exported with ``--kubernetes-enable-pod-labels``).
        namespace_classes: namespace -> workload class.
    """

    class_label: str | None = None
    namespace_classes: dict[str, str] = Field(default_factory=dict)


class SlurmAttribution(_Model):
    """Class given to GPU processes that run inside a Slurm job (None: owner only)."""

    workload_class: str | None = None


class AttributionConfig(_Model):
    """How GPUs are linked to workload classes (see exporters/gpu/attribution.py)."""

    static: dict[str, StaticAttribution] = Field(default_factory=dict)
    kubernetes: KubernetesAttribution = Field(default_factory=KubernetesAttribution)
    slurm: SlurmAttribution = Field(default_factory=SlurmAttribution)
    process_env: bool = True
    cache_ttl_seconds: float = Field(60.0, gt=0, le=3600)
    refresh_interval_seconds: float = Field(15.0, gt=0, le=3600)


class DcgmClientConfig(HTTPClientConfig):
    """How the ``dcgm`` GPU source reaches dcgm-exporter: its URL and Prometheus' HTTP client
    options (``tls_config`` with a private CA / client certificate, ``basic_auth`` or
    ``authorization`` with secrets from files, ``http_headers``, ``proxy_url``; see
    :mod:`obsctl.httpconfig`). Relative file paths are taken from the config file's folder.

    Attributes:
        url: dcgm-exporter's metrics URL (``--dcgm.url`` overrides it); no userinfo.
    """

    url: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else validate_url(value)


class ExporterConfig(_Model):
    """Everything the exporter reads from ``--config.file``; the defaults are zero config."""

    spec: str | None = None
    pricing: Pricing = Field(default_factory=Pricing)
    dcgm: DcgmClientConfig = Field(default_factory=DcgmClientConfig)
    attribution: AttributionConfig = Field(default_factory=AttributionConfig)
    path: Path | None = Field(None, exclude=True)


def spec_namespace_classes(spec) -> dict[str, str]:
    """Namespace -> class for the spec's classes whose selector pins one namespace (``namespace: X``),
    so a pod in X found on a GPU (pod-resources, dcgm-exporter) is attributed to that class; a
    namespace two classes select is left out (ambiguous)."""
    claims: dict[str, set[str]] = {}
    for wc in spec.workload_classes:
        namespace = wc.selector.get("namespace")
        if isinstance(namespace, str) and namespace:
            claims.setdefault(namespace, set()).add(wc.name)
    return {ns: next(iter(names)) for ns, names in sorted(claims.items()) if len(names) == 1}


def load_exporter_config(path: str | Path | None) -> ExporterConfig:
    """Load ``--config.file``; ``None`` gives the zero config.

    Raises:
        SpecError: the file is an obsctl spec and is invalid (message from load_spec).
        UsageError: the file is missing, unreadable, not YAML, not a mapping, or an invalid
            exporter config (message names file, line, field and what is allowed).
    """
    if path is None:
        return ExporterConfig()
    cfg_path = Path(path)
    data, lines = yamlio.load_file(cfg_path, UsageError, "--config.file")
    if data is None:
        return ExporterConfig(path=cfg_path.resolve())
    if not isinstance(data, dict):
        raise UsageError(f"{cfg_path}:1: --config.file must be a YAML mapping (pricing, dcgm, attribution), got a {type(data).__name__}")
    if _SPEC_KEYS & set(data):
        spec = load_spec(cfg_path)  # raises SpecError with file/line/field
        attribution = AttributionConfig(kubernetes=KubernetesAttribution(namespace_classes=spec_namespace_classes(spec)))
        return ExporterConfig(pricing=spec.pricing, attribution=attribution, path=spec.path)
    try:
        cfg = ExporterConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(yamlio.validation_message(cfg_path, exc, lines, ExporterConfig)) from None
    if cfg.spec is None:
        return cfg.model_copy(update={"path": cfg_path.resolve()})
    if "pricing" in data:
        raise UsageError(f"{cfg_path}:{lines.get(('pricing',), 1)}: pricing: and spec: {cfg.spec} both give prices; "
                         "keep one source of prices (the spec's pricing section)")
    spec_path = Path(cfg.spec).expanduser()
    spec = load_spec(spec_path if spec_path.is_absolute() else cfg_path.parent / spec_path)  # SpecError: file/line/field
    kube = cfg.attribution.kubernetes
    namespaces = {**spec_namespace_classes(spec), **kube.namespace_classes}
    attribution = cfg.attribution.model_copy(update={"kubernetes": kube.model_copy(update={"namespace_classes": namespaces})})
    return cfg.model_copy(update={"pricing": spec.pricing, "attribution": attribution, "path": cfg_path.resolve()})


__all__ = ["ExporterConfig", "AttributionConfig", "DcgmClientConfig", "load_exporter_config"]
