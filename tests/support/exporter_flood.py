"""A connection flood against a real ``obsctl-exporter`` process, with a real scrape beside it.

Shared by ``tests/integration/test_exporter_flood.py`` (10 s) and
``bench/bench_exporter_flood.py`` (the soak). The exporter runs with its descriptor limit
lowered (``RLIMIT_NOFILE``, set in the child before exec). The flood holds ``idle``
connections that never send a byte (each established before the next is opened) and
``trickle`` connections that send one byte of a
never-ending request head every ``trickle_every`` seconds, and once per round re-opens those
the exporter closed, as slowloris tools do. Meanwhile a scraper opens a new connection every
``scrape_every`` seconds and reads ``/metrics`` to the end, timing each scrape.

Figures (:class:`Figures`): scrape times in seconds, the exporter's VmRSS in KiB
(``/proc/<pid>/status``) before and during the flood, and its CPU seconds
(``/proc/<pid>/stat`` utime + stime).
"""

from __future__ import annotations

import http.client
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TRICKLE_HEAD = b"GET /metrics HTTP/1.1\r\nHost: flood\r\nX-Pad: "  # then one 'a' per tick, never ending


def exporter_command(port: int, *flags: str) -> list[str]:
    """``python -m obsctl.exporters.main`` on 127.0.0.1:``port`` with no GPU source (the
    module, not the console script, so ``PYTHONPATH`` picks which code runs)."""
    return [sys.executable, "-m", "obsctl.exporters.main", f"--web.listen-address=127.0.0.1:{port}",
            "--gpu.source=none", *flags]


def start_exporter(port: int, log_path: Path, nofile: int = 256, *flags: str) -> subprocess.Popen:
    """Start the exporter with ``RLIMIT_NOFILE`` (soft and hard) ``nofile``; returns once it answers.

    The limit is set with ``prlimit`` on the new process at once (before Python has even
    started; a ``preexec_fn`` is unsafe in a threaded test process)."""
    with log_path.open("wb") as out:
        proc = subprocess.Popen(exporter_command(port, *flags), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (nofile, nofile))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exporter exited {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            scrape(port, timeout=2)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("exporter did not answer within 30 s")


def scrape(port: int, timeout: float = 5.0) -> float:
    """One scrape on a new connection; seconds from connect to the end of the body.

    Raises:
        OSError / http.client.HTTPException: no complete answer; AssertionError: not a 200
            carrying the exporter's build info.
    """
    t0 = time.monotonic()
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        client.request("GET", "/metrics", headers={"Connection": "close"})
        resp = client.getresponse()
        body = resp.read()
    finally:
        client.close()
    assert resp.status == 200 and b"obsctl_exporter_build_info" in body, (resp.status, body[:200])
    return time.monotonic() - t0


def vm_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Flood:
    """Idle and trickling connections to 127.0.0.1:``port`` on a background thread.

    Args:
        idle, trickle: connections of each kind to hold.
        trickle_every: seconds between the bytes a trickling connection sends.
        round_seconds: how often closed connections are re-opened.
    """

    def __init__(self, port: int, idle: int = 300, trickle: int = 20, trickle_every: float = 2.0,
                 round_seconds: float = 1.0) -> None:
        self.port = port
        self.want = {"idle": idle, "trickle": trickle}
        self.trickle_every = trickle_every
        self.round_seconds = round_seconds
        self.opened = 0
        self.closed_by_server = 0
        self.connect_failures = 0
        self.peak_open = 0
        self._socks: dict[str, dict[int, socket.socket]] = {"idle": {}, "trickle": {}}
        self._sent: dict[int, int] = {}  # trickling fd -> bytes of its head sent
        self._stop = threading.Event()
        self.established = threading.Event()  # every connection of the flood open at once
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def start(self) -> Flood:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for socks in self._socks.values():
            for sock in socks.values():
                sock.close()

    def _open(self, kind: str) -> bool:
        """Open one connection, as an attacker does: wait (up to 1 s) until it is established.
        False when it was not (the server's listen queue is full: stop for this round)."""
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=1.0)
        except OSError:
            self.connect_failures += 1
            return False
        sock.setblocking(False)
        self._socks[kind][sock.fileno()] = sock
        self.opened += 1
        return True

    def _reap(self, poller: select.poll) -> None:
        """Drop the connections the server closed."""
        for fd, _ in poller.poll(0):
            for socks in self._socks.values():
                sock = socks.get(fd)
                if sock is None:
                    continue
                try:
                    gone = sock.recv(4096) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    poller.unregister(fd)
                    del socks[fd]
                    self._sent.pop(fd, None)
                    sock.close()
                    self.closed_by_server += 1

    def _run(self) -> None:
        poller = select.poll()
        next_round = next_tick = 0.0
        while not self._stop.wait(0.05):
            now = time.monotonic()
            self._reap(poller)
            if now >= next_round:
                next_round = now + self.round_seconds
                for kind, want in self.want.items():
                    while len(self._socks[kind]) < want and not self._stop.is_set() and self._open(kind):
                        pass
                for socks in self._socks.values():
                    for fd in socks:
                        try:
                            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
                        except (ValueError, OSError):
                            pass
                self.peak_open = max(self.peak_open, sum(map(len, self._socks.values())))
                if self.peak_open >= sum(self.want.values()):
                    self.established.set()
            if now >= next_tick:
                next_tick = now + self.trickle_every
                for fd, sock in list(self._socks["trickle"].items()):
                    sent = self._sent.get(fd, 0)
                    try:
                        sock.send(TRICKLE_HEAD[sent:sent + 1] or b"a")
                        self._sent[fd] = sent + 1
                    except OSError:
                        pass  # not connected yet, or closed: reaped next time


