"""A baseline taken hours before the start has aged: verify compares the window with the
period right before the start instead, so a drift in between is not read as the change,
and a real change at the start still is. Real Prometheus, backfilled history, pinned times."""

from __future__ import annotations

import datetime as dt
import json
import re

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, snapshot_baseline, verify
from support.prometheus import served_history

STEP, HOUR = 15, 3600
T0 = 1_780_000_200  # start of the baseline window (a fixed past instant on the grid)
HISTORY = 3 * HOUR  # before the baseline, for the memory model


def level(cls: str, ts: int) -> float:
    if cls == "drifting":  # +10 % from 2 h after the baseline's start, long before the initiative
        return 1100.0 if ts > T0 + 2 * HOUR else 1000.0
    return 1100.0 if ts > T0 + 5 * HOUR else 1000.0  # "improving": the change itself, at the start


def _history() -> str:
    rng = np.random.default_rng(11)
    lines = ["# TYPE aged_tokens gauge"]
    for cls in ("drifting", "improving"):
        noise = 0.0
        for ts in range(T0 - HISTORY, T0 + 6 * HOUR + 1, STEP):
            noise = 0.8 * noise + float(rng.normal(0, 8))
            lines.append(f'aged_tokens{{job="w",workload="{cls}"}} {round(level(cls, ts) + noise, 6)!r} {ts}')
    return "\n".join([*lines, "# EOF"]) + "\n"


def iso(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    work = tmp_path_factory.mktemp("aged")
    with served_history(work / "prom", _history()) as served:
        path = work / "obsctl.yaml"
        path.write_text(yaml.safe_dump({
            "prometheus": {"url": served.url}, "store": str(work / "store"),
            "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "w", "workload": c}} for c in ("drifting", "improving")],
            "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(aged_tokens{$selector})",
                         "unit": "tokens/s", "direction": "higher_is_better"}],
            "verification": {"window": "1h", "step": "15s", "memory_history": "3h", "guards": []},
        }))
        yield path


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def verdict_of(spec, cls):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--window", "1h", "--end", iso(T0 + HOUR)])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", spec, "--name", f"change {cls}", "--lever", "batch-size", "--class", cls,
                               "--signal", "tokens_per_second", "--started-at", iso(T0 + 5 * HOUR), "-o", "json"])
    assert started.exit_code == 0, started.output
    out = run(verify, ["--spec", spec, "--initiative", json.loads(started.stdout)["id"], "--end", iso(T0 + 6 * HOUR), "-o", "json"])
    return out.exit_code, json.loads(out.stdout)


def test_drift_since_an_aged_baseline_is_not_the_change(spec):
    code, doc = verdict_of(spec, "drifting")
    # Against the 4-hour-old baseline the +10 % drift was IMPROVED +10 %.
    assert doc["verdict"] in ("NO_CHANGE", "INCONCLUSIVE") and code in (10, 11), doc["reason"]
    assert abs(doc["change_ratio"]) < 0.01
    assert doc["baseline_mean"] == pytest.approx(1100, rel=0.01)
    assert f"compared with the 1h right before the start: the baseline of {iso(T0 + HOUR)} ended 4h before the start" in doc["reason"]
    moved = re.search(r"\(the signal moved ([+-][0-9.]+) % in between\)", doc["reason"])
    assert moved and float(moved[1]) == pytest.approx(10.0, abs=1.0)  # the +10 % drift, said, not judged


def test_a_real_change_after_an_aged_baseline_is_still_seen(spec):
    code, doc = verdict_of(spec, "improving")
    assert (code, doc["verdict"]) == (0, "IMPROVED"), doc["reason"]
    assert doc["change_ratio"] == pytest.approx(0.10, abs=0.01)
    assert "right before the start" in doc["reason"]
