"""``obsctl dashboards``: build the Grafana dashboards as JSON files."""

from __future__ import annotations

from pathlib import Path

import click
from obsctl.dashboards import build as builder

from obsctl.clikit import emit_json, load, output_option, spec_option, wrap_errors
from obsctl.errors import ObsctlError


@click.group()
def dashboards() -> None:
    """Grafana dashboards for the loop (see docs/dashboards.md)."""


@dashboards.command()
@spec_option
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder for the JSON files.")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 if the files in --out differ.")
@output_option
@wrap_errors
def build(spec_path: str, out: Path, check_only: bool, output: str) -> None:
    """Write the obsctl dashboards as Grafana JSON (atomically): loop overview, GPU fleet,
    inference, training, cost and waste, verification (docs/dashboards.md)."""
    files = builder.build(load(spec_path))
    if check_only:
        stale = builder.check(out, files)
        if stale:
            raise ObsctlError(f"{out}: out of date: {', '.join(stale)}; rebuild with obsctl dashboards build")
        paths = [out / n for n in files]
    else:
        paths = builder.write(out, files)
    if output == "json":
        emit_json({"out": str(out), "files": [str(p) for p in paths], "checked": check_only})
    else:
        for path in paths:
            click.echo(str(path))
