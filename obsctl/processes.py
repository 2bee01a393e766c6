"""Running the Prometheus toolchain's programs from obsctl: finding a binary on PATH and
running it under a deadline on progress instead of a fixed timeout (``promtool`` checks
and tests of the generated rules, :mod:`obsctl.rules.promtool`).

A deadline on progress passes when the process has used no CPU for its stall window, or
at a hard ceiling: a run slowed down by a busy machine is waited for, a hung one is not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from obsctl.errors import ObsctlError

PROMTOOL_BIN = "promtool"


def require_binary(name: str) -> str:
    """Absolute path of ``name`` on PATH; raises ObsctlError naming the Debian package."""
    path = shutil.which(name)
    if path is None:
        package = {"promtool": "prometheus", "prometheus-alertmanager": "prometheus-alertmanager"}.get(name, name)
        raise ObsctlError(f"{name} not found on PATH; install it with: apt-get install {package}")
    return path


#: A deadline on progress ends at the latest this many times its stall window after it began.
CEILING_FACTOR = 10


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, s) the process ``pid`` and its waited-for children have used,
    from ``/proc/<pid>/stat`` (Linux); None where it cannot be read (gone, not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Progress:
    """A deadline on progress: it passes when a process has used no CPU for ``stall`` seconds,
    or at the latest ``ceiling`` seconds after it began, so a slow start on a busy machine is
    waited for while a hung one is not.

    Args:
        pid: the process watched (None: no progress is seen; the deadline is ``stall`` seconds).
        stall: seconds without CPU progress. ceiling: hard limit (default
            :data:`CEILING_FACTOR` x ``stall``).
        clock: monotonic seconds; cpu: ``pid -> CPU seconds or None`` (injected in tests).
    """

    def __init__(self, pid: int | None, stall: float, ceiling: float | None = None,
                 clock: Callable[[], float] = time.monotonic, cpu: Callable[[int], float | None] = cpu_seconds) -> None:
        self.pid, self.stall = pid, stall
        self._clock, self._cpu = clock, cpu
        self.started = self._last_move = clock()
        self.ceiling = stall * CEILING_FACTOR if ceiling is None else ceiling
        self._used = cpu(pid) if pid is not None else None

    def expired(self) -> bool:
        """Whether the deadline has passed (checked now: progress since the last call counts)."""
        now = self._clock()
        if self.pid is not None:
            used = self._cpu(self.pid)
            if used is not None and (self._used is None or used > self._used):
                self._used, self._last_move = used, now
        return now - self._last_move >= self.stall or now - self.started >= self.ceiling

    def why(self) -> str:
        """Which limit passed, for a message."""
        if self._clock() - self.started >= self.ceiling:
            return f"not done after {self.ceiling:.0f}s (the ceiling)"
        return f"no progress (no CPU used) for {self.stall:.0f}s"


def run_progressing(argv: list[str], stall: float, ceiling: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, **kwargs)`` with a deadline on
    progress (:class:`Progress`) instead of a fixed timeout.

    Raises:
        subprocess.TimeoutExpired: the process stalled for ``stall`` seconds or ran past the
            ceiling (it is killed first).
    """
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs) as proc:
        progress = Progress(proc.pid, stall, ceiling)
        while True:
            try:
                out, err = proc.communicate(timeout=min(1.0, stall))
                return subprocess.CompletedProcess(argv, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                if progress.expired():
                    proc.kill()
                    out, err = proc.communicate()
                    raise subprocess.TimeoutExpired(argv, progress.ceiling, out, err) from None
