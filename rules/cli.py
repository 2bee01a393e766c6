"""``obsctl rules``: generate the Prometheus rule files and check them with promtool."""

from __future__ import annotations

from pathlib import Path

import click

from obsctl.clikit import emit_json, load, output_option, progress, spec_option, wrap_errors
from obsctl.errors import ObsctlError, UsageError
from obsctl.rules import generate as gen
from obsctl.rules.promtool import check_rules, validate_rule_files
from obsctl.spec import Spec


def current_baselines(spec: Spec) -> list:
    """The store's current baselines; an absent store directory means none yet."""
    if not spec.store_path().exists():
        return []
    from obsctl.baselining.store import Store

    return Store(spec.store_path()).current_baselines()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@click.group()
def rules() -> None:
    """Prometheus recording and alerting rules for the loop (see docs/rules.md)."""


@rules.command()
@spec_option
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder for the rule files.")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 if the files in --out differ.")
@click.option("--empty-store", is_flag=True, help="Ignore the store: no baseline series (how rules/generated/ is made).")
@output_option
@wrap_errors
def generate(spec_path: str, out: Path, check_only: bool, empty_store: bool, output: str) -> None:
    """Write obsctl-*.rules.yaml from the spec and the baseline store (atomically), and the
    Alertmanager route tree of the spec's owners to alertmanager/obsctl-routes.yml under
    --out (to merge into alertmanager.yml; docs/rules.md#owners-and-routing).

    The files are checked with promtool (when installed) before any is written: a spec
    whose PromQL Prometheus would reject exits 2 and leaves the old files in place.
    """
    from obsctl.rules.routes import ROUTES_FILE, routes_file

    spec = load(spec_path)
    files, warnings = gen.generate(spec, [] if empty_store else current_baselines(spec))
    routes = {ROUTES_FILE: routes_file(spec)}
    for line in warnings:
        progress(f"obsctl: warning: {line}")
    if check_only:
        stale = gen.check(out, files) + [n for n, text in routes.items() if _read(out / n) != text]
        if stale:
            raise ObsctlError(f"{out}: out of date: {', '.join(stale)}; regenerate with obsctl rules generate")
        paths = [out / n for n in [*files, *routes]]
    else:
        problem = validate_rule_files(files, spec)
        if problem:
            warnings.append(problem)
            progress(f"obsctl: warning: {problem}")
        paths = gen.write(out, files) + gen.write(out, routes)
    if output == "json":
        emit_json({"out": str(out), "files": [str(p) for p in paths], "warnings": warnings, "checked": check_only})
    else:
        for path in paths:
            click.echo(str(path))


@rules.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@output_option
@wrap_errors
def check(directory: Path, output: str) -> None:
    """Run promtool check rules on every *.rules.yaml / *.yml file in DIRECTORY.

    Exit 0 when promtool accepts every file, 1 when it refuses one (its report is printed;
    with --output json: {directory, files, ok, promtool}), 2 when DIRECTORY has no rule files."""
    paths = sorted(p for p in directory.glob("*") if p.suffix in (".yaml", ".yml"))
    if not paths:
        raise UsageError(f"{directory}: no rule files (*.yaml, *.yml) found")
    result = check_rules(paths)
    report = (result.stdout + result.stderr).strip()
    if output == "json":
        emit_json({"directory": str(directory), "files": [str(p) for p in paths], "ok": result.returncode == 0, "promtool": report})
    else:
        click.echo(report)
    if result.returncode != 0:
        raise ObsctlError(f"promtool check rules failed on {directory}")
