"""Build every dashboard as Grafana JSON, deterministically (sorted keys, no timestamps).

``python -m obsctl.dashboards.build [--check]`` regenerates the committed copy in
``dashboards/generated/`` from ``examples/obsctl.yaml`` (``make generate``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from obsctl.dashboards import (
    answers,
    cost,
    gpu_fleet,
    inference,
    loop_overview,
    training,
    verification,
)
from obsctl.generated import regenerate_main, stale_files, write_files
from obsctl.spec import Spec

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SPEC = REPO / "examples" / "obsctl.yaml"
COMMITTED = REPO / "dashboards" / "generated"
PATTERN = "obsctl-*.json"


def build(spec: Spec) -> dict[str, str]:
    """``{file name: JSON text}`` for each dashboard (``obsctl-<uid suffix>.json``)."""
    dashboards = [loop_overview.build(spec), gpu_fleet.build(), inference.build(spec), training.build(spec), cost.build(spec),
                  verification.build(spec)]
    dashboards = [answers.apply(d) for d in dashboards]  # every panel says what it answers
    return {f"{d['uid']}.json": json.dumps(d, indent=2, sort_keys=True) + "\n" for d in dashboards}


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write each dashboard atomically into ``out``; returns the paths."""
    return write_files(out, files)


def check(out: Path, files: dict[str, str]) -> list[str]:
    """Dashboard files in ``out`` that are missing, extra or differ (empty: up to date)."""
    return stale_files(out, files, PATTERN)


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` verify) the committed dashboards; exit 1 when stale."""
    return regenerate_main("python -m obsctl.dashboards.build", build, PATTERN, EXAMPLE_SPEC, COMMITTED, argv)


if __name__ == "__main__":
    sys.exit(main())
