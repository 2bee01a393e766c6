"""``ObsctlSignalRegression`` through ``promtool test rules`` at fixed times: it fires past
the baseline's own spread, its tolerance and its floor, and never on a demand-bound dip.

One spec, one class per scenario, two signals read from plain gauges (so every value is
set here): ``tokens_per_second`` (throughput, higher is better, tolerance 10 %, ``alert_for``
5m) and ``kv_cache_usage`` (a ``ratio``, lower is better, tolerance 10 %). Baselines:
tokens mean 100, p5 80, p95 115 (a noisy signal); KV cache mean 0.001 (0.1 %), p5 0.0008,
p95 0.0012. The thresholds are computed here from those numbers (not by the module):
tokens ``min(80, 100 x 0.9, 100 - 0) = 80``; KV cache ``max(0.0012, 0.001 x 1.1, 0.001 + 0.02) = 0.021``.

=========== ======================= ======================================= ==============
class       tokens/s, KV cache      saturation (support.saturation_scenarios) fires
=========== ======================= ======================================= ==============
dip         85 (-15 %), 0.001       unknown                                  nothing: inside the spread
drop        100, then 70 from 4m    unknown                                  tokens, from 9m (for: 5m)
kvblip      100, 0.002 (0.1->0.2 %) unknown                                  nothing: under the floor
kvreal      100, 0.05 (5 %)         unknown                                  KV cache
ok-gpu      70, 0.001               healthy (inference)                      nothing: demand-bound
sat-gpu     70, 0.001               saturated (inference)                    tokens
train       70, 0.001               healthy, but a training class            tokens
=========== ======================= ======================================= ==============
"""

from __future__ import annotations

import yaml

from obsctl.records import Statistics
from obsctl.rules import generate as gen
from obsctl.rules.loop_series import REGRESSION_THRESHOLD
from support.promtool import evaluate
from support.rules_fixtures import baseline, write_spec
from support.saturation_scenarios import N, input_series

STEP = 15
TOK = {"mean": 100.0, "p5": 80.0, "p95": 115.0}
KV = {"mean": 0.001, "p5": 0.0008, "p95": 0.0012}
CLASSES = {  # name: (kind, tokens/s as promtool values, KV cache, saturation scenario or None)
    "dip": ("inference", f"85x{N}", f"0.001x{N}", None),
    "drop": ("inference", f"100x15 70x{N - 16}", f"0.001x{N}", None),
    "kvblip": ("inference", f"100x{N}", f"0.002x{N}", None),
    "kvreal": ("inference", f"100x{N}", f"0.05x{N}", None),
    "ok-gpu": ("inference", f"70x{N}", f"0.001x{N}", "ok-gpu"),
    "sat-gpu": ("inference", f"70x{N}", f"0.001x{N}", "sat-gpu"),
    "train": ("training", f"70x{N}", f"0.001x{N}", "train"),
}
FIRING = 'ALERTS{alertname="ObsctlSignalRegression",alertstate="firing"}'


def _spec(tmp_path):
    classes = [{"name": n, "kind": kind, "selector": {"job": "w", "workload": n}, "node_selector": {"job": "x"}}
               for n, (kind, *_) in CLASSES.items()]
    signals = [
        {"name": "tokens_per_second", "category": "throughput", "query": "sum(tok{$selector})", "unit": "tokens/s",
         "direction": "higher_is_better", "tolerance_ratio": 0.1, "alert_for": "5m"},
        {"name": "kv_cache_usage", "category": "saturation", "query": "avg(kv{$selector})", "unit": "ratio",
         "direction": "lower_is_better", "tolerance_ratio": 0.1, "alert_for": "5m"},
    ]
    return write_spec(tmp_path, {"store": "s", "workload_classes": classes, "signals": signals,
                                 "saturation": {"queue_wait_seconds": 1.0}})


def _baseline(cls: str, signal: str, stats: dict):
    b = baseline(cls, signal, stats["mean"])
    return b.model_copy(update={"stats": Statistics(sample_count=240, median=stats["mean"], stddev=0.0,
                                                    batch_means=[stats["mean"]] * 10, **stats)})


