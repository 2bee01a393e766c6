"""Atomic file writes: a reader sees the old file or the new one, never a half file.

The content goes to a temporary file in the target's directory (same filesystem, so
``os.replace`` is an atomic rename on POSIX), is flushed and fsync'ed, then renamed over
the target; the directory is fsync'ed so the rename survives a power loss. On any error
the temporary file is removed and the old file is untouched.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import yaml

from obsctl.errors import WriteError

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Create or replace ``path`` with what ``write(fh)`` writes to a binary file handle.

    Raises:
        WriteError: the directory cannot be created or written, or ``write`` failed
            (the message names the file; the old content is kept).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (narrowed to
        # the mode of the regular file it replaces), so Prometheus and Grafana users can
        # read rules, dashboards and reports written as another user.
        os.fchmod(fd, _target_mode(path))
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise WriteError(f"cannot write {path}: {detail} (old content kept)") from None
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Atomically write ``data`` to ``path`` (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Atomically write UTF-8 ``text`` to ``path`` (see :func:`atomic_write`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_yaml(path: Path, data: object) -> None:
    """Atomically write ``data`` (plain dicts/lists/scalars) as YAML to ``path``.

    The YAML is streamed into the temporary file, so a value that cannot be serialized
    fails midway, after part of the file was written: the temporary file is then removed
    and ``path`` keeps its old content.
    """

    def dump(fh: IO[bytes]) -> None:
        yaml.dump(data, fh, Dumper=_Dumper, sort_keys=False, allow_unicode=True, encoding="utf-8", default_flow_style=None)

    atomic_write(path, dump)


def _target_mode(path: Path) -> int:
    """Permission bits for ``path``: the process's own, ``0666 & ~umask``, narrowed to those
    of the regular file it replaces (a file kept at 0640 stays 0640, none is widened).

    Never taken from anything else: ``path`` as a symbolic link is replaced by the new file,
    not written through, so its target's mode (a world-writable or set-user-ID file
    elsewhere) means nothing here; and set-user-ID, set-group-ID and sticky bits are never set.
    """
    own = 0o666 & ~_umask()
    try:
        info = path.lstat()
    except OSError:
        return own
    return own & stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else own


def _umask() -> int:
    # The umask can only be read by setting it; read /proc first to avoid the brief
    # process-wide change, which other threads could observe.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def _fsync_dir(directory: Path) -> None:
    # Not every filesystem allows opening a directory; the rename is still atomic.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
