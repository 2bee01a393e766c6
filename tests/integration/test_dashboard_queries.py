"""Every dashboard query runs against a real Prometheus holding fixture data.

History (30 minutes up to now, every 15 s) for examples/obsctl.yaml's classes and the
canonical GPU metrics is backfilled with ``promtool tsdb create-blocks-from openmetrics``;
the rules generated from the spec and one baseline per class x signal are loaded, so
the recording-rule based panels have data. Grafana's variables are substituted as Grafana
would ($__rate_interval, $instance = All).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
import requests
from obsctl.baselining.models import Baseline, Population, Statistics, Window
from obsctl.dashboards import build as builder
from obsctl.rules import canonical as C
from obsctl.rules import generate as gen
from obsctl.rules.cost import run_cost_usd_query

from obsctl.spec import load_spec
from obsctl.stack import Prometheus, create_blocks_from_openmetrics

pytestmark = pytest.mark.integration

STEP, POINTS = 15, 120
#: Canonical series held as fixture values for both classes: those the SDK source cannot fill from
#: this fixture's raw series (tokens, requests, samples and queue wait it records from them).
CANONICAL = {C.INPUT_TOKENS: 1800.0, C.OUTPUT_TOKENS: 600.0, C.STEPS: 2.0, C.TTFT_P50: 0.08, C.TTFT_P95: 0.2, C.ITL_P95: 0.03, C.E2E_P95: 1.5,
             C.STEP_TIME: 0.5, C.REQUESTS_RUNNING: 8.0, C.KV_CACHE_USAGE: 0.7,
             C.PREEMPTIONS: 0.1, C.MFU: 0.42}
VARIABLES = {"$__rate_interval": "1m", "$__interval_ms": "15000", "$__interval": "15s", "$__range": "30m", "$instance": ".*",
             "$workload_class": ".*", "$control_class": "finetune-batch", "$signal": "tokens_per_second"}
#: embed-online runs as canary replicas: its workload series split by ``track`` (sums unchanged).
TRACKS = {"stable": 0.75, "canary": 0.25}
VARIANT = {"label": "track", "control": "stable", "treatment": "canary"}
#: Panels whose query is correctly empty on healthy fixture data.
MAY_BE_EMPTY = {"Failing exporter collectors", "Firing obsctl alerts"}


def _families(now: float) -> dict[str, tuple[str, list[tuple[dict, object]]]]:
    """{family: (type, [(labels, value or callable(i) -> value)])} of the fixture."""
    w = {"job": "obsctl-workload", "workload": "embed-online"}
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
    return fam


def _scaled(value, share: float):
    return (lambda i: share * value(i)) if callable(value) else share * value


def _verification_spec(spec):
    """The example spec with embed-online judged as a canary (track) and finetune-batch against a control."""
    from obsctl.spec import ClassComparison, Comparison, Variant

    classes = {"embed-online": ClassComparison(design="canary", variant=Variant(**VARIANT, traffic_share=TRACKS["canary"])),
               "finetune-batch": ClassComparison(design="control", control="embed-online")}
    return spec.model_copy(update={"comparison": Comparison(classes=classes)})


def write_openmetrics(path: Path, now: float) -> None:
    """The fixture as OpenMetrics text with timestamps (seconds), ending ``now``."""
    start = now - STEP * (POINTS - 1)
    lines = []
    for name, (kind, series) in sorted(_families(now).items()):
        lines.append(f"# TYPE {name} {kind}")
        suffix = {"counter": "_total", "histogram": "_bucket"}.get(kind, "")
        for labels, value in series:
            lbl = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            for i in range(POINTS):
                v = value(i) if callable(value) else value
                lines.append(f"{name}{suffix}{{{lbl}}} {v} {start + STEP * i:.3f}")
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


def _baselines(spec) -> list[Baseline]:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [Baseline(
        id=f"{c.name}.{s.name}.20260101T000000Z", workload_class=c.name, signal=s.name, unit=s.unit, direction=s.direction,
        query="q", window=Window(start=start, end=start + dt.timedelta(hours=1), step_seconds=15),
        population=Population(series_count=1),
        stats=Statistics(sample_count=240, mean=1.0, median=1.0, p5=1.0, p95=1.0, stddev=0.0, batch_means=[1.0] * 10),
        created_at=start + dt.timedelta(hours=2)) for c in spec.workload_classes for s in spec.signals]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashq")
    spec = load_spec(builder.EXAMPLE_SPEC)
    files, _ = gen.generate(spec, _baselines(spec))
    rule_paths = gen.write(tmp / "rules", files)
    now = time.time() - 1
    write_openmetrics(tmp / "history.om", now)
    create_blocks_from_openmetrics(tmp / "history.om", tmp / "data")
    prom = Prometheus(tmp / "prom", rule_files=rule_paths, data_dir=tmp / "data", evaluation_interval="1s")
    try:
        prom.start()
        _wait_for(prom.url, "workload_class:obsctl_signal_target_gap:ratio")
        ready = time.time()  # rates over the backfilled history are exact only this close to its end
        _wait_for(prom.url, _substitute(run_cost_usd_query("$__range", "$__interval", "$__interval_ms / 1000")))
        yield prom, spec, ready
    finally:
        prom.stop()


def _wait_for(url: str, expr: str, timeout: float = 30) -> None:
    """Wait until the rule groups have evaluated once (readiness, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _run(url, expr, instant=True)["data"]["result"]:
            return
        time.sleep(0.5)
    raise AssertionError(f"{expr} never returned data; rules not evaluated")


def _run(url: str, expr: str, instant: bool, at: float | None = None) -> dict:
    now = at or time.time()
    if instant:
        resp = requests.get(f"{url}/api/v1/query", params={"query": expr, "time": now}, timeout=10)
    else:
        resp = requests.get(f"{url}/api/v1/query_range",
                            params={"query": expr, "start": now - 1800, "end": now, "step": STEP}, timeout=10)
    body = resp.json()
    assert resp.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
    return body


def _substitute(expr: str) -> str:
    for var, value in VARIABLES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


@pytest.mark.parametrize("name", ["obsctl-loop-overview.json", "obsctl-gpu-fleet.json", "obsctl-inference.json",
                                  "obsctl-training.json", "obsctl-cost.json", "obsctl-verification.json"])
def test_every_panel_query_runs_and_returns_data(prometheus, name):
    prom, spec, _ = prometheus
    dash = json.loads(builder.build(spec)[name])
    empty = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            body = _run(prom.url, _substitute(target["expr"]), target["instant"])
            if not body["data"]["result"] and panel["title"] not in MAY_BE_EMPTY:
                empty.append(f"{panel['title']} / {target['refId']}: {target['expr']}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


@pytest.mark.parametrize("signal", ["tokens_per_second", "usd_per_million_tokens", "gpu_utilization",
                                    "queue_wait_p95_seconds", "request_error_ratio"])
def test_verification_dashboard_queries_return_data(prometheus, signal):
    """Every panel of the verification dashboard, for each primary signal, with a canary row (embed-online) and
    finetune-batch as $control_class."""
    prom, spec, _ = prometheus
    dash = json.loads(builder.build(_verification_spec(spec))["obsctl-verification.json"])
    assert any(p["title"].startswith("embed-online: canary track=canary") for p in dash["panels"])
    empty = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            expr = _substitute(target["expr"].replace("$signal", signal))
            if not _run(prom.url, expr, target["instant"])["data"]["result"]:
                empty.append(f"{panel['title']} / {target['refId']}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_verification_dashboard_effects_match_fixture(prometheus):
    """Known answers of the design panels: the canary's T/C - 1 is the tracks' token shares' ratio - 1, and
    the control-adjusted change (T/T_b)/(C/C_b) - 1 the classes' token rates' ratio (baselines are 1.0)."""
    prom, spec, ready = prometheus
    dash = json.loads(builder.build(_verification_spec(spec))["obsctl-verification.json"])
    fam = _families(ready)
    rate = {(lbl["workload"], lbl.get("track")): v(1) / STEP for lbl, v in fam["obsctl_tokens"][1]}
    value = lambda expr: float(_run(prom.url, _substitute(expr), True, ready)["data"]["result"][0]["value"][1])
    canary = next(p for p in dash["panels"] if p["title"] == "tokens_per_second: treatment / control - 1")
    want = rate["embed-online", "canary"] / rate["embed-online", "stable"] - 1
    assert value(canary["targets"][0]["expr"]) == pytest.approx(want)
    adjusted = next(p for p in dash["panels"] if p["title"] == "Control's own movement and control-adjusted change")
    expr = adjusted["targets"][1]["expr"].replace('workload_class=~"$workload_class"', 'workload_class="embed-online"')
    treated = rate["embed-online", "canary"] + rate["embed-online", "stable"]
    assert value(expr) == pytest.approx(treated / rate["finetune-batch", None] - 1)
    assert value(adjusted["targets"][0]["expr"]) == pytest.approx(rate["finetune-batch", None] - 1)


def test_signal_values_match_fixture(prometheus):
    """Known answers: 2400 tokens/s, 0.40 USD/h / 3600 / 2400 * 1e6 USD per 1M tokens, 5 % errors."""
    prom, _, ready = prometheus
    got = {r["metric"]["signal"]: float(r["value"][1]) for r in _run(
        prom.url, '{__name__=~"workload_class:obsctl_.*",workload_class="embed-online",signal!=""}', True, ready)["data"]["result"]
        if r["metric"]["__name__"] != "workload_class:obsctl_signal_baseline:value"
        and r["metric"]["__name__"].startswith("workload_class:obsctl_") and ":obsctl_signal_" not in r["metric"]["__name__"]}
    assert got["tokens_per_second"] == pytest.approx(2400.0)
    assert got["usd_per_million_tokens"] == pytest.approx(0.40 / 3600 / 2400 * 1e6)
    assert got["request_error_ratio"] == pytest.approx(0.05)
    assert got["gpu_utilization"] == pytest.approx(0.6)
    # buckets per step: 20 <= 0.1, 60 <= 0.5, 80 <= 1; rank 76 in (0.5, 1] holding 20 -> 0.5 + 16/20 * 0.5
    assert got["queue_wait_p95_seconds"] == pytest.approx(0.9)


@pytest.mark.parametrize("raw", [False, True], ids=["recorded-queue", "raw-queue"])
def test_saturation_from_raw_inputs_matches_recorded_state(prometheus, raw):
    """verify's path: the Python classify over the inputs (saturation.inputs; with raw=True the
    queue inputs too come from the server's own metrics) gives the state the rules recorded."""
    from obsctl.rules import saturation as S

    prom, spec, ready = prometheus
    states = {}
    for wc in spec.workload_classes:
        got = _run(prom.url, f'{C.SATURATION_STATE}{{workload_class="{wc.name}"}} == 1', True, ready)["data"]["result"]
        # The inputs at the instant the rule recorded that state (not at `ready`: a queue
        # series that first appeared in between would compare two different moments).
        at = float(got[0]["value"][0]) if got else ready
        values = {}
        for name, expr in S.inputs(spec, wc, raw=raw).items():
            result = _run(prom.url, expr, True, at)["data"]["result"]
            values[name] = [float(result[0]["value"][1])] if result else [None]
        want = S.classify_inputs(values, S.Thresholds.for_class(spec, wc.name))[0]
        assert want is not None and [r["metric"]["state"] for r in got] == [want], (wc.name, values)
        states[wc.name] = want
    # the fixture's design: embed-online queues (3 waiting) on a 0.6-busy GPU, finetune-batch does not queue
    assert states == {"embed-online": "constrained", "finetune-batch": "healthy"}


def test_cost_series_match_fixture(prometheus):
    """Known answers from the fixture: each attributed GPU costs its model's price (H100 4.10 USD/h)."""
    prom, _, ready = prometheus
    fam = _families(ready)
    attributed = [lbl["workload_class"] for lbl, _ in fam["obsctl_gpu_attribution_info"][1]]
    utils = {lbl["uuid"]: v for lbl, v in fam["obsctl_gpu_utilization_ratio"][1]}
    price = fam["obsctl_accelerator_price_usd_per_hour"][1][0][1]
    value = lambda expr: float(_run(prom.url, expr, True, ready)["data"]["result"][0]["value"][1])
    for wc in ("embed-online", "finetune-batch"):
        assert value(f'{C.COST_USD_PER_HOUR}{{workload_class="{wc}"}}') == pytest.approx(price * attributed.count(wc))
    idle = [lbl for lbl, _ in fam["obsctl_gpu_attribution_info"][1] if utils[lbl["uuid"]] < 0.1]
    assert value(f'{C.IDLE_WASTE_USD_PER_HOUR}{{workload_class="finetune-batch"}}') == pytest.approx(price * len(idle))
    unattributed = len(utils) - len(attributed)
    assert value(C.UNATTRIBUTED_WASTE_USD_PER_HOUR) == pytest.approx(price * unattributed)
    tokens = sum(v(1) for lbl, v in fam["obsctl_tokens"][1] if lbl["workload"] == "embed-online") / STEP  # its counter rate
    assert value(f'{C.COST_PER_MILLION_TOKENS}{{workload_class="embed-online"}}') == pytest.approx(price / 3600 / tokens * 1e6)


def test_saturation_and_cost_rules_evaluate_without_errors(prometheus):
    """On real data every saturation and cost rule evaluates (no many-to-many join, no parse error)."""
    prom, _, _ = prometheus
    groups = requests.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    mine = [g for g in groups if g["name"].startswith(("obsctl.saturation.", "obsctl.cost."))]
    assert mine
    bad = [f"{g['name']} {r['name']}: {r.get('lastError')}" for g in mine for r in g["rules"] if r["health"] != "ok"]
    assert not bad, bad
