"""What a GPU process says about its workload: environment variable, Slurm job, user.

Read from ``/proc/<pid>/environ`` (``OBSCTL_WORKLOAD_CLASS``, ``OBSCTL_WORKLOAD_OWNER``),
``/proc/<pid>/cgroup`` (Slurm puts job steps in ``.../slurm/uid_<uid>/job_<id>/step_<n>``
under cgroup v1 and ``.../job_<id>/step_<n>/...`` under cgroup v2) and the owner uid of
``/proc/<pid>``. :class:`ProcessCache` keeps results, negative ones included, for a TTL,
keyed by (pid, start time) so a recycled pid is never confused with the process it replaced.
"""

from __future__ import annotations

import os
import pwd
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ENV_CLASS = "OBSCTL_WORKLOAD_CLASS"
ENV_OWNER = "OBSCTL_WORKLOAD_OWNER"
#: A workload class name as the spec allows it (any process on the node can set the variable).
CLASS_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
MAX_OWNER_CHARS = 128
_SLURM_JOB = re.compile(r"/job_(\d+)(?=/|$)")
_SLURM_UID = re.compile(r"/uid_(\d+)(?=/|$)")


@dataclass(frozen=True)
class ProcessInfo:
    """Attribution facts of one process.

    Attributes:
        pid: process id.
        workload_class: from ``OBSCTL_WORKLOAD_CLASS`` (``""`` if unset, unreadable or not
            a class name: ``[a-z][a-z0-9_-]{0,62}``, as in the spec).
        owner: ``OBSCTL_WORKLOAD_OWNER`` when printable and at most 128 characters, else
            ``slurm:job_<id>``, else ``user:<name>``.
        slurm_job: Slurm job id from the cgroup path, ``""`` if none.
        error: ``""``, or why the environment could not be read (``permission_denied``) or
            was refused (``invalid_workload_class``).
    """

    pid: int
    workload_class: str = ""
    owner: str = ""
    slurm_job: str = ""
    error: str = ""


def slurm_job_from_cgroup(text: str) -> tuple[str, str] | None:
    """``(job id, uid or "")`` from the text of a ``/proc/<pid>/cgroup`` file, or None.

    Accepts cgroup v1 lines (``4:memory:/slurm/uid_1000/job_42/step_0``) and v2 lines
    (``0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0``).
    """
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        job = _SLURM_JOB.search(path)
        if job and ("slurm" in path):
            uid = _SLURM_UID.search(path)
            return job.group(1), uid.group(1) if uid else ""
    return None


def start_time(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """Start time of ``pid`` in clock ticks after boot (``/proc/<pid>/stat`` field 22), or None if gone."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def read_process(pid: int, proc_root: Path = Path("/proc")) -> ProcessInfo | None:
    """Read the attribution facts of ``pid``; None if the process is gone.

    A process whose environment is unreadable (another user's process without privileges)
    is returned with ``error="permission_denied"``; the cgroup is still read.
    """
    base = proc_root / str(pid)
    env: dict[str, str] = {}
    error = ""
    try:
        raw = (base / "environ").read_bytes()
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep and key in (ENV_CLASS.encode(), ENV_OWNER.encode()):
                env[key.decode()] = value.decode("utf-8", "replace")
    except PermissionError:
        error = "permission_denied"
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        error = f"read_error_{exc.errno}"
    try:
        cgroup = (base / "cgroup").read_text()
    except OSError:
        cgroup = ""
    slurm = slurm_job_from_cgroup(cgroup)
    job = slurm[0] if slurm else ""
    owner = env.get(ENV_OWNER, "").strip()
    if not valid_owner(owner):
        owner = ""
    if not owner and job:
        owner = f"slurm:job_{job}"
    if not owner:
        owner = _user_of(base)
    workload_class = env.get(ENV_CLASS, "").strip()
    if workload_class and not CLASS_NAME.match(workload_class):
        workload_class, error = "", error or "invalid_workload_class"
    return ProcessInfo(pid, workload_class, owner, job, error)


def valid_owner(text: str) -> bool:
    """Whether ``text`` may be published as an ``owner`` label: 1-128 printable characters."""
    return 0 < len(text) <= MAX_OWNER_CHARS and text.isprintable()


def _user_of(base: Path) -> str:
    try:
        uid = os.stat(base).st_uid
    except OSError:
        return ""
    try:
        return f"user:{pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid:{uid}"


class ProcessCache:
    """TTL cache of :func:`read_process`, negative results included.

    Args:
        ttl_seconds: how long an answer (found, not found, error) is reused.
        proc_root: ``/proc`` (tests may point elsewhere).
        clock: monotonic clock.
        reader: the lookup (injected by tests).

    The cache key is (pid, start time): reading ``/proc/<pid>/stat`` each scrape is cheap
    (one small read) and guarantees a recycled pid is looked up afresh.
    """

    def __init__(self, ttl_seconds: float = 60.0, proc_root: Path = Path("/proc"),
                 clock: Callable[[], float] = time.monotonic,
                 reader: Callable[[int, Path], ProcessInfo | None] = read_process) -> None:
        self.ttl_seconds = ttl_seconds
        self.proc_root = proc_root
        self._clock = clock
        self._reader = reader
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, int], tuple[float, ProcessInfo | None]] = {}
        self.lookups = 0  # reads of /proc/<pid>/environ done (for tests and the benchmark)

    def get(self, pid: int) -> ProcessInfo | None:
        """Cached facts for ``pid`` (None: the process is gone)."""
        found = self.lookup(pid)
        return None if found is None else found[1]

    def lookup(self, pid: int) -> tuple[int, ProcessInfo | None] | None:
        """``(start time in clock ticks, cached facts)`` for ``pid``; None if the process is gone.

        The facts are None when the process vanished between the stat and environ reads.
        """
        started = start_time(pid, self.proc_root)
        if started is None:
            return None
        key = (pid, started)
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] > now:
                return started, hit[1]
        info = self._reader(pid, self.proc_root)
        self.lookups += 1
        with self._lock:
            self._entries[key] = (now + self.ttl_seconds, info)
            if len(self._entries) > 4096:  # drop expired entries of exited processes
                self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
        return started, info
