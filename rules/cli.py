"""``obsctl rules``: generate the Prometheus rule files and check them with promtool."""

from __future__ import annotations

from pathlib import Path

import click

from obsctl.clikit import emit_json, load, output_option, progress, spec_option, wrap_errors
from obsctl.errors import ObsctlError, UsageError
from obsctl.generated import stale_files
from obsctl.kubeobjects import check_object_name, parse_labels
from obsctl.rules import generate as gen
from obsctl.rules import prometheusrule
from obsctl.rules.promtool import check_rules, validate_rule_files
from obsctl.spec import Spec


def current_baselines(spec: Spec) -> list:
    """The store's current baselines; an absent store directory means none yet."""
    if not spec.store_path().exists():
        return []
    from obsctl.baselining.store import Store

    return Store(spec.store_path()).current_baselines()


def anchored_targets(spec: Spec) -> dict:
    """The spec's relative targets as anchored in the store; one that meets a baseline for
    the first time here is anchored to it in memory (the rules job mounts the store
    read-only; snapshot-baseline and initiative start, which make every new baseline
    reachable, write the anchor): :func:`obsctl.baselining.practice.targets.anchored_values`.
    ``{}`` without a store."""
    if not spec.targets or not spec.store_path().exists():
        return {}
    from obsctl.baselining.practice import targets as target_rules
    from obsctl.baselining.store import Store
    from obsctl.timeutil import utcnow

    store = Store(spec.store_path())
    return target_rules.anchored_values(spec, target_rules.anchor_all(spec, store, utcnow(), write=False))


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
@click.option("--format", "fmt", type=click.Choice(["rules", "prometheusrule"]), default="rules", show_default=True,
              help="rules: Prometheus rule files; prometheusrule: one prometheus-operator PrometheusRule object per "
                   "rule file (obsctl-*.prometheusrule.yaml, the same groups).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="With --format prometheusrule: a label on every object, repeatable; the Prometheus CR's ruleSelector "
                   "picks on it (kube-prometheus-stack: release=<release name>).")
@click.option("--namespace", default=None,
              help="With --format prometheusrule: metadata.namespace (default none: kubectl -n or kustomize sets it).")
@output_option
@wrap_errors
def generate(spec_path: str, out: Path, check_only: bool, empty_store: bool, output: str, fmt: str = "rules",
             labels: tuple[str, ...] = (), namespace: str | None = None) -> None:
    """Write obsctl-*.rules.yaml from the spec and the baseline store (atomically), and the
    Alertmanager route tree of the spec's owners to alertmanager/obsctl-routes.yml under
    --out (to merge into alertmanager.yml; docs/rules.md#owners-and-routing).

    The files are checked with promtool (when installed) before any is written: a spec
    whose PromQL Prometheus would reject exits 2 and leaves the old files in place.
    """
    from obsctl.rules.routes import ROUTES_FILE, routes_file

    spec = load(spec_path)
    files, warnings = gen.generate(spec, [] if empty_store else current_baselines(spec),
                                   {} if empty_store else anchored_targets(spec))
    routes = {ROUTES_FILE: routes_file(spec)}
    for line in warnings:
        progress(f"obsctl: warning: {line}")
    if fmt == "prometheusrule":
        _prometheus_rules(spec, files, warnings, out, check_only, labels, namespace, output)
        return
    if labels or namespace:
        raise UsageError("--label and --namespace apply to --format prometheusrule only")
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
    elif not check_only:  # --check is quiet when everything is up to date (exit 0), like `make -q`
        for path in paths:
            click.echo(str(path))


def _prometheus_rules(spec: Spec, files: dict[str, str], warnings: list[str], out: Path, check_only: bool,
                      labels: tuple[str, ...], namespace: str | None, output: str) -> None:
    """``rules generate --format prometheusrule``: the rule files promtool checked, as PrometheusRule
    objects written to (or with ``check_only`` compared against) ``out``."""
    extra = parse_labels(labels)
    if namespace is not None:
        check_object_name(namespace, "--namespace")
    if not check_only:
        problem = validate_rule_files(files, spec)
        if problem:
            warnings.append(problem)
            progress(f"obsctl: warning: {problem}")
    objects = prometheusrule.to_prometheus_rules(files, extra, namespace)
    if check_only:
        stale = stale_files(out, objects, prometheusrule.PATTERN)
        if stale:
            raise ObsctlError(f"{out}: out of date: {', '.join(stale)}; regenerate with obsctl rules generate --format prometheusrule")
        paths = [out / n for n in objects]
    else:
        paths = gen.write(out, objects)
    if output == "json":
        emit_json({"out": str(out), "files": [str(p) for p in paths], "warnings": warnings, "checked": check_only})
    elif not check_only:
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
        error = ObsctlError(f"promtool check rules failed on {directory}")
        error.reported = output == "json"  # the report above is this command's one document
        raise error
