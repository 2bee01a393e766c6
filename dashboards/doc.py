"""docs/dashboards.md's panel list, generated from the dashboards themselves.

For each dashboard built from ``examples/obsctl.yaml`` (the committed copy in
``dashboards/generated/``): its rows and panels in order, each with its type and what it
answers (the panel's ``description``, see :mod:`obsctl.dashboards.answers`). Written between
the ``<!-- panels:begin -->`` / ``<!-- panels:end -->`` markers of docs/dashboards.md.

Usage: ``python -m obsctl.dashboards.doc [--check]`` (``--check``: write nothing, exit 1 when
the list in docs/dashboards.md is stale).
"""

from __future__ import annotations

import json
import re
import sys

from obsctl.dashboards.build import EXAMPLE_SPEC, REPO, build
from obsctl.spec import load_spec

DOC = REPO / "docs" / "dashboards.md"
BLOCK = re.compile(r"(<!-- panels:begin -->\n).*?(<!-- panels:end -->)", re.DOTALL)


def _cell(text: str) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def render_markdown(files: dict[str, str]) -> str:
    """The panel list of the dashboards ``{file name: JSON text}`` (:func:`obsctl.dashboards.build.build`)."""
    lines: list[str] = []
    for name, text in files.items():
        dash = json.loads(text)
        lines += [f"### {_cell(dash['title'])} (`{name}`)", "", _cell(dash.get("description", "")), "",
                  "| row | panel | type | what it answers |", "|---|---|---|---|"]
        row = "(top)"
        for panel in dash["panels"]:
            if panel["type"] == "row":
                row = _cell(panel["title"])
                continue
            lines.append(f"| {row} | {_cell(panel['title'])} | {panel['type']} | {_cell(panel.get('description', ''))} |")
        lines.append("")
    return "\n".join(lines)


def synced(doc_text: str, files: dict[str, str]) -> str:
    """``doc_text`` with the block between the markers replaced by the current list.

    Raises:
        ValueError: the markers are missing.
    """
    if not BLOCK.search(doc_text):
        raise ValueError(f"{DOC}: no <!-- panels:begin --> / <!-- panels:end --> block")
    table = render_markdown(files)
    return BLOCK.sub(lambda m: m.group(1) + table + m.group(2), doc_text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` verify) the panel list of docs/dashboards.md; 1 when stale."""
    args = sys.argv[1:] if argv is None else argv
    text = DOC.read_text()
    new = synced(text, build(load_spec(EXAMPLE_SPEC)))
    if "--check" in args:
        if new != text:
            print("docs/dashboards.md panel list is stale: run python -m obsctl.dashboards.doc", file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
