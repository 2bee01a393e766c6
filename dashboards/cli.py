"""``obsctl dashboards``: build the Grafana dashboards as JSON files."""

from __future__ import annotations

from pathlib import Path

import click

from obsctl.clikit import emit_json, load, output_option, spec_option, wrap_errors
from obsctl.dashboards import build as builder
from obsctl.dashboards import configmap
from obsctl.errors import ObsctlError, UsageError
from obsctl.generated import stale_files
from obsctl.kubeobjects import check_label_key, check_object_name, parse_labels


@click.group()
def dashboards() -> None:
    """Grafana dashboards for the loop (see docs/dashboards.md)."""


@dashboards.command()
@spec_option
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder for the JSON files.")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 if the files in --out differ.")
@click.option("--format", "fmt", type=click.Choice(["json", "configmap"]), default="json", show_default=True,
              help="json: Grafana JSON files; configmap: one ConfigMap per dashboard for Grafana's sidecar "
                   "(obsctl-*.configmap.yaml, label grafana_dashboard=\"1\").")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="With --format configmap: a label on every ConfigMap, repeatable (overrides grafana_dashboard=1 "
                   "for a sidecar with another label or value).")
@click.option("--folder", default="obsctl", show_default=True, help="With --format configmap: the Grafana folder.")
@click.option("--folder-annotation", default=configmap.FOLDER_ANNOTATION, show_default=True,
              help="With --format configmap: the annotation holding the folder (the chart's "
                   "sidecar.dashboards.folderAnnotation).")
@click.option("--namespace", default=None,
              help="With --format configmap: metadata.namespace (default none: kubectl -n or kustomize sets it).")
@output_option
@wrap_errors
def build(spec_path: str, out: Path, check_only: bool, fmt: str, labels: tuple[str, ...], folder: str,
          folder_annotation: str, namespace: str | None, output: str) -> None:
    """Write the obsctl dashboards as Grafana JSON (atomically): loop overview, GPU fleet,
    inference, training, cost and waste, verification (docs/dashboards.md); with
    --format configmap as ConfigMaps for Grafana's dashboard sidecar, each checked to fit
    client-side kubectl apply."""
    if fmt == "json" and (labels or namespace):
        raise UsageError("--label and --namespace apply to --format configmap only")
    extra = parse_labels(labels)
    check_label_key(folder_annotation, "--folder-annotation")
    if namespace is not None:
        check_object_name(namespace, "--namespace")
    files = builder.build(load(spec_path))
    pattern = builder.PATTERN
    if fmt == "configmap":
        files, pattern = configmap.to_configmaps(files, extra, folder, folder_annotation, namespace), configmap.PATTERN
    if check_only:
        stale = stale_files(out, files, pattern)
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
