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


def test_the_cli_entry_point_limits_blas_threads_unless_the_user_set_them():
    code = ("import os; from obsctl.cli import main, BLAS_THREAD_VARIABLES\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(*(os.environ[v] for v in BLAS_THREAD_VARIABLES))")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert out.returncode == 0 and out.stdout.split()[-3:] == ["1", "1", "1"], out.stderr
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         env={**env, "OPENBLAS_NUM_THREADS": "4"})
    assert out.stdout.split()[-3:] == ["4", "1", "1"], out.stderr
