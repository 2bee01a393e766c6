"""docs/dashboards.md's panel list comes from the dashboards: every panel says what it answers,
and the list in the doc is the one the dashboards give (obsctl.dashboards.doc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obsctl.dashboards import answers, doc
from obsctl.dashboards import build as builder
from obsctl.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "examples" / "obsctl.yaml", REPO / "deploy" / "kubernetes" / "base" / "obsctl.yaml"]


def _built(spec: Path) -> list[dict]:
    return [json.loads(text) for text in builder.build(load_spec(spec)).values()]


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.parent.name)
def test_every_panel_says_what_it_answers(spec):
    missing = [(d["uid"], p["title"]) for d in _built(spec) for p in d["panels"]
               if p["type"] != "row" and not p.get("description", "").strip()]
    assert not missing, f"panels without a description (add one in the module or dashboards/answers.py): {missing}"


def test_every_answer_names_a_panel_that_uses_it():
    panels = {(d["uid"], p["title"]): p.get("description") for d in _built(SPECS[0]) for p in d["panels"] if p["type"] != "row"}
    for uid, entries in answers.ANSWERS.items():
        for title, text in entries.items():
            assert (uid, title) in panels, f"dashboards/answers.py: no panel {title!r} in {uid}"
            assert panels[(uid, title)] == text, f"{uid} / {title}: the module's own description wins; drop the entry"


def test_doc_lists_every_row_and_panel():
    files = builder.build(load_spec(SPECS[0]))
    text = (REPO / "docs" / "dashboards.md").read_text()
    assert doc.synced(text, files) == text, "docs/dashboards.md panel list is stale: run python -m obsctl.dashboards.doc"
    assert doc.main(["--check"]) == 0
    for body in files.values():
        dash = json.loads(body)
        assert f"### {dash['title']} (`{dash['uid']}.json`)" in text
        for panel in dash["panels"]:
            assert f"| {doc._cell(panel['title'])} |" in text, panel["title"]


def test_render_keeps_rows_and_escapes_cells():
    dash = {"title": "T", "description": "d", "panels": [
        {"type": "stat", "title": "Top", "description": "a | b\nc"},
        {"type": "row", "title": "R1"},
        {"type": "table", "title": "In R1"}]}
    out = doc.render_markdown({"t.json": json.dumps(dash)})
    assert "| (top) | Top | stat | a \\| b c |" in out
    assert "| R1 | In R1 | table |  |" in out


def test_stale_list_and_missing_markers_are_caught():
    files = builder.build(load_spec(SPECS[0]))
    stale = "<!-- panels:begin -->\n| old |\n<!-- panels:end -->\n"
    assert doc.synced(stale, files) != stale
    with pytest.raises(ValueError, match="panels:begin"):
        doc.synced("no markers here\n", files)
