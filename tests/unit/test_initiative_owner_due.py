"""Initiatives with an owner, a due date and a lever outside the list, through the CLI on
a store without Prometheus (``initiative start`` and ``initiative list`` read the store only).

- ``--owner`` is validated with the spec's owner pattern; ``--due`` is a date not before the start.
- ``initiative list`` shows the planned end (the due date at 00:00 UTC, else the start plus
  the planned length) and OVERDUE past it without a decisive verdict.
- ``--lever other`` needs ``--lever-description``; a description with a listed lever is refused.
- ``initiative start`` warns on stderr when its plan cannot detect the expected effect.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative
from obsctl.baselining.store import Store
from obsctl.records import Initiative, Statistics, VerificationResult, Window
from support.store_records import make_baseline

CLASS, SIGNAL = "embed-online", "tokens_per_second"
SPEC = {"store": "store",
        "workload_classes": [{"name": CLASS, "kind": "inference", "selector": {"workload": CLASS}, "owner": "team-embed"}],
        "signals": [{"name": SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"}]}
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def _spec(tmp_path, baseline=None) -> str:
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    Store(tmp_path / "store").save_baseline(baseline or make_baseline(cls=CLASS, sig=SIGNAL))
    return str(path)


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _start(spec, *extra, started=None):
    args = ["start", "--spec", spec, "--name", "kv offload", "--class", CLASS, "--signal", SIGNAL,
            "--started-at", _iso(started or NOW - dt.timedelta(minutes=10)), *extra]
    return CliRunner().invoke(initiative, args)


def _list(spec, output="json"):
    r = CliRunner().invoke(initiative, ["list", "--spec", spec, "--output", output])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if output == "json" else r.stdout


def test_owner_and_due_are_stored_and_the_due_date_is_the_planned_end(tmp_path):
    spec = _spec(tmp_path)
    due = (NOW + dt.timedelta(days=3)).date()
    r = _start(spec, "--lever", "batch-size", "--owner", "Jane Doe (SRE)", "--due", due.isoformat())
    assert r.exit_code == 0, r.output
    assert ", owner Jane Doe (SRE), due " + due.isoformat() in r.stdout
    [row] = _list(spec)
    assert (row["owner"], row["due"], row["overdue"]) == ("Jane Doe (SRE)", due.isoformat(), False)
    assert row["planned_end"] == f"{due.isoformat()}T00:00:00Z"
    text = _list(spec, "text")
    assert f"planned end {due.isoformat()}T00:00:00Z, owner Jane Doe (SRE)" in text and "OVERDUE" not in text


def test_without_due_the_planned_end_is_the_start_plus_the_planned_length(tmp_path):
    spec = _spec(tmp_path)
    started = NOW - dt.timedelta(minutes=10)
    assert _start(spec, "--lever", "batch-size", started=started).exit_code == 0
    [row] = _list(spec)
    # The spec's default verification.window is 1h (a 2-sample baseline cannot be planned from),
    # plus the change's transition: the signal's rate(...[1m]) reads the minute before.
    assert row["planned_window_seconds"] == 3600 + 60
    assert row["planned_end"] == _iso(started + dt.timedelta(hours=1, minutes=1)) and row["overdue"] is False


def test_overdue_past_the_planned_end_until_a_decisive_verdict(tmp_path):
    spec = _spec(tmp_path)
    started = NOW - dt.timedelta(hours=5)
    assert _start(spec, "--lever", "batch-size", started=started).exit_code == 0
    [row] = _list(spec)
    assert row["overdue"] is True and row["planned_end"] == _iso(started + dt.timedelta(hours=1, minutes=1))  # 1h + the rate's 1m transition
    assert "OVERDUE" in _list(spec, "text")

    store = Store(tmp_path / "store")
    i = store.initiative(row["id"])
    for verdict, overdue in (("INCONCLUSIVE", True), ("IMPROVED", False)):
        v = VerificationResult(verdict=verdict, primary_verdict=verdict, baseline_id=i.baseline_id, signal=SIGNAL,
                               window=Window(start=started, end=NOW, step_seconds=15), baseline_mean=1, window_mean=1,
                               change_ratio=0.1, ci_low=0.05, ci_high=0.15, confidence=0.95, verified_at=NOW,
                               window_stats=Statistics(sample_count=2, mean=1, median=1, p5=1, p95=1, stddev=0, batch_means=[1, 1]))
        store.save_initiative(i.model_copy(update={"status": "verified", "verifications": [v]}))
        assert _list(spec)[0]["overdue"] is overdue, verdict


@pytest.mark.parametrize("extra, message", [
    (["--owner", " padded"], "--owner ' padded' is not an owner name"),
    (["--owner", "tab\there"], "is not an owner name"),
    (["--owner", "x" * 129], "is not an owner name"),
    (["--due", "2026-13-01"], "--due: '2026-13-01' is not a date (YYYY-MM-DD)"),
    (["--due", "2020-01-01"], "--due 2020-01-01 is before the start"),
])
def test_bad_owner_or_due_is_one_line_and_stores_nothing(tmp_path, extra, message):
    spec = _spec(tmp_path)
    r = _start(spec, "--lever", "batch-size", *extra)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("obsctl: error: ") and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert _list(spec) == []


def test_lever_other_needs_a_description_and_shows_it(tmp_path):
    spec = _spec(tmp_path)
    missing = _start(spec, "--lever", "other")
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1, missing.output
    assert "--lever other needs --lever-description TEXT" in missing.stderr
    stray = _start(spec, "--lever", "batch-size", "--lever-description", "KV offload")
    assert stray.exit_code == 2 and "--lever-description is for --lever other" in stray.stderr, stray.output
    multi = _start(spec, "--lever", "other", "--lever-description", "two\nlines")
    assert multi.exit_code == 2 and "one line of at most 200 printable characters" in multi.stderr, multi.output
    assert _list(spec) == []

    ok = _start(spec, "--lever", "other", "--lever-description", "KV-cache offload to *CPU*")
    assert ok.exit_code == 0, ok.output
    assert "started initiative kv-offload-" in ok.stdout and ": other: KV-cache offload to *CPU* on embed-online" in ok.stdout
    [row] = _list(spec)
    assert (row["lever"], row["lever_description"]) == ("other", "KV-cache offload to *CPU*")
    assert "(other: KV-cache offload to *CPU*) on embed-online/tokens_per_second" in _list(spec, "text")


def test_the_record_refuses_other_without_description_and_a_description_elsewhere():
    base = dict(id="i", name="n", workload_class="c", primary_signal="s", baseline_id="b", started_at=NOW)
    with pytest.raises(ValueError, match="lever 'other' needs a lever_description"):
        Initiative(lever="other", **base)
    with pytest.raises(ValueError, match="lever_description is for lever 'other'"):
        Initiative(lever="topology", lever_description="x", **base)
    with pytest.raises(ValueError, match="owner"):
        Initiative(lever="topology", owner="bad\x07owner", **base)
    assert Initiative(lever="other", lever_description="KV offload", **base).lever_description == "KV offload"


def _noisy_baseline():
    # 480 samples at 15 s of white noise with a 30 % relative spread: the baseline's own mean
    # is uncertain by about 0.3 / sqrt(480) = 1.4 %, so no window however long detects 0.1 %.
    rng = np.random.default_rng(7)
    end = NOW - dt.timedelta(hours=1)
    ts = [end.timestamp() - 15 * k for k in range(480)][::-1]
    values = list(1000 * (1 + 0.3 * rng.standard_normal(480)))
    b = make_baseline(cls=CLASS, sig=SIGNAL, mean=float(np.mean(values)), created=end)
    return b.model_copy(update={"samples": list(zip(ts, values, strict=True)), "window": Window(start=end - dt.timedelta(hours=2), end=end, step_seconds=15),
                                "stats": b.stats.model_copy(update={"sample_count": 480})})


def test_start_warns_when_its_plan_cannot_detect_the_expected_effect(tmp_path):
    spec = _spec(tmp_path, _noisy_baseline())
    tiny = _start(spec, "--lever", "batch-size", "--expected-impact", "0.001")
    assert tiny.exit_code == 0, tiny.output
    [warning] = [line for line in tiny.stderr.splitlines() if line.startswith("obsctl: warning: ")]
    assert "its plan cannot detect +0.1% on embed-online/tokens_per_second" in warning and "INCONCLUSIVE" in warning


def test_start_does_not_warn_when_its_plan_can_detect_the_effect(tmp_path):
    spec = _spec(tmp_path, _noisy_baseline())
    large = _start(spec, "--lever", "batch-size", "--expected-impact", "0.5")
    assert large.exit_code == 0, large.output
    assert "warning" not in large.stderr and "detect +50.0% with" in large.stdout


def test_lever_other_in_the_ledger_and_the_report_is_escaped(tmp_path):
    from obsctl.baselining.practice.ledger import build_ledger
    from obsctl.baselining.report import write_report
    from obsctl.baselining.text.present_ledger import ledger_lines, ledger_markdown
    from obsctl.spec import load_spec
    from support import ledger_store

    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    ledger_store.build(store, spec)
    described = "KV *offload* | <b>[x](y)"
    i = store.initiative("scheduler-tweak")
    store.save_initiative(i.model_copy(update={"lever": "other", "lever_description": described}))

    ledger = build_ledger(spec, store)
    assert "scheduler-tweak: " in "\n".join(ledger_lines(ledger)) and f"(other: {described}) on" in "\n".join(ledger_lines(ledger))
    md = ledger_markdown(ledger)
    escaped = "other: KV \\*offload\\* \\| \\<b\\>\\[x\\](y)"  # '](' broken by the escaped ']'
    [row] = [line for line in md.splitlines() if line.startswith("| scheduler")]
    assert f"| {escaped} |" in row and row.count(" | ") == 6  # the description's '|' added no cell
    assert "<b>" not in md and "[x](y)" not in md
    assert ledger.as_dict()["initiatives"][1]["lever_description"] == described

    report_md, _ = write_report(store, "scheduler-tweak", tmp_path / "out")
    text = report_md.read_text()
    assert f"lever **{escaped}**" in text and "<b>" not in text and "[x](y)" not in text
