"""Safety of the SDK's multiprocess directory (``PROMETHEUS_MULTIPROC_DIR``).

prometheus_client's multiprocess mode keeps each process's values in memory-mapped files
``<type>_<pid>.db`` there, opened with a plain ``open(path, "a+b")``: it follows a symbolic
link, and accepts a directory anyone can write to. Another local user could then point a
process's ``counter_<pid>.db`` at a file of the victim's (which the process then overwrites)
or add counts of their own. The SDK therefore:

* refuses a directory that is a symbolic link, is not owned by this process's user, or is
  group- or world-writable (:func:`check_directory`), as OpenSSH does for ``~/.ssh``;
* creates a new directory with mode 0700 whatever the umask (:func:`make_directory`);
* opens every value file it will write through :class:`NoFollowMmapedDict` first: with
  ``O_NOFOLLOW`` (a symbolic link is refused), and only a regular file of this user with a
  single link (no hard link to a file elsewhere) is accepted.

prometheus_client offers no hook for how it opens these files, so :func:`install` replaces
the ``MmapedDict`` name in ``prometheus_client.values`` (the one place it is used to write)
with the checking subclass; reads by ``MultiProcessCollector`` are unchanged.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import prometheus_client.values
from prometheus_client.mmap_dict import MmapedDict

ENV = "PROMETHEUS_MULTIPROC_DIR"


class UnsafeMultiprocessDir(RuntimeError):
    """The directory or a file in it could be written by someone else, or is a link."""


def check_directory(directory: Path) -> None:
    """Raise :class:`UnsafeMultiprocessDir` unless ``directory`` is a real directory (not a
    symbolic link) owned by this user and writable by nobody else; FileNotFoundError if missing."""
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeMultiprocessDir(f"{ENV}={directory} is a symbolic link: give the directory itself")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeMultiprocessDir(f"{ENV}={directory} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeMultiprocessDir(f"{ENV}={directory} is owned by uid {info.st_uid}, not by this user "
                                    f"(uid {os.geteuid()}): another user could change the counts")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeMultiprocessDir(f"{ENV}={directory} is group- or world-writable (mode {stat.S_IMODE(info.st_mode):04o}): "
                                    f"chmod 700 it, or let prepare_multiprocess_dir() create it")


def make_directory(directory: Path) -> None:
    """Create ``directory`` (and missing parents) with mode 0700 whatever the umask, or
    check the one that exists (:func:`check_directory`)."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700, follow_symlinks=False)  # mkdir's mode is masked by the umask
    except FileExistsError:
        pass
    check_directory(directory)


def claim_file(path: str) -> None:
    """Create or open ``path`` for writing without following a symbolic link, and check it
    is a regular file of this user with one link; raise :class:`UnsafeMultiprocessDir` if not."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeMultiprocessDir(f"{path} is a symbolic link: refusing to write through it") from None
        raise UnsafeMultiprocessDir(f"{path}: cannot open: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        raise UnsafeMultiprocessDir(f"{path} is not a regular file of this user with a single link: refusing to write to it")


class NoFollowMmapedDict(MmapedDict):
    """prometheus_client's value file, claimed with :func:`claim_file` before it is opened
    for writing. The directory is checked first (no one else can swap the file in between)."""

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        if not read_mode:
            check_directory(Path(filename).parent)
            claim_file(filename)
        super().__init__(filename, read_mode)


def install() -> None:
    """Make prometheus_client open its multiprocess value files through :class:`NoFollowMmapedDict`."""
    prometheus_client.values.MmapedDict = NoFollowMmapedDict
