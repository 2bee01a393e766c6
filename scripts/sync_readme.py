"""Write the GPU metric catalogue (from obsctl.exporters.gpu.catalogue) and the source
catalogue (from obsctl.rules.sources.doc) into README.md between their markers, so the
README cannot drift from the code.

Usage: python scripts/sync_readme.py [--check]   (--check: exit 1 if README is stale)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from obsctl.exporters.gpu.catalogue import render_markdown_table
from obsctl.rules.sources.doc import render_markdown as render_sources

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"(<!-- catalogue:start -->\n).*?(<!-- catalogue:end -->)", re.S)
SOURCES_BLOCK = re.compile(r"(<!-- sources:start -->\n).*?(<!-- sources:end -->)", re.DOTALL)


def synced(text: str) -> str:
    """README text with the catalogue block replaced by the current table."""
    table = render_markdown_table()
    text = BLOCK.sub(lambda m: m.group(1) + table + ("" if table.endswith("\n") else "\n") + m.group(2), text)
    sources = render_sources()
    return SOURCES_BLOCK.sub(lambda m: m.group(1) + sources + m.group(2), text)


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = synced(text)
    if "--check" in argv:
        if new != text:
            print("README.md GPU or source catalogue is stale: run python scripts/sync_readme.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
