"""Guard signals in verify, promote and report against a real Prometheus with backfilled
history (tests/integration/conftest.py): a +30 % throughput step with flat guards is
IMPROVED and promotes the guards too; the same step with a 10 % quality drop is
REGRESSED (exit 12) naming the quality guard. Expected values are computed from the
values written, independently of obsctl."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import baseline, initiative, report, snapshot_baseline, verify
from obsctl.baselining.store import Store

# The guard metrics written by conftest.build_history (not imported: tests/conftest.py
# shadows the module name ``conftest``).
QUALITY = "obsctl_synthetic_quality_ratio"
LATENCY = "obsctl_synthetic_request_seconds"


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(history, spec, cls):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--window", "1h", "--end", history.iso(1)])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", spec, "--name", f"tune {cls}", "--lever", "batch-size", "--class", cls,
                               "--signal", "tokens_per_second", "--started-at", history.iso(1), "--output", "json"])
    assert started.exit_code == 0, started.output
    return json.loads(started.stdout)["id"]


def expected_change(history, cls, metric):
    base = history.window(cls, history.at(0), history.at(1), metric)
    window = history.window(cls, history.at(1), history.at(2), metric)
    return np.mean(window) / np.mean(base) - 1, np.mean(window)


def test_flat_guards_improved_and_promoted(history, guard_spec, tmp_path):
    # Utilization has data in the first half hour only: baselined over that half hour
    # (over the whole hour its coverage is 50 %, and the baseline would be refused).
    half = run(snapshot_baseline, ["--spec", guard_spec, "--class", "steady", "--signal", "gpu_utilization",
                                   "--window", "30m", "--end", history.iso(0.5)])
    assert half.exit_code == 0, half.output
    iid = start(history, guard_spec, "steady")
    store = Store(tmp_path / "store")
    assert set(store.initiative(iid).guard_baseline_ids) == {"quality_ratio", "request_seconds", "gpu_utilization"}

    # A guard without data is not a pass, whatever its category: INCONCLUSIVE, naming it...
    held = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2)])
    assert held.exit_code == 11, held.output
    assert held.stdout.startswith("INCONCLUSIVE: utilization guard gpu_utilization NO_DATA (not shown within its margin; optional_guards lifts this)")
    # ... until the spec says the team does not need it.
    doc = yaml.safe_load(guard_spec.read_text())
    doc["verification"]["optional_guards"] = ["gpu_utilization"]
    guard_spec.write_text(yaml.safe_dump(doc))
    text = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2)])
    assert text.exit_code == 0, text.output
    first, second = text.stdout.splitlines()[:2]
    assert first.startswith("IMPROVED: tokens_per_second +")
    assert second == "guards: gpu_utilization NO_DATA, quality_ratio NO_CHANGE, request_seconds NO_CHANGE"

    result = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["verdict"] == out["primary_verdict"] == "IMPROVED" and out["guards_evaluated"] is True
    guards = {g["signal"]: g for g in out["guards"]}
    assert "samples" not in guards["quality_ratio"]
    # Quality exactly 1.0 on both sides: the exact rule, change 0, no NaN.
    q = guards["quality_ratio"]
    assert (q["verdict"], q["exact"], q["change_ratio"], q["ci_low"], q["ci_high"]) == ("NO_CHANGE", True, 0.0, 0.0, 0.0)
    assert q["category"] == "quality" and q["baseline_mean"] == q["window_mean"] == 1.0
    lat = guards["request_seconds"]
    change, _ = expected_change(history, "steady", LATENCY)
    assert lat["verdict"] == "NO_CHANGE" and not lat["exact"]
    assert lat["change_ratio"] == pytest.approx(change, rel=1e-6, abs=1e-12)
    assert -0.02 < lat["ci_low"] < lat["change_ratio"] < lat["ci_high"] < 0.02
    assert guards["gpu_utilization"]["verdict"] == "NO_DATA" and guards["gpu_utilization"]["window_stats"] is None

    old = {s: store.current_baseline("steady", s) for s in ("tokens_per_second", "quality_ratio", "request_seconds", "gpu_utilization")}
    # An optional guard with no data was not checked: promote needs a stated reason to go on.
    refused = run(baseline, ["promote", "--spec", guard_spec, "--initiative", iid])
    assert refused.exit_code == 1 and "not judged with the spec's guards (guard gpu_utilization NO_DATA" in refused.output
    assert store.current_baseline("steady", "tokens_per_second").id == old["tokens_per_second"].id
    promoted = run(baseline, ["promote", "--spec", guard_spec, "--initiative", iid, "--override-reason", "utilization exporter retired"])
    assert promoted.exit_code == 0, promoted.output
    assert promoted.stdout.startswith("override: promoted without every guard judged: utilization exporter retired (unjudged: "
                                      "guard gpu_utilization NO_DATA")
    lines = promoted.stdout.splitlines()[1:]
    assert lines[0].startswith("promoted primary: steady/tokens_per_second baseline is now steady.tokens_per_second.")
    assert sorted(line.split()[2] for line in lines[1:]) == ["steady/quality_ratio", "steady/request_seconds"]
    for sig in ("tokens_per_second", "quality_ratio", "request_seconds"):
        new = store.current_baseline("steady", sig)
        assert new.source == "promoted" and new.initiative == iid, sig
        assert new.window.start.timestamp() == history.at(1) and new.window.end.timestamp() == history.at(2)
        assert [b.id for b in store.history("steady", sig)] == [old[sig].id, new.id]
        assert new.query == old[sig].query and new.direction == old[sig].direction
    _, latency_mean = expected_change(history, "steady", LATENCY)
    assert store.current_baseline("steady", "request_seconds").stats.mean == pytest.approx(latency_mean, rel=1e-9)
    assert store.current_baseline("steady", "quality_ratio").stats.mean == 1.0
    # No data in the window: the guard's baseline is not replaced.
    assert store.current_baseline("steady", "gpu_utilization").id == old["gpu_utilization"].id

    out_dir = tmp_path / "report"
    rep = run(report, ["--spec", guard_spec, "--initiative", iid, "--out", out_dir])
    assert rep.exit_code == 0, rep.output
    md = (out_dir / f"{iid}.md").read_text()
    assert "## Guard signals" in md
    assert "| signal | category | baseline mean | window mean | change | CI | verdict |" in md
    assert "| `quality_ratio` | quality | 1 ratio | 1 ratio | +0.0 % | exact (both constant) | **NO_CHANGE** |" in md
    assert "| `gpu_utilization` | utilization |" in md and "**NO_DATA** |" in md


def test_quality_drop_makes_improvement_a_regression(history, guard_spec, tmp_path):
    iid = start(history, guard_spec, "degrading")
    # The class has no utilization series: no baseline, so no such guard.
    assert set(Store(tmp_path / "store").initiative(iid).guard_baseline_ids) == {"quality_ratio", "request_seconds"}
    change, _ = expected_change(history, "degrading", QUALITY)
    assert change == pytest.approx(-0.10, abs=0.01)

    text = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2)])
    assert text.exit_code == 12, text.output
    first, second = text.stdout.splitlines()[:2]
    assert first.startswith(f"REGRESSED: quality guard quality_ratio regressed {change * 100:+.1f} % (95 % CI -")
    assert "; primary tokens_per_second IMPROVED +" in first
    assert second.startswith(f"guards: quality_ratio REGRESSED {change * 100:+.1f} %, request_seconds NO_CHANGE")

    result = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"])
    assert result.exit_code == 12
    out = json.loads(result.stdout)
    assert (out["verdict"], out["primary_verdict"], out["exit_code"]) == ("REGRESSED", "IMPROVED", 12)
    assert out["reason"].startswith("quality guard quality_ratio regressed")
    q = {g["signal"]: g for g in out["guards"]}["quality_ratio"]
    assert q["change_ratio"] == pytest.approx(change, rel=1e-6)
    assert q["ci_low"] < change < q["ci_high"] < 0

    refused = run(baseline, ["promote", "--spec", guard_spec, "--initiative", iid])
    assert refused.exit_code == 1 and "latest verdict is REGRESSED" in refused.output

    primary_only = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2), "--no-guards"])
    assert primary_only.exit_code == 0, primary_only.output
    assert primary_only.stdout.splitlines()[:2] == [primary_only.stdout.splitlines()[0], "guards: not evaluated"]
    assert primary_only.stdout.startswith("IMPROVED: tokens_per_second +")
    # The regression the guards found cannot become the baseline by skipping them.
    skipped = run(baseline, ["promote", "--spec", guard_spec, "--initiative", iid])
    assert skipped.exit_code == 1, skipped.output
    assert "not judged with the spec's guards (verified with --no-guards (gpu_utilization, quality_ratio, request_seconds not judged))" \
        in skipped.output
    assert Store(tmp_path / "store").initiative(iid).status == "verified"


def test_a_chosen_guard_without_a_baseline_is_shown_and_caps_the_verdict(history, guard_spec):
    # No gpu_utilization baseline on "steady" (the snapshot of start() cannot take one over
    # the hour): that guard is not evaluated, so the +30 % step on flat guards is INCONCLUSIVE.
    iid = start(history, guard_spec, "steady")
    text = run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2)])
    assert text.exit_code == 11, text.output
    first, second = text.stdout.splitlines()[:2]
    assert first.startswith("INCONCLUSIVE: guard gpu_utilization not evaluated (no baseline) (not shown within its margin")
    assert "; primary tokens_per_second IMPROVED +" in first
    assert second == "guards: quality_ratio NO_CHANGE, request_seconds NO_CHANGE, gpu_utilization NOT EVALUATED (no baseline)"
    out = json.loads(run(verify, ["--spec", guard_spec, "--initiative", iid, "--end", history.iso(2), "-o", "json"]).stdout)
    assert out["guards_missing"] == ["gpu_utilization"] and out["primary_verdict"] == "IMPROVED"
