"""The statistics of verify against a real Prometheus with backfilled history
(tests/integration/conftest.py: AR(1) noise, phi = 0.8 per 15 s step): the memory is
estimated at snapshot time from the hour *before* the baseline window and stored; verify
reports the method, the memory, effective samples, the look number and its boundary;
a second saved look on the same (capped) window reuses the boundary; ``obsctl plan``
and the report show the same figures."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, plan, report, snapshot_baseline, verify
from obsctl.baselining.statistics import anytime
from obsctl.baselining.store import Store
from support.history import PRE_HOURS


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def test_memory_from_history_looks_and_plan(history, loop_spec, tmp_path):
    snap = run(snapshot_baseline, ["--spec", loop_spec, "--class", "noisy", "--window", "1h", "--end", history.iso(2)])
    assert snap.exit_code == 0, snap.output
    b = Store(tmp_path / "store").current_baseline("noisy", "tokens_per_second")
    # History: the PRE_HOURS and the hour before the window (4 h: 960 samples) plus the window's 240.
    assert b.memory is not None and b.memory.source == "history" and b.memory.samples == (PRE_HOURS + 1) * 240 + 240
    # AR(1) with phi = 0.8 at 15 s: tau = (1 + phi) / (1 - phi) steps = 135 s; 480 samples estimate it loosely.
    assert 60 < b.memory.tau_seconds < 300

    started = run(initiative, ["start", "--spec", loop_spec, "--name", "noise", "--lever", "scheduling", "--class", "noisy",
                               "--signal", "tokens_per_second", "--started-at", history.iso(2), "--output", "json"])
    assert started.exit_code == 0, started.output
    iid = json.loads(started.stdout)["id"]
    assert json.loads(started.stdout)["plan"]["planned_seconds"] == 3600  # max(verification.window, planner)

    first = run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(3), "--output", "json"])
    assert first.exit_code in (10, 11), first.output  # pure noise: never a direction
    a1 = json.loads(first.stdout)["assessment"]
    assert a1["look"] == 1 and a1["memory_source"] == "history" and a1["planned_seconds"] == 3600
    # One boundary for every look of the change, fixed by the baseline's t_min (anytime.py).
    assert 0 < a1["min_fraction"] < 1 and a1["boundary_z"] == pytest.approx(anytime.boundary(a1["min_fraction"], 0.05), rel=1e-9)
    assert a1["boundary_z"] > 1.96
    assert 10 < a1["n_eff_window"] < 240 and a1["tau_seconds"] == pytest.approx(b.memory.tau_seconds)

    text = run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(3), "--verbose"])
    stat = [line for line in text.stdout.splitlines() if line.startswith("statistics: ")]
    assert len(stat) == 1 and stat[0].startswith(f"statistics: look 2, boundary z = {a1['boundary_z']:.2f}") and "from history" in stat[0]
    a2 = Store(tmp_path / "store").initiative(iid).verifications[-1].assessment
    assert a2.look == 2 and a2.boundary_z == pytest.approx(a1["boundary_z"])  # one boundary for every look
    # Without --verbose (read again with --peek: no look) the statistics line and the notes are plain words.
    stored = Store(tmp_path / "store").initiative(iid).verifications[-1]
    plain = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek"]).stdout
    assert "statistics: look 2 at this change (its interval holds however often you look)" in plain
    assert "boundary z" not in plain and "effective samples" not in plain and "p = " not in plain
    assert stored.notes and all(n.plain in plain and n.detail not in plain for n in stored.notes)
    assert all(f"  diagnostic: {n.detail}" in text.stdout for n in stored.notes)  # the --verbose run above
    logged = Store(tmp_path / "store").looks("noisy", "tokens_per_second")
    assert [(look.number, look.initiative, look.role) for look in logged] == [(1, iid, "primary"), (2, iid, "primary")]

    out_dir = tmp_path / "report"
    assert run(report, ["--spec", loop_spec, "--initiative", iid, "--out", out_dir]).exit_code == 0
    md = (out_dir / f"{iid}.md").read_text()
    assert "## Statistics" in md and "Look 2 on the change's confidence sequence" in md and "## Looks" in md

    planned = run(plan, ["--spec", loop_spec, "--class", "noisy", "--signal", "tokens_per_second", "--effect", "0.05", "-o", "json"])
    assert planned.exit_code == 0, planned.output
    p = json.loads(planned.stdout)
    assert p["window_seconds"] > 0 and p["memory_source"] == "history" and p["mde"] > 0
    assert run(plan, ["--spec", loop_spec, "--class", "noisy", "--signal", "tokens_per_second", "--effect", "0"]).exit_code == 2
    assert run(plan, ["--spec", loop_spec, "--class", "steady", "--signal", "tokens_per_second", "--effect", "0.05"]).exit_code == 1



def test_verify_judges_the_baseline_sides_stored_at_start_without_their_samples(history, guard_spec, tmp_path):
    # initiative start stores each baseline's side (mean, variance of the mean under its
    # memory; constant or not) with the cycle fit; a before-after verify then reads no
    # baseline samples: with the baselines' sample sidecars removed, the same result.
    import shutil

    import yaml

    from obsctl.baselining.decide.sides import stored_side
    from obsctl.spec import load_spec

    # The utilization guard gets no baseline for this class from this history: optional here, or it
    # would cap the verdict (a guard not evaluated is never a plain IMPROVED).
    data = yaml.safe_load(guard_spec.read_text())
    data["verification"]["optional_guards"] = ["gpu_utilization"]
    guard_spec.write_text(yaml.safe_dump(data, sort_keys=False))
    snap = run(snapshot_baseline, ["--spec", guard_spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", guard_spec, "--name", "sides", "--lever", "scheduling", "--class", "steady",
                               "--signal", "tokens_per_second", "--started-at", history.iso(1), "--output", "json"])
    assert started.exit_code == 0, started.output
    store = Store(tmp_path / "store")
    i = store.initiative(json.loads(started.stdout)["id"])
    by_id = {s.baseline_id: s for s in i.baseline_sides}
    spec = load_spec(guard_spec)
    for bid in {i.baseline_id, *i.guard_baseline_ids.values()}:
        b = store.baseline(bid)
        # What verify would compute from the samples; none without a memory model (the
        # constant quality ratio: fit_memory has no model for it, verify reads its samples).
        assert by_id.get(bid) == stored_side(spec, b) and (bid in by_id) == (b.memory is not None)
    assert i.baseline_id in by_id and len(by_id) >= 2

    bare = tmp_path / "bare"
    shutil.copytree(tmp_path / "store", bare)
    removed = [p for bid in by_id for p in (bare / "baselines").rglob(f"{bid}.*.samples.npz")]
    assert len(removed) == len(by_id)
    for sidecar in removed:
        sidecar.unlink()
    data = yaml.safe_load(guard_spec.read_text())
    data["store"] = str(bare)
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    args = ["--initiative", i.id, "--end", history.iso(2), "--output", "json"]
    full = run(verify, ["--spec", guard_spec, *args])
    without = run(verify, ["--spec", tmp_path / "bare.yaml", *args])
    assert full.exit_code == without.exit_code == 0, full.output + without.output  # +30 % at hour 1
    a, c = json.loads(full.stdout), json.loads(without.stdout)
    for key in ("verdict", "change_ratio", "ci_low", "ci_high", "baseline_mean", "assessment"):
        assert a[key] == c[key], key
    assert a["guards"] and [(g["signal"], g["verdict"], g["ci_low"]) for g in a["guards"]] == [
        (g["signal"], g["verdict"], g["ci_low"]) for g in c["guards"]]
