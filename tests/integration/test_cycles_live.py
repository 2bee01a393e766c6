"""Cycles known before the window, end to end: a real Prometheus with backfilled weeks, the CLI.

History (60 s step, ending 10 minutes before a pinned Saturday 03:00 UTC; the change goes live
at Saturday 00:00, so the baseline is Friday 23:00-24:00 and the window weekend hours), metric
``obsctl_synthetic_cycle_tokens_per_second``, every class 10 % lower on Saturday and Sunday
with small AR(1) noise (0.5 %):

- ``known``: 17 days of history, +10 % from the change: the snapshot learns the weekly cycle,
  ``initiative start`` chooses the ``profile`` design by default, and ``verify`` finds the
  +10 % that a before-after comparison reads as about -1 %;
- ``short``: 5 days of history, nothing changes: the weekly cycle is unknown and the window
  holds weekend hours the baseline does not, so ``verify`` refuses (INCONCLUSIVE, typed
  ``cycle-unknown``) and names the look that still matches and the history needed.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, snapshot_baseline, verify
from obsctl.baselining.store import Store
from support.prometheus import served_history

STEP = 60
HOUR, DAY = 3600, 86400
METRIC = "obsctl_synthetic_cycle_tokens_per_second"
#: Saturday 2026-11-28T03:00:00Z: a fixed instant, so the weekend falls where the test says.
NOW = 1_795_834_800
DAYS = {"known": 17, "short": 5}
GAIN = {"known": 0.10, "short": 0.0}


class History:
    def __init__(self):
        self.end = (NOW - 600) // STEP * STEP
        self.t_c = NOW - 3 * HOUR
        rng = np.random.default_rng(20261128)
        self.series: dict[str, dict[int, float]] = {}
        for cls, days in DAYS.items():
            t = np.arange(self.end - days * DAY, self.end + 1, STEP)
            e = np.empty(t.size)
            e[0] = 0.0
            shocks = rng.normal(0.0, 0.005 * math.sqrt(1 - 0.64), t.size)
            for k in range(1, t.size):
                e[k] = 0.8 * e[k - 1] + shocks[k]
            weekend = np.isin(((t - 345_600) // DAY) % 7, (5, 6))  # 1970-01-05 was a Monday
            y = 1000.0 * np.where(weekend, 0.9, 1.0) * np.where(t > self.t_c, 1 + GAIN[cls], 1.0) * np.exp(e)
            self.series[cls] = dict(zip(t.tolist(), np.round(y, 6).tolist(), strict=True))
        self.url = ""

    def iso(self, ts: float) -> str:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def openmetrics(self) -> str:
        lines = [f"# TYPE {METRIC} gauge", f"# HELP {METRIC} Synthetic throughput with a weekly cycle."]
        for cls, values in self.series.items():
            lines += [f'{METRIC}{{job="cycles",workload="{cls}"}} {v!r} {t}' for t, v in sorted(values.items())]
        return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    assert dt.datetime.fromtimestamp(NOW, dt.UTC).strftime("%a %H") == "Sat 03"
    h = History()
    with served_history(tmp_path_factory.mktemp("cycles-prometheus"), h.openmetrics()) as served:
        h.url = served.url
        yield h


@pytest.fixture
def spec(tmp_path, hist):
    data = {
        "version": 1,
        "prometheus": {"url": hist.url, "timeout_seconds": 20},
        "store": str(tmp_path / "store"),
        "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "cycles", "workload": c}} for c in DAYS],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": f"sum({METRIC}{{$selector}})",
                     "unit": "tokens/s", "direction": "higher_is_better"}],
        "verification": {"window": "1h", "step": "60s", "confidence": 0.95, "min_effect_ratio": 0.02, "guards": ["quality"]},
    }
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(hist, spec, cls):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--window", "1h", "--end", hist.iso(hist.t_c)])
    assert snap.exit_code == 0, snap.output
    assert "cycles: the " in snap.output and "weekly cycle" in snap.output
    out = run(initiative, ["start", "--spec", spec, "--name", f"change {cls}", "--lever", "batch-size", "--class", cls,
                           "--signal", "tokens_per_second", "--started-at", hist.iso(hist.t_c), "--output", "json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def verify_json(hist, spec, iid):
    out = run(verify, ["--spec", spec, "--initiative", iid, "--start", hist.iso(hist.t_c), "--end", hist.iso(hist.end), "--output", "json"])
    return out, json.loads(out.stdout)


def test_a_known_weekly_cycle_makes_the_profile_design_the_default_and_finds_the_change(hist, spec):
    i = start(hist, spec, "known")
    b = Store(spec.parent / "store").baseline(i["baseline_id"])
    assert (b.cycles.weekly, b.cycles.profile_cycle) == ("present", "week")
    assert b.cycles.history_seconds >= 14 * DAY
    assert i["design"] == "profile" and "weekly cycle" in i["design_note"]
    out, res = verify_json(hist, spec, i["id"])
    w = hist.series["known"]
    window = [w[t] for t in sorted(w) if hist.t_c < t <= hist.end]
    base = [w[t] for t in sorted(w) if hist.t_c - HOUR < t <= hist.t_c]
    assert np.mean(window) / np.mean(base) - 1 == pytest.approx(-0.01, abs=0.01)  # what before-after would read
    assert res["design"] == "profile" and res["verdict"] == "IMPROVED", out.output
    assert res["change_ratio"] == pytest.approx(0.10, abs=0.01)
    assert any("weekly cycle" in n for n in res["design_context"]["notes"])


def test_an_unknown_weekly_cycle_refuses_the_weekend_with_advice(hist, spec):
    i = start(hist, spec, "short")
    b = Store(spec.parent / "store").baseline(i["baseline_id"])
    assert (b.cycles.daily, b.cycles.weekly) == ("absent", "unknown")
    assert i["design"] == "before-after"
    out, res = verify_json(hist, spec, i["id"])
    assert res["verdict"] == "INCONCLUSIVE" and out.exit_code == 11, out.output
    assert res["design_context"]["cycle"]["refusal"] == "cycle-unknown"
    assert "weekly cycle is unknown" in res["reason"] and "--design control" in res["reason"]
    assert "a look whose window ends before" in res["reason"] and "history spans 14d" in res["reason"]
