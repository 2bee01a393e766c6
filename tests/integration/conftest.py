"""Specs pointing at the session's Prometheus with the synthetic history (``history``, in
tests/conftest.py), each with a fresh store."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.history import write_guard_spec, write_spec


@pytest.fixture
def guard_spec(tmp_path, history) -> Path:
    """A spec with guard signals (quality, latency, utilization) and a fresh store under ``tmp_path``."""
    return write_guard_spec(tmp_path / "obsctl.yaml", history.prometheus_url, tmp_path / "store")


@pytest.fixture
def loop_spec(tmp_path, history) -> Path:
    """A spec file for the backfilled Prometheus with a fresh store under ``tmp_path``."""
    return write_spec(tmp_path / "obsctl.yaml", history.prometheus_url, tmp_path / "store")
