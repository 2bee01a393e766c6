"""Saturation scenarios with known states: one workload class per scenario, its raw input
series (GPU utilization and attribution, process CPU, canonical queue series) for
promtool, and the state the pure-Python classifier gives from the same values."""

from __future__ import annotations

from obsctl.rules import canonical as C
from obsctl.rules import saturation as S
from support.rules_fixtures import write_spec

STEP = 15
N = 60  # samples of each input series (15 min)
EVAL = "10m"

# name: (gpu utilizations, cpu cores/s per process, waiting, queue wait p95 s, rejected/s, want)
SCENARIOS = {
    "sat-gpu": ([0.9, 0.95], None, 5.0, None, None, "saturated"),
    "con-gpu": ([0.3, 0.4], None, 0.0, 3.0, None, "constrained"),
    "idle-gpu": ([0.01], None, 0.0, None, None, "idle"),
    "ok-gpu": ([0.5], None, 0.0, 0.2, 0.0, "healthy"),
    "edge-gpu": ([0.8], None, 1.0, None, None, "saturated"),  # both thresholds are inclusive (>=)
    "sat-cpu": (None, [0.95, 0.95], None, None, 0.5, "saturated"),
    "con-cpu": (None, [0.9, 0.9], 3.0, None, None, "constrained"),  # cpu_cores: 4 -> busy 0.45
    "train": ([0.92], None, None, None, None, "healthy"),  # no queue signal: never saturated
    "strict": ([0.9], None, 2.0, None, None, "constrained"),  # class override busy_ratio 0.95
}
OVERRIDES = {"con-cpu": {"cpu_cores": 4}, "strict": {"busy_ratio": 0.95}}


def scenario_spec(tmp_path):
    classes = [{"name": n, "kind": "inference", "selector": {"job": "w", "workload": n}, "node_selector": {"job": "x"}}
               for n in SCENARIOS]
    sig = {"name": "tokens", "category": "throughput", "query": "sum(rate(t{$selector}[1m]))", "unit": "t/s",
           "direction": "higher_is_better"}
    return write_spec(tmp_path, {"store": "s", "workload_classes": classes, "signals": [sig],
                                 "saturation": {"queue_wait_seconds": 1.0, "classes": OVERRIDES}})


def input_series(name: str) -> list[dict]:
    """Input series of one scenario (raw exporter/process metrics and canonical queue series)."""
    gpus, cpus, waiting, wait, rejected, _ = SCENARIOS[name]
    out = []
    for i, util in enumerate(gpus or []):
        uuid = f"GPU-{name}-{i}"
        out.append({"series": f'obsctl_gpu_utilization_ratio{{job="x",instance="n1",gpu="{i}",uuid="{uuid}"}}', "values": f"{util}x{N}"})
        out.append({"series": f'obsctl_gpu_attribution_info{{job="x",instance="n1",gpu="{i}",uuid="{uuid}",workload_class="{name}",owner="o"}}',
                    "values": f"1x{N}"})
    for i, cores in enumerate(cpus or []):
        out.append({"series": f'process_cpu_seconds_total{{job="w",workload="{name}",instance="p{i}"}}', "values": f"0+{cores * STEP}x{N}"})
    own = f'workload_class="{name}"'
    if waiting is not None:
        out.append({"series": f"{C.REQUESTS_WAITING}{{{own}}}", "values": f"{waiting}x{N}"})
    if wait is not None:
        out.append({"series": f"{C.QUEUE_WAIT_P95}{{{own}}}", "values": f"{wait}x{N}"})
    if rejected is not None:
        out.append({"series": f'{C.REQUESTS}{{{own},outcome="rejected"}}', "values": f"{rejected}x{N}"})
    return out


def python_state(spec, name: str) -> str | None:
    gpus, cpus, waiting, wait, rejected, _ = SCENARIOS[name]
    th = S.Thresholds.for_class(spec, name)
    busy = S.busy_fraction(sum(gpus) if gpus else None, len(gpus) if gpus else None,
                           sum(cpus) if cpus else None, (th.cpu_cores or len(cpus)) if cpus else None)
    return S.classify(busy, waiting, wait, rejected, th)
