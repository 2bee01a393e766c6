"""obsctl.cli.main, the console-script entry point."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_the_cli_entry_point_freezes_startup_objects_and_collects_young_objects_less_often():
    # obsctl.cli.main: a short-lived process; the exporter's entry point keeps CPython's defaults.
    out = _run("import gc; from obsctl.cli import main, CLI_GC_THRESHOLD\n"
               "before = gc.get_threshold()\n"
               "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
               "print(before[0], gc.get_threshold()[0] == CLI_GC_THRESHOLD, gc.get_freeze_count() > 10000)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["700", "True", "True"]
