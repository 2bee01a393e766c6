"""The obsctl spec: one YAML file that is the single source of truth for the loop.

``load_spec(path)`` reads and validates it and returns a :class:`Spec`. Validation is
pydantic (unknown keys are errors); this module only turns pydantic's and PyYAML's
errors into one readable message naming the file, the line, the field and what is
allowed, raised as :class:`obsctl.errors.SpecError`.

Signal queries are PromQL templates: ``$selector`` is replaced by the workload class's
label matchers (escaped, see :func:`promql_matchers`), so one signal definition serves
every class.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError, ValidationInfo, field_validator, model_validator

from obsctl import names as _names
from obsctl import yamlio
from obsctl.durations import is_duration
from obsctl.errors import SpecError
from obsctl.escape import promql_string
from obsctl.httpconfig import HTTPClientConfig, validate_url
from obsctl.names import LEVERS, OWNER_PATTERN, Lever  # noqa: F401 (the spec's levers and owners)

DEFAULT_SPEC_PATH = "obsctl.yaml"
SPEC_ENV = "OBSCTL_SPEC"

# Prometheus label names and our identifiers (class and signal names end up as label
# values and in record names, so keep them to a safe alphabet).
_LABEL_NAME = _names.LABEL_NAME
_IDENT = _names.IDENT
# Prometheus durations: units in descending order, each at most once (model.ParseDuration).
_PLACEHOLDER = re.compile(r"\$(node_selector|selector|class)\b")

#: Label matcher operators of a class's ``selector`` / ``node_selector`` (PromQL's four).
MATCH_OPERATORS = ("=", "!=", "=~", "!~")
#: A selector entry: a string (equality) or ``{operator: value}``, e.g. ``{"=~": "llm-.*"}``.
SelectorValue = str | dict[str, str]
Category = Literal["utilization", "throughput", "cost", "quality", "saturation"]
Direction = Literal["higher_is_better", "lower_is_better"]
Cadence = Literal["weekly", "monthly"]
#: The length of one cadence period (s): a week, and a month of 30 days.
CADENCE_SECONDS: dict[str, float] = {"weekly": 7 * 86400.0, "monthly": 30 * 86400.0}


class _Model(BaseModel):
    # NaN and infinities are never meaningful in a spec (prices, targets, tolerances).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _Numbers(_Model):
    """A block of numbers (prices, thresholds, FLOPs): YAML's ``true``/``yes``/``on`` is
    refused where a number is meant (pydantic would read it as 1, e.g. a 1 USD price)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: object) -> object:
        values = value.values() if isinstance(value, dict) else (value,)
        if any(isinstance(v, bool) for v in values):
            raise ValueError("must be a number, not true/false (yes/no, on/off)")
        return value


def _positive_duration(value: str) -> str:
    if not isinstance(value, str) or not is_duration(value):
        raise ValueError("must be a positive Prometheus duration such as 15s, 5m, 1h30m (units in descending order)")
    return value


class PrometheusConfig(HTTPClientConfig):
    """Where the Prometheus HTTP API lives and how to talk to it (docs/prometheus-connection.md).

    Attributes:
        url: base URL, e.g. ``http://127.0.0.1:9090``; no userinfo (use ``basic_auth``).
        timeout_seconds: deadline of one whole request attempt (connect, headers, body).
        deadline_seconds: deadline of one API call with all its retries; default
            ``3 * timeout_seconds``; at least ``timeout_seconds``.
        body_size_limit: largest answer body accepted, bytes or ``64MiB``/``512KiB``/``1GiB``
            (``KB``/``MB``/``GB`` are base 2 as in Prometheus); default 64 MiB.
        authorization, basic_auth, tls_config, http_headers, proxy_url,
            proxy_from_environment: Prometheus' own HTTP client options
            (:class:`obsctl.httpconfig.HTTPClientConfig`); secrets only from files.
        backend: what serves the Prometheus API at ``url`` (``prometheus``, ``victoriametrics``,
            ``thanos``, ``mimir``); adapts what the client sends (:data:`obsctl.promapi.BACKENDS`).
        tenant: the tenant (``X-Scope-OrgID``) of a multi-tenant ``mimir``; required there.
    """

    url: str = "http://127.0.0.1:9090"
    backend: Literal["prometheus", "victoriametrics", "thanos", "mimir"] = "prometheus"
    tenant: str | None = Field(None, min_length=1, max_length=150, pattern=r"^[A-Za-z0-9!._*'()|-]+$")  # Mimir's tenant alphabet; '|' federates
    timeout_seconds: float = Field(10.0, gt=0, le=300)
    deadline_seconds: float | None = Field(None, gt=0, le=3600)
    body_size_limit: int = 64 * 1024 * 1024

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return validate_url(value).rstrip("/")

    @field_validator("body_size_limit", mode="before")
    @classmethod
    def _size(cls, value: object) -> int:
        return _byte_size(value)

    @model_validator(mode="after")
    def _tenant(self) -> PrometheusConfig:
        if self.tenant is not None and self.backend != "mimir":
            raise ValueError(f"tenant is for backend mimir (X-Scope-OrgID); backend is {self.backend}")
        if self.backend == "mimir" and self.tenant is None:
            raise ValueError("backend mimir needs tenant: the X-Scope-OrgID Mimir reads the series of")
        return self

    @model_validator(mode="after")
    def _deadline(self) -> PrometheusConfig:
        if self.deadline_seconds is not None and self.deadline_seconds < self.timeout_seconds:
            raise ValueError(f"deadline_seconds ({self.deadline_seconds:g}) must be at least timeout_seconds ({self.timeout_seconds:g})")
        return self

    @property
    def overall_deadline_seconds(self) -> float:
        """``deadline_seconds``, or its default ``3 * timeout_seconds``."""
        return self.deadline_seconds if self.deadline_seconds is not None else 3 * self.timeout_seconds


