"""Run ``promtool check rules`` / ``promtool test rules`` (Debian package ``prometheus``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from obsctl.stack import PROMTOOL_BIN, require_binary


def promtool(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run promtool with ``args``; returns the completed process (never raises on exit code).

    Raises:
        ObsctlError: promtool is not installed.
    """
    return subprocess.run([require_binary(PROMTOOL_BIN), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def check_rules(paths: list[Path]) -> subprocess.CompletedProcess:
    """``promtool check rules PATHS...`` (exit code 0 when every file is valid)."""
    return promtool("check", "rules", *paths)


def test_rules(paths: list[Path]) -> subprocess.CompletedProcess:
    """``promtool test rules PATHS...`` (exit code 0 when every unit test passes)."""
    return promtool("test", "rules", *paths)
