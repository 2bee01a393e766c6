"""Regression tests for the bad-input review: file modes, JSON without NaN, one-line
usage errors, odd output folders, and rules that promtool would reject."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from obsctl.atomicio import atomic_write_text
from obsctl.generated import stale_files

REPO = Path(__file__).resolve().parents[2]


def obsctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obsctl", *args], capture_output=True, text=True)


def test_new_files_get_umask_mode_and_replaced_files_keep_theirs(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.yaml", "a: 1\n")
        assert stat.S_IMODE((tmp_path / "new.yaml").stat().st_mode) == 0o644
        (tmp_path / "kept.yaml").write_text("x")
        os.chmod(tmp_path / "kept.yaml", 0o640)
        atomic_write_text(tmp_path / "kept.yaml", "y")
        assert stat.S_IMODE((tmp_path / "kept.yaml").stat().st_mode) == 0o640
        assert (tmp_path / "kept.yaml").read_text() == "y"
    finally:
        os.umask(old)


def test_json_output_never_holds_nan(tmp_path):
    import click
    from click.testing import CliRunner

    from obsctl.clikit import emit_json

    @click.command()
    def cmd():
        emit_json({"mean": float("nan"), "values": [1.0, float("inf")], "ok": 2.5})

    out = CliRunner().invoke(cmd).output
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "mean": None, "values": [1.0, None], "ok": 2.5}


def test_usage_errors_are_one_line_with_exit_2(tmp_path):
    (tmp_path / "file").write_text("x")
    result = obsctl("rules", "generate", "--spec", str(REPO / "examples/obsctl.yaml"), "--out", str(tmp_path / "file"))
    assert result.returncode == 2
    assert result.stderr.startswith("obsctl: error: Invalid value for '--out'")
    assert result.stderr.count("\n") == 1


def test_stale_check_counts_unreadable_files_as_stale(tmp_path):
    (tmp_path / "obsctl-a.json").mkdir()
    (tmp_path / "obsctl-b.json").write_bytes(b"\xff\xfe")
    (tmp_path / "obsctl-c.json").write_text("same")
    files = {"obsctl-a.json": "x", "obsctl-b.json": "y", "obsctl-c.json": "same"}
    assert stale_files(tmp_path, files, "obsctl-*.json") == ["obsctl-a.json", "obsctl-b.json"]


def test_rules_promtool_rejects_are_refused_and_old_files_kept(tmp_path):
    good = REPO / "examples/obsctl.yaml"
    out = tmp_path / "rules"
    assert obsctl("rules", "generate", "--spec", str(good), "--out", str(out)).returncode == 0
    before = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.yaml"
    text = good.read_text()
    query = "query: sum(rate(obsctl_tokens_total{$selector}[1m]))"
    line = text[: text.index(query)].count("\n") + 1  # the spec line the error must name
    bad.write_text(text.replace(query, query[:-1]))
    for args in (("rules", "generate", "--spec", str(bad), "--out", str(out)), ("check", "--spec", str(bad))):
        result = obsctl(*args)
        assert result.returncode == 2, result.stderr
        assert f"{bad}:{line}: signals[0].query (tokens_per_second): Prometheus would reject it" in result.stderr
        assert "unclosed left parenthesis" in result.stderr
        assert "Traceback" not in result.stderr
    assert {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()} == before


def test_check_json_reports_an_invalid_spec_on_stdout(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("signals: 3\n")
    result = obsctl("check", "--spec", str(bad), "--output", "json")
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["valid"] is False and str(bad) in document["error"]


def test_exporter_logs_are_logfmt_with_rfc3339_and_prometheus_levels():
    import logging
    import re

    from obsctl.exporters.main import LogfmtFormatter

    record = logging.LogRecord("obsctl.exporter", logging.WARNING, __file__, 1, 'collector "gpu" failed\nagain', None, None)
    line = LogfmtFormatter().format(record)
    assert re.fullmatch(r'ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=warn logger=obsctl.exporter msg="collector \\"gpu\\" failed\\nagain"', line), line


def test_a_symlink_targets_mode_is_never_copied(tmp_path):
    """Writing over a symbolic link replaces the link with a file of the process's own mode,
    not one of its target's (a set-user-ID, world-writable target came out 4777); the target
    is untouched."""
    old = os.umask(0o022)
    try:
        target = tmp_path / "elsewhere"
        target.write_text("theirs")
        os.chmod(target, 0o4777)
        link = tmp_path / "review.md"
        link.symlink_to(target)
        atomic_write_text(link, "ours")
        assert not link.is_symlink() and link.read_text() == "ours"
        assert stat.S_IMODE(link.stat().st_mode) == 0o644
        assert target.read_text() == "theirs" and stat.S_IMODE(target.stat().st_mode) == 0o4777
    finally:
        os.umask(old)


def test_a_replaced_file_never_widens_the_mode_or_keeps_special_bits(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "wide.yaml"
        path.write_text("x")
        os.chmod(path, 0o6777)
        atomic_write_text(path, "y")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        os.umask(old)
