"""``obsctl review``: the cadence meeting in one command (findings in obsctl.baselining.practice.review)."""

from __future__ import annotations

import sys

import click

from obsctl.clikit import emit_json, load, output_option, progress, spec_option, wrap_errors
from obsctl.timeutil import parse_instant

#: Exit code when a finding is at or above ``--fail-on``.
EXIT_FINDINGS = 10


@click.command("review")
@spec_option
@click.option("--class", "classes", multiple=True, metavar="NAME", help="Workload class (repeatable; default: all).")
@click.option("--as-of", default="now", show_default=True, metavar="RFC3339|now", help="The instant reviewed (RFC3339; without an offset, UTC).")
@click.option("--fail-on", type=click.Choice(["info", "warning", "critical"]), default="warning", show_default=True,
              help="Exit 10 when a finding is at this severity or above.")
@click.option("--write", "write", is_flag=True, help="Write the dated review document (review-YYYY-MM-DD.md) into review.folder "
                                                     "(or --out) and mark the targets reviewed.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=str),
              help="Folder for --write (default: the spec's review.folder, relative to the spec).")
@output_option
@wrap_errors
def review(spec_path, classes, as_of, fail_on, write, out_dir, output):
    """Review every class (or --class): baselines missing, stale, drifted or with a changed
    population; targets met, behind, unrealistic or impossible; initiatives overdue or
    unpromoted; classes gone quiet; and the opportunities, ranked by USD/month at stake,
    each with its action. Rules and thresholds: docs/practice.md.

    \b
    Exit codes:
      0   no finding at --fail-on (default warning) or above
      10  some finding at --fail-on or above (missing or stale data always is a warning)
      1   store refused, 2 bad spec or flag, 3 Prometheus unreachable
    """
    from pathlib import Path

    from obsctl.baselining.practice.review import review as run_review
    from obsctl.baselining.statistics import distributions
    from obsctl.baselining.store import Store
    from obsctl.baselining.text.present_review import review_lines, review_markdown
    from obsctl.errors import UsageError
    from obsctl.promapi import PrometheusClient

    distributions.prefetch()
    spec = load(spec_path)
    store = Store(spec.store_path())
    when = parse_instant(as_of, "--as-of")
    folder = None
    if write:
        folder = Path(out_dir) if out_dir else (spec.path.parent / spec.review.folder if spec.review.folder else None)
        if folder is None:
            raise UsageError("--write needs a folder: set review.folder in the spec or pass --out DIR")
    result = run_review(spec, store, PrometheusClient.from_spec(spec), when, list(classes) or None, write_anchors=True,
                        progress=progress)
    written = None
    if folder is not None:
        written = _write(folder, result, review_markdown(result))
        from obsctl.baselining.practice.targets import mark_reviewed

        for t in spec.targets:
            if t.workload_class in result.classes:
                mark_reviewed(store, t, when)
    if output == "json":
        emit_json({**result.as_dict(), "document": str(written) if written else None})
    else:
        for line in review_lines(result):
            click.echo(line)
        if written:
            click.echo(f"wrote {written}")
    if result.fails(fail_on):
        sys.exit(EXIT_FINDINGS)


def _write(folder, result, text: str):
    from obsctl.atomicio import atomic_write_text
    from obsctl.errors import WriteError

    path = folder / f"review-{result.as_of.date().isoformat()}.md"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write the review document: {exc.strerror or exc}") from None
    return path
