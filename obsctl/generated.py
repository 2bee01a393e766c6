"""Generated files (rule files, dashboards): write them atomically, tell whether a
committed copy is stale, and the ``python -m ... [--check]`` entry point both use.

Generated output is committed (kubernetes-mixin practice) and a test regenerates it, so
a change to the generators that is not committed shows up as a failing check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from obsctl.atomicio import atomic_write_text
from obsctl.spec import Spec, load_spec

#: ``{file name: text}``, what a generator produces.
Files = dict[str, str]


def write_files(out: Path, files: Files) -> list[Path]:
    """Write each file atomically into ``out`` (created if needed); returns the paths.

    Raises:
        WriteError: a file could not be written (files already written stay complete).
    """
    for name, text in files.items():
        atomic_write_text(out / name, text)
    return [out / name for name in files]


def stale_files(out: Path, files: Files, pattern: str) -> list[str]:
    """Names in ``out`` matching ``pattern`` that are missing, extra or differ from ``files``."""
    existing = {p.name for p in out.glob(pattern)} if out.is_dir() else set()
    differ = [n for n in sorted(files) if n not in existing or _read(out / n) != files[n]]
    return differ + sorted(existing - set(files))


def _read(path: Path) -> str | None:
    """The file's text, or None when it is not a readable UTF-8 file (so it counts as stale)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def regenerate_main(
    prog: str, produce: Callable[[Spec], Files], pattern: str, example_spec: Path, committed: Path, argv: list[str] | None
) -> int:
    """``prog [--check] [--spec PATH] [--out DIR]``: regenerate the committed copy, or with
    ``--check`` exit 1 (naming the files) when it is stale."""
    parser = argparse.ArgumentParser(prog=prog, description=f"Regenerate (or --check) {committed.name}/ from a spec.")
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    parser.add_argument("--spec", type=Path, default=example_spec)
    parser.add_argument("--out", type=Path, default=committed)
    args = parser.parse_args(argv)
    files = produce(load_spec(args.spec))
    if args.check:
        stale = stale_files(args.out, files, pattern)
        if stale:
            print(f"{args.out}: out of date: {', '.join(stale)}; run: {prog}", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    for path in write_files(args.out, files):
        print(path)
    return 0
