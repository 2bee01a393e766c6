"""``obsctl ledger``: the outcome ledger (built by obsctl.baselining.practice.ledger)."""

from __future__ import annotations

import click

from obsctl.clikit import emit_json, load, output_option, spec_option, wrap_errors


@click.command("ledger")
@spec_option
@click.option("--class", "classes", multiple=True, metavar="NAME", help="Workload class (repeatable; default: all).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="With --output text: plain lines, or the Markdown document on stdout.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=str),
              help="Also write ledger.md and ledger.png (the staircase and the effects) into this folder.")
@click.option("--no-cost", is_flag=True, help="Do not ask Prometheus for the class's spend (USD/month figures n/a).")
@output_option
@wrap_errors
def ledger(spec_path, classes, fmt, out_dir, no_cost, output):
    """Every initiative with what changed (lever, description), its verified effect with
    interval, what it cost (effort, and the change of the class's spend in USD/month from
    its cost series over the baseline and verification windows), what it taught (--lesson
    at promote and close), and per class the staircase of promoted baselines.

    Exit codes: 0 ok, 1 store refused, 2 bad spec or flag, 3 Prometheus unreachable
    (pass --no-cost to build the ledger from the store alone).
    """
    from obsctl.baselining.practice.ledger import build_ledger
    from obsctl.baselining.store import Store
    from obsctl.baselining.text.present_ledger import ledger_lines, ledger_markdown, write_ledger

    spec = load(spec_path)
    client = None
    if not no_cost:
        from obsctl.promapi import PrometheusClient

        client = PrometheusClient.from_spec(spec)
    result = build_ledger(spec, Store(spec.store_path()), client, list(classes) or None)
    written = write_ledger(result, out_dir) if out_dir else None
    if output == "json":
        emit_json({**result.as_dict(), "files": [str(p) for p in written] if written else []})
        return
    if fmt == "markdown":
        click.echo(ledger_markdown(result, written[1].name if written else None))
    else:
        for line in ledger_lines(result):
            click.echo(line)
    for path in written or []:
        click.echo(f"wrote {path}", err=fmt == "markdown")
