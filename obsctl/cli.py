"""The ``obsctl`` command: one entry point for every stage of the optimization loop.

Subcommands live next to what they drive (``obsctl.rules.cli``, ``obsctl.dashboards.cli``,
``obsctl.baselining.cli``) and are imported only when invoked, so ``obsctl --help`` and
``obsctl check`` stay fast.

Exit codes: 0 ok (and IMPROVED for ``verify``), 1 operation failed, 2 bad spec or
usage, 3 Prometheus unreachable; ``verify`` verdicts use 10-13 (see ``obsctl verify --help``).
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any

import click

from obsctl import __version__
from obsctl.clikit import emit_json, error_document, load, output_option, run_main, spec_option, terminal_streams, wrap_errors
from obsctl.errors import SpecError


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's documented pattern)."""

    def __init__(self, *args, lazy_subcommands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands or {}

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with terminal_streams():  # also under click's test runner, which bypasses run_main()
            return super().main(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            module_name, attr = self.lazy_subcommands[cmd_name].split(":")
            return getattr(importlib.import_module(module_name), attr)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    lazy_subcommands={
        "rules": "obsctl.rules.cli:rules",
        "dashboards": "obsctl.dashboards.cli:dashboards",
        "snapshot-baseline": "obsctl.baselining.cli:snapshot_baseline",
        "baseline": "obsctl.baselining.cli:baseline",
        "target": "obsctl.baselining.cli:target",
        "initiative": "obsctl.baselining.cli:initiative",
        "verify": "obsctl.baselining.cli:verify",
        "plan": "obsctl.baselining.cli:plan",
        "report": "obsctl.baselining.cli:report",
        "review": "obsctl.baselining.review_cli:review",
        "ledger": "obsctl.baselining.ledger_cli:ledger",
        "publish": "obsctl.baselining.publish_cli:publish",
    },
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="obsctl")
def cli() -> None:
    """Run the GPU / AI-workload optimization loop on your Prometheus stack.

    \b
    The loop, once per cadence (weekly or monthly):
      capture    obsctl-exporter + the workload SDK publish signals to Prometheus
      baseline   obsctl snapshot-baseline          (documents the current state)
      target     targets in the spec               (obsctl rules generate publishes them)
      initiative obsctl initiative start            (one change per workload class)
      verify     obsctl verify                     (effect size, interval, alerts fired)
      update     obsctl baseline promote           (the verified state becomes the baseline)
      share      obsctl report, obsctl dashboards build
      review     obsctl review                     (the cadence meeting: findings ranked by USD)

    Every command reads the spec (--spec, $OBSCTL_SPEC or ./obsctl.yaml).
    """


@cli.command()
@spec_option
@output_option
@wrap_errors
def check(spec_path: str, output: str) -> None:
    """Validate the spec without contacting Prometheus (exit 2 when invalid).

    Checks the YAML, every field and reference, and, when promtool is installed, that
    the rules generated from the spec pass ``promtool check rules`` (PromQL syntax).
    Unreadable prometheus secret or TLS files are a warning (they may exist only where
    the loop runs).
    """
    from obsctl.httpconfig import SecretFileError, check_files
    from obsctl.rules.generate import generate
    from obsctl.rules.promtool import validate_rule_files
    from obsctl.rules.sources import catalogue_gaps, describe

    try:
        spec = load(spec_path)
        warning = validate_rule_files(generate(spec, [])[0], spec)
    except SpecError as exc:
        if output == "json":  # pipelines get a document either way; the error also goes to stderr
            emit_json({"spec": spec_path, "valid": False, **error_document(str(exc), exc.exit_code)})
            exc.reported = True
        raise
    if warning:
        click.echo(f"obsctl: warning: {warning}", err=True)
    try:  # secret and TLS files may exist only where the loop runs: a warning, not an error
        check_files(spec.prometheus, spec.path.parent, "prometheus")
    except SecretFileError as exc:
        from obsctl.promapi import spec_located

        click.echo(f"obsctl: warning: {spec_located(spec, exc)}", err=True)
    summary = {
        "spec": str(spec.path),
        "valid": True,
        "workload_classes": [c.name for c in spec.workload_classes],
        "signals": [s.name for s in spec.signals],
        "targets": len(spec.targets),
        "store": str(spec.store_path()),
        "promql_checked": warning is None,
        "catalogue": {c.name: describe(c) for c in spec.workload_classes},
        "catalogue_gaps": catalogue_gaps(spec),
    }
    for gap in summary["catalogue_gaps"]:
        click.echo(f"obsctl: note: {gap}", err=True)
    if output == "json":
        emit_json(summary)
    else:
        click.echo(
            f"{spec.path}: OK: {len(spec.workload_classes)} workload class(es), "
            f"{len(spec.signals)} signal(s), {len(spec.targets)} target(s); store {spec.store_path()}"
        )
        for name, about in summary["catalogue"].items():  # the source catalogue's signals per class
            queue = f" + queue {about['queue']}" if about["queue"] else ""
            click.echo(f"  {name}: source {about['source']}{queue}: catalogue signals {', '.join(about['signals']) or 'none'}")


#: Thread-count variables of the BLAS builds numpy ships with or may use (OpenBLAS, MKL, OpenMP).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
#: Allocations between young-generation collections in a CLI process (CPython's default: 700).
CLI_GC_THRESHOLD = 50_000


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    An ``obsctl`` process lives seconds and holds many long-lived objects (pydantic's
    schemas, a baseline's tens of thousands of samples), few of them in cycles: with
    CPython's default thresholds the cycle collector re-walks them about a hundred times
    per ``verify`` (~0.1 s, bench/bench_store_verify.py). The objects that exist now are
    frozen out of collection and young collections run less often; nothing that is
    garbage stays beyond the process, and the exporter (its own entry point) keeps the
    defaults."""
    gc.freeze()
    gc.set_threshold(CLI_GC_THRESHOLD, *gc.get_threshold()[1:])
    # Before numpy loads (the loop commands import it lazily): obsctl's linear algebra is
    # small, and OpenBLAS' worker threads spin after each call, taking ~0.3 s of a second
    # core per verify from Prometheus on the same machine. A value the user set is kept.
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    run_main(cli, argv)