_SIZE_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "KIB": 1 << 10, "MB": 1 << 20, "MIB": 1 << 20, "GB": 1 << 30, "GIB": 1 << 30}


def _byte_size(value: object) -> int:
    # Prometheus' units.Base2Bytes spelling (body_size_limit: 64MB means 64 MiB).
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(value)) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    unit = match.group(2).upper() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise ValueError("must be a size such as 64MiB, 512KiB, 1GiB or a number of bytes")
    size = int(match.group(1)) * _SIZE_UNITS[unit]
    if not 1024 <= size <= 4 << 30:
        raise ValueError("must be between 1KiB and 4GiB")
    return size


#: Serving sources of the catalogue (obsctl.rules.sources.SOURCES) and queue sources.
SourceName = Literal["sdk", "vllm", "tgi", "triton", "sglang", "llamacpp", "ray-serve"]
QueueSourceName = Literal["kueue", "slurm", "ray-serve"]


class QueueSource(_Model):
    """The scheduler queue a class waits in; it fills the class's queue depth and wait.

    Attributes:
        source: ``kueue`` | ``slurm`` | ``ray-serve``.
        selector: label matchers of the scheduler's metrics (e.g. ``{job: kueue}``);
            empty selects every target that publishes them.
        cluster_queue: Kueue ClusterQueue name (or give ``local_queue``).
        local_queue: Kueue LocalQueue as ``namespace/name``.
        partition: Slurm partition.
    """

    source: QueueSourceName
    selector: dict[str, str] = Field(default_factory=dict)
    cluster_queue: str | None = Field(None, min_length=1)
    local_queue: str | None = Field(None, pattern=r"^[^/\s]+/[^/\s]+$")
    partition: str | None = Field(None, min_length=1)

    @field_validator("selector")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _LABEL_NAME.match(k) or k.startswith("__")]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a usable Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with '__')")
        return value

    @model_validator(mode="after")
    def _options(self) -> QueueSource:
        given = {k for k in ("cluster_queue", "local_queue", "partition") if getattr(self, k) is not None}
        wanted = {"kueue": None, "slurm": {"partition"}, "ray-serve": set()}[self.source]
        if self.source == "kueue":
            if len(given) != 1 or "partition" in given:
                raise ValueError("kueue needs exactly one of cluster_queue or local_queue (namespace/name)")
        elif given != wanted:
            need = "partition" if wanted else "no queue name (select the deployment with selector)"
            raise ValueError(f"{self.source} takes {need}; got {', '.join(sorted(given)) or 'none'}")
        if self.source == "ray-serve" and not self.selector:
            raise ValueError("ray-serve needs a selector naming the application or deployment, e.g. {application: chat}")
        return self


class MfuConfig(_Numbers):
    """Model FLOPs utilization (MFU) of a class: achieved model FLOP/s over the dense peak
    FLOP/s of the GPUs attributed to it (obsctl.rules.training; peaks from the table in
    obsctl.exporters.training.peaks by GPU model and ``dtype``).

    Attributes:
        flops_per_token: model FLOPs per token processed (forward + backward when
            training; a dense transformer: about 6 x parameters + 12 x layers x d_model x
            sequence length, Kaplan et al. 2020). Multiplies the class's tokens/s.
        flops_per_sample: model FLOPs per sample instead (multiplies samples/s); give
            exactly one of the two.
        dtype: the compute dtype that selects the peak: fp32 | tf32 | bf16 | fp16 | fp8.
        peak_flops_per_second: dense peak FLOP/s of one of the class's GPUs, for GPUs
            not in the table (overrides it).
    """

    flops_per_token: float | None = Field(None, gt=0)
    flops_per_sample: float | None = Field(None, gt=0)
    dtype: Literal["fp32", "tf32", "bf16", "fp16", "fp8"] = "bf16"
    peak_flops_per_second: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_of(self) -> MfuConfig:
        if (self.flops_per_token is None) == (self.flops_per_sample is None):
            raise ValueError("give exactly one of 'flops_per_token' or 'flops_per_sample'")
        return self


class WorkloadClass(_Model):
    """A population of workloads that is baselined and optimized as one.

    Attributes:
        name: identifier, used as the ``workload_class`` label value.
        kind: ``training`` or ``inference``.
        selector: label matchers that select the class's workload series: ``label: value``
            (equality) or ``label: {op: value}`` with op ``=``, ``!=``, ``=~`` or ``!~`` (e.g.
            ``namespace: {"=~": "llm-.*"}``); rendered by :func:`promql_matchers`.
        node_selector: label matchers that select the exporter series (prices, GPUs) of
            the nodes the class runs on; defaults to ``{job: obsctl-exporter}``.
        description: free text shown in reports.
        mfu: FLOPs per token or sample and dtype, for model FLOPs utilization (optional).
        source: the server whose metrics fill the class's canonical series (the source
            catalogue, obsctl.rules.sources): sdk (default) | vllm | tgi | triton |
            sglang | llamacpp | ray-serve; ``selector`` picks its series.
        queue: the scheduler queue the class waits in (Kueue, Slurm, Ray Serve), if any.
        owner: who answers for the class (a team or person; alerts and reviews name it).
        cadence: ``weekly`` | ``monthly``: how often the class is reviewed (default: the
            spec's ``cadence``, or weekly above ``review.weekly_above_usd_per_month``).
    """

    name: str
    kind: Literal["training", "inference"]
    selector: dict[str, SelectorValue] = Field(min_length=1)
    node_selector: dict[str, SelectorValue] = Field(default_factory=lambda: {"job": "obsctl-exporter"})
    description: str = ""
    source: SourceName = "sdk"
    queue: QueueSource | None = None
    mfu: MfuConfig | None = None
    owner: str | None = Field(None, min_length=1, max_length=128, pattern=OWNER_PATTERN)
    cadence: Cadence | None = None

    @field_validator("name")
    @classmethod
    def _ident(cls, value: str) -> str:
        if not _IDENT.match(value):
            raise ValueError("must start with a lowercase letter and hold only a-z, 0-9, '_' or '-' (at most 63)")
        return value

    @field_validator("selector", "node_selector")
    @classmethod
    def _label_names(cls, value: dict[str, SelectorValue]) -> dict[str, SelectorValue]:
        for key, matcher in value.items():
            if not _LABEL_NAME.match(key):
                raise ValueError(f"{key!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")
            if key.startswith("__"):
                raise ValueError(f"{key!r}: labels starting with '__' are reserved; select by metric name in the signal's query")
            if isinstance(matcher, dict):
                _check_matcher(key, matcher)
        return value