@dataclass
class Figures:
    """What one flood run measured (times in seconds, memory in KiB)."""

    seconds: float
    scrape_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    rss_before_kib: int = 0
    rss_max_kib: int = 0
    rss_after_kib: int = 0
    cpu_seconds: float = 0.0
    opened: int = 0
    connect_failures: int = 0
    closed_by_server: int = 0
    peak_open: int = 0

    @property
    def rss_growth_mib(self) -> float:
        return (self.rss_max_kib - self.rss_before_kib) / 1024

    @property
    def slowest(self) -> float:
        return max(self.scrape_seconds, default=float("inf"))


def run_flood(proc: subprocess.Popen, port: int, seconds: float, scrape_every: float = 0.5, warmup: int = 5,
              rss_every: float = 1.0, establish_seconds: float = 120.0, **flood_args: float) -> Figures:
    """Warm the exporter up with ``warmup`` scrapes, open the whole flood (waiting up to
    ``establish_seconds`` until all its connections were open at once), then keep it up for
    ``seconds`` while scraping."""
    for _ in range(warmup):
        scrape(port)
    figures = Figures(seconds, rss_before_kib=vm_rss_kib(proc.pid))
    figures.rss_max_kib = figures.rss_before_kib
    flood = Flood(port, **flood_args).start()
    try:
        if not flood.established.wait(establish_seconds):
            figures.failures.append(f"the flood never had all its connections open within {establish_seconds:g}s")
        cpu0 = cpu_seconds(proc.pid)
        end = time.monotonic() + seconds
        next_rss = 0.0
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                figures.scrape_seconds.append(scrape(port))
            except (OSError, http.client.HTTPException, AssertionError) as exc:
                figures.failures.append(f"{type(exc).__name__}: {exc}"[:200])
            if t0 >= next_rss:
                next_rss = t0 + rss_every
                figures.rss_max_kib = max(figures.rss_max_kib, vm_rss_kib(proc.pid))
            time.sleep(max(0.0, scrape_every - (time.monotonic() - t0)))
    finally:
        flood.stop()
    figures.cpu_seconds = cpu_seconds(proc.pid) - cpu0
    figures.rss_after_kib = vm_rss_kib(proc.pid)
    figures.rss_max_kib = max(figures.rss_max_kib, figures.rss_after_kib)
    figures.opened, figures.closed_by_server, figures.peak_open = flood.opened, flood.closed_by_server, flood.peak_open
    figures.connect_failures = flood.connect_failures
    return figures
