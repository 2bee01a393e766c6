"""Helpers of the fault, TLS and secret tests (their fixtures are in tests/faults/conftest.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from support.faultproxy import FaultProxy
from support.history import write_spec


def write_fault_spec(path: Path, url: str, store: Path, **prometheus) -> Path:
    """The integration spec, pointed at ``url``, with short deadlines and extra
    ``prometheus:`` fields (``tls_config=...``, ``authorization=...``)."""
    write_spec(path, url, store)
    spec = yaml.safe_load(path.read_text())
    spec["prometheus"] = {"url": url, "timeout_seconds": 1, "deadline_seconds": 2, **prometheus}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


#: The store's lock files: taken (and so created) by a command that then fails, never records.
LOCK_FILES = (".lock", ".looks.lock")


def tree_digest(root: Path) -> str:
    """sha256 over every path, file mode and byte under ``root`` (empty if absent), lock files aside."""
    digest = hashlib.sha256()
    if root.exists():
        for p in sorted(root.rglob("*")):
            if p.name in LOCK_FILES and p.parent == root:
                continue
            digest.update(str(p.relative_to(root)).encode() + b"\0" + oct(p.stat().st_mode).encode() + b"\0")
            if p.is_file():
                digest.update(p.read_bytes())
    return digest.hexdigest()


def seed_store(work: Path, history, write_spec) -> Path:
    """A store under ``work`` with the ``steady`` class's baselines (1 h ending at hour 1)
    and an open initiative started at hour 1, made through a pass-through proxy with the
    spec ``write_spec(path, url, store)`` writes; returns the store directory."""
    from click.testing import CliRunner

    from obsctl.baselining.commands.cli import initiative, snapshot_baseline

    def run(cmd, args):
        return CliRunner().invoke(cmd, [str(a) for a in args])

    with FaultProxy(history.prometheus_url) as proxy:
        spec = write_spec(work / "obsctl.yaml", proxy.url, work / "store")
        first = run(snapshot_baseline, ["--spec", spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)])
        assert first.exit_code == 0, first.output
        started = run(initiative, ["start", "--spec", spec, "--name", "tune", "--lever", "batch-size", "--class", "steady",
                                   "--signal", "tokens_per_second", "--started-at", history.iso(1)])
        assert started.exit_code == 0, started.output
    return work / "store"
