"""The saturation state in Python: each scenario of :mod:`support.saturation_scenarios` gives
the state it was designed for (tests/promtool/test_saturation_rules.py checks that the
generated rules give the same), absent inputs, thresholds and their spec errors."""

from __future__ import annotations

import math

import pytest
import yaml

from obsctl.errors import SpecError
from obsctl.rules import saturation as S
from obsctl.rules.generate import generate
from support.rules_fixtures import write_spec
from support.saturation_scenarios import SCENARIOS, python_state, scenario_spec


def test_each_scenario_means_its_state(tmp_path):
    spec = scenario_spec(tmp_path)
    assert {n: python_state(spec, n) for n in SCENARIOS} == {n: s[-1] for n, s in SCENARIOS.items()}
    assert set(s[-1] for s in SCENARIOS.values()) == set(S.STATES)


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
    spec = scenario_spec(tmp_path)
    assert S.Thresholds.for_class(spec, "strict").busy_ratio == 0.95
    assert S.Thresholds.for_class(spec, "sat-gpu") == S.Thresholds(queue_wait_seconds=1.0)
    bad = spec.model_copy(update={"saturation": spec.saturation.model_copy(update={"idle_ratio": 0.9})})
    with pytest.raises(SpecError, match="idle_ratio"):
        S.Thresholds.for_class(bad, "sat-gpu")


def test_unknown_class_in_saturation_block(tmp_path):
    data = yaml.safe_load((scenario_spec(tmp_path).path).read_text())
    data["saturation"]["classes"]["nope"] = {"busy_ratio": 0.5}
    with pytest.raises(SpecError, match="saturation.classes.nope"):
        write_spec(tmp_path, data)


def test_spec_rejects_idle_above_busy(tmp_path):
    data = yaml.safe_load((scenario_spec(tmp_path).path).read_text())
    data["saturation"]["classes"]["strict"]["idle_ratio"] = 0.96  # its busy_ratio is 0.95
    with pytest.raises(SpecError, match=r"saturation.classes.strict: idle_ratio \(0.96\) must be below busy_ratio"):
        write_spec(tmp_path, data)


def test_idle_above_the_default_busy_names_the_spec_line(tmp_path):
    """idle_ratio 0.9 against the built-in busy_ratio 0.8 passes the spec (no busy_ratio
    given) and is caught when the rules are made: one line with the file and line."""

    data = yaml.safe_load((scenario_spec(tmp_path).path).read_text())
    data["saturation"] = {"classes": {"strict": {"idle_ratio": 0.9}}}
    spec = write_spec(tmp_path, data)
    line = next(i for i, text in enumerate(spec.path.read_text().splitlines(), 1) if text.strip().startswith("strict:"))
    with pytest.raises(SpecError) as info:
        generate(spec, [])
    message = str(info.value)
    assert message.startswith(f"{spec.path}:{line}: saturation for class 'strict': idle_ratio (0.9) must be below busy_ratio (0.8")
    assert "\n" not in message


def test_the_engines_own_busy_fraction_comes_after_the_gpu_and_before_the_cpu():
    assert S.busy_fraction(engine_busy=1.0, cpu_busy=0.1, cpus_allocated=1.0) == 1.0
    assert S.busy_fraction(gpu_busy=0.5, gpus_allocated=1.0, engine_busy=1.0) == 0.5
    assert S.busy_fraction(engine_busy=math.nan, cpu_busy=0.25, cpus_allocated=1.0) == 0.25
    # a closed loop: requests wait for the engine's capacity on every sample -> saturated
    states = S.classify_inputs({"engine_busy": [1.0] * 4, "waiting": [5.0] * 4})
    assert states == ["saturated"] * 4
    # waiting for something else while the KV cache is a quarter full -> constrained
    assert S.classify_inputs({"engine_busy": [0.25], "waiting": [3.0]}) == ["constrained"]
