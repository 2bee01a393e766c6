"""A seeded, smaller run of the transition calibration (bench/bench_transitions.py): a +40 %
change rolled out with restarts through a recording rule, judged through ``verdict.decide``;
and Prometheus' rate as the benchmark computes it, against hand-computed answers."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "bench_transitions.py"
_spec = importlib.util.spec_from_file_location("bench_transitions", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up while the class is built
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def spec():
    with tempfile.TemporaryDirectory() as tmp:
        return bench.spec_for(Path(tmp))


def test_prometheus_rate_known_answers():
    ts = np.arange(0.0, 601.0, 15.0)
    vs = 10.0 * ts  # 10/s
    # at 300: samples 15..300 (20), 285 s sampled, 15 s to the range's start (< 1.1 x 15: extrapolated), 0 to its end
    assert bench.prom_rate(ts, vs, np.array([300.0]), 300.0)[0] == pytest.approx(2850.0 * 300.0 / 285.0 / 300.0)
    # a reset at 450 (the counter starts again from 0): the value before it is added back, the rate stays 10/s
    reset = np.where(ts >= 450.0, 10.0 * (ts - 450.0), vs)
    assert bench.prom_rate(ts, reset, np.array([600.0]), 300.0)[0] == pytest.approx(
        (10.0 * (600.0 - 450.0) + 10.0 * 435.0 - 10.0 * 315.0) * 300.0 / 285.0 / 300.0)
    assert np.isnan(bench.prom_rate(ts, vs, np.array([10.0]), 300.0)[0])  # fewer than 2 samples


def test_a_change_rolled_out_with_restarts_is_found_and_its_size_right(spec):
    rng = np.random.default_rng(7301)
    fleet = bench.Fleet(additive=True)
    rows = [bench.replicate(spec, rng, fleet, 0.40, 4.0, True) for _ in range(24)]
    final = [r[-1] for r in rows]
    found = sum(v == "IMPROVED" for v, *_ in final)
    assert found >= 17  # the benchmark: 97/100 (Wilson low 91.5 %)
    assert abs(np.mean([c for _, c, *_ in final if c is not None]) - 0.40) < 0.02
    assert all(r[4] == 540.0 for r in final)  # the last restart (210 s + 20 s down, seen at 240 s) + the 5m range
    assert not any(v == "REGRESSED" for r in rows for v, *_ in r)


def test_untrimmed_the_ramp_leaves_no_interval(spec):
    rng = np.random.default_rng(7302)
    rows = [bench.replicate(spec, rng, bench.Fleet(additive=True), 0.40, 4.0, False) for _ in range(6)]
    assert not any(v == "IMPROVED" for r in rows for v, *_ in r)
