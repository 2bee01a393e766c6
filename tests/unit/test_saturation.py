"""The saturation state: each state from synthetic series with known answers, computed two
ways that must agree: the pure-Python :func:`classify` over the raw input values, and the
generated recording rules evaluated by ``promtool test rules`` over the same series.

Every scenario is designed for one state (``want``); the test checks that Python gives that
state from the inputs (so the scenario means what it says) and that PromQL gives the state
Python computes, 1 for it and 0 for the other three.
"""

from __future__ import annotations

import math

import pytest
import yaml

from obsctl.errors import SpecError
from obsctl.rules import canonical as C
from obsctl.rules import promtool
from obsctl.rules import saturation as S
from obsctl.rules.generate import generate
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


def _spec(tmp_path):
    classes = [{"name": n, "kind": "inference", "selector": {"job": "w", "workload": n}, "node_selector": {"job": "x"}}
               for n in SCENARIOS]
    sig = {"name": "tokens", "category": "throughput", "query": "sum(rate(t{$selector}[1m]))", "unit": "t/s",
           "direction": "higher_is_better"}
    return write_spec(tmp_path, {"store": "s", "workload_classes": classes, "signals": [sig],
                                 "saturation": {"queue_wait_seconds": 1.0, "classes": OVERRIDES}})


def _series(name: str) -> list[dict]:
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


def _python_state(spec, name: str) -> str | None:
    gpus, cpus, waiting, wait, rejected, _ = SCENARIOS[name]
    th = S.Thresholds.for_class(spec, name)
    busy = S.busy_fraction(sum(gpus) if gpus else None, len(gpus) if gpus else None,
                           sum(cpus) if cpus else None, (th.cpu_cores or len(cpus)) if cpus else None)
    return S.classify(busy, waiting, wait, rejected, th)


def test_each_scenario_means_its_state(tmp_path):
    spec = _spec(tmp_path)
    assert {n: _python_state(spec, n) for n in SCENARIOS} == {n: s[-1] for n, s in SCENARIOS.items()}
    assert set(s[-1] for s in SCENARIOS.values()) == set(S.STATES)


@pytest.mark.integration
def test_rules_agree_with_python(tmp_path):
    spec = _spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    for fname, text in files.items():
        (tmp_path / "rules" / fname).write_text(text)
    tests = []
    for name in SCENARIOS:
        state = _python_state(spec, name)
        exp = [{"labels": f'{C.SATURATION_STATE}{{state="{s}",workload_class="{name}"}}', "value": 1 if s == state else 0}
               for s in S.STATES]
        tests.append({"interval": f"{STEP}s", "input_series": _series(name), "promql_expr_test": [
            {"expr": f'{C.SATURATION_STATE}{{workload_class="{name}"}}', "eval_time": EVAL, "exp_samples": exp}]})
    suite = tmp_path / "sat_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted((tmp_path / "rules").iterdir())],
                                     "evaluation_interval": f"{STEP}s", "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
def test_busy_ratio_rule_known_answer(tmp_path):
    """BUSY_RATIO for a CPU class with cpu_cores 4: 2 x 0.9 cores/s / 4 = 0.45; the harness fails on 0.9."""
    spec = _spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    for fname, text in files.items():
        (tmp_path / "rules" / fname).write_text(text)

    def run(value: float):
        test = {"interval": f"{STEP}s", "input_series": _series("con-cpu"), "promql_expr_test": [
            {"expr": f'{C.BUSY_RATIO}{{workload_class="con-cpu"}}', "eval_time": EVAL,
             "exp_samples": [{"labels": f'{C.BUSY_RATIO}{{workload_class="con-cpu"}}', "value": value}]}]}
        suite = tmp_path / "busy_test.yaml"
        suite.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted((tmp_path / "rules").iterdir())],
                                         "evaluation_interval": f"{STEP}s", "tests": [test]}))
        return promtool.test_rules([suite]).returncode

    assert run(2 * 0.9 / 4) == 0
    assert run(0.9) != 0


def test_classify_absent_inputs():
    assert S.classify(None, waiting=10) is None
    assert S.classify(math.nan, waiting=10) is None
    assert S.classify(0.99) == "healthy"  # no queue signal at all
    assert S.classify(0.99, waiting=math.nan, queue_wait_p95=None) == "healthy"
    assert S.busy_fraction(gpu_busy=1.0, gpus_allocated=None, cpu_busy=0.5, cpus_allocated=1) == 0.5
    assert S.busy_fraction() is None


