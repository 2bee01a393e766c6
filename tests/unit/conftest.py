"""Fixtures of the unit tests that need real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture()
def sleeper() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start idle child processes with chosen OBSCTL_* environment variables (the others
    removed); every one still running is killed when the test ends.

    Call it as ``sleeper(OBSCTL_WORKLOAD_CLASS="embed", OBSCTL_WORKLOAD_OWNER="team")``.
    """
    started: list[subprocess.Popen] = []

    def start(**obsctl_env: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OBSCTL_")} | obsctl_env
        # The child says "ready" once it runs: Popen returns when exec has begun, before the
        # kernel has laid out the new environment (/proc/PID/environ reads empty until then).
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"], env=env,
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout.readline() == "ready\n"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
        proc.stdout.close()
