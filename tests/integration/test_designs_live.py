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
import time

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from obsctl.baselining.cli import (
    baseline,
    initiative,
    report,
    snapshot_baseline,
    verify,
)
from obsctl.baselining.store import Store

from obsctl.stack import Prometheus, create_blocks_from_openmetrics

pytestmark = pytest.mark.integration

STEP = 15
HOUR = 3600
DAY = 86400
METRIC = "obsctl_synthetic_design_tokens_per_second"
GAIN = {"cyc-gain": 0.10, "treated": 0.10}
CANARY_GAIN = 0.15


def _ar1(rng, n, sd=0.005, phi=0.8):
    out, e = np.empty(n), 0.0
    for i in range(n):
        e = phi * e + rng.normal(0.0, sd * math.sqrt(1 - phi * phi))
        out[i] = e
    return out


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
            self.series[(cls, None)] = dict(zip(self.stamps.tolist(), np.round(y, 6).tolist()))
        for track, gain in (("stable", 0.0), ("canary", CANARY_GAIN)):
            y = 500.0 * cyc * np.exp(_ar1(rng, self.stamps.size)) * np.where(after, 1 + gain, 1.0)
            self.series[("canary", track)] = dict(zip(self.stamps.tolist(), np.round(y, 6).tolist()))
        self.url = ""

    def values(self, cls: str, start: float, end: float, track: str | None = None) -> np.ndarray:
        s = self.series[(cls, track)]
        return np.array([v for t, v in sorted(s.items()) if start < t <= end])

    def iso(self, ts: float) -> str:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def openmetrics(self) -> str:
        lines = [f"# TYPE {METRIC} gauge", f"# HELP {METRIC} Synthetic throughput for the designs tests."]
        for (cls, track), values in self.series.items():
            labels = f'job="designs",workload="{cls}"' + (f',track="{track}"' if track else "")
            lines += [f"{METRIC}{{{labels}}} {v!r} {t}" for t, v in sorted(values.items())]
        return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    work = tmp_path_factory.mktemp("designs-prometheus")
    h = History(time.time())
    (work / "history.om").write_text(h.openmetrics())
    create_blocks_from_openmetrics(work / "history.om", work / "data")
    prom = Prometheus(workdir=work, data_dir=work / "data")
    try:
        prom.start()
        h.url = prom.url
        yield h
    finally:
        prom.stop()


@pytest.fixture
def spec(tmp_path, hist):
    classes = ["cyc-null", "cyc-gain", "treated", "ctrl", "canary"]
    data = {
        "version": 1,
        "prometheus": {"url": hist.url, "timeout_seconds": 20},
        "store": str(tmp_path / "store"),
        "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "designs", "workload": c}} for c in classes],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": f"sum({METRIC}{{$selector}})",
                     "unit": "tokens/s", "direction": "higher_is_better"}],
        "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02},
        "comparison": {"classes": {
            "treated": {"design": "control", "control": "ctrl"},
            "cyc-gain": {"design": "seasonal"},
            "canary": {"design": "canary", "variant": {"label": "track", "control": "stable", "treatment": "canary"}},
        }},
    }
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(hist, spec, cls, window="1h", *extra):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--window", window, "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0, snap.output
    out = run(initiative, ["start", "--spec", spec, "--name", f"change {cls}", "--lever", "batch-size", "--class", cls,
                           "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c), "--output", "json", *extra])
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


def test_seasonal_refuses_a_short_baseline(hist, spec):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", "cyc-gain", "--window", "3h", "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0
    out = run(initiative, ["start", "--spec", spec, "--name", "short", "--lever", "batch-size", "--class", "cyc-gain",
                           "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c)])
    assert out.exit_code == 2
    assert "spans 3.0 h, less than one whole day" in out.output