class Signal(_Model):
    """One measurable signal of the loop, evaluated per workload class.

    Attributes:
        name: identifier (``signal`` label value), e.g. ``tokens_per_second``.
        category: utilization | throughput | cost | quality | saturation.
        query: PromQL template; ``$selector`` becomes the class's label matchers and
            ``$node_selector`` the class's node matchers, ``$class`` the class name
            (escaped). Must return a single series (aggregate away all labels).
        unit: the value's unit as shown to people (``tokens/s``, ``USD/1M tokens``, ``ratio``).
        direction: ``higher_is_better`` or ``lower_is_better``.
        tolerance_ratio: relative regression past the baseline that fires the regression
            alert (0.10 = 10 % worse than baseline).
        guard_margin_ratio: the non-inferiority margin when the signal is judged as a
            guard (``verify``): how much worse than its baseline still counts as held; None:
            ``verification.guard_margin_ratio``. A verdict's margin, not an alerting threshold.
        alert_for: how long the regression must hold before the alert fires (PromQL duration).
        alert_floor: the smallest absolute change from the baseline mean (the signal's unit)
            that can fire the regression alert; None: a default by unit kind
            (:func:`obsctl.rules.regression.alert_floor`: 0.02 for a ``ratio``, 0.005 for
            ``seconds``, ...).
        record: ``<metric>:<operations>`` part of the recording rule name (the level
            ``workload_class:`` is prepended); default ``obsctl_<name>:value``.
        catalogue: instead of ``query``, a key of the source catalogue's signals
            (obsctl.rules.canonical.CATALOGUE_SIGNALS, e.g. ``ttft_p95_seconds``): reads
            the class's canonical series; category, unit and direction default from it.
        spiky: true: spikes (GC pauses, bursts, restarts) dominate the signal, so verdicts
            judge its 10 % trimmed mean; false: always its mean; unset: the trimmed mean
            when the baseline's snapshot finds it heavy-tailed (docs/verification.md).
    """

    name: str
    catalogue: str | None = None
    category: Category
    query: str
    unit: str
    direction: Direction
    tolerance_ratio: float = Field(0.10, gt=0, lt=1)
    guard_margin_ratio: float | None = Field(None, gt=0, lt=1)
    alert_for: str = "10m"
    alert_floor: float | None = Field(None, ge=0, allow_inf_nan=False)
    record: str | None = None
    spiky: bool | None = None

    @property
    def record_name(self) -> str:
        """Recording rule name ``workload_class:<metric>:<operations>`` of this signal."""
        return f"workload_class:{self.record or f'obsctl_{self.name}:value'}"

    @field_validator("record")
    @classmethod
    def _record(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+$", value):
            raise ValueError("must be '<metric>:<operations>' such as obsctl_tokens:rate5m (the 'workload_class:' level is added)")
        if value is not None and f"workload_class:{value}" in _canonical_names():
            # The source rules fill that series; a spec signal recorded under the same name
            # would be summed or max()ed in with it by every reader of the canonical set.
            raise ValueError(f"workload_class:{value} is a canonical series the source rules publish (docs/rules.md); "
                             "choose another record name, or use the catalogue signal that reads it (catalogue: <key>)")
        return value

    @field_validator("name")
    @classmethod
    def _ident(cls, value: str) -> str:
        if not re.match(r"^[a-z][a-z0-9_]{0,62}$", value):
            raise ValueError("must start with a lowercase letter and hold only a-z, 0-9 or '_' (at most 63)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _from_catalogue(cls, data: object) -> object:
        if not isinstance(data, dict) or data.get("catalogue") is None:
            return data
        from obsctl.rules.canonical import CATALOGUE_SIGNALS, catalogue_query

        key = data["catalogue"]
        if not isinstance(key, str) or key not in CATALOGUE_SIGNALS:  # a list or mapping is unhashable
            raise ValueError(f"catalogue {key!r} is not one of: {', '.join(sorted(CATALOGUE_SIGNALS))}")
        if "query" in data:
            raise ValueError("give either query or catalogue, not both")
        _, _, category, unit, direction = CATALOGUE_SIGNALS[key]
        return {"category": category, "unit": unit, "direction": direction, **data, "query": catalogue_query(key)}

    @field_validator("query")
    @classmethod
    def _has_selector(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("catalogue"):  # reads the class's canonical series by $class
            return value
        if "$selector" not in value and "$node_selector" not in value:
            raise ValueError("must contain $selector (or $node_selector) so it can be evaluated per workload class")
        return value

    @field_validator("alert_for")
    @classmethod
    def _duration(cls, value: str) -> str:
        return _positive_duration(value)


class Target(_Model):
    """A desired state of one signal for one class, tied to a business driver and a date.

    Exactly one of ``relative`` (change against the current baseline, e.g. 0.20 = +20 %,
    -0.15 = -15 %) or ``absolute`` (a value in the signal's unit) is given. A relative
    target is anchored to the baseline current when obsctl first saw it
    (:mod:`obsctl.baselining.practice.targets`), so promoting a gain does not move it. ``owner``
    defaults to the class's.
    """

    workload_class: str
    signal: str
    relative: float | None = Field(None, gt=-1, lt=10)
    absolute: float | None = None
    driver: str = Field(min_length=1)
    deadline: dt.date
    owner: str | None = Field(None, min_length=1, max_length=128, pattern=OWNER_PATTERN)

    @model_validator(mode="after")
    def _one_of(self) -> Target:
        if (self.relative is None) == (self.absolute is None):
            raise ValueError("give exactly one of 'relative' (e.g. 0.2 for +20 %) or 'absolute'")
        return self


PricingModel = Literal["on_demand", "reserved", "spot"]


class PriceByModel(_Numbers):
    """One price (USD per hour) per pricing model; a plain number in the spec means ``on_demand``."""

    on_demand: float | None = Field(None, ge=0)
    reserved: float | None = Field(None, ge=0)
    spot: float | None = Field(None, ge=0)


# A number or a mapping; the discriminator keeps errors to the branch the input meant.
_Price = Annotated[
    Annotated[Annotated[float, Field(ge=0)], Tag("usd")] | Annotated[PriceByModel, Tag("by_model")],
    Discriminator(lambda v: "by_model" if isinstance(v, (dict, PriceByModel)) else "usd"),
]


class Pricing(_Numbers):
    """Prices, published by the exporter as Prometheus series, and how cost rules read them.

    Attributes:
        node_hour_usd: price of one node-hour (CPU-only or whole-node pricing): a number
            (on-demand) or ``{on_demand, reserved, spot}``.
        accelerator_hour_usd: price of one accelerator-hour by GPU model name as NVML
            reports it (e.g. ``"NVIDIA H100 80GB HBM3": 4.10`` or ``{on_demand: 4.1, spot: 1.6}``).
        pricing_model: the model this exporter's node is billed under (on_demand | reserved
            | spot); the exporter publishes that model's prices. Nodes billed differently run
            the exporter with their own config.
        energy_usd_per_kwh: electricity price, for the energy cost of the GPUs' energy counter.
        prefer: ``opencost`` (default): OpenCost's ``node_gpu_hourly_cost`` (> 0) /
            ``node_total_hourly_cost`` win where Prometheus has them, the prices above fill
            the rest; ``spec``: the other way round.
        opencost_node_label: label on the obsctl exporter's series whose value is OpenCost's
            ``node`` (add it by relabelling, e.g. from ``__meta_kubernetes_pod_node_name``).
        idle_utilization_ratio: an attributed accelerator below this utilization (5 m mean)
            counts as idle waste.
        run_label: label on a training class's work counters naming the run (cost per run).
        output_token_weight: what one output (generated) token costs in input tokens, for
            the split of a class's cost into USD per million input and output tokens
            (default 4: output is priced 4x-8x input on hosted-model price sheets).
        cached_input_token_weight: what one cached prompt token (served from a prefix or
            offloaded KV cache, where the engine counts them) costs in uncached input
            tokens, 0-1 (default 0.1: hosted APIs bill cached input at a tenth of input on
            their newest models; 0 leaves cached tokens out of the split).
        time_slicing_share: a time-sliced (shared, not MIG) GPU's share per attribution
            entry, by class name (e.g. ``{chat: 0.75, embed: 0.25}``: the replicas each class
            was configured with, over the GPU's replicas); a class not named splits what is
            left equally with the other unnamed classes on that GPU (default: an equal split).
    """

    node_hour_usd: _Price | None = None
    accelerator_hour_usd: dict[str, _Price] = Field(default_factory=dict)
    pricing_model: PricingModel = "on_demand"
    energy_usd_per_kwh: float | None = Field(None, ge=0)
    prefer: Literal["opencost", "spec"] = "opencost"
    opencost_node_label: str = "node"
    idle_utilization_ratio: float = Field(0.1, gt=0, le=1)
    run_label: str = "run"
    output_token_weight: float = Field(4.0, gt=0)
    cached_input_token_weight: float = Field(0.1, ge=0, le=1)
    time_slicing_share: dict[str, float] = Field(default_factory=dict)

    @field_validator("accelerator_hour_usd")
    @classmethod
    def _model_names(cls, value: dict) -> dict:
        # Published as the gpu_model label and joined on NVML's name: an empty one matches nothing.
        for name in value:
            if not name.strip() or not name.isprintable():
                raise ValueError(f"GPU model {name!r} must be the name NVML reports, e.g. 'NVIDIA H100 80GB HBM3'")
        return value

    @field_validator("time_slicing_share")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not 0 < v <= 1}
        if bad:
            raise ValueError(f"shares must be in (0, 1]: {bad}")
        if sum(value.values()) > 1 + 1e-9:
            raise ValueError(f"shares add up to {sum(value.values())!r}, more than the whole GPU (1)")
        return value

    @field_validator("opencost_node_label", "run_label")
    @classmethod
    def _label_name(cls, value: str) -> str:
        if not _LABEL_NAME.match(value) or value.startswith("__"):
            raise ValueError(f"{value!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with '__')")
        return value

    @model_validator(mode="after")
    def _model_priced(self) -> Pricing:
        for name, price in [("node_hour_usd", self.node_hour_usd), *self.accelerator_hour_usd.items()]:
            if isinstance(price, PriceByModel) and getattr(price, self.pricing_model) is None:
                raise ValueError(f"{name}: no {self.pricing_model} price (pricing_model is {self.pricing_model})")
        return self

    def _pick(self, price: float | PriceByModel | None) -> float | None:
        return getattr(price, self.pricing_model) if isinstance(price, PriceByModel) else price

    def node_price(self) -> float | None:
        """USD per node-hour under :attr:`pricing_model` (None: not configured)."""
        return self._pick(self.node_hour_usd)

    def accelerator_prices(self) -> dict[str, float]:
        """``{GPU model: USD per accelerator-hour}`` under :attr:`pricing_model`."""
        return {model: self._pick(price) for model, price in self.accelerator_hour_usd.items()}


class SaturationThresholds(_Numbers):
    """Thresholds of the saturation state (see ``obsctl.rules.saturation``); all optional.

    Attributes:
        busy_ratio: accelerator (or CPU) busy fraction at or above which the class is busy.
        idle_ratio: busy fraction below which a class without a queue is idle.
        queue_depth: waiting requests at or above which the queue builds.
        queue_wait_seconds: queue wait p95 at or above which the queue builds.
        rejected_per_second: rejections per second above which the queue builds.
        cpu_cores: CPU cores the class's processes may use (CPU-only busy fraction);
            default one core per process series.
    """

    busy_ratio: float | None = Field(None, gt=0, le=1)
    idle_ratio: float | None = Field(None, ge=0, lt=1)
    queue_depth: float | None = Field(None, gt=0)
    queue_wait_seconds: float | None = Field(None, gt=0)
    rejected_per_second: float | None = Field(None, ge=0)
    cpu_cores: float | None = Field(None, gt=0)


class Saturation(SaturationThresholds):
    """The spec's ``saturation:`` block: defaults plus ``classes: {name: {...}}`` overrides."""

    classes: dict[str, SaturationThresholds] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _idle_below_busy(self) -> Saturation:
        # given values only; against the built-in defaults obsctl.rules.saturation checks at generation
        for name, layer in [("saturation", self), *((f"saturation.classes.{n}", c) for n, c in self.classes.items())]:
            idle = layer.idle_ratio if layer.idle_ratio is not None else self.idle_ratio
            busy = layer.busy_ratio if layer.busy_ratio is not None else self.busy_ratio
            if idle is not None and busy is not None and idle >= busy:
                raise ValueError(f"{name}: idle_ratio ({idle}) must be below busy_ratio ({busy})")
        return self


Design = Literal["before-after", "control", "canary", "seasonal", "profile"]

#: What a design needs of its class's ``comparison`` settings: the field it reads and the
#: field's shape, as the spec's errors name them. The design objects declare the same
#: (``obsctl.baselining.designs.branch.Design``: ``needs_control``, ``needs_variant``) and
#: the design package holds them to this table, so the spec checks them without loading it.
DESIGN_NEEDS: dict[str, tuple[str, str]] = {"control": ("control", "<another class>"), "canary": ("variant", "{label, control, treatment}")}


class Variant(_Model):
    """Canary replicas of one class, told apart by one label (used in queries only).

    Attributes:
        label: the label name, e.g. ``track``.
        control, treatment: its values on the unchanged and the changed replicas.
        traffic_share: the treatment's share of the class's traffic (the planner uses it).
    """

    label: str
    control: str = Field(min_length=1)
    treatment: str = Field(min_length=1)
    traffic_share: float = Field(0.5, gt=0, lt=1)

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not _LABEL_NAME.match(value) or value.startswith("__"):
            raise ValueError(f"{value!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with '__')")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> Variant:
        if self.control == self.treatment:
            raise ValueError(f"control and treatment must differ (both {self.control!r})")
        return self


class ClassComparison(_Model):
    """How one class's initiatives are compared (``comparison.classes.<name>``; all optional).

    Attributes:
        design: the default design of the class's initiatives.
        control: the control class of the ``control`` design (a class the change does not touch).
        variant: the canary replicas of the ``canary`` design.
        mix: mix dimensions (label names, e.g. ``model``) whose shift ``verify`` decomposes.
        demand: the signal that measures offered load (default: the canonical
            ``workload_class:obsctl_requests_offered:rate5m`` the class's source fills).
    """

    design: Design | None = None
    control: str | None = None
    variant: Variant | None = None
    mix: list[str] = Field(default_factory=list)
    demand: str | None = None

    @field_validator("mix")
    @classmethod
    def _mix_labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise ValueError(f"{label!r} is not a Prometheus label name")
        return value


class Comparison(_Model):
    """The spec's ``comparison:`` block: comparison designs of ``verify`` (docs/verification-designs.md).

    Attributes:
        design: default design: ``before-after`` | ``control`` | ``canary`` | ``seasonal`` |
            ``profile``; when neither the block nor the class names one, ``initiative start``
            chooses ``profile`` for a baseline whose history shows a cycle.
        seasonal_cycle: ``day`` or ``week``: the cycle the ``seasonal`` design matches.
        timezone: IANA time zone for "the same hour" (default UTC).
        classes: per-class settings (:class:`ClassComparison`).
    """

    design: Design = "before-after"
    seasonal_cycle: Literal["day", "week"] = "day"
    timezone: str = "UTC"
    classes: dict[str, ClassComparison] = Field(default_factory=dict)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone name (e.g. UTC, Europe/Berlin)") from None
        return value

    def for_class(self, name: str) -> ClassComparison:
        """The class's settings with the block's default design filled in."""
        own = self.classes.get(name) or ClassComparison()
        return own if own.design else own.model_copy(update={"design": self.design})


class Verification(_Model):
    """Defaults for snapshot and verify windows.

    Attributes:
        window: default window for ``snapshot-baseline`` and ``verify`` (PromQL duration).
        step: query resolution step (PromQL duration).
        min_samples: fewest finite samples a side (baseline or window) needs to be
            stored or judged; fewer is NO_DATA.
        confidence: two-sided confidence level of the interval, 0-1 (over all looks).
        min_effect_ratio: smallest relative change that counts as IMPROVED/REGRESSED,
            and the equivalence margin of NO_CHANGE.
        guards: guard signals, by category or signal name (default quality and cost).
        optional_guards: guard signals whose NO_DATA / INCONCLUSIVE does not cap the
            verdict (any other guard without a decision keeps it at most INCONCLUSIVE).
        guard_margin_ratio: the guards' non-inferiority margin (default 0.05: a guard
            holds when it is shown no more than 5 % worse than its baseline); a signal's
            own ``guard_margin_ratio`` overrides it.
        memory_history: how much history before a baseline window ``snapshot-baseline``
            reads to estimate the signal's memory (PromQL duration, default 3d).
        power: power the planner aims at (``obsctl plan``, ``initiative start``).
        min_coverage_ratio: least fraction of the window's step grid with fresh input
            (real samples, ``obsctl.baselining.measure.coverage``); below it a verdict is
            INCONCLUSIVE (NO_DATA when the signal stopped) and a baseline is refused.
        fresh_on_change: signals whose inputs re-serve their last value ("latest
            score" gauges): a sample counts as fresh only when the value changes.
    """

    window: str = "1h"
    step: str = "15s"
    min_samples: int = Field(10, ge=2, le=100000)
    confidence: float = Field(0.95, gt=0.5, lt=1)
    min_effect_ratio: float = Field(0.02, ge=0, lt=1)
    min_coverage_ratio: float = Field(0.9, gt=0, le=1)
    fresh_on_change: list[str] = Field(default_factory=list)
    guards: list[str] = Field(default_factory=lambda: ["quality", "cost"])
    optional_guards: list[str] = Field(default_factory=list)
    guard_margin_ratio: float = Field(0.05, gt=0, lt=1)
    memory_history: str = "3d"
    power: float = Field(0.9, gt=0.5, lt=1)

    @field_validator("window", "step", "memory_history")
    @classmethod
    def _duration(cls, value: str) -> str:
        return _positive_duration(value)

    @model_validator(mode="before")
    @classmethod
    def _removed_batches(cls, data: object) -> object:
        if isinstance(data, dict) and "batches" in data:
            raise ValueError("'batches' was removed: verdicts size their interval from the signal's memory; "
                             "use min_samples for the fewest samples a window needs")
        if isinstance(data, dict) and "planned_looks" in data:
            raise ValueError("'planned_looks' was removed: the interval is a confidence sequence, valid at any number of looks; drop the key")
        return data


class Review(_Numbers):
    """The spec's ``review:`` block: how ``obsctl review`` judges the practice (docs/practice.md).

    Attributes:
        weekly_above_usd_per_month: a class costing more than this (USD/month, from its
            cost series over the last month) is reviewed weekly unless it names its own
            ``cadence``; None: the spec's ``cadence`` for every class.
        stale_periods: cadence periods after its window's end a baseline is stale
            (default 2: a weekly class re-baselines every other week); ``max_age`` overrides.
        baseline_life: reviews the drift check spends its error over (default 8).
        max_age: a baseline older than this (a duration, e.g. ``60d``) is stale; default
            ``stale_periods`` cadence periods.
        realistic_per_quarter: improvement per quarter (ratio) a target may require and
            still be realistic (default 0.05: about 5 %).
        aspirational_per_quarter: improvement per quarter above which a target is
            unrealistic (default 0.30: 30 % in a quarter).
        episodic_periods: a class with no initiative started for this many cadence
            periods is flagged ``episodic``.
        folder: where ``review --write`` puts the dated review documents (relative to
            the spec's folder); None: ``--write`` needs ``--out``.
    """

    weekly_above_usd_per_month: float | None = Field(None, ge=0)
    stale_periods: int = Field(2, ge=1, le=520)
    baseline_life: int = Field(8, ge=1, le=520)
    max_age: str | None = None
    realistic_per_quarter: float = Field(0.05, gt=0, lt=10)
    aspirational_per_quarter: float = Field(0.30, gt=0, lt=10)
    episodic_periods: int = Field(3, ge=1, le=520)
    folder: str | None = Field(None, min_length=1)

    @field_validator("max_age", mode="before")
    @classmethod
    def _age(cls, value: object) -> object:
        return value if value is None else _positive_duration(value)

    @model_validator(mode="after")
    def _band(self) -> Review:
        if self.aspirational_per_quarter <= self.realistic_per_quarter:
            raise ValueError(f"aspirational_per_quarter ({self.aspirational_per_quarter}) must be above "
                             f"realistic_per_quarter ({self.realistic_per_quarter})")
        return self


def target_bound_error(target: Target, signal: Signal) -> str | None:
    """Why ``target``'s value is beyond a physical bound of ``signal``, or None.

    Bounds: a ``ratio`` (utilization, MFU, hit or error ratio) lies in [0, 1]; a cost is
    above 0; a throughput, a duration or any ``.../s`` rate is not negative. Applied to an
    absolute target here (``obsctl check`` refuses it) and to a relative target's value
    against its anchor by ``obsctl review``.
    """
    return value_bound_error(target.absolute, signal) if target.absolute is not None else None


def value_bound_error(value: float, signal: Signal) -> str | None:
    """Why a target value of ``value`` is beyond ``signal``'s physical bound (see :func:`target_bound_error`), or None."""
    if signal.unit == "ratio" and not 0 <= value <= 1:
        return f"{value:g} is outside [0, 1], the range of a ratio (MFU and utilization cannot exceed their peak)"
    if signal.category == "cost" and value <= 0:
        return f"{value:g} is not above 0: a cost of zero or less cannot be reached"
    if value < 0 and (signal.category in ("throughput", "cost") or signal.unit in ("seconds",) or signal.unit.endswith("/s")):
        return f"{value:g} is negative: a {signal.category} in {signal.unit} cannot be"
    return None


class Spec(_Model):
    """The whole spec. ``path`` is where it was loaded from (not a YAML key).

    ``runbook_base_url`` is where alert runbooks live (each alert links
    ``<runbook_base_url>#<alertname lowercased>``); point it at your copy of
    docs/runbooks.md, e.g. ``https://wiki.example.com/obsctl/runbooks``.
    """

    version: Literal[1] = 1
    prometheus: PrometheusConfig = Field(default_factory=PrometheusConfig)
    alertmanager_url: str | None = None
    runbook_base_url: str = "docs/runbooks.md"
    cadence: Cadence = "weekly"
    store: str = ".obsctl-store"
    workload_classes: list[WorkloadClass] = Field(min_length=1)
    signals: list[Signal] = Field(min_length=1)
    pricing: Pricing = Field(default_factory=Pricing)
    saturation: Saturation = Field(default_factory=Saturation)
    comparison: Comparison = Field(default_factory=Comparison)
    targets: list[Target] = Field(default_factory=list)
    verification: Verification = Field(default_factory=Verification)
    review: Review = Field(default_factory=Review)
    #: The spec's identity where its state is shared (the Pushgateway group of ``obsctl
    #: publish``): a team's name, e.g. ``team-chat``; None: the spec file's name.
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    path: Path | None = Field(None, exclude=True)
    _lines: dict = PrivateAttr(default_factory=dict)

    @field_validator("runbook_base_url")
    @classmethod
    def _runbook_base_url(cls, value: str) -> str:
        # Alertmanager receivers (Slack, e-mail, PagerDuty) render it as a link: only a web
        # address or a relative path, never javascript:, data: or file: links.
        scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", value)
        if scheme and scheme.group(1).lower() not in ("http", "https"):
            raise ValueError(f"scheme {scheme.group(1)!r} is not allowed: use an http(s) URL such as "
                             "https://wiki.example.com/obsctl/runbooks, or a relative path such as docs/runbooks.md")
        if not value.strip() or not value.isprintable() or any(c.isspace() for c in value):
            raise ValueError("must be an http(s) URL or a relative path, without spaces or control characters")
        if scheme:
            validate_url(value, "runbook")
        return value

    @field_validator("store")
    @classmethod
    def _store(cls, value: str) -> str:
        # '' would make the spec's own folder the store, '   ' a folder named by spaces.
        if not value.strip():
            raise ValueError("must be a folder path, not empty or blank (leave the key out for the default .obsctl-store)")
        return value

    @field_validator("alertmanager_url")
    @classmethod
    def _alertmanager_url(cls, value: str | None) -> str | None:
        # Same rules as prometheus.url: no userinfo (it would be printed), no spaces.
        return None if value is None else validate_url(value, "Alertmanager").rstrip("/")

    def line_of(self, *path: object) -> int | None:
        """1-based line of a key or item in the spec file, e.g. ``line_of("signals", 2, "query")``."""
        for cut in range(len(path), -1, -1):
            if path[:cut] in self._lines:
                return self._lines[path[:cut]]
        return None

    @model_validator(mode="after")
    def _references(self) -> Spec:
        classes = [c.name for c in self.workload_classes]
        signals = [s.name for s in self.signals]
        for kind, names in (("workload class", classes), ("signal", signals)):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {kind} name(s): {', '.join(dupes)}")
        for i, target in enumerate(self.targets):
            if target.workload_class not in classes:
                raise ValueError(f"targets[{i}].workload_class {target.workload_class!r} is not one of: {', '.join(classes)}")
            if target.signal not in signals:
                raise ValueError(f"targets[{i}].signal {target.signal!r} is not one of: {', '.join(signals)}")
            bound = target_bound_error(target, self.signals[signals.index(target.signal)])
            if bound:
                raise ValueError(f"targets[{i}] ({target.workload_class}/{target.signal}): absolute {bound}")
        for name in self.saturation.classes:
            if name not in classes:
                raise ValueError(f"saturation.classes.{name}: no such workload class; defined: {', '.join(classes)}")
        return self

    @model_validator(mode="after")
    def _comparison_references(self) -> Spec:
        classes = [c.name for c in self.workload_classes]
        signals = [s.name for s in self.signals]
        for name, cc in self.comparison.classes.items():
            where = f"comparison.classes.{name}"
            if name not in classes:
                raise ValueError(f"{where}: no such workload class; defined: {', '.join(classes)}")
            if cc.control is not None and (cc.control not in classes or cc.control == name):
                raise ValueError(f"{where}.control {cc.control!r} must be another workload class; defined: {', '.join(classes)}")
            if cc.demand is not None and cc.demand not in signals:
                raise ValueError(f"{where}.demand {cc.demand!r} is not one of the signals: {', '.join(signals)}")
            design = cc.design or self.comparison.design
            field, shape = DESIGN_NEEDS.get(design, (None, ""))
            if field is not None and getattr(cc, field) is None:
                raise ValueError(f"{where}: design {design} needs {field}: {shape}")
        if self.comparison.design in DESIGN_NEEDS:
            missing = [c for c in classes if not (self.comparison.classes.get(c) and
                       (self.comparison.classes[c].control or self.comparison.classes[c].variant or self.comparison.classes[c].design))]
            if missing:
                raise ValueError(f"comparison.design {self.comparison.design} needs per-class settings; missing for: {', '.join(missing)}")
        return self

    # --- lookups -------------------------------------------------------------------

    def workload_class(self, name: str) -> WorkloadClass:
        """Return the class called ``name``; raises SpecError listing the valid names."""
        for wc in self.workload_classes:
            if wc.name == name:
                return wc
        raise SpecError(f"{self.path}: no workload class {name!r}; defined: {', '.join(c.name for c in self.workload_classes)}")

    def signal(self, name: str) -> Signal:
        """Return the signal called ``name``; raises SpecError listing the valid names."""
        for sig in self.signals:
            if sig.name == name:
                return sig
        raise SpecError(f"{self.path}: no signal {name!r}; defined: {', '.join(s.name for s in self.signals)}")

    def store_path(self) -> Path:
        """The store directory; a relative ``store`` is resolved against the spec's folder."""
        store = Path(self.store).expanduser()
        if not store.is_absolute() and self.path is not None:
            store = self.path.parent / store
        return store

    def query_for(self, signal: Signal | str, workload_class: WorkloadClass | str) -> str:
        """The signal's PromQL for one class, with ``$selector``, ``$node_selector``, ``$class`` filled in."""
        sig = self.signal(signal) if isinstance(signal, str) else signal
        wc = self.workload_class(workload_class) if isinstance(workload_class, str) else workload_class
        values = {
            "node_selector": promql_matchers(wc.node_selector),
            "selector": promql_matchers(wc.selector),
            "class": escape_label_value(wc.name),
        }
        # One pass: substituted label values are never scanned for placeholders again,
        # so a value containing "$selector" stays literal (no PromQL injection).
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], sig.query)


