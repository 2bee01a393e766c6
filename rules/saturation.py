"""The saturation state of a workload class: one definition, as recording rules and as Python.

Inputs, all per class (canonical series, :mod:`obsctl.rules.canonical`):

* **busy fraction** ``b`` (0-1): ``GPU_BUSY / GPUS_ALLOCATED`` (the attributed accelerators'
  mean utilization) when the class has attributed GPUs, else ``ENGINE_BUSY`` (the serving
  engine's own account, :mod:`obsctl.rules.sources`: 1 while requests wait for its capacity,
  else its KV-cache usage; vLLM, TGI, Triton, SGLang, llama.cpp), else ``CPU_BUSY /
  CPUS_ALLOCATED`` (CPU seconds per second of the class's processes over the cores they
  may use);
* **queue** ``q`` (0/1): 1 when any present queue signal is over its threshold:
  ``REQUESTS_WAITING >= queue_depth``, ``QUEUE_WAIT_P95 >= queue_wait_seconds``,
  rejections per second ``> rejected_per_second``. Absent signals do not vote; a class
  with none of them (a training job) is never saturated or constrained.

State, from ``b`` and ``q`` (thresholds ``busy_ratio`` > ``idle_ratio``):

=============== ================================ ===========================================
state           condition                        meaning
=============== ================================ ===========================================
``saturated``   ``q = 1`` and ``b >= busy_ratio`` capacity problem: more accelerators help
``constrained`` ``q = 1`` and ``b < busy_ratio``  configuration problem: the queue builds while
                                                 the accelerators wait (batch size, workers)
``idle``        ``q = 0`` and ``b < idle_ratio``  nothing to do: capacity is wasted
``healthy``     ``q = 0`` and ``b >= idle_ratio`` serving what arrives without queueing
=============== ================================ ===========================================

A closed-loop load (fixed concurrency above what the engine batches, so requests wait
persistently) reads as ``saturated`` from the engine's queue alone: waiting >= queue_depth
and, waiting for capacity, an engine busy fraction of 1.

No busy fraction (no GPU attributed, no engine account and no process CPU series): no state (absent rules,
``None`` in Python). Thresholds come from the spec's ``saturation:`` block (defaults, then
``saturation.classes.<name>``), else :class:`Thresholds`' defaults.

The same definition twice: :func:`rules` emits the PromQL (``SATURATION_STATE`` one series
per ``state`` label, 1 for the current state and 0 for the others), :func:`classify` and
:func:`classify_inputs` evaluate it over raw values, so ``verify`` can classify any past
period (also history from before the rules were loaded: :func:`inputs` gives the PromQL of
each input over raw metrics where it can). The unit tests run both on the same series.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal

from obsctl.errors import SpecError
from obsctl.rules import canonical as C
from obsctl.rules.loop_series import class_regex, number, selector, shared_by
from obsctl.spec import Spec, WorkloadClass, promql_matchers

State = Literal["saturated", "constrained", "idle", "healthy"]
STATES: tuple[State, ...] = ("saturated", "constrained", "idle", "healthy")
#: The rate/averaging window of the inputs (the canonical ``rate5m`` series).
WINDOW = "5m"


@dataclass(frozen=True)
class Thresholds:
    """Thresholds of the saturation state.

    Attributes:
        busy_ratio: busy fraction (0-1) at or above which the accelerators are busy.
        idle_ratio: busy fraction below which a class with no queue is idle (< busy_ratio).
        queue_depth: waiting requests (a count) at or above which the queue builds.
        queue_wait_seconds: queue wait p95 (seconds) at or above which the queue builds.
        rejected_per_second: rejections per second above which the queue builds (0: any).
        cpu_cores: cores a CPU-only class's processes may use; None: one per process series
            (a Python worker is bound to about one core by the GIL); set it where one series
            sums several processes (multiprocess mode) or a container CPU limit is known.
    """

    busy_ratio: float = 0.8
    idle_ratio: float = 0.05
    queue_depth: float = 1.0
    queue_wait_seconds: float = 1.0
    rejected_per_second: float = 0.0
    cpu_cores: float | None = None

    @classmethod
    def for_class(cls, spec: Spec, name: str) -> Thresholds:
        """Defaults, overlaid with the spec's ``saturation:`` block and ``saturation.classes.<name>``.

        Raises:
            SpecError: the merged ``idle_ratio`` is not below ``busy_ratio``.
        """
        out = cls()
        for layer in (spec.saturation, spec.saturation.classes.get(name)):
            if layer is not None:
                out = replace(out, **{f.name: getattr(layer, f.name) for f in fields(cls) if getattr(layer, f.name) is not None})
        if out.idle_ratio >= out.busy_ratio:
            # The line of the class's override if it has one, else of the saturation block.
            line = spec.line_of("saturation", "classes", name) if name in spec.saturation.classes else spec.line_of("saturation")
            where = f"{spec.path}:{line}" if line else f"{spec.path}"
            raise SpecError(f"{where}: saturation for class {name!r}: idle_ratio ({out.idle_ratio}) "
                            f"must be below busy_ratio ({out.busy_ratio}, the default unless set)")
        return out


def _present(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def busy_fraction(gpu_busy: float | None = None, gpus_allocated: float | None = None,
                  cpu_busy: float | None = None, cpus_allocated: float | None = None,
                  engine_busy: float | None = None) -> float | None:
    """The busy fraction the state reads: GPU busy seconds/s over allocated GPUs, else the
    engine's own busy fraction, else CPU.

    Args:
        gpu_busy: ``GPU_BUSY`` (sum of the attributed GPUs' utilization, 0..n).
        gpus_allocated: ``GPUS_ALLOCATED`` (count).
        cpu_busy: ``CPU_BUSY`` (CPU seconds per second of the class's processes).
        cpus_allocated: ``CPUS_ALLOCATED`` (cores).
        engine_busy: ``ENGINE_BUSY`` (0-1, the serving engine's own account).

    Returns:
        0-1 (can exceed 1 for CPU when processes use more cores than allowed), or None when
        neither pair is present. None or NaN mean absent, as in PromQL.
    """
    if _present(gpu_busy) and _present(gpus_allocated) and gpus_allocated:
        return gpu_busy / gpus_allocated
    if _present(engine_busy):
        return engine_busy
    if _present(cpu_busy) and _present(cpus_allocated) and cpus_allocated:
        return cpu_busy / cpus_allocated
    return None


def queue_building(waiting: float | None = None, queue_wait_p95: float | None = None,
                   rejected_per_second: float | None = None, thresholds: Thresholds = Thresholds()) -> bool:
    """Whether any present queue signal is over its threshold (absent signals do not vote)."""
    t = thresholds
    return ((_present(waiting) and waiting >= t.queue_depth)
            or (_present(queue_wait_p95) and queue_wait_p95 >= t.queue_wait_seconds)
            or (_present(rejected_per_second) and rejected_per_second > t.rejected_per_second))


def classify(busy: float | None, waiting: float | None = None, queue_wait_p95: float | None = None,
             rejected_per_second: float | None = None, thresholds: Thresholds = Thresholds()) -> State | None:
    """The saturation state at one instant.

    Args:
        busy: busy fraction 0-1 (:func:`busy_fraction`); None/NaN: unknown.
        waiting: requests waiting (``REQUESTS_WAITING``).
        queue_wait_p95: queue wait p95, seconds (``QUEUE_WAIT_P95``).
        rejected_per_second: rejected requests per second (``REQUESTS{outcome="rejected"}``).
        thresholds: :class:`Thresholds`.

    Returns:
        ``saturated`` | ``constrained`` | ``idle`` | ``healthy``, or None without a busy fraction.
    """
    if not _present(busy):
        return None
    if queue_building(waiting, queue_wait_p95, rejected_per_second, thresholds):
        return "saturated" if busy >= thresholds.busy_ratio else "constrained"
    return "idle" if busy < thresholds.idle_ratio else "healthy"


#: Input names of :func:`classify_inputs` and :func:`inputs`.
INPUTS = ("gpu_busy", "gpus_allocated", "cpu_busy", "cpus_allocated", "engine_busy", "waiting", "queue_wait_p95", "rejected_per_second")


def classify_inputs(values: Mapping[str, Sequence[float | None]], thresholds: Thresholds = Thresholds()) -> list[State | None]:
    """The state at each aligned sample of a period.

    Args:
        values: ``{input name: samples}`` for any subset of :data:`INPUTS`, all of one length
            (aligned on the same timestamps; None/NaN where a sample is missing).
        thresholds: :class:`Thresholds`.

    Returns:
        One state (or None) per sample.

    Raises:
        ValueError: an unknown input name or sequences of different lengths.
    """
    unknown = sorted(set(values) - set(INPUTS))
    if unknown:
        raise ValueError(f"unknown saturation input(s) {unknown}; known: {', '.join(INPUTS)}")
    lengths = {len(v) for v in values.values()}
    if len(lengths) > 1:
        raise ValueError(f"saturation inputs must be aligned: lengths {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    at = lambda name, i: values[name][i] if name in values else None  # noqa: E731
    return [classify(busy_fraction(at("gpu_busy", i), at("gpus_allocated", i), at("cpu_busy", i), at("cpus_allocated", i),
                                   at("engine_busy", i)),
                     at("waiting", i), at("queue_wait_p95", i), at("rejected_per_second", i), thresholds) for i in range(n)]


def state_shares(states: Sequence[State | None]) -> dict[State, float]:
    """Fraction of the classified samples in each state (unclassified samples left out; all 0 if none)."""
    counts = Counter(s for s in states if s is not None)
    total = sum(counts.values())
    return {s: (counts[s] / total if total else 0.0) for s in STATES}


def dominant_state(states: Sequence[State | None]) -> State | None:
    """The most frequent state of a period (ties: the first in :data:`STATES`), None if none classified."""
    shares = state_shares(states)
    best = max(STATES, key=lambda s: (shares[s], -STATES.index(s)))
    return best if shares[best] > 0 else None


# --- PromQL ---------------------------------------------------------------------------


def _nodes(wc: WorkloadClass, **extra: str) -> str:
    matchers = ",".join(filter(None, [promql_matchers(wc.node_selector), promql_matchers(extra)]))
    return "{" + matchers + "}"


def inputs(spec: Spec, wc: WorkloadClass, raw: bool = False) -> dict[str, str]:
    """PromQL per input of :func:`classify_inputs` for class ``wc``, each one series.

    ``gpu_busy``, ``gpus_allocated``, ``cpu_busy`` and ``cpus_allocated`` always read raw
    metrics (the exporter's GPU and attribution series, ``process_cpu_seconds_total``).
    The process series are selected by :func:`process_selector` (the class's matchers less
    those on labels the server puts on its own series only, e.g. vLLM's ``model_name``).
    The queue inputs and ``engine_busy`` read the canonical series the rules record, or with ``raw=True`` the
    class's source expressions over the server's own metrics (:mod:`obsctl.rules.sources`),
    so a period from before the rules were loaded can be classified too; a queue input the
    source does not provide is left out (it does not vote).
    """
    th = Thresholds.for_class(spec, wc.name)
    attributed = f"obsctl_gpu_attribution_info{_nodes(wc, workload_class=wc.name)}"
    procs = f"process_cpu_seconds_total{{{process_selector(wc)}}}"
    cores = f"count({procs})" if th.cpu_cores is None else f"(count({procs}) * 0 + {number(th.cpu_cores)})"
    out = {
        "gpu_busy": f"sum({attributed} * on(uuid, gpu_instance) group_left() "
                    f"avg_over_time(obsctl_gpu_utilization_ratio{_nodes(wc)}[{WINDOW}]))",
        "gpus_allocated": f"count({attributed})",
        "cpu_busy": f"sum(rate({procs}[{WINDOW}]))",
        "cpus_allocated": cores,
    }
    return out | (_raw_queue(wc) if raw else _recorded_queue(wc))


def period_inputs(spec: Spec, wc: WorkloadClass) -> dict[str, str]:
    """:func:`inputs` for a past period, as ``verify`` reads it: each queue input is the
    recorded canonical series where the rules recorded it, else the source's expression over
    the server's own metrics (``(recorded) or (raw)``), so a period from before the rules
    were loaded is classified by the same engine signals (a vLLM closed loop's queue) rather
    than left unknown."""
    out = inputs(spec, wc)
    for key, raw in _raw_queue(wc).items():
        out[key] = f"({out[key]})\nor\n({raw})"
    return out


def offered_query(wc: WorkloadClass, recorded: str) -> str:
    """``recorded`` (the canonical offered load), else the class's source expression of it
    over raw metrics (``(recorded) or sum(raw)``); ``recorded`` alone for a source without one."""
    from obsctl.rules.sources import Ctx, class_mappings

    for src, m in class_mappings(wc):
        if m.record == C.REQUESTS_OFFERED and src.kind == "serving":
            return f"({recorded})\nor\nsum({m.build(Ctx(promql_matchers(wc.selector), WINDOW))})"
    return recorded


def process_selector(wc: WorkloadClass) -> str:
    """The matchers of the class's ``process_*`` series: its selector less the matchers on
    the source's :attr:`~obsctl.rules.sources.base.Source.series_labels` (a vLLM replica
    labels its ``vllm:`` series ``model_name`` and ``engine``, its process collector's
    ``process_cpu_seconds_total`` only with the target's labels). A selector left empty
    keeps its first matcher (which then selects nothing rather than every process)."""
    from obsctl.rules.sources import SOURCES

    source = SOURCES.get(wc.source)
    drop = set(source.series_labels) if source else set()
    kept = {k: v for k, v in wc.selector.items() if k not in drop}
    return promql_matchers(kept or dict([next(iter(sorted(wc.selector.items())))]))


def _recorded_queue(wc: WorkloadClass) -> dict[str, str]:
    own = {"workload_class": wc.name}
    return {
        "engine_busy": f"max({selector(C.ENGINE_BUSY, **own)})",
        "waiting": f"sum({selector(C.REQUESTS_WAITING, **own)})",
        "queue_wait_p95": f"max({selector(C.QUEUE_WAIT_P95, **own)})",
        "rejected_per_second": f"sum({selector(C.REQUESTS, **own, outcome='rejected')})",
    }


def _raw_queue(wc: WorkloadClass) -> dict[str, str]:
    """The queue inputs as the class's source rules compute them (queue source first)."""
    from obsctl.rules.sources import Ctx, class_mappings  # sources import the spec, not this module

    built = {}
    for src, m in class_mappings(wc):
        sel = promql_matchers(wc.queue.selector) if src.kind == "queue" else promql_matchers(wc.selector)
        built[m.record] = m.build(Ctx(sel, WINDOW, wc.queue if src.kind == "queue" else None))
    out = {}
    if C.ENGINE_BUSY in built:
        out["engine_busy"] = f"max({built[C.ENGINE_BUSY]})"
    if C.REQUESTS_WAITING in built:
        out["waiting"] = f"sum({built[C.REQUESTS_WAITING]})"
    if C.QUEUE_WAIT_P95 in built:
        out["queue_wait_p95"] = f"max({built[C.QUEUE_WAIT_P95]})"
    if C.REQUESTS in built:  # keep the rejected outcome only (the expression's one label)
        out["rejected_per_second"] = (f"sum(({built[C.REQUESTS]})\n"
                                      f'  and on(outcome) label_replace(vector(1), "outcome", "rejected", "", ""))')
    return out


def _queue_and_state_rules(th: Thresholds, match: str) -> list[dict]:
    """``QUEUE_BUILDING`` and ``SATURATION_STATE`` x 4 states for the classes ``match``
    selects (empty: every class), which share the thresholds ``th``."""
    def rec(name: str, **labels: str) -> str:
        matchers = ",".join(filter(None, [match, promql_matchers(labels)]))
        return f"{name}{{{matchers}}}" if matchers else name

    tag = lambda expr, name: f'label_replace({expr}, "queue_signal", "{name}", "", "")'  # noqa: E731
    queue = " or ".join([
        tag(f"sum by (workload_class) ({rec(C.REQUESTS_WAITING)}) >= bool {number(th.queue_depth)}", "waiting"),
        tag(f"max by (workload_class) ({rec(C.QUEUE_WAIT_P95)}) >= bool {number(th.queue_wait_seconds)}", "wait"),
        tag(f"sum by (workload_class) ({rec(C.REQUESTS, outcome='rejected')}) > bool {number(th.rejected_per_second)}",
            "rejected"),
        f"0 * {rec(C.BUSY_RATIO)}",  # present busy, absent queue signals: no queue
    ])
    busy, q = rec(C.BUSY_RATIO), rec(C.QUEUE_BUILDING)
    b, i = number(th.busy_ratio), number(th.idle_ratio)
    states = {
        "saturated": f"{q} * ({busy} >= bool {b})",
        "constrained": f"{q} * ({busy} < bool {b})",
        "idle": f"(1 - {q}) * ({busy} < bool {i})",
        "healthy": f"(1 - {q}) * ({busy} >= bool {i})",
    }
    rules = [{"record": C.QUEUE_BUILDING, "expr": f"max by (workload_class) (\n  {queue.replace(' or ', chr(10) + '  or ')}\n)"}]
    return rules + [{"record": C.SATURATION_STATE, "expr": states[s], "labels": {"state": s}} for s in STATES]


def rules(spec: Spec) -> list[dict]:
    """The saturation recording rules of every class, in evaluation order (one group:
    later rules read earlier ones).

    * ``CPU_BUSY`` and ``CPUS_ALLOCATED`` per class: they read the class's processes
      through its ``selector``, and raw series carry no class label to group by;
    * ``GPU_BUSY`` and ``GPUS_ALLOCATED`` once per node selector, ``by (workload_class)``
      over the attribution series (which carry the class);
    * ``BUSY_RATIO`` once (GPU, else the engine's own ``ENGINE_BUSY``, else CPU);
    * ``QUEUE_BUILDING`` and ``SATURATION_STATE`` x 4 states once per set of thresholds
      (``saturation.classes`` overrides make more than one).
    """
    classes = sorted(spec.workload_classes, key=lambda c: c.name)
    out: list[dict] = []
    for wc in classes:
        src = inputs(spec, wc)
        own = {"workload_class": wc.name}
        out += [{"record": C.CPU_BUSY, "expr": src["cpu_busy"], "labels": own},
                {"record": C.CPUS_ALLOCATED, "expr": src["cpus_allocated"], "labels": dict(own)}]
    for nodes, members in shared_by(classes, lambda c: promql_matchers(c.node_selector)):
        attributed = f"obsctl_gpu_attribution_info{{{','.join(filter(None, [nodes, class_regex(c.name for c in members)]))}}}"
        out += [{"record": C.GPU_BUSY, "expr": f"sum by (workload_class) (\n  {attributed}\n  * on(uuid, gpu_instance) group_left() "
                                                f"avg_over_time(obsctl_gpu_utilization_ratio{_nodes(members[0])}[{WINDOW}])\n)"},
                {"record": C.GPUS_ALLOCATED, "expr": f"count by (workload_class) ({attributed})"}]
    engine = f"max by (workload_class) ({selector(C.ENGINE_BUSY, signal='')})"
    out.append({"record": C.BUSY_RATIO, "expr": f"({C.GPU_BUSY} / {C.GPUS_ALLOCATED})\nor {engine}\n"
                                                 f"or ({C.CPU_BUSY} / {C.CPUS_ALLOCATED})"})
    by_thresholds = shared_by(classes, lambda c: Thresholds.for_class(spec, c.name))
    for th, members in by_thresholds:
        out += _queue_and_state_rules(th, "" if len(by_thresholds) == 1 else class_regex(c.name for c in members))
    return out


def saturation_groups(spec: Spec) -> list[dict]:
    """The rule group ``obsctl.saturation`` (:func:`rules`); none without classes."""
    return [{"name": "obsctl.saturation", "rules": rules(spec)}] if spec.workload_classes else []
