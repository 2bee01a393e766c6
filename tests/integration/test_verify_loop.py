"""verify, promote and report against a real Prometheus with backfilled history:
IMPROVED for a known +30 % step, never IMPROVED for pure noise, NO_DATA for a vanished
series; promote makes the window the baseline; report writes Markdown and a PNG."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from obsctl.baselining.commands.cli import baseline, initiative, report, snapshot_baseline, verify
from obsctl.baselining.store import Store


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def start(history, spec, cls, name="batch size tuning"):
    snap = run(snapshot_baseline, ["--spec", spec, "--class", cls, "--window", "1h", "--end", history.iso(1)])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", spec, "--name", name, "--lever", "batch-size", "--class", cls,
                               "--signal", "tokens_per_second", "--expected-impact", "0.3", "--started-at", history.iso(1),
                               "--output", "json"])
    assert started.exit_code == 0, started.output
    return json.loads(started.stdout)["id"]


def test_step_is_improved_then_promoted_and_reported(history, loop_spec, tmp_path):
    iid = start(history, loop_spec, "steady")
    result = run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["verdict"] == "IMPROVED"
    base = history.window("steady", history.at(0), history.at(1))
    window = history.window("steady", history.at(1), history.at(2))
    expected = np.mean(window) / np.mean(base) - 1
    assert expected == pytest.approx(0.30, abs=0.02)
    assert out["change_ratio"] == pytest.approx(expected, rel=1e-9)
    assert out["ci_low"] < expected < out["ci_high"]
    assert out["ci_low"] > 0.25 and out["ci_high"] < 0.35
    assert out["alerts_fired"] == []
    assert out["window_stats"]["sample_count"] == 240
    assert out["summary"].startswith("IMPROVED: tokens_per_second +")

    store = Store(tmp_path / "store")
    old = store.current_baseline("steady", "tokens_per_second")
    assert store.initiative(iid).status == "verified"

    promoted = run(baseline, ["promote", "--spec", loop_spec, "--initiative", iid])
    assert promoted.exit_code == 0, promoted.output
    new = store.current_baseline("steady", "tokens_per_second")
    assert new.source == "promoted" and new.initiative == iid
    assert new.stats.mean == pytest.approx(np.mean(window), rel=1e-12)
    assert new.window.start.timestamp() == history.at(1) and new.window.end.timestamp() == history.at(2)
    assert [b.id for b in store.history("steady", "tokens_per_second")] == [old.id, new.id]
    assert store.initiative(iid).status == "promoted"

    again = run(baseline, ["promote", "--spec", loop_spec, "--initiative", iid])
    assert again.exit_code == 1 and "promoted" in again.output

    out_dir = tmp_path / "report"
    rep = run(report, ["--spec", loop_spec, "--initiative", iid, "--out", out_dir])
    assert rep.exit_code == 0, rep.output
    md = (out_dir / f"{iid}.md").read_text()
    assert "IMPROVED" in md and "batch-size" in md and "obsctl_synthetic_tokens_per_second" in md
    assert f"({iid}.png)" in md
    assert (out_dir / f"{iid}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out_dir.glob(".*.tmp"))


def test_noise_is_never_improved_and_alerts_are_listed(history, loop_spec):
    iid = start(history, loop_spec, "noisy")
    result = run(verify, ["--spec", loop_spec, "--class", "noisy", "--start", history.iso(1), "--end", history.iso(2), "--output", "json"])
    out = json.loads(result.stdout)
    assert out["verdict"] in ("NO_CHANGE", "INCONCLUSIVE")
    assert result.exit_code == {"NO_CHANGE": 10, "INCONCLUSIVE": 11}[out["verdict"]]
    # Same process before and after: the point change is small (the interval may or may
    # not contain 0 for one seeded draw; the verdict must not claim an improvement).
    assert abs(out["change_ratio"]) < 0.05
    assert out["alerts_fired"] == ['ObsctlSignalRegression{signal="tokens_per_second"}']
    refused = run(baseline, ["promote", "--spec", loop_spec, "--initiative", iid])
    assert refused.exit_code == 1 and "only an IMPROVED window" in refused.output


def test_missing_series_is_no_data(history, loop_spec):
    iid = start(history, loop_spec, "vanishing")
    result = run(verify, ["--spec", loop_spec, "--initiative", iid, "--start", history.iso(1), "--end", history.iso(3)])
    assert result.exit_code == 13, result.output
    assert result.stdout.startswith("NO_DATA: tokens_per_second")


def test_initiative_rules(history, loop_spec):
    start(history, loop_spec, "steady")
    second = run(initiative, ["start", "--spec", loop_spec, "--name", "quantize", "--lever", "quantization",
                              "--class", "steady", "--signal", "tokens_per_second"])
    assert second.exit_code == 1 and "already has an open initiative" in second.output
    no_baseline = run(initiative, ["start", "--spec", loop_spec, "--name", "x", "--lever", "topology",
                                   "--class", "missing", "--signal", "tokens_per_second"])
    assert no_baseline.exit_code == 1 and "no current baseline for missing/tokens_per_second" in no_baseline.output
    bad_lever = run(initiative, ["start", "--spec", loop_spec, "--name", "x", "--lever", "magic",
                                 "--class", "steady", "--signal", "tokens_per_second"])
    assert bad_lever.exit_code == 2
    listed = run(initiative, ["list", "--spec", loop_spec, "--output", "json"])
    (only,) = json.loads(listed.stdout)
    closed = run(initiative, ["close", "--spec", loop_spec, "--initiative", only["id"], "--note", "superseded", "-o", "json"])
    assert closed.exit_code == 0, closed.output
    record = json.loads(closed.stdout)
    assert record["id"] == only["id"] and record["status"] == "closed" and record["notes"].endswith("superseded")
    again = run(initiative, ["close", "--spec", loop_spec, "--initiative", only["id"], "-o", "json"])
    assert again.exit_code == 1 and "already closed" in again.stderr
    assert json.loads(again.stdout) == {"error": again.stderr.strip().removeprefix("obsctl: error: "), "exit_code": 1}
    assert run(initiative, ["start", "--spec", loop_spec, "--name", "quantize", "--lever", "quantization",
                            "--class", "steady", "--signal", "tokens_per_second"]).exit_code == 0


def test_window_before_initiative_start_is_refused(history, loop_spec):
    # The baseline's own window measured as the initiative's effect.
    iid = start(history, loop_spec, "noisy")
    before = run(verify, ["--spec", loop_spec, "--initiative", iid, "--start", history.iso(0), "--end", history.iso(1)])
    assert before.exit_code == 2
    assert before.stderr.strip() == (
        f"obsctl: error: --end {history.iso(1)} is not after the initiative's start {history.iso(1)} ({iid}): "
        "the window holds nothing measured after the change; use a later --end, or --allow-before-start"
    )
    partly = run(verify, ["--spec", loop_spec, "--initiative", iid, "--start", history.iso(0.5), "--end", history.iso(2)])
    assert partly.exit_code == 2 and f"--start {history.iso(0.5)} is before the initiative's start" in partly.stderr
    assert Store(loop_spec.parent / "store").initiative(iid).verifications == []
    forced = run(verify, ["--spec", loop_spec, "--initiative", iid, "--start", history.iso(0), "--end", history.iso(1),
                          "--allow-before-start", "--output", "json"])
    assert forced.exit_code in (10, 11), forced.output  # the baseline's own window: never IMPROVED
    doc = json.loads(forced.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert doc["saved"] is True and doc["verdict"] in ("NO_CHANGE", "INCONCLUSIVE")


def test_peek_and_report_read_the_verdict_again_without_a_look(history, loop_spec, tmp_path):
    iid = start(history, loop_spec, "steady", name="peek twice")
    store = Store(tmp_path / "store")
    none_yet = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek"])
    assert none_yet.exit_code == 1 and "has no verdict yet" in none_yet.output
    first = run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"])
    assert first.exit_code == 0, first.output
    logged = store.looks("steady", "tokens_per_second")
    assert [x.number for x in logged] == [1]
    assert logged[0].query_key == 'obsctl_synthetic_tokens_per_second{job="synthetic",workload="steady"}'
    for _ in range(2):
        again = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek", "--output", "json"])
        assert again.exit_code == 0, again.output
        doc = json.loads(again.stdout)
        assert doc["peek"] is True and doc["verdict"] == "IMPROVED"
        assert doc["change_ratio"] == json.loads(first.stdout)["change_ratio"]
    text = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek"])
    assert text.stdout.splitlines()[0].startswith(f"stored verdict of {iid}, verified ")
    assert text.stdout.splitlines()[1].startswith("IMPROVED: tokens_per_second +")
    rep = run(report, ["--spec", loop_spec, "--initiative", iid, "--out", tmp_path / "rep"])
    assert rep.exit_code == 0, rep.output
    assert len(store.looks("steady", "tokens_per_second")) == 1  # neither peek nor report looked
    refused = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek", "--end", history.iso(2)])
    assert refused.exit_code == 2 and "--peek shows the stored verdict as it was judged" in refused.output


def test_a_verified_change_counts_toward_the_target_it_was_done_for(history, loop_spec, tmp_path):
    # README order: snapshot -> initiative -> verify -> promote, the target never shown
    # before. The snapshot anchors the target; the promoted +30 % counts toward it, and
    # the rules publish the same anchored value as a constant.
    import datetime as dt

    import yaml

    from obsctl.baselining.commands.cli import target
    from obsctl.rules.cli import rules

    doc = yaml.safe_load(loop_spec.read_text())
    deadline = (dt.date.today() + dt.timedelta(days=90)).isoformat()
    doc["targets"] = [{"workload_class": "steady", "signal": "tokens_per_second", "relative": 0.2, "deadline": deadline, "driver": "capacity"}]
    loop_spec.write_text(yaml.safe_dump(doc))
    iid = start(history, loop_spec, "steady", name="target counts")
    assert run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(2)]).exit_code == 0
    assert run(baseline, ["promote", "--spec", loop_spec, "--initiative", iid]).exit_code == 0

    before = float(np.mean(history.window("steady", history.at(0), history.at(1))))
    after = float(np.mean(history.window("steady", history.at(1), history.at(2))))
    shown = run(target, ["show", "--spec", loop_spec, "--output", "json"])
    assert shown.exit_code == 0, shown.output
    row = json.loads(shown.stdout)[0]
    assert row["anchor_value"] == pytest.approx(before, rel=1e-9)
    assert row["target"] == pytest.approx(before * 1.2, rel=1e-9)
    assert row["current"] == pytest.approx(after, rel=1e-9)
    assert row["progress"] == pytest.approx((after - before) / (0.2 * before), rel=1e-9) and row["met"] is True

    out = tmp_path / "rules"
    assert run(rules, ["generate", "--spec", loop_spec, "--out", out]).exit_code == 0
    groups = yaml.safe_load((out / "obsctl-targets.rules.yaml").read_text())["groups"]
    value = next(r for g in groups for r in g["rules"] if r.get("record") == "workload_class:obsctl_signal_target:value")
    assert value["expr"] == f"vector({row['target']!r})"
    info = next(r for g in groups for r in g["rules"] if r.get("record") == "obsctl_target_info")
    assert info["labels"]["anchor_baseline_id"] == row["anchor_baseline_id"]


def test_an_early_baseline_has_a_way_forward_before_the_first_look(history, loop_spec, tmp_path):
    # A 30 min baseline ending 90 min before the start: start warns with the exact commands,
    # and the initiative can be bound to a fresh baseline ending at the start, logged, until
    # its first look (then the remedy is a new change).
    early = run(snapshot_baseline, ["--spec", loop_spec, "--class", "steady", "--window", "30m", "--end", history.iso(-0.5)])
    assert early.exit_code == 0, early.output
    started = run(initiative, ["start", "--spec", loop_spec, "--name", "early base", "--lever", "batch-size", "--class", "steady",
                               "--signal", "tokens_per_second", "--started-at", history.iso(1), "--output", "json"])
    assert started.exit_code == 0, started.output
    iid = json.loads(started.stdout)["id"]
    warning = (f"baseline steady.tokens_per_second.{json.loads(started.stdout)['baseline_id'].rsplit('.', 1)[1]} ended 1h30m before "
               "the start (more than 1h): verify will compare with the period right before the start instead. To judge against a "
               "baseline that ends at the start, before the first verify: obsctl snapshot-baseline --class steady --signal "
               f"tokens_per_second --window 30m --end {history.iso(1)} && obsctl initiative rebase --initiative {iid} --reason ")
    assert warning in started.stderr
    store = Store(tmp_path / "store")
    old = store.initiative(iid).baseline_id
    none_fresher = run(initiative, ["rebase", "--spec", loop_spec, "--initiative", iid, "--reason", "fresh"])
    assert none_fresher.exit_code == 1 and "no fresher baseline" in none_fresher.output
    fresh = run(snapshot_baseline, ["--spec", loop_spec, "--class", "steady", "--window", "30m", "--end", history.iso(1)])
    assert fresh.exit_code == 0, fresh.output
    new = store.current_baseline("steady", "tokens_per_second").id
    rebased = run(initiative, ["rebase", "--spec", loop_spec, "--initiative", iid, "--reason", "baseline ended 1h30m early"])
    assert rebased.exit_code == 0, rebased.output
    assert rebased.stdout.strip() == f"rebased initiative {iid}: baseline {old} -> {new} (logged on the initiative)"
    record = store.initiative(iid)
    assert record.baseline_id == new and record.rebased[0]["from"] == old and record.rebased[0]["reason"] == "baseline ended 1h30m early"
    assert [s.baseline_id for s in record.baseline_sides] == [new]
    # The verdict now compares with the fresh baseline (no "right before the start" note).
    out = json.loads(run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"]).stdout)
    assert out["baseline_id"] == new and "right before the start" not in out["reason"]
    after = run(initiative, ["rebase", "--spec", loop_spec, "--initiative", iid, "--reason", "again"])
    assert after.exit_code == 1 and "can change only before the first look" in after.output and "start a new change after" in after.output


def test_a_placebo_initiative_is_recorded_as_such_and_never_promoted(history, loop_spec, tmp_path):
    # An A/A run on the same process before and after ("noisy"): started with --expected-impact 0.
    snap = run(snapshot_baseline, ["--spec", loop_spec, "--class", "noisy", "--window", "1h", "--end", history.iso(1)])
    assert snap.exit_code == 0, snap.output
    started = run(initiative, ["start", "--spec", loop_spec, "--name", "a/a", "--lever", "batch-size", "--class", "noisy",
                               "--signal", "tokens_per_second", "--expected-impact", "0", "--started-at", history.iso(1)])
    assert started.exit_code == 0, started.output
    assert started.stdout.startswith("started placebo (A/A) initiative a-a-")
    iid = started.stdout.split()[4].rstrip(":")
    record = Store(tmp_path / "store").initiative(iid)
    assert record.placebo is True and record.expected_impact_ratio is None
    out = json.loads(run(verify, ["--spec", loop_spec, "--initiative", iid, "--end", history.iso(2), "--output", "json"]).stdout)
    assert out["verdict"] in ("NO_CHANGE", "INCONCLUSIVE") and out["placebo_initiative"] is True
    text = run(verify, ["--spec", loop_spec, "--initiative", iid, "--peek"]).stdout.splitlines()
    assert text[2].startswith("placebo (A/A) initiative: nothing was changed, NO_CHANGE expected; "), text
    assert ("as expected" in text[2]) == (out["verdict"] == "NO_CHANGE")
    assert run(report, ["--spec", loop_spec, "--initiative", iid, "--out", tmp_path / "rep"]).exit_code == 0
    assert "expected impact none (placebo (A/A) initiative: nothing was changed, NO_CHANGE expected" in (tmp_path / "rep" / f"{iid}.md").read_text()
    refused = run(baseline, ["promote", "--spec", loop_spec, "--initiative", iid])
    assert refused.exit_code == 1 and "is a placebo (A/A)" in refused.output
    from obsctl.baselining.practice.ledger import build_ledger
    from obsctl.baselining.text.present_ledger import ledger_lines, ledger_markdown
    from obsctl.spec import load_spec

    ledger = build_ledger(load_spec(loop_spec), Store(tmp_path / "store"))
    assert any("placebo (A/A): nothing was changed, NO_CHANGE expected" in line for line in ledger_lines(ledger))
    assert "| placebo (A/A) |" in ledger_markdown(ledger)