def _inputs() -> list[tuple[str, str]]:
    out = []
    for name, (_, tok, kv, scenario) in CLASSES.items():
        out += [(f'tok{{job="w",workload="{name}"}}', tok), (f'kv{{job="w",workload="{name}"}}', kv)]
        out += [(s["series"], s["values"]) for s in (input_series(scenario) if scenario else [])]
    return out


def _run(tmp_path, at: str, tok: dict = TOK, kv: dict = KV) -> dict:
    spec = _spec(tmp_path)
    baselines = [_baseline(c, "tokens_per_second", tok) for c in CLASSES] + [_baseline(c, "kv_cache_usage", kv) for c in CLASSES]
    files, warnings = gen.generate(spec, baselines)
    assert warnings == []
    paths = gen.write(tmp_path / "rules", files)
    return evaluate(tmp_path / at, paths, _inputs(), {"firing": FIRING, "threshold": REGRESSION_THRESHOLD}, at)


def _firing(got: dict) -> list[tuple[str, str]]:
    return sorted((s["workload_class"], s["signal"]) for s, _ in got["firing"])


def test_thresholds_are_the_farthest_of_spread_tolerance_and_floor(tmp_path):
    got = _run(tmp_path, "1m")
    thresholds = {(s["workload_class"], s["signal"]): v for s, v in got["threshold"]}
    assert len(thresholds) == 2 * len(CLASSES)
    assert {thresholds[(c, "tokens_per_second")] for c in CLASSES} == {min(80.0, 100.0 * (1 - 0.1), 100.0)}
    assert {thresholds[(c, "kv_cache_usage")] for c in CLASSES} == {max(0.0012, 0.001 * (1 + 0.1), 0.001 + 0.02)}


def test_fires_on_real_regressions_only(tmp_path):
    # At 10 min: drop has been at 70 for 6 min (for: 5m), the others for 10 min.
    assert _firing(_run(tmp_path, "10m")) == [
        ("drop", "tokens_per_second"),  # 70 < 80: past the spread
        ("kvreal", "kv_cache_usage"),  # 0.05 > 0.021: past the floor
        ("sat-gpu", "tokens_per_second"),  # saturated: the dip is the class's capacity
        ("train", "tokens_per_second"),  # a training job pulls its work: never only demand
    ]


def test_holds_for_its_for_duration(tmp_path):
    # drop falls at 4m: pending, not firing, until 9m.
    assert ("drop", "tokens_per_second") not in _firing(_run(tmp_path, "8m45s"))
    assert ("drop", "tokens_per_second") in _firing(_run(tmp_path, "9m15s"))


def test_without_spread_and_floor_the_same_data_fire(tmp_path):
    """The harness can fail: a baseline with no spread (p5 = p95 = mean) and a KV-cache
    signal with a zero floor make the dip (-15 %, past the 10 % tolerance) and the blip
    (+100 %) fire, as the mean x (1 -+ tolerance) rule did."""
    raw = yaml.safe_load(_spec(tmp_path).path.read_text())
    raw["signals"][1]["alert_floor"] = 0
    flat_tok = {"mean": 100.0, "p5": 100.0, "p95": 100.0}
    flat_kv = {"mean": 0.001, "p5": 0.001, "p95": 0.001}
    baselines = [_baseline(c, "tokens_per_second", flat_tok) for c in CLASSES] + [_baseline(c, "kv_cache_usage", flat_kv) for c in CLASSES]
    files, _ = gen.generate(write_spec(tmp_path, raw), baselines)
    paths = gen.write(tmp_path / "rules", files)
    firing = _firing(evaluate(tmp_path / "flat", paths, _inputs(), {"firing": FIRING, "threshold": REGRESSION_THRESHOLD}, "10m"))
    assert ("dip", "tokens_per_second") in firing and ("kvblip", "kv_cache_usage") in firing
    assert ("ok-gpu", "tokens_per_second") not in firing  # still demand-bound
