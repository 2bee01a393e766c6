"""Fixtures shared by every test: paths to the repository, the example spec and the
public metric dumps in ../shared/fixtures (read-only)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
