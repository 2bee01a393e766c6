"""The SDK's multiprocess directory: unsafe directories are refused, new ones are 0700
whatever the umask, and no value file is written through a planted symbolic link. Each
case runs the SDK in a real child process (prometheus_client picks its multiprocess value
store at import), with PROMETHEUS_MULTIPROC_DIR set before it starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from obsctl.exporters.multiproc_dir import UnsafeMultiprocessDir
from obsctl.exporters.sdk import prepare_multiprocess_dir

CHILD = textwrap.dedent("""
    import os, sys
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if len(sys.argv) > 1:  # plant a link where this process's counter file will be
        os.symlink(sys.argv[1], os.path.join(directory, f"counter_{os.getpid()}.db"))
    from obsctl.exporters.sdk import Workload
    try:
        wl = Workload("train")
        wl.count_samples(5)
    except RuntimeError as exc:
        print(f"refused: {exc}")
        sys.exit(3)
    print("counted")
""")


def run_child(directory, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    return subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_planted_symlink_is_not_followed(tmp_path) -> None:
    directory = prepare_multiprocess_dir(tmp_path / "mp")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    result = run_child(directory, str(victim))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "is a symbolic link: refusing to write through it" in result.stdout
    assert victim.read_text() == "precious\n"  # not truncated, not mapped, not written


def test_safe_directory_counts(tmp_path) -> None:
    directory = prepare_multiprocess_dir(tmp_path / "mp")
    result = run_child(directory)
    assert result.returncode == 0 and "counted" in result.stdout, result.stdout + result.stderr
    files = list(directory.glob("counter_*.db"))
    assert files and all(stat.S_IMODE(f.stat().st_mode) & 0o077 == 0 for f in files)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_group_or_world_writable_directory_is_refused(tmp_path, mode) -> None:
    directory = tmp_path / "mp"
    directory.mkdir()
    directory.chmod(mode)
    result = run_child(directory)
    assert result.returncode == 3 and "group- or world-writable" in result.stdout, result.stdout + result.stderr
    assert not list(directory.iterdir())
    with pytest.raises(UnsafeMultiprocessDir, match="group- or world-writable"):
        prepare_multiprocess_dir(directory)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_directory_is_refused(tmp_path) -> None:
    directory = tmp_path / "mp"
    directory.mkdir(mode=0o755)
    os.chown(directory, 65534, 65534)
    result = run_child(directory)
    assert result.returncode == 3 and "owned by uid 65534" in result.stdout, result.stdout + result.stderr


def test_symlinked_directory_is_refused(tmp_path) -> None:
    real = prepare_multiprocess_dir(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    result = run_child(link)
    assert result.returncode == 3 and "is a symbolic link" in result.stdout, result.stdout + result.stderr


def test_new_directory_is_0700_whatever_the_umask(tmp_path) -> None:
    old = os.umask(0)
    try:
        directory = prepare_multiprocess_dir(tmp_path / "a" / "mp")
    finally:
        os.umask(old)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_hard_link_to_a_file_elsewhere_is_refused(tmp_path) -> None:
    from obsctl.exporters.multiproc_dir import claim_file

    directory = prepare_multiprocess_dir(tmp_path / "mp")
    victim = tmp_path / "victim"
    victim.write_text("x")
    os.link(victim, directory / "counter_1.db")
    with pytest.raises(UnsafeMultiprocessDir, match="single link"):
        claim_file(str(directory / "counter_1.db"))
