"""Build every dashboard as Grafana JSON, deterministically (sorted keys, no timestamps).

``python -m obsctl.dashboards.build [--check]`` regenerates the committed copy in
``dashboards/generated/`` from ``examples/obsctl.yaml`` (``make generate``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from obsctl.dashboards import gpu_fleet, loop_overview
from obsctl.rules.render import stale_files, write_atomic
from obsctl.spec import Spec, load_spec

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SPEC = REPO / "examples" / "obsctl.yaml"
COMMITTED = REPO / "dashboards" / "generated"
PATTERN = "obsctl-*.json"


def build(spec: Spec) -> dict[str, str]:
    """``{file name: JSON text}`` for each dashboard (``obsctl-<uid suffix>.json``)."""
    dashboards = [loop_overview.build(spec), gpu_fleet.build()]
    return {f"{d['uid']}.json": json.dumps(d, indent=2, sort_keys=True) + "\n" for d in dashboards}


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write each dashboard atomically into ``out``; returns the paths."""
    for name, text in files.items():
        write_atomic(out / name, text)
    return [out / name for name in files]


def check(out: Path, files: dict[str, str]) -> list[str]:
    """Dashboard files in ``out`` that are missing, extra or differ (empty: up to date)."""
    return stale_files(out, files, PATTERN)


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` verify) the committed dashboards; exit 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m obsctl.dashboards.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    parser.add_argument("--spec", type=Path, default=EXAMPLE_SPEC)
    parser.add_argument("--out", type=Path, default=COMMITTED)
    args = parser.parse_args(argv)
    files = build(load_spec(args.spec))
    if args.check:
        stale = check(args.out, files)
        if stale:
            print(f"{args.out}: out of date: {', '.join(stale)}; run: python -m obsctl.dashboards.build", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    for path in write(args.out, files):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
