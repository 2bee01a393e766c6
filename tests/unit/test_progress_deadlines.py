"""Deadlines on progress (obsctl.processes.Progress): a server starting up or a promtool run is
waited for while it uses CPU (a busy machine slows it), and given up when it stalls or at a
hard ceiling. The rules are checked on an injected clock and CPU reader (no timing); the
real /proc reader and the runner on real processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from obsctl import processes
from obsctl.errors import ObsctlError
from support import servers


class Fake:
    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def clock(self) -> float:
        return self.now

    def used(self, _pid: int) -> float:
        return self.cpu


def test_a_process_using_cpu_is_waited_for_past_the_stall_window() -> None:
    fake = Fake()
    progress = processes.Progress(123, stall=30, clock=fake.clock, cpu=fake.used)
    for _ in range(9):  # 270 s on a busy machine, a little CPU every 30 s
        fake.now += 29
        fake.cpu += 0.01
        assert not progress.expired()
    fake.now += 29  # no CPU used for 29 s: still within the window
    assert not progress.expired()
    fake.now += 1
    assert progress.expired() and progress.why() == "no progress (no CPU used) for 30s"


def test_the_ceiling_ends_even_a_process_that_keeps_using_cpu() -> None:
    fake = Fake()
    progress = processes.Progress(123, stall=30, clock=fake.clock, cpu=fake.used)
    assert progress.ceiling == 300
    while fake.now < 299:
        fake.now += 10
        fake.cpu += 1
        assert progress.expired() == (fake.now >= 300)
    assert progress.why() == "not done after 300s (the ceiling)"


def test_without_a_process_the_deadline_is_the_stall_window() -> None:
    fake = Fake()
    progress = processes.Progress(None, stall=5, clock=fake.clock, cpu=fake.used)
    fake.now, fake.cpu = 4.9, 100.0
    assert not progress.expired()
    fake.now = 5.0
    assert progress.expired()


def test_cpu_seconds_reads_a_real_process() -> None:
    if processes.cpu_seconds(1) is None and not sys.platform.startswith("linux"):
        pytest.skip("/proc is Linux's")
    proc = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in range(3_000_000): pass\nsys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        used = processes.cpu_seconds(proc.pid)
        assert used is not None and used >= 0
    finally:
        proc.communicate(b"")
    assert processes.cpu_seconds(proc.pid) is None  # gone


def test_run_progressing_returns_what_subprocess_run_would() -> None:
    done = processes.run_progressing([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                                 stall=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_run_progressing_stops_a_stalled_process() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run_progressing([sys.executable, "-c", "import time; time.sleep(600)"], stall=0.5, ceiling=30)


def test_wait_ready_gives_up_on_a_process_that_stalls_without_serving() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with pytest.raises(ObsctlError, match=r"not ready: (no progress|not done after)"):
            servers.wait_ready(f"http://127.0.0.1:{servers.free_port()}/", timeout=0.5, process=proc, ceiling=30)
    finally:
        proc.kill()
        proc.wait()
