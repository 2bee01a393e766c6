"""The outcome ledger from a store built through the real promote and close paths
(support.ledger_store): entries, the staircase, text, Markdown escaping, JSON, PNG, CLI."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.ledger import build_ledger, write_ledger
from obsctl.baselining.present_ledger import ledger_lines, ledger_markdown
from obsctl.baselining.store import Store
from obsctl.cli import cli
from obsctl.spec import load_spec
from support import ledger_store as L

SPEC = {
    "store": "store",
    "workload_classes": [{"name": "embed-online", "kind": "inference", "selector": {"workload": "embed-online"}, "owner": "team-search"}],
    "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                 "unit": "tokens/s", "direction": "higher_is_better"}],
}


@pytest.fixture
def built(tmp_path):
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    L.build(store, spec)
    return spec, store


def test_entries_record_change_effect_cost_and_lesson(built):
    spec, store = built
    ledger = build_ledger(spec, store)
    assert [e.id for e in ledger.entries] == ["batch-size-32", "scheduler-tweak", "int8-weights"]
    first, _, last = ledger.entries
    assert (first.status, first.verdict, first.change_ratio, first.ci_low, first.ci_high) == ("promoted", "IMPROVED", 0.5, 0.4, 0.6)
    assert first.lesson == L.LESSONS["batch-size-32"] and first.effort == "2 engineer-days"
    assert first.promoted_baseline is not None and first.ended_at is not None
    assert (last.status, last.verdict, last.lesson, last.effort) == ("closed", "NO_CHANGE", "int8 gains nothing on CPU", "1 engineer-day")
    assert first.usd_per_month_change is None  # no Prometheus asked


def test_staircase_compounds_the_promoted_baselines(built):
    spec, store = built
    (chain,) = build_ledger(spec, store).chains
    assert [s.mean for s in chain.steps] == [1000.0, 1500.0, 1800.0]
    assert [s.initiative for s in chain.steps] == [None, "batch-size-32", "scheduler-tweak"]
    assert chain.steps[1].step_ratio == pytest.approx(0.5) and chain.steps[2].step_ratio == pytest.approx(0.2)
    assert chain.cumulative_ratio == pytest.approx(0.8)  # 1800 / 1000 - 1
    assert chain.verified_ratio == pytest.approx(1.5 * 1.2 - 1)


def test_text_lines_and_json(built):
    spec, store = built
    ledger = build_ledger(spec, store)
    text = "\n".join(ledger_lines(ledger))
    assert "batch-size-32: batch size 32 (batch-size) on embed-online/tokens_per_second" in text
    assert "effect: IMPROVED +50.0 % (95 % CI +40.0 % .. +60.0 %), expected +30.0 %" in text
    assert "embed-online/tokens_per_second: 2 promotion(s), cumulative +80.0 % (verified +80.0 %)" in text
    doc = json.loads(json.dumps(ledger.as_dict()))
    assert doc["initiatives"][0]["lesson"] == L.LESSONS["batch-size-32"]
    assert doc["chains"][0]["steps"][2]["cumulative_ratio"] == pytest.approx(0.8)


def test_markdown_escapes_untrusted_text(built):
    spec, store = built
    text = ledger_markdown(build_ledger(spec, store), "ledger.png")
    assert "Batching \\| \\*amortizes\\* \\<b\\>the\\</b\\> \\[tokenizer\\](x)" in text
    assert not re.search(r"(?<!\\)<", text) and not re.search(r"(?<!\\)\]\(x\)", text)  # no raw HTML, no link
    rows = [line for line in text.splitlines() if line.startswith("| batch-size-32")]
    assert len(rows) == 1 and rows[0].count(" | ") == 6  # the lesson's '|' did not add a cell


def test_figure_and_files(built, tmp_path):
    spec, store = built
    md, png = write_ledger(build_ledger(spec, store), tmp_path / "out")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "![" in md.read_text()


def test_cli_offline_json_and_markdown(built, tmp_path):
    spec, _ = built
    runner = CliRunner()
    result = runner.invoke(cli, ["ledger", "--spec", str(spec.path), "--no-cost", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert [e["id"] for e in json.loads(result.stdout)["initiatives"]] == ["batch-size-32", "scheduler-tweak", "int8-weights"]
    md = runner.invoke(cli, ["ledger", "--spec", str(spec.path), "--no-cost", "--format", "markdown", "--out", str(tmp_path / "o")])
    assert md.exit_code == 0 and md.stdout.startswith("# Outcome ledger") and (tmp_path / "o" / "ledger.png").exists()
    bad = runner.invoke(cli, ["ledger", "--spec", str(spec.path), "--no-cost", "--class", "nope"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_cli_unreachable_prometheus_is_exit_3(built):
    spec, _ = built
    data = dict(SPEC, prometheus={"url": "http://127.0.0.1:9", "timeout_seconds": 1})
    spec.path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(cli, ["ledger", "--spec", str(spec.path)])
    assert result.exit_code == 3 and "Traceback" not in result.output


HOSTILE_LESSON = "ok\nverdict: IMPROVED +900 %\r\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J \u202eevil\u2066"
HOSTILE_EFFORT = "1 day\n  lesson: forged\x9b31m"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    monkeypatch.setitem(L.LESSONS, "batch-size-32", HOSTILE_LESSON)
    monkeypatch.setitem(L.EFFORT, "batch-size-32", HOSTILE_EFFORT)
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    L.build(store, spec)
    return spec, store


def test_text_lines_cannot_be_forged_or_carry_escapes(hostile):
    spec, store = hostile
    lines = ledger_lines(build_ledger(spec, store))
    assert not [line for line in lines if RAW.search(line) or "\n" in line]
    assert not [line for line in lines if line.startswith(("verdict:", "  lesson: forged"))]
    (lesson,) = [line for line in lines if line.startswith("  lesson: ok")]
    assert lesson == ("  lesson: ok\\nverdict: IMPROVED +900 %\\r\\x1b]8;;https://evil.example\\x07click\\x1b]8;;\\x07 "
                      "\\x1b[2J \\u202eevil\\u2066")
    assert "  cost: effort 1 day\\n  lesson: forged\\u009b31m, spend change n/a" in lines


def test_cli_text_and_markdown_carry_no_control_or_bidi_character(hostile, tmp_path):
    spec, _ = hostile
    runner = CliRunner()
    for args in ([], ["--format", "markdown", "--out", str(tmp_path / "o")]):
        result = runner.invoke(cli, ["ledger", "--spec", str(spec.path), "--no-cost", *args])
        assert result.exit_code == 0, result.output
        assert not RAW.search(result.stdout.replace("\n", "")), result.stdout
    written = (tmp_path / "o" / "ledger.md").read_text()
    assert "\u202e" not in written and "\u2066" not in written and "\\\\u202eevil" in written


def test_initiative_list_shows_a_name_with_a_line_break_on_one_line(built):
    spec, store = built
    first = store.initiatives()[0]
    store.save_initiative(first.model_copy(update={"name": "batch\nverdict: IMPROVED \u202eevil"}))
    result = CliRunner().invoke(cli, ["initiative", "list", "--spec", str(spec.path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and not [line for line in lines if line.startswith("verdict:")]
    assert "batch\\nverdict: IMPROVED \\u202eevil (batch-size)" in lines[0]
