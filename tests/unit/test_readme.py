"""The README stays true: its GPU catalogue matches the code's catalogue, its quick start
is the two make targets, and CI runs the README's test command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_gpu_catalogue_in_readme_is_current():
    result = subprocess.run([sys.executable, str(REPO / "scripts/sync_readme.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_catalogue_metric_is_documented():
    from obsctl.exporters.gpu.catalogue import CATALOGUE

    for metric in CATALOGUE:
        assert f"`{metric.name}`" in README, metric.name


def test_quick_start_is_two_make_commands_and_ci_runs_the_test_one():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, re.M)
    assert commands == ["make demo", "make test"]
    ci = (REPO / ".ci/run").read_text()
    assert "make test" in ci.splitlines()[-1]


def test_documentation_links_resolve():
    for link in re.findall(r"\]\(((?:docs|examples)/[^)#]+)", README):
        assert (REPO / link).exists(), link


def test_the_practice_section_shows_the_cadence_and_the_commands_that_exist():
    from click.testing import CliRunner

    from obsctl.cli import cli
    from obsctl.rules.routes import ROUTES_FILE

    practice = README.split("## The practice on a cadence", 1)[1].split("\n## ", 1)[0]
    assert "**weekly**" in practice and "**monthly**" in practice
    for command in ("review", "ledger", "publish"):
        assert f"obsctl {command}" in practice, command
        assert CliRunner().invoke(cli, [command, "--help"]).exit_code == 0, command
    # The routes file is named where rules generate writes it, and the committed one exists.
    assert f"DIR/{ROUTES_FILE}" in practice and f"rules/generated/{ROUTES_FILE}" in practice
    assert (REPO / "rules/generated" / ROUTES_FILE).exists()
