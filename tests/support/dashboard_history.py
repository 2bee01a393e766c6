"""The fixture the dashboard tests query: examples/obsctl.yaml's two classes, their raw
workload series, the canonical GPU and price series, and one baseline per class x signal.

Every series is a constant (gauges) or grows by a constant per 15 s sample (counters,
histogram buckets), so every rate, ratio and quantile has one known value at any instant
after the first minute; :func:`families` holds the values the known answers are computed
from. The same data goes to promtool (:func:`input_series`) and, as OpenMetrics with
timestamps, to a live Prometheus (:func:`openmetrics`).
"""

from __future__ import annotations

import datetime as dt

from obsctl.dashboards import build as builder
from obsctl.records import Baseline, Population, Statistics, Window
from obsctl.rules import canonical as C
from obsctl.rules import generate as gen
from obsctl.spec import load_spec
from support import promtool

STEP = 15
#: Canonical series held as fixture values for both classes: those the SDK source cannot fill from
#: this fixture's raw series (tokens, requests, samples and queue wait it records from them).
CANONICAL = {C.INPUT_TOKENS: 1800.0, C.OUTPUT_TOKENS: 600.0, C.STEPS: 2.0, C.TTFT_P50: 0.08, C.TTFT_P95: 0.2, C.ITL_P95: 0.03, C.E2E_P95: 1.5,
             C.STEP_TIME: 0.5, C.REQUESTS_RUNNING: 8.0, C.KV_CACHE_USAGE: 0.7,
             C.PREEMPTIONS: 0.1, C.MFU: 0.42}
#: Grafana's variables as Grafana would substitute them ($instance = All).
VARIABLES = {"$__rate_interval": "1m", "$__interval_ms": "15000", "$__interval": "15s", "$__range": "30m", "$instance": ".*",
             "$workload_class": ".*", "$control_class": "finetune-batch", "$signal": "tokens_per_second"}
#: embed-online runs as canary replicas: its workload series split by ``track`` (sums unchanged).
TRACKS = {"stable": 0.75, "canary": 0.25}
VARIANT = {"label": "track", "control": "stable", "treatment": "canary"}
WORKLOAD_JOB = "obsctl-workload"