def test_classify_inputs_over_a_period():
    states = S.classify_inputs({"gpu_busy": [1.8, 1.8, 0.0, None], "gpus_allocated": [2, 2, 2, 2],
                                "waiting": [4, 0, 0, 0]})
    assert states == ["saturated", "healthy", "idle", None]
    shares = S.state_shares(states)
    assert shares["saturated"] == pytest.approx(1 / 3) and shares["constrained"] == 0
    assert S.dominant_state(states) == "saturated"  # tie broken in STATES order
    assert S.dominant_state([None, None]) is None
    with pytest.raises(ValueError, match="aligned"):
        S.classify_inputs({"gpu_busy": [1.0], "gpus_allocated": [1, 1]})
    with pytest.raises(ValueError, match="unknown"):
        S.classify_inputs({"busy": [1.0]})


def test_thresholds_layering_and_errors(tmp_path):
    spec = _spec(tmp_path)
    assert S.Thresholds.for_class(spec, "strict").busy_ratio == 0.95
    assert S.Thresholds.for_class(spec, "sat-gpu") == S.Thresholds(queue_wait_seconds=1.0)
    bad = spec.model_copy(update={"saturation": spec.saturation.model_copy(update={"idle_ratio": 0.9})})
    with pytest.raises(SpecError, match="idle_ratio"):
        S.Thresholds.for_class(bad, "sat-gpu")


def test_unknown_class_in_saturation_block(tmp_path):
    data = yaml.safe_load((_spec(tmp_path).path).read_text())
    data["saturation"]["classes"]["nope"] = {"busy_ratio": 0.5}
    with pytest.raises(SpecError, match="saturation.classes.nope"):
        write_spec(tmp_path, data)


@pytest.mark.integration
def test_mig_instances_join_their_own_utilization(tmp_path):
    """A class attributed two MIG instances: busy = mean of those instances' utilization; the
    whole GPU's series (no gpu_instance) must not join."""
    spec = _spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "sat.yaml").write_text(files["obsctl-saturation.rules.yaml"])
    mig = {"1": 0.75, "2": 0.5}
    base = 'job="x",instance="n1",gpu="0",uuid="GPU-M"'
    series = [{"series": f"obsctl_gpu_utilization_ratio{{{base}}}", "values": f"0.0625x{N}"}]
    for gi, util in mig.items():
        series.append({"series": f'obsctl_gpu_utilization_ratio{{{base},gpu_instance="{gi}"}}', "values": f"{util}x{N}"})
        series.append({"series": f'obsctl_gpu_attribution_info{{{base},gpu_instance="{gi}",workload_class="ok-gpu",owner="o"}}',
                       "values": f"1x{N}"})
    own = 'workload_class="ok-gpu"'
    checks = {C.GPU_BUSY: sum(mig.values()), C.GPUS_ALLOCATED: len(mig), C.BUSY_RATIO: sum(mig.values()) / len(mig)}
    tests = [{"interval": f"{STEP}s", "input_series": series, "promql_expr_test": [
        {"expr": f"{name}{{{own}}}", "eval_time": EVAL, "exp_samples": [{"labels": f"{name}{{{own}}}", "value": v}]}
        for name, v in checks.items()]}]
    suite = tmp_path / "mig_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(tmp_path / "rules" / "sat.yaml")], "evaluation_interval": f"{STEP}s",
                                     "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr


def test_spec_rejects_idle_above_busy(tmp_path):
    data = yaml.safe_load((_spec(tmp_path).path).read_text())
    data["saturation"]["classes"]["strict"]["idle_ratio"] = 0.96  # its busy_ratio is 0.95
    with pytest.raises(SpecError, match=r"saturation.classes.strict: idle_ratio \(0.96\) must be below busy_ratio"):
        write_spec(tmp_path, data)


def test_idle_above_the_default_busy_names_the_spec_line(tmp_path):
    """idle_ratio 0.9 against the built-in busy_ratio 0.8 passes the spec (no busy_ratio
    given) and is caught when the rules are made: one line with the file and line."""
    from obsctl.rules.generate import generate

    data = yaml.safe_load((_spec(tmp_path).path).read_text())
    data["saturation"] = {"classes": {"strict": {"idle_ratio": 0.9}}}
    spec = write_spec(tmp_path, data)
    line = next(i for i, text in enumerate(spec.path.read_text().splitlines(), 1) if text.strip().startswith("strict:"))
    with pytest.raises(SpecError) as info:
        generate(spec, [])
    message = str(info.value)
    assert message.startswith(f"{spec.path}:{line}: saturation for class 'strict': idle_ratio (0.9) must be below busy_ratio (0.8")
    assert "\n" not in message