def _canonical_names() -> frozenset[str]:
    """The canonical per-class series names (:mod:`obsctl.rules.canonical`)."""
    from obsctl.rules import canonical

    return frozenset(v for k, v in vars(canonical).items() if k.isupper() and isinstance(v, str) and v.startswith("workload_class:"))


#: A value for inside a double-quoted PromQL label matcher (:func:`obsctl.escape.promql_string`).
escape_label_value = promql_string


def matcher_of(value: SelectorValue) -> tuple[str, str]:
    """``(operator, value)`` of a selector entry: a string is ``=``, ``{"=~": "llm-.*"}`` names the operator."""
    return ("=", value) if isinstance(value, str) else next(iter(value.items()))


def promql_matchers(selector: dict[str, SelectorValue]) -> str:
    """Render ``{"job": "a", "namespace": {"=~": "llm-.*"}}`` as ``job="a",namespace=~"llm-.*"``
    (comma separated, sorted by label, values escaped as PromQL strings)."""
    return ",".join(f'{k}{op}"{escape_label_value(v)}"' for k, (op, v) in sorted((k, matcher_of(m)) for k, m in selector.items()))


def _check_matcher(label: str, matcher: dict[str, str]) -> None:
    """A ``{operator: value}`` selector entry: exactly one of :data:`MATCH_OPERATORS`, and for ``=~`` /
    ``!~`` a regular expression (Prometheus anchors it; RE2 syntax, checked here with Python's ``re``,
    which accepts what RE2 does except RE2-only classes, so promtool has the last word)."""
    if len(matcher) != 1 or next(iter(matcher)) not in MATCH_OPERATORS:
        raise ValueError(f"{label}: a matcher is one of {{'=': v}}, {{'!=': v}}, {{'=~': regex}}, {{'!~': regex}}, got {sorted(matcher)}")
    op, value = next(iter(matcher.items()))
    if op in ("=~", "!~"):
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{label}: {op} {value!r} is not a regular expression: {exc}") from None