def families() -> dict[str, tuple[str, list[tuple[dict, object]]]]:
    """{family: (type, [(labels, value or callable(i) -> value of sample i)])} of the fixture."""
    w = {"job": WORKLOAD_JOB, "workload": "embed-online"}
    t = {"job": "trainer", "workload": "finetune-batch"}
    gpus = [({"instance": "n1", "gpu": "0", "uuid": "GPU-a"}, "embed-online", 0.6),
            ({"instance": "n1", "gpu": "1", "uuid": "GPU-b"}, "finetune-batch", 0.9),
            ({"instance": "n1", "gpu": "2", "uuid": "GPU-c"}, None, 0.02),  # unattributed: waste
            ({"instance": "n1", "gpu": "3", "uuid": "GPU-d"}, "finetune-batch", 0.05)]  # idle: waste
    ex = {"job": "obsctl-exporter"}
    fam: dict = {
        "obsctl_tokens": ("counter", [(w, lambda i: 2400.0 * STEP * i), (t, lambda i: 900.0 * STEP * i)]),
        "obsctl_requests": ("counter", [({**w, "outcome": "success"}, lambda i: 95.0 * i), ({**w, "outcome": "error"}, lambda i: 5.0 * i),
                                        ({**t, "outcome": "success"}, lambda i: 10.0 * i), ({**t, "outcome": "error"}, lambda i: 1.0 * i)]),
        "obsctl_node_price_usd_per_hour": ("gauge", [(ex, 0.40)]),
        "obsctl_queue_wait_seconds": ("histogram", []),
        "obsctl_exporter_scrape_collector_success": ("gauge", [({**ex, "collector": "gpu"}, 1.0)]),
        "obsctl_accelerator_price_usd_per_hour": ("gauge", [({**ex, "instance": "n1", "gpu_model": "NVIDIA H100 80GB HBM3"}, 4.10)]),
        "obsctl_energy_price_usd_per_kwh": ("gauge", [({**ex, "instance": "n1"}, 0.20)]),
        "obsctl_samples": ("counter", [({**t, "run": "ft-001"}, lambda i: 64.0 * STEP * i)]),
        "obsctl_queue_depth_requests": ("gauge", [(w, 3.0), (t, 0.0)]),  # the SDK source's REQUESTS_WAITING
        "process_cpu_seconds": ("counter", [(w, lambda i: 0.5 * STEP * i), (t, lambda i: 0.25 * STEP * i)]),
    }
    # canonical per-class series, as the source catalogue's and the training rules would record them
    for wc in ("embed-online", "finetune-batch"):
        for name, value in CANONICAL.items():
            labels = {"workload_class": wc, "fixture": "canonical"}
            fam.setdefault(name, ("gauge", []))[1].append((labels, value))
    for labels in (w, t):
        for le, per_step in (("0.1", 20.0), ("0.5", 60.0), ("1.0", 80.0), ("+Inf", 80.0)):
            fam["obsctl_queue_wait_seconds"][1].append(({**labels, "le": le}, lambda i, n=per_step: n * i))
    for name, (kind, series) in fam.items():  # the workload's replicas: one copy per track, scaled by its share
        fam[name] = (kind, [(({**lbl, "track": tr}, _scaled(v, share)) if lbl.get("job") == w["job"] else (lbl, v))
                            for lbl, v in series for tr, share in (TRACKS.items() if lbl.get("job") == w["job"] else [("", 1)])])
    gauge = lambda name: fam.setdefault(name, ("gauge", []))[1]
    for labels, wc, util in gpus:
        gl = {**ex, **labels}
        gauge("obsctl_gpu_utilization_ratio").append((gl, util))
        gauge("obsctl_gpu_memory_used_bytes").append((gl, 40e9))
        gauge("obsctl_gpu_memory_total_bytes").append((gl, 80e9))
        gauge("obsctl_gpu_power_watts").append((gl, 300.0))
        gauge("obsctl_gpu_temperature_celsius").append((gl, 60.0))
        gauge("obsctl_gpu_up").append((gl, 1.0))
        gauge("obsctl_gpu_info").append(({**gl, "model": "NVIDIA H100 80GB HBM3"}, 1.0))
        if wc:
            gauge("obsctl_gpu_attribution_info").append(({**gl, "workload_class": wc, "owner": "team"}, 1.0))
        fam.setdefault("obsctl_gpu_energy_joules", ("counter", []))[1].append((gl, lambda i: 300.0 * STEP * i))
        # Health of a healthy GPU: no uncorrected errors, no pending or failed remap, every
        # NVLink up; a few corrected errors and PCIe replays, and sw_power_cap (normal under load).
        counter = lambda name: fam.setdefault(name, ("counter", []))[1]
        counter("obsctl_gpu_ecc_errors").extend([({**gl, "error_type": "corrected"}, lambda i: float(i // 60)),
                                                       ({**gl, "error_type": "uncorrected"}, 0.0)])
        counter("obsctl_gpu_pcie_replays").append((gl, lambda i: float(i // 30)))
        gauge("obsctl_gpu_remapped_rows").extend([({**gl, "cause": "correctable"}, 0.0), ({**gl, "cause": "uncorrectable"}, 0.0)])
        gauge("obsctl_gpu_remapped_rows_pending").append((gl, 0.0))
        gauge("obsctl_gpu_remapped_rows_failed").append((gl, 0.0))
        gauge("obsctl_gpu_clock_event_reason_active").extend([({**gl, "reason": r}, 1.0 if r == "sw_power_cap" else 0.0)
                                                              for r in ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                                                                        "hw_thermal_slowdown", "hw_power_brake_slowdown")])
        gauge("obsctl_gpu_nvlink_link_up").extend([({**gl, "link": str(k)}, 1.0) for k in range(2)])
    return fam


def _scaled(value, share: float):
    return (lambda i: share * value(i)) if callable(value) else share * value


def _sample_name(name: str, kind: str) -> str:
    return name + {"counter": "_total", "histogram": "_bucket"}.get(kind, "")


def openmetrics(start: float, points: int) -> str:
    """The fixture as OpenMetrics text with timestamps: ``points`` samples from ``start``."""
    lines = []
    for name, (kind, series) in sorted(families().items()):
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in series:
            selector = promtool.series(_sample_name(name, kind), labels)
            for i in range(points):
                v = value(i) if callable(value) else value
                lines.append(f"{selector} {v} {start + STEP * i:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def input_series(points: int) -> list[tuple[str, str]]:
    """The fixture as promtool input series (one sample per :data:`STEP` seconds)."""
    return [(promtool.series(_sample_name(name, kind), labels), promtool.values(value, points))
            for name, (kind, series) in sorted(families().items()) for labels, value in series]


def baselines(spec) -> list[Baseline]:
    """One baseline of mean 1.0 per class x signal (the verification panels divide by it)."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [Baseline(
        id=f"{c.name}.{s.name}.20260101T000000Z", workload_class=c.name, signal=s.name, unit=s.unit, direction=s.direction,
        query="q", window=Window(start=start, end=start + dt.timedelta(hours=1), step_seconds=15),
        population=Population(series_count=1),
        stats=Statistics(sample_count=240, mean=1.0, median=1.0, p5=1.0, p95=1.0, stddev=0.0, batch_means=[1.0] * 10),
        created_at=start + dt.timedelta(hours=2)) for c in spec.workload_classes for s in spec.signals]


def example_spec():
    return load_spec(builder.EXAMPLE_SPEC)


def write_rules(out, spec) -> list:
    """The rules generated from ``spec`` with :func:`baselines`, written under ``out``; their paths."""
    files, _ = gen.generate(spec, baselines(spec))
    return gen.write(out, files)


def verification_spec(spec):
    """The example spec with embed-online judged as a canary (track) and finetune-batch against a control."""
    from obsctl.spec import ClassComparison, Comparison, Variant

    classes = {"embed-online": ClassComparison(design="canary", variant=Variant(**VARIANT, traffic_share=TRACKS["canary"])),
               "finetune-batch": ClassComparison(design="control", control="embed-online")}
    return spec.model_copy(update={"comparison": Comparison(classes=classes)})


def substitute(expr: str, **overrides: str) -> str:
    """``expr`` with Grafana's variables replaced by :data:`VARIABLES` (``overrides`` by
    name without the ``$``, e.g. ``__interval="1s"``)."""
    for var, value in (VARIABLES | {f"${k}": v for k, v in overrides.items()}).items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr
