"""A placebo (A/A) initiative expects no change: --placebo with a non-zero --expected-impact is
a usage error (exit 2) that names both, and nothing is stored."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from obsctl.baselining.store import Store
from obsctl.cli import cli
from support.store_records import make_baseline

SPEC = {"store": "store",
        "workload_classes": [{"name": "embed-online", "kind": "inference", "selector": {"workload": "embed-online"}}],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"}]}


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()}


def _start(tmp_path: Path, *extra: str):
    """(the CLI result, the store's files before, after)."""
    spec = tmp_path / "obsctl.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    Store(tmp_path / "store").save_baseline(make_baseline())
    before = _files(tmp_path / "store")
    result = CliRunner().invoke(cli, ["initiative", "start", "--spec", str(spec), "--name", "a-a", "--lever", "batch-size",
                                      "--class", "embed-online", "--signal", "tokens_per_second", *extra])
    return result, before, _files(tmp_path / "store")


def test_placebo_with_an_expected_impact_is_a_usage_error(tmp_path):
    result, before, after = _start(tmp_path, "--placebo", "--expected-impact", "0.2")
    assert result.exit_code == 2, result.output
    assert "--placebo with --expected-impact 0.2" in result.output and "Traceback" not in result.output
    assert after == before


def test_placebo_alone_starts(tmp_path):
    result, before, after = _start(tmp_path, "--placebo")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("started placebo (A/A) initiative a-a-")
    assert after > before
