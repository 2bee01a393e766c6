"""``obsctl publish``: the review state as Prometheus series (obsctl.baselining.practice.publish)."""

from __future__ import annotations

import re

import click

from obsctl.clikit import emit_json, load, output_option, progress, spec_option, wrap_errors
from obsctl.timeutil import parse_instant


@click.command("publish")
@spec_option
@click.option("--pushgateway", default=None, metavar="URL",
              help="Replace the group {job=obsctl-publish, instance=<spec identity>} on this Pushgateway (scrape it with "
                   "honor_labels: true); refused when that group holds another spec's state.")
@click.option("--instance", default=None, metavar="NAME",
              help="The group's instance label (default: the spec's name, else the spec file's name).")
@click.option("--textfile", default=None, type=click.Path(dir_okay=False, path_type=str),
              help="Write the exposition to this file instead: a *.prom file in an existing folder that node_exporter reads "
                   "(--collector.textfile.directory); an existing non-regular file is never replaced.")
@click.option("--no-review", is_flag=True, help="Publish what the store says only (baselines, initiatives, events); no Prometheus query.")
@click.option("--as-of", default="now", show_default=True, metavar="RFC3339|now", help="The instant reviewed (RFC3339; without an offset, UTC).")
@output_option
@wrap_errors
def publish(spec_path, pushgateway, textfile, no_review, as_of, output, instance=None):
    """Publish baselines' age, drift, target progress, initiatives' planned ends and
    events, opportunities (USD/month) and the review's findings as gauges, for the
    alerts ObsctlBaselineStale, ObsctlTargetBehind, ObsctlInitiativeOverdue and the
    dashboards' review table, ledger and annotations (docs/practice.md#publishing).

    Without --pushgateway or --textfile the exposition is printed. Run it on a schedule
    (hourly, e.g. a CronJob next to the review). Exit codes: 0 published, 1 store refused
    or file not written, 2 bad spec or flag, 3 Prometheus or the Pushgateway unreachable.
    """
    from prometheus_client import generate_latest

    from obsctl.baselining.practice.publish import add_identity, collect, grouping_key, push, write_textfile
    from obsctl.baselining.store import Store
    from obsctl.errors import UsageError
    from obsctl.httpconfig import validate_url

    if pushgateway and textfile:
        raise UsageError("give --pushgateway or --textfile, not both")
    if instance is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", instance):
        raise UsageError(f"--instance {instance!r}: letters, digits, '.', '_', '-' (at most 63, starting with a letter or digit)")
    if pushgateway:
        try:
            pushgateway = validate_url(pushgateway, "Pushgateway").rstrip("/")
        except ValueError as exc:
            raise UsageError(f"--pushgateway: {exc}") from None
    spec = load(spec_path)
    store = Store(spec.store_path())
    when = parse_instant(as_of, "--as-of")
    result = None
    if not no_review:
        from obsctl.baselining.practice.review import review
        from obsctl.baselining.statistics import distributions
        from obsctl.promapi import PrometheusClient

        distributions.prefetch()
        result = review(spec, store, PrometheusClient.from_spec(spec), when, progress=progress)
    registry = collect(spec, store, result, when)
    add_identity(spec, registry, instance)
    text = generate_latest(registry).decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    if pushgateway:
        push(spec, registry, pushgateway, spec.prometheus.timeout_seconds, instance)
        where = f"{pushgateway} job=obsctl-publish instance={grouping_key(spec, instance)['instance']}"
    elif textfile:
        write_textfile(registry, textfile)
        where = textfile
    else:
        where = None
    if output == "json":
        emit_json({"series": series, "published_to": where, "findings": len(result.findings) if result else None,
                   **({} if where else {"exposition": text})})
    elif where:
        click.echo(f"published {series} series to {where}")
    else:
        click.echo(text, nl=False)