# --- loading -----------------------------------------------------------------------


def resolve_spec_path(path: str | os.PathLike[str] | None) -> Path:
    """``--spec`` if given, else ``$OBSCTL_SPEC``, else ``./obsctl.yaml``."""
    return Path(path or os.environ.get(SPEC_ENV) or DEFAULT_SPEC_PATH)


def load_spec(path: str | os.PathLike[str] | None = None) -> Spec:
    """Read, parse and validate a spec file.

    Args:
        path: spec path; ``None`` uses :func:`resolve_spec_path`.

    Returns:
        The validated :class:`Spec` with ``path`` set.

    Raises:
        SpecError: missing/unreadable file, not UTF-8, empty, YAML syntax error, not a
            mapping, or any validation error (unknown key, wrong type, bad reference).
    """
    spec_path = resolve_spec_path(path)
    if not spec_path.exists() and not spec_path.is_symlink():
        raise SpecError(f"{spec_path}: spec file not found (pass --spec PATH or set {SPEC_ENV}; an example is examples/obsctl.yaml)")
    data, lines = yamlio.load_file(spec_path, SpecError, "spec")
    if data is None:
        raise SpecError(f"{spec_path}: spec is empty; it needs at least workload_classes and signals (see examples/obsctl.yaml)")
    if not isinstance(data, dict):
        raise SpecError(f"{spec_path}:1: spec must be a YAML mapping of keys (workload_classes, signals, ...), got a {type(data).__name__}")
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(yamlio.validation_message(spec_path, exc, lines, Spec)) from None
    spec = spec.model_copy(update={"path": spec_path.resolve()})
    spec._lines = lines
    return spec
