"""Fixtures shared by every test: paths to the repository, the example spec and the
public metric dumps in ../shared/fixtures (read-only), and the session's Prometheus serving
the synthetic history of :mod:`support.history` (started on first use)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.history import HISTORY_NOW, History, build_history, openmetrics
from support.prometheus import served_history

REPO = Path(__file__).resolve().parent.parent

# Fixtures for every tier: the stand-in NVML (``nvml_env``, ``stub_so``), raw-socket peers (``raw_server``).
pytest_plugins = ["support.nvml_fixtures", "support.rawserver"]


def shared_fixtures_dir() -> Path:
    """``../shared/fixtures`` beside the checkout (CI lays shared/ beside the clone)."""
    for candidate in (REPO.parent / "shared" / "fixtures", REPO / "shared" / "fixtures"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shared fixtures not found beside {REPO} (expected ../shared/fixtures)")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return shared_fixtures_dir()


@pytest.fixture(scope="session")
def example_spec_path() -> Path:
    return REPO / "examples" / "obsctl.yaml"


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> History:
    """A real Prometheus (stopped at session end) serving the backfilled synthetic history;
    the values written are on the returned :class:`History`."""
    hist = build_history(HISTORY_NOW)
    with served_history(tmp_path_factory.mktemp("history-prometheus"), openmetrics(hist)) as served:
        hist.prometheus_url = served.url
        yield hist


#: Folders are tiers: the marker each folder's tests get (``pytest -m integration`` runs the live tier).
TIERS = {"integration": "integration", "faults": "integration", "promtool": "promtool"}


def pytest_collection_modifyitems(config, items):
    """Mark every test with its folder's tier (:data:`TIERS`); tests/unit is unmarked."""
    tests = Path(__file__).resolve().parent
    for item in items:
        try:
            folder = item.path.resolve().relative_to(tests).parts[0]
        except ValueError:
            continue
        if folder in TIERS:
            item.add_marker(TIERS[folder])


def _child_processes() -> list[tuple[int, str]]:
    """(pid, command line) of live processes whose parent is this pytest process."""
    import os

    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                children.append((int(stat.parent.name), cmdline))
        except (OSError, IndexError, ValueError):
            continue
    return children


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if a test left a server (Prometheus, Alertmanager, exporter) running."""
    leaked = [(pid, cmd) for pid, cmd in _child_processes() if any(
        name in cmd for name in ("prometheus", "alertmanager", "obsctl-exporter", "obsctl.exporters.main", "pushgateway"))]
    if leaked:
        lines = "\n".join(f"  pid {pid}: {cmd[:160]}" for pid, cmd in leaked)
        print(f"\nTests left these processes running:\n{lines}")
        session.exitstatus = 1

