"""Comparison designs end to end: a real Prometheus with 26 h of backfilled history, the CLI,
and the expected effect of each design computed here from the values written.

History (15 s step, ending 10 minutes before now; ``t_c`` = one hour before the end is
when the change goes live), metric ``obsctl_synthetic_design_tokens_per_second``, every
class multiplied by the same +-30 % daily cycle and small AR(1) noise (0.5 %):

- ``cyc-null``: nothing changes (a before-after against a 24 h baseline meets the cycle);
- ``cyc-gain``: +10 % from ``t_c`` (judged ``seasonal`` against the 24 h baseline);
- ``treated`` / ``ctrl``: the same cycle; ``treated`` +10 % from ``t_c``, ``ctrl`` unchanged
  (judged ``control`` with ``ctrl`` as the control class, 1 h periods);
- ``canary``: two tracks (``track="stable"`` and ``track="canary"``) at the same level until
  ``t_c``, then the canary track +15 % (judged ``canary``).
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import (
    baseline,
    initiative,
    plan,
    report,
    snapshot_baseline,
    verify,
)
from obsctl.baselining.store import Store
from support.prometheus import served_history

STEP = 15
HOUR = 3600
DAY = 86400
METRIC = "obsctl_synthetic_design_tokens_per_second"
GAIN = {"cyc-gain": 0.10, "treated": 0.10}
CANARY_GAIN = 0.15
PRICE = "obsctl_synthetic_price_usd_per_hour"
PRICE_USD_PER_HOUR = 12.0


def _ar1(rng, n, sd=0.005, phi=0.8):
    out, e = np.empty(n), 0.0
    for i in range(n):
        e = phi * e + rng.normal(0.0, sd * math.sqrt(1 - phi * phi))
        out[i] = e
    return out


#: The history ends 10 minutes before this instant (2026-12-01T06:40:00Z).
HISTORY_NOW = 1_796_107_200


class History:
    def __init__(self, now: float):
        self.end = int((now - 600) // STEP * STEP)
        self.t_c = self.end - HOUR
        self.start = self.end - 26 * HOUR
        self.stamps = np.arange(self.start, self.end + 1, STEP)
        rng = np.random.default_rng(20261201)
        cyc = 1 + 0.3 * np.sin(2 * np.pi * self.stamps / DAY)
        after = self.stamps > self.t_c
        self.series: dict[tuple[str, str | None], dict[int, float]] = {}
        for cls in ("cyc-null", "cyc-gain", "treated", "ctrl"):
            level = 800.0 if cls == "ctrl" else 1000.0
            y = level * cyc * np.exp(_ar1(rng, self.stamps.size)) * np.where(after, 1 + GAIN.get(cls, 0.0), 1.0)
            self.series[(cls, None)] = dict(zip(self.stamps.tolist(), np.round(y, 6).tolist(), strict=True))
        for track, gain in (("stable", 0.0), ("canary", CANARY_GAIN)):
            y = 500.0 * cyc * np.exp(_ar1(rng, self.stamps.size)) * np.where(after, 1 + gain, 1.0)
            self.series[("canary", track)] = dict(zip(self.stamps.tolist(), np.round(y, 6).tolist(), strict=True))
        # Demand and mix classes: the last 3 hours only, no cycle.
        self.recent = self.stamps[self.stamps > self.end - 3 * HOUR]
        n, late = self.recent.size, self.recent > self.t_c
        demand = np.where(late, 120.0, 100.0)  # offered load, requests/s: +20 % at t_c
        self.extra: dict[tuple[str, tuple[tuple[str, str], ...]], dict[int, float]] = {}
        put = lambda name, labels, y: self.extra.__setitem__((name, tuple(sorted(labels.items()))),
                                                             dict(zip(self.recent.tolist(), np.round(y, 6).tolist(), strict=True)))
        # unsat: serves everything that arrives (tokens/s = 10 x demand), CPU half busy, no queue.
        put(METRIC, {"job": "designs", "workload": "unsat"}, 10 * demand * np.exp(_ar1(rng, n)))
        put("workload_class:obsctl_requests_offered:rate5m", {"workload_class": "unsat"}, demand)
        put("workload_class:obsctl_requests_waiting:sum", {"workload_class": "unsat"}, np.zeros(n))
        cpu = np.cumsum(np.where(late, 0.6, 0.5) * STEP)  # CPU seconds of one process: 0.5 -> 0.6 busy
        put("process_cpu_seconds_total", {"job": "designs", "workload": "unsat"}, cpu)
        # mixy: tokens per GPU-second of two models (1000 and 500, unchanged); their shares of
        # the requests move 50/50 -> 70/30, so the aggregate rises 13.3 % by the mix alone.
        for model, rate, share in (("a", 1000.0, np.where(late, 0.7, 0.5)), ("b", 500.0, np.where(late, 0.3, 0.5))):
            req = 100.0 * share
            gpu = req / 10.0
            lab = {"job": "designs", "workload": "mixy", "model": model}
            put("obsctl_synthetic_requests_per_second", lab, req)
            put("obsctl_synthetic_gpu_seconds_per_second", lab, gpu)
            put("obsctl_synthetic_model_tokens_per_second", lab, rate * gpu * np.exp(_ar1(rng, n)))
        # A fixed price per hour on unsat (cost per token follows its demand), and sat: saturated
        # throughout (CPU 97 % busy, 6 waiting, 150 req/s offered), +10 % capacity at t_c.
        put(PRICE, {"job": "designs", "workload": "unsat"}, np.full(n, PRICE_USD_PER_HOUR))
        put(PRICE, {"job": "designs", "workload": "sat"}, np.full(n, PRICE_USD_PER_HOUR))
        put(METRIC, {"job": "designs", "workload": "sat"}, 1000.0 * np.where(late, 1.10, 1.0) * np.exp(_ar1(rng, n)))
        put("workload_class:obsctl_requests_offered:rate5m", {"workload_class": "sat"}, np.full(n, 150.0))
        put("workload_class:obsctl_requests_waiting:sum", {"workload_class": "sat"}, np.full(n, 6.0))
        put("process_cpu_seconds_total", {"job": "designs", "workload": "sat"}, np.cumsum(np.full(n, 0.97 * STEP)))
        self.url = ""

    def values(self, cls: str, start: float, end: float, track: str | None = None) -> np.ndarray:
        s = self.series[(cls, track)]
        return np.array([v for t, v in sorted(s.items()) if start < t <= end])

    def values_extra(self, name: str, cls: str, start: float, end: float) -> np.ndarray:
        s = next(v for (n, labels), v in self.extra.items() if n == name and ("workload", cls) in labels)
        return np.array([v for t, v in sorted(s.items()) if start < t <= end])

    def iso(self, ts: float) -> str:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def openmetrics(self) -> str:
        lines = [f"# TYPE {METRIC} gauge", f"# HELP {METRIC} Synthetic throughput for the designs tests."]
        for (cls, track), values in self.series.items():
            labels = f'job="designs",workload="{cls}"' + (f',track="{track}"' if track else "")
            lines += [f"{METRIC}{{{labels}}} {v!r} {t}" for t, v in sorted(values.items())]
        for name in sorted({k[0] for k in self.extra}):
            if name != METRIC:
                kind = "counter" if name.endswith("_total") else "gauge"
                lines += [f"# TYPE {name.removesuffix('_total') if kind == 'counter' else name} {kind}"]
            for (n, labels), values in self.extra.items():
                if n == name:
                    text = ",".join(f'{k}="{v}"' for k, v in labels)
                    lines += [f"{name}{{{text}}} {v!r} {t}" for t, v in sorted(values.items())]
        return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    # A fixed instant, not the wall clock: the daily cycle's phase in the windows (and so the
    # fitted memory and every plan) would otherwise depend on the hour the suite runs.
    h = History(HISTORY_NOW)
    with served_history(tmp_path_factory.mktemp("designs-prometheus"), h.openmetrics()) as served:
        h.url = served.url
        yield h


@pytest.fixture
def spec(tmp_path, hist):
    classes = ["cyc-null", "cyc-gain", "treated", "ctrl", "canary", "unsat", "mixy", "sat"]
    data = {
        "version": 1,
        "prometheus": {"url": hist.url, "timeout_seconds": 20},
        "store": str(tmp_path / "store"),
        "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "designs", "workload": c}} for c in classes],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": f"sum({METRIC}{{$selector}})",
                     "unit": "tokens/s", "direction": "higher_is_better"},
                    {"name": "tokens_per_gpu_second", "category": "utilization", "unit": "tokens/GPU-s", "direction": "higher_is_better",
                     "query": "sum(obsctl_synthetic_model_tokens_per_second{$selector}) / sum(obsctl_synthetic_gpu_seconds_per_second{$selector})"},
                    {"name": "requests_per_second", "category": "throughput", "unit": "requests/s", "direction": "higher_is_better",
                     "query": "sum(obsctl_synthetic_requests_per_second{$selector})"},
                    {"name": "usd_per_million_tokens", "category": "cost", "unit": "USD/1M tokens", "direction": "lower_is_better",
                     "query": f"sum({PRICE}{{$selector}}) / 3600 / sum({METRIC}{{$selector}}) * 1e6"}],
        # These tests judge the designs on the primary: guard only quality (no such signal
        # here), so the cost signal, baselined only where it is the primary, is no guard.
        "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02, "guards": ["quality"]},
        "comparison": {"classes": {
            "treated": {"design": "control", "control": "ctrl"},
            "cyc-gain": {"design": "seasonal"},
            "canary": {"design": "canary", "variant": {"label": "track", "control": "stable", "treatment": "canary"}},
            "mixy": {"mix": ["model"], "demand": "requests_per_second"},
        }},
    }
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(hist, spec, cls, window="1h", *extra, signal="tokens_per_second"):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--signal", signal, "--window", window, "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0, snap.output
    out = run(initiative, ["start", "--spec", spec, "--name", f"change {cls}", "--lever", "batch-size", "--class", cls,
                           "--signal", signal, "--started-at", hist.iso(hist.t_c), "--output", "json", *extra])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def verify_json(hist, spec, iid):
    out = run(verify, ["--spec", spec, "--initiative", iid, "--start", hist.iso(hist.t_c), "--end", hist.iso(hist.end), "--output", "json"])
    return out, json.loads(out.stdout)


def test_control_design_removes_the_shared_cycle(hist, spec):
    i = start(hist, spec, "treated")
    assert i["design"] == "control" and i["control_class"] == "ctrl"
    out, res = verify_json(hist, spec, i["id"])
    b0, b1, w1 = hist.t_c - HOUR, hist.t_c, hist.end
    tb, cb = hist.values("treated", b0, b1), hist.values("ctrl", b0, b1)
    ta, ca = hist.values("treated", b1, w1), hist.values("ctrl", b1, w1)
    expected = math.exp(np.mean(np.log(ta) - np.log(ca)) - np.mean(np.log(tb) - np.log(cb))) - 1
    assert expected == pytest.approx(0.10, abs=0.01)
    assert res["design"] == "control" and res["change_ratio"] == pytest.approx(expected, rel=1e-6)
    assert res["ci_low"] < expected < res["ci_high"] and res["ci_low"] > 0.02
    assert res["verdict"] == "IMPROVED" and out.exit_code == 0, out.output
    own = res["design_context"]["control"]["change"]
    assert own == pytest.approx(ca.mean() / cb.mean() - 1, rel=1e-6)
    text = run(verify, ["--spec", spec, "--initiative", i["id"], "--start", hist.iso(hist.t_c), "--end", hist.iso(hist.end)]).output
    assert "design: control" in text and f"control ctrl: moved {own * 100:+.1f} % on its own" in text


def test_control_class_is_locked_while_the_initiative_is_open(hist, spec):
    start(hist, spec, "treated")
    snap = run(snapshot_baseline, ["--spec", spec, "--class", "ctrl", "--window", "1h", "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0
    refused = run(initiative, ["start", "--spec", spec, "--name", "touch the control", "--lever", "batch-size", "--class", "ctrl",
                               "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c)])
    assert refused.exit_code == 1
    assert "'ctrl' is the control of initiative 'change-treated-" in refused.output


def test_canary_needs_no_baseline_and_promote_takes_the_treatment_window(hist, spec):
    out = run(initiative, ["start", "--spec", spec, "--name", "canary", "--lever", "batch-size", "--class", "canary",
                           "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c), "--output", "json"])
    assert out.exit_code == 0, out.output
    i = json.loads(out.stdout)
    assert i["design"] == "canary" and i["baseline_id"] == "" and i["variant"]["treatment"] == "canary"
    out, res = verify_json(hist, spec, i["id"])  # the control group's window stands in for the baseline
    assert res["design"] == "canary" and res["verdict"] == "IMPROVED", out.output
    stand_in = Store(spec.parent / "store").baseline(res["baseline_id"])
    assert stand_in.stats.mean == pytest.approx(hist.values("canary", hist.t_c, hist.end, "stable").mean(), rel=1e-9)
    assert Store(spec.parent / "store").current_baseline("canary", "tokens_per_second") is None  # not made current
    run(initiative, ["close", "--spec", spec, "--initiative", i["id"]])

    i = start(hist, spec, "canary")
    out, res = verify_json(hist, spec, i["id"])
    t = hist.values("canary", hist.t_c, hist.end, "canary")
    c = hist.values("canary", hist.t_c, hist.end, "stable")
    expected = math.exp(np.mean(np.log(t) - np.log(c))) - 1
    assert expected == pytest.approx(CANARY_GAIN, abs=0.01)
    assert res["design"] == "canary" and res["change_ratio"] == pytest.approx(expected, rel=1e-6)
    assert res["verdict"] == "IMPROVED" and out.exit_code == 0, out.output
    promoted = run(baseline, ["promote", "--spec", spec, "--initiative", i["id"]])
    assert promoted.exit_code == 0, promoted.output
    new = Store(spec.parent / "store").current_baseline("canary", "tokens_per_second")
    assert new.stats.mean == pytest.approx(t.mean(), rel=1e-9)  # the treatment group's window
    assert 'track="canary"' not in new.query  # the published baseline keeps its identity labels


def test_seasonal_compares_the_same_hours_and_before_after_sees_the_cycle(hist, spec, tmp_path):
    i = start(hist, spec, "cyc-gain", "24h")
    out, res = verify_json(hist, spec, i["id"])
    w = hist.series[("cyc-gain", None)]
    window = [t for t in sorted(w) if hist.t_c < t <= hist.end]
    expected = math.exp(np.mean([math.log(w[t]) - math.log(w[t - DAY]) for t in window])) - 1
    assert expected == pytest.approx(0.10, abs=0.01)
    assert res["design"] == "seasonal" and res["change_ratio"] == pytest.approx(expected, rel=1e-6)
    assert res["verdict"] == "IMPROVED" and out.exit_code == 0, out.output
    rep = run(report, ["--spec", spec, "--initiative", i["id"], "--out", tmp_path / "rep"])
    assert rep.exit_code == 0, rep.output
    md = (tmp_path / "rep" / f"{i['id']}.md").read_text()
    assert "## Comparison design" in md and "**seasonal**" in md

    j = start(hist, spec, "cyc-null", "24h")
    out, res = verify_json(hist, spec, j["id"])
    assert res["design"] == "before-after"
    assert res["verdict"] == "INCONCLUSIVE" and out.exit_code == 11
    assert "over the day" in res["reason"] and "--design seasonal" in res["reason"]
    amp = res["design_context"]["cycle"]["amplitude"]
    assert amp == pytest.approx(0.30, abs=0.03)
    # The cycle test was fitted once, at initiative start, and verify judged the stored fit.
    assert [f["cycle"] for f in j["baseline_cycle"]] == ["day"] and j["baseline_cycle"][0]["amplitude"] == amp
    store = Store(spec.parent / "store")
    fit = store.initiative(j["id"]).baseline_cycle[0]
    store.save_initiative(store.initiative(j["id"]).model_copy(update={"baseline_cycle": [fit.model_copy(update={"p_value": 0.5})]}))
    _, again = verify_json(hist, spec, j["id"])
    assert again["design_context"]["cycle"]["p_value"] == 0.5 and not again["design_context"]["cycle"]["detected"]


def test_seasonal_refuses_a_short_baseline(hist, spec):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", "cyc-gain", "--window", "3h", "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0
    out = run(initiative, ["start", "--spec", spec, "--name", "short", "--lever", "batch-size", "--class", "cyc-gain",
                           "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c)])
    assert out.exit_code == 2
    assert "spans 3h, less than one whole day (1d)" in out.output


def test_demand_rise_on_an_unsaturated_class_is_not_an_improvement(hist, spec):
    i = start(hist, spec, "unsat")
    out, res = verify_json(hist, spec, i["id"])
    base, window = hist.values_extra(METRIC, "unsat", hist.t_c - HOUR, hist.t_c), hist.values_extra(METRIC, "unsat", hist.t_c, hist.end)
    assert window.mean() / base.mean() - 1 == pytest.approx(0.20, abs=0.01)  # what before-after alone would call IMPROVED
    load = res["design_context"]["load"]
    assert load["demand_change"] == pytest.approx(0.20, rel=1e-9)
    assert load["before"]["state"] == "healthy" and load["after"]["state"] == "healthy"
    assert res["verdict"] == "INCONCLUSIVE" and out.exit_code == 11
    assert "demand-bound" in res["reason"] and "judge an efficiency, latency or queue-wait signal" in res["reason"]


def _cost_per_million(hist, cls, start, end):
    return PRICE_USD_PER_HOUR / 3600 / hist.values_extra(METRIC, cls, start, end) * 1e6


def test_demand_rise_moves_cost_per_token_and_is_not_an_improvement(hist, spec):
    # The same +20 % demand on the unsaturated class: a fixed price over 20 % more tokens.
    i = start(hist, spec, "unsat", signal="usd_per_million_tokens")
    out, res = verify_json(hist, spec, i["id"])
    base = _cost_per_million(hist, "unsat", hist.t_c - HOUR, hist.t_c)
    window = _cost_per_million(hist, "unsat", hist.t_c, hist.end)
    assert window.mean() / base.mean() - 1 == pytest.approx(1 / 1.2 - 1, abs=0.01)  # -16.7 %, by demand alone
    assert res["change_ratio"] == pytest.approx(window.mean() / base.mean() - 1, rel=1e-6)
    assert res["design_context"]["load"]["demand_bound"] is True
    assert res["verdict"] == "INCONCLUSIVE" and out.exit_code == 11, out.output
    assert res["reason"].startswith("usd_per_million_tokens is demand-bound: demand moved +20.0 % while the class was not saturated "
                                    "in the baseline and the window"), res["reason"]


def test_cost_per_token_under_saturation_is_decided(hist, spec):
    i = start(hist, spec, "sat", signal="usd_per_million_tokens")
    out, res = verify_json(hist, spec, i["id"])
    base = _cost_per_million(hist, "sat", hist.t_c - HOUR, hist.t_c)
    window = _cost_per_million(hist, "sat", hist.t_c, hist.end)
    expected = window.mean() / base.mean() - 1
    assert expected == pytest.approx(1 / 1.1 - 1, abs=0.01)  # -9.1 %: the capacity rose 10 % at the same price
    load = res["design_context"]["load"]
    assert load["before"]["state"] == "saturated" and load["after"]["state"] == "saturated" and load["demand_bound"] is False
    assert res["change_ratio"] == pytest.approx(expected, rel=1e-6)
    assert res["verdict"] == "IMPROVED" and out.exit_code == 0, out.output


def test_mix_shift_is_decomposed_and_makes_the_verdict_inconclusive(hist, spec):
    i = start(hist, spec, "mixy", signal="tokens_per_gpu_second")
    out, res = verify_json(hist, spec, i["id"])
    mix = res["design_context"]["mix"]
    assert mix["segments"] == ["a", "b"]
    assert mix["share_before"] == pytest.approx([0.5, 0.5]) and mix["share_after"] == pytest.approx([0.7, 0.3])
    rate = {}
    for model in ("a", "b"):  # each model's tokens per GPU-second over the baseline period, from the values written
        tok = next(v for (n, lab), v in hist.extra.items() if n == "obsctl_synthetic_model_tokens_per_second" and ("model", model) in lab)
        gpu = next(v for (n, lab), v in hist.extra.items() if n == "obsctl_synthetic_gpu_seconds_per_second" and ("model", model) in lab)
        rate[model] = np.mean([tok[t] / gpu[t] for t in tok if hist.t_c - HOUR < t <= hist.t_c])
    expected = (0.7 * rate["a"] + 0.3 * rate["b"]) / (0.5 * rate["a"] + 0.5 * rate["b"]) - 1
    assert expected == pytest.approx(850 / 750 - 1, abs=0.002)
    assert mix["mix_change"] == pytest.approx(expected, rel=1e-6)
    assert abs(mix["rate_change"]) < 0.01 and mix["mix_share"] > 0.9
    assert res["verdict"] == "INCONCLUSIVE" and "the mix explains" in res["reason"], out.output


def test_plan_accounts_for_the_design(hist, spec):
    # Both classes' baselines over the same hour: control plans on the treated/control log ratio,
    # where the shared cycle is no memory; before-after plans on the cyclic signal itself.
    assert run(snapshot_baseline, ["--spec", spec, "--class", "ctrl", "--window", "1h", "--end", hist.iso(hist.t_c)]).exit_code == 0
    start(hist, spec, "treated")
    figures = {}
    for design in ("before-after", "control", "canary"):
        out = run(plan, ["--spec", spec, "--class", "treated", "--signal", "tokens_per_second", "--effect", "0.1", "--design", design,
                         "--output", "json"])
        assert out.exit_code == 0, out.output
        figures[design] = json.loads(out.stdout)
        assert figures[design]["design"] == design
    assert figures["before-after"]["window_seconds"] is None  # the cycle reads as memory of days: not reachable
    assert figures["control"]["window_seconds"] is not None and figures["control"]["tau_seconds"] < 600
