"""Every obsctl command's text output, ``--output json`` output and exit code over the
fixture matrix of tests/golden_cli/harness.py against the committed golden record
(tests/golden_cli/golden.json), one unified diff per case that changed.

Skipped unless OBSCTL_GOLDEN=1: a change of wording is a change of the record, made on
purpose with ``scripts/cli_golden.py record tests/golden_cli/golden.json``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from golden_cli import harness

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden_cli"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("OBSCTL_GOLDEN") != "1", reason="golden CLI record: set OBSCTL_GOLDEN=1 to compare"),
    pytest.mark.timeout(900),
]


def test_cli_output_matches_golden_record():
    golden = harness.load(GOLDEN_DIR / "golden.json")
    current = harness.record(harness.Runner(python=sys.executable))
    changed = harness.diff(golden, current)
    if changed:
        pytest.fail(f"{len(changed)} of {len(golden)} golden CLI cases differ ({', '.join(changed)}):\n\n"
                    + "\n\n".join(changed.values()), pytrace=False)
