"""The loop commands: snapshot-baseline, baseline, target, initiative, verify, report.

``obsctl.cli`` imports these click objects lazily by name: ``snapshot_baseline``,
``baseline`` (group), ``target`` (group), ``initiative`` (group), ``verify``, ``plan``, ``report``.
"""

from __future__ import annotations

import math
import sys

import click

from obsctl.baselining.designs import DESIGNS
from obsctl.baselining.store import Store
from obsctl.clikit import emit_json, load, output_option, progress, spec_option, wrap_errors
from obsctl.errors import EXIT_FAILURE
from obsctl.spec import LEVERS
from obsctl.timeutil import parse_instant, rfc3339

#: ``snapshot-baseline``: some pairs stored, some refused (a partial snapshot is not a success).
EXIT_PARTLY_REFUSED = 4


def _prefetch_statistics() -> None:
    # scipy.special's import (~0.27 s) overlaps the store reads and Prometheus requests
    # of the commands that judge or plan (statistics.distributions).
    from obsctl.baselining.statistics import distributions

    distributions.prefetch()


def _num(value: float | None, fmt: str = ".6g") -> str:
    # None, NaN and Inf read as n/a in text output.
    return "n/a" if value is None or not math.isfinite(value) else format(value, fmt)


def _store(spec) -> Store:
    return Store(spec.store_path())


def _client(spec):
    from obsctl.promapi import PrometheusClient

    return PrometheusClient.from_spec(spec)


def _baseline_summary(b) -> dict:
    return {
        "id": b.id, "workload_class": b.workload_class, "signal": b.signal, "unit": b.unit, "direction": b.direction,
        "source": b.source, "initiative": b.initiative, "created_at": b.created_at.isoformat(),
        "window_start": b.window.start.isoformat(), "window_end": b.window.end.isoformat(), "step_seconds": b.window.step_seconds,
        "mean": b.stats.mean, "median": b.stats.median, "p5": b.stats.p5, "p95": b.stats.p95, "stddev": b.stats.stddev,
        "sample_count": b.stats.sample_count, "batch_means": b.stats.batch_means, "series_count": b.population.series_count,
        "query": b.query,
        "coverage_ratio": b.coverage.ratio if b.coverage else None, "partial": b.partial, "warnings": b.warnings,
    }


# --- snapshot-baseline -------------------------------------------------------------------


@click.command("snapshot-baseline")
@spec_option
@click.option("--class", "classes", multiple=True, metavar="NAME", help="Workload class (repeatable; default: all).")
@click.option("--signal", "signals", multiple=True, metavar="NAME", help="Signal (repeatable; default: all).")
@click.option("--window", default=None, metavar="DURATION", help="Window length, e.g. 1h or 7d (default: spec verification.window).")
@click.option("--end", default="now", show_default=True, metavar="RFC3339|now",
              help="Window end, aligned down to the step (RFC3339; without an offset, UTC).")
@click.option("--allow-partial", is_flag=True,
              help="Store a baseline even when Prometheus says its answer is partial (marked partial: verdicts against it are at most INCONCLUSIVE).")
@click.option("--from-raw", is_flag=True,
              help="Read catalogue signals from the raw series behind their recorded series (vllm:..., obsctl_tokens_total, "
                   "the exporter's GPU, attribution and price series, ...), not the recorded series, which start when the rules "
                   "were loaded: a baseline from history right after install. Every level of the generated rules is inlined "
                   "(cost per token, efficiency, per-GPU signals too); a signal whose rules cannot be inlined with the same "
                   "values, or that the class's source does not fill, is REFUSED with the reason.")
@click.option("--verbose", "-v", is_flag=True,
              help="Text output: the tests behind the stationarity and tails lines (statistics, p-values, level); "
                   "JSON always carries them.")
@output_option
@wrap_errors
def snapshot_baseline(spec_path, classes, signals, window, end, allow_partial, from_raw, output, verbose=False):
    """Measure each class x signal over a window and store it as the current baseline.

    Stores the PromQL, the window (UTC), the population (input series), mean, median,
    p5, p95, stddev, sample count, the batch means and the raw samples. A class x signal
    with fewer finite samples than verification.min_samples (default 10) is reported
    as NO DATA and not stored. Only real
    samples count (lookback copies of a stopped series do not): each line shows the
    window's coverage, and one below verification.min_coverage_ratio, or a partial
    answer (Prometheus warnings; see --allow-partial), is REFUSED and not stored; so
    is one whose mean is 0 (every verdict is a change relative to it).
    Catalogue signals read obsctl's recorded series; for a window before the rules
    were loaded, --from-raw reads the raw series behind them instead (every rule
    level inlined, cost and efficiency signals included).

    Each stored baseline's lines say whether it is steady (stationarity) and, for a spiky
    signal, that verdicts judge its trimmed mean, in plain words; --verbose shows the
    tests behind them (statistics, p-values, level), as JSON always does.

    Exit codes: 0 when every class x signal was stored or had no data, 4 when some were
    stored and some REFUSED (JSON: "refused" lists those pairs with their reasons),
    1 when nothing was stored, 2 bad spec or flag, 3 Prometheus unreachable.
    """
    _prefetch_statistics()
    from obsctl.baselining.snapshot import SnapshotRequest, snapshot

    spec = load(spec_path)
    request = SnapshotRequest(list(classes) or None, list(signals) or None, window, parse_instant(end, "--end"),
                              allow_partial=allow_partial, from_raw=from_raw)
    report = snapshot(spec, _client(spec), _store(spec), request, progress=progress)
    refused = [{"workload_class": o.workload_class, "signal": o.signal, "reason": o.reason} for o in report.outcomes if o.status == "refused"]
    if output == "json":
        emit_json({"stored": len(report.stored), "refused": refused, "outcomes": [o.as_dict() for o in report.outcomes]})
    else:
        from obsctl.baselining.text.present import population_summary

        for o in report.outcomes:
            if o.baseline is not None:
                b = o.baseline
                dropped = f", {o.dropped} NaN/Inf dropped" if o.dropped else ""
                click.echo(f"{o.workload_class}/{o.signal}: baseline {b.id}: mean {_num(b.stats.mean)} {b.unit} "
                           f"(p5 {_num(b.stats.p5)}, p95 {_num(b.stats.p95)}, {b.stats.sample_count} samples{dropped}, "
                           f"{len(b.stats.batch_means)} batches, {population_summary(b.population, 'input series')})"
                           + (" PARTIAL" if b.partial else ""))
                if b.tails is not None and b.tails.memory is not None:  # a robust location: never a silent switch
                    from obsctl.baselining.measure.tails import tails_line
                    from obsctl.baselining.text.notes import tails_plain

                    click.echo(f"  tails: {tails_line(b.tails) if verbose else tails_plain(b.tails)}")
                if b.cycles is not None:
                    from obsctl.baselining.designs.knowledge import describe

                    click.echo(f"  cycles: {describe(b.cycles)}")
                from obsctl.baselining.text.present_stationarity import stationarity_line, stationarity_plain

                click.echo(f"  {stationarity_line(b.stationarity) if verbose else stationarity_plain(b.stationarity)}")
            else:
                click.echo(f"{o.workload_class}/{o.signal}: {'NO DATA' if o.status == 'no_data' else 'REFUSED'} ({o.reason}); not stored")
            from obsctl.baselining.text.present import output_lines

            for line in output_lines(o.coverage, o.warnings):
                click.echo(f"  {line}")
    if not report.stored:
        click.echo("obsctl: error: no baseline stored: no class x signal had data in the window", err=True)
        sys.exit(EXIT_FAILURE)
    if refused:
        names = ", ".join(f"{r['workload_class']}/{r['signal']}" for r in refused)
        click.echo(f"obsctl: error: partly refused: {len(refused)} class x signal(s) not stored: {names}", err=True)
        sys.exit(EXIT_PARTLY_REFUSED)


# --- baseline ----------------------------------------------------------------------------


@click.group()
def baseline():
    """Show, list and promote baselines."""


@baseline.command("list")
@spec_option
@click.option("--history", is_flag=True, help="All baselines ever taken, not only the current ones.")
@output_option
@wrap_errors
def baseline_list(spec_path, history, output):
    """List the current baselines (or the whole history)."""
    from obsctl.errors import StoreError

    store = _store(load(spec_path))
    records = store.all_baselines() if history else store.current_baselines()
    if history:
        # The history files stand on their own: a broken current.yaml only hides the marks.
        try:
            current = {b.id for b in store.current_baselines()}
        except StoreError as exc:
            click.echo(f"obsctl: warning: cannot tell which baselines are current: {exc}", err=True)
            current = set()
    else:
        current = {b.id for b in records}
    if output == "json":
        emit_json([{**_baseline_summary(b), "current": b.id in current} for b in records])
        return
    if not records:
        click.echo("no baselines yet (run: obsctl snapshot-baseline)")
    for b in records:
        mark = "*" if b.id in current else " "
        click.echo(f"{mark} {b.workload_class}/{b.signal}: {_num(b.stats.mean)} {b.unit} "
                   f"[{rfc3339(b.window.start)} .. {rfc3339(b.window.end)}, {b.stats.sample_count} samples, {b.source}] {b.id}")


@baseline.command("show")
@spec_option
@click.option("--class", "workload_class", default=None, metavar="NAME", help="Workload class of the current baseline to show.")
@click.option("--signal", default=None, metavar="NAME", help="Signal of the current baseline to show (with --class).")
@click.option("--id", "baseline_id", default=None, metavar="ID", help="A baseline id (current or historical).")
@output_option
@wrap_errors
def baseline_show(spec_path, workload_class, signal, baseline_id, output):
    """Show one baseline: by --id, or the current one of --class and --signal."""
    from obsctl.errors import StoreError, UsageError

    store = _store(load(spec_path))
    if baseline_id:
        b = store.baseline(baseline_id)
    elif workload_class and signal:
        b = store.current_baseline(workload_class, signal)
        if b is None:
            raise StoreError(f"no current baseline for {workload_class}/{signal} (run: obsctl snapshot-baseline)")
    else:
        raise UsageError("give --id ID, or --class NAME and --signal NAME")
    summary = _baseline_summary(b)
    if output == "json":
        emit_json({**summary, "population": b.population.model_dump()})
        return
    for key, value in summary.items():
        click.echo(f"{key}: {value}")
    click.echo(f"population: {b.population.series_count} series")
    for labels in b.population.label_sets[:20]:
        click.echo(f"  {labels}")


@baseline.command("promote")
@spec_option
@click.option("--initiative", "initiative_id", required=True, metavar="ID")
@click.option("--lesson", default="", metavar="TEXT", help="What the initiative taught (kept on it; obsctl ledger shows it).")
@click.option("--effort", default="", metavar="TEXT", help="What it cost, e.g. '2 engineer-days' (if not given at start).")
@click.option("--override-reason", default=None, metavar="TEXT",
              help="Promote a verdict not judged with every guard of the spec (--no-guards, a guard without a baseline or "
                   "without data) anyway; TEXT says why and is recorded on the initiative, in the ledger and the report.")
@output_option
@wrap_errors
def baseline_promote(spec_path, initiative_id, output, lesson="", effort="", override_reason=None):
    """Make an IMPROVED initiative's verification window the current baseline.

    The latest verdict must be IMPROVED and judged with every guard the spec chooses
    (verification.guards): a verify with --no-guards, a guard without a baseline or with
    no data is refused (exit 1) unless --override-reason says why. The primary signal and
    every guard signal with data in the window get a new current baseline (source
    promoted); the old ones stay in the history; the initiative becomes promoted. One line
    per promoted baseline, and the override when one was used.
    """
    from obsctl.baselining.promote import promote

    spec = load(spec_path)
    initiative, stored = promote(spec, _store(spec), initiative_id, lesson=lesson, effort=effort, override_reason=override_reason)
    if output == "json":
        emit_json({"initiative": initiative.id, "status": initiative.status, "baseline": _baseline_summary(stored[0]),
                   "promoted": [_baseline_summary(b) for b in stored], "override": initiative.promote_override or None})
    else:
        if initiative.promote_override:
            click.echo(f"override: promoted without every guard judged: {initiative.promote_override}")
        for role, new in zip(["primary", *["guard"] * (len(stored) - 1)], stored, strict=True):
            click.echo(f"promoted {role}: {new.workload_class}/{new.signal} baseline is now {new.id} "
                       f"(mean {_num(new.stats.mean)} {new.unit}, from initiative {initiative.id})")


# --- target ------------------------------------------------------------------------------


@click.group()
def target():
    """Targets from the spec against the current baselines."""


@target.command("show")
@spec_option
@output_option
@wrap_errors
def target_show(spec_path, output):
    """Each target with its anchored baseline, current value, progress and deadline.

    A relative target is anchored to the baseline current when obsctl first saw it
    (stored in STORE/targets/, docs/practice.md), so promoting a gain does not move it;
    every target's progress starts at that anchor. The current value is the class x
    signal's current baseline (the last snapshot or promoted verification window).
    progress = (current - anchor) / (target - anchor) (1 = met); OVERDUE: the deadline
    (00:00 UTC) has passed and the target is not met. JSON: one object per target with
    baseline, baseline_id, target, gap, gap_ratio, anchor_baseline_id, anchor_value,
    anchored_at, current, progress, elapsed, met, overdue, days_left, driver, deadline.
    Exit 1 when the store cannot record a first-seen anchor.
    """
    from obsctl.baselining.practice import targets as target_rules
    from obsctl.timeutil import utcnow

    spec = load(spec_path)
    store = _store(spec)
    now = utcnow()
    rows = []
    for t in spec.targets:
        sig = spec.signal(t.signal)
        b = store.current_baseline(t.workload_class, t.signal, samples=False)
        # A non-finite baseline mean (an old record) or target is no number to compare: None.
        base = b.stats.mean if b and math.isfinite(b.stats.mean) else None
        record = target_rules.anchor(store, t, now)
        st = target_rules.state(t, sig, record, base, base, now)
        value = st.value if st.value is not None and math.isfinite(st.value) else None
        rows.append({
            "workload_class": t.workload_class, "signal": t.signal, "unit": sig.unit,
            "baseline": base, "baseline_id": b.id if b else None, "target": value,
            "gap": (value - base) if value is not None and base is not None else None,
            # Undefined for a baseline of 0 (e.g. an error ratio with no errors).
            "gap_ratio": (value / base - 1) if value is not None and base else None,
            "anchor_baseline_id": record.anchor_baseline_id, "anchor_value": record.anchor_value,
            "anchored_at": rfc3339(record.anchored_at), "current": base,
            "progress": st.progress if value is not None else None, "elapsed": st.elapsed, "met": st.met,
            "overdue": st.overdue, "days_left": st.days_left,
            "driver": t.driver, "deadline": t.deadline.isoformat(),
        })
    if output == "json":
        emit_json(rows)
        return
    if not rows:
        click.echo("no targets in the spec")
    for r in rows:
        flag = " OVERDUE" if r["overdue"] else (" MET" if r["met"] else "")
        if r["baseline"] is None:
            why = "no current baseline" if r["baseline_id"] is None else f"baseline {r['baseline_id']} has no finite mean"
            click.echo(f"{r['workload_class']}/{r['signal']}: {why} (target {_num(r['target']) if r['target'] is not None else 'relative'}), "
                       f"by {r['deadline']}: {r['driver']}{flag}")
            continue
        ratio = "gap ratio n/a" if r["gap_ratio"] is None else f"{r['gap_ratio'] * 100:+.1f} %"
        click.echo(f"{r['workload_class']}/{r['signal']}: baseline {_num(r['baseline'])} -> target {_num(r['target'])} {r['unit']} "
                   f"(gap {_num(r['gap'], '+.6g')}, {ratio}) by {r['deadline']}: {r['driver']}{flag}")
        anchored = (f"anchored to {r['anchor_baseline_id']} ({_num(r['anchor_value'])} {r['unit']}) since {r['anchored_at']}"
                    if r["anchor_baseline_id"] else f"no anchor yet, first seen {r['anchored_at']}")
        progress = "progress n/a" if r["progress"] is None else f"progress {r['progress'] * 100:.0f} %"
        days = (f"{r['days_left']:.0f} day(s) left" if r["days_left"] >= 0 else f"deadline passed {int(-r['days_left'])} day(s) ago")
        click.echo(f"  {anchored}; current {_num(r['current'])} {r['unit']}; {progress}, "
                   f"{min(r['elapsed'], 1) * 100:.0f} % of the time gone; {days}")


# --- initiative --------------------------------------------------------------------------


@click.group()
def initiative():
    """The initiative ledger: one change at a time per workload class."""


@initiative.command("start")
@spec_option
@click.option("--name", required=True, help="What is being changed, e.g. 'batch size tuning'.")
@click.option("--lever", required=True, type=click.Choice(LEVERS), help="The optimization lever ('other': give --lever-description).")
@click.option("--lever-description", default="", metavar="TEXT",
              help="What the lever is when --lever other (required then, refused with a listed lever).")
@click.option("--class", "workload_class", required=True, metavar="NAME", help="The workload class changed.")
@click.option("--signal", required=True, metavar="NAME", help="The primary signal the verdict is based on.")
@click.option("--expected-impact", type=float, default=None, metavar="RATIO",
              help="Expected relative change, e.g. 0.2 for +20 %; 0 starts a placebo (as --placebo).")
@click.option("--placebo", is_flag=True,
              help="A placebo (A/A) initiative: change nothing and see verify hold NO_CHANGE on your stack; the ledger "
                   "records it as a placebo; never promoted.")
@click.option("--started-at", default="now", show_default=True, metavar="RFC3339|now",
              help="When the change went live (RFC3339; without an offset, UTC).")
@click.option("--notes", default="", help="Free text kept with the initiative.")
@click.option("--design", type=click.Choice(list(DESIGNS)), default=None,
              help="How verify compares (default: the spec's comparison block): before-after (window vs baseline), "
                   "control (vs an untouched --control class, difference in differences), canary (treatment vs control "
                   "replicas in the same window; no baseline needed), seasonal (vs the same hours of the stored baseline).")
@click.option("--control", "control_class", default=None, metavar="NAME", help="The control class of --design control.")
@click.option("--effort", default="", metavar="TEXT", help="What the change costs, e.g. '3 engineer-days' (shown by obsctl ledger).")
@click.option("--owner", default=None, metavar="NAME", help="Who answers for the initiative (default: the class's owner).")
@click.option("--due", default=None, metavar="YYYY-MM-DD",
              help="Decide it by this date (00:00 UTC; default: the start plus the planned length).")
@output_option
@wrap_errors
def initiative_start(spec_path, name, lever, workload_class, signal, expected_impact, started_at, notes, design, control_class, output,
                     effort="", owner=None, due=None, lever_description="", placebo=False):
    """Open an initiative. Refuses a second open initiative on the same class, a class
    that is another open initiative's control, and a class x signal without a current
    baseline unless the design is canary (exit 1). The design is recorded on the
    initiative and shown by verify and report.

    When the initiative's own plan cannot detect its expected effect (default 5 %)
    within the planner's limit, a 'obsctl: warning:' line on stderr says so: its verify
    would stay INCONCLUSIVE. The initiative is still started (exit 0)."""
    _prefetch_statistics()
    from obsctl.baselining.initiative import Start, start_initiative
    from obsctl.baselining.text.present import lever_text

    spec = load(spec_path)
    i = start_initiative(spec, _store(spec), Start(name, lever, workload_class, signal, expected_impact,
                                                   parse_instant(started_at, "--started-at"), notes, design=design, control=control_class,
                                                   effort=effort, owner=owner, due=_parse_date(due, "--due") if due else None,
                                                   lever_description=lever_description, placebo=placebo))
    plan = _initiative_plan(spec, i)  # start_initiative fixed the planned length (repeated looks, docs/verification.md)
    warning = _undetectable_warning(i, plan)
    if warning:
        click.echo(f"obsctl: warning: {warning}", err=True)
    from obsctl.baselining.initiative import aged_warning

    aged = aged_warning(spec, _store(spec), i)
    if aged:
        click.echo(f"obsctl: warning: {aged}", err=True)
    if output == "json":
        emit_json({**i.model_dump(mode="json"), "plan": plan})
    else:
        lever = lever_text(i.lever, i.lever_description)
        click.echo(f"started {'placebo (A/A) ' if i.placebo else ''}initiative {i.id}: {lever} on {i.workload_class}, "
                   f"primary signal {i.primary_signal}, "
                   f"baseline {i.baseline_id or 'none (canary)'}, design {i.design}"
                   + (f" (control {i.control_class})" if i.control_class else "")
                   + (f" ({i.variant['label']}={i.variant['treatment']} vs {i.variant['control']})" if i.variant else "")
                   + (f", owner {i.owner}" if i.owner else "") + (f", due {i.due.isoformat()}" if i.due else ""))
        if i.design_note:
            click.echo(f"design {i.design}: {i.design_note}")
        if plan:
            click.echo(f"plan: verify on the cumulative window from the start up to {plan['planned_text']}; " + "; ".join(plan["lines"][1:]))
        if i.baseline_cycle:
            from obsctl.baselining.designs.cycle import assess

            check = assess(i.baseline_cycle, spec.verification.min_effect_ratio)
            click.echo(f"cycle: {check.reason}" + ("; a before-after verdict will be INCONCLUSIVE" if check.detected else ""))


@initiative.command("rebase")
@spec_option
@click.option("--initiative", "initiative_id", required=True, metavar="ID")
@click.option("--reason", required=True, metavar="TEXT", help="Why the initiative gets a fresh baseline (kept on it).")
@output_option
@wrap_errors
def initiative_rebase(spec_path, initiative_id, reason, output):
    """Bind an open initiative, before its first verify, to the class's current baselines
    (take one that ends at the start first: snapshot-baseline --end <start>).

    Logged on the initiative (rebased: when, from, to, why; and its notes). Exit 1 after a
    look (close it and start a new change instead), without a fresher baseline, or for an
    unknown id; 2 for an empty reason or a baseline that ends after the start.
    """
    from obsctl.baselining.initiative import rebase_initiative

    spec = load(spec_path)
    i = rebase_initiative(spec, _store(spec), initiative_id, reason)
    last = i.rebased[-1]
    if output == "json":
        emit_json({"initiative": i.id, "baseline_id": i.baseline_id, "guard_baseline_ids": i.guard_baseline_ids, "rebased": last})
    else:
        click.echo(f"rebased initiative {i.id}: baseline {last['from'] or 'none'} -> {last['to']} (logged on the initiative)")


@initiative.command("list")
@spec_option
@click.option("--class", "workload_class", default=None, metavar="NAME", help="Only initiatives of this workload class.")
@click.option("--status", type=click.Choice(["open", "verified", "promoted", "closed"]), default=None)
@output_option
@wrap_errors
def initiative_list(spec_path, workload_class, status, output):
    """List initiatives, oldest first, each with its planned end (``due`` when given, else
    the start plus the planned length) and OVERDUE when it is open or verified, past that
    end, and without a decisive verdict (IMPROVED, NO_CHANGE, REGRESSED). JSON adds
    ``last_verdict``, ``planned_end`` (RFC 3339) and ``overdue`` (bool) to each record."""
    from obsctl.baselining.practice.review import is_overdue, planned_end
    from obsctl.baselining.text.present import lever_text
    from obsctl.escape import terminal_text
    from obsctl.timeutil import utcnow

    spec = load(spec_path)
    records = _store(spec).initiatives(workload_class, status)
    now = utcnow()
    if output == "json":
        emit_json([{**i.model_dump(mode="json", exclude={"verifications"}),
                    "last_verdict": i.verifications[-1].verdict if i.verifications else None,
                    "planned_end": rfc3339(planned_end(spec, i)), "overdue": is_overdue(spec, i, now)} for i in records])
        return
    if not records:
        click.echo("no initiatives")
    for i in records:
        verdict = f", last verdict {i.verifications[-1].verdict}" if i.verifications else ""
        lever = lever_text(i.lever, i.lever_description)
        owner = f", owner {i.owner}" if i.owner else ""
        end = f", planned end {rfc3339(planned_end(spec, i))}" + (" OVERDUE" if is_overdue(spec, i, now) else "")
        click.echo(f"{i.id}: {i.status}{verdict}: {terminal_text(i.name)} ({terminal_text(lever)}) on {i.workload_class}/"
                   f"{i.primary_signal}, started {rfc3339(i.started_at)}{end}{terminal_text(owner)}")


@initiative.command("close")
@spec_option
@click.option("--initiative", "initiative_id", required=True, metavar="ID")
@click.option("--note", default="", help="Why it is closed without promotion.")
@click.option("--lesson", default="", metavar="TEXT", help="What it taught (kept on the initiative; obsctl ledger shows it).")
@click.option("--effort", default="", metavar="TEXT", help="What it cost, e.g. '2 engineer-days' (if not given at start).")
@output_option
@wrap_errors
def initiative_close(spec_path, initiative_id, note, output, lesson="", effort=""):
    """Close an initiative without promoting it (frees its class). Exit 1 for an unknown
    id or an initiative already promoted or closed."""
    from obsctl.baselining.initiative import close_initiative

    i = close_initiative(_store(load(spec_path)), initiative_id, note, lesson=lesson, effort=effort)
    if output == "json":
        emit_json(i.model_dump(mode="json", exclude={"verifications"}) | {"verifications": len(i.verifications)})
    else:
        click.echo(f"closed initiative {i.id}")


@initiative.command("lesson")
@spec_option
@click.option("--initiative", "initiative_id", required=True, metavar="ID")
@click.option("--lesson", required=True, metavar="TEXT", help="What the initiative taught (obsctl ledger shows it).")
@output_option
@wrap_errors
def initiative_lesson(spec_path, initiative_id, lesson, output):
    """Record what a promoted or closed initiative taught (obsctl review flags ended ones
    without a lesson). Exit 1 for an unknown id or an initiative still open or verified
    (give the lesson to baseline promote / initiative close), 2 for an empty lesson."""
    from obsctl.baselining.initiative import record_lesson

    i = record_lesson(_store(load(spec_path)), initiative_id, lesson)
    if output == "json":
        emit_json({"initiative": i.id, "status": i.status, "lesson": i.lesson})
    else:
        click.echo(f"lesson kept on initiative {i.id} ({i.status})")


def _parse_date(text: str, what: str):
    # A calendar date YYYY-MM-DD, as the spec's target deadlines.
    import datetime as dt

    from obsctl.errors import UsageError

    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a date (YYYY-MM-DD)") from None


def _undetectable_warning(i, plan: dict | None) -> str | None:
    # The plan's verdict on its own effect: no window within the planner's limit detects it.
    if not plan or "window_seconds" not in plan or plan["window_seconds"]:
        return None
    from obsctl.baselining.statistics.power import MAX_PLAN_SECONDS
    from obsctl.durations import format_duration

    effect = f"{plan['effect']:+.1%}" + ("" if i.expected_impact_ratio else " (the default; give --expected-impact)")
    return (f"initiative {i.id}: its plan cannot detect {effect} on {i.workload_class}/{i.primary_signal} within "
            f"{format_duration(MAX_PLAN_SECONDS)} against baseline {i.baseline_id}: verify will stay INCONCLUSIVE; "
            "re-snapshot a longer baseline, choose a design with less noise, or expect a larger effect")


def _initiative_plan(spec, i) -> dict | None:
    # The planned length and the planner's figures (obsctl.baselining.plan); None without a baseline.
    from obsctl.baselining.plan import planned_seconds
    from obsctl.baselining.text.present import plan_lines
    from obsctl.durations import format_duration
    from obsctl.errors import UsageError

    b = _store(spec).baseline(i.baseline_id) if i.baseline_id else None
    if b is None:
        return None
    planned = planned_seconds(spec, i, b)
    try:
        p = _design_plan(spec, b, i.expected_impact_ratio or 0.05, i.workload_class, i.design,
                         i.control_class)
    except UsageError as exc:
        return {"planned_seconds": planned, "planned_text": format_duration(planned), "lines": ["", str(exc)]}
    return {"planned_seconds": planned, "planned_text": format_duration(planned), **p.as_dict(),
            "lines": plan_lines(p, f"{i.workload_class}/{i.primary_signal}")}


# --- plan --------------------------------------------------------------------------------


def _design_plan(spec, b, effect, workload_class, design, control_class=None):
    # The planner for the initiative's comparison design (obsctl.baselining.designs.plan).
    from obsctl.baselining.designs.plan import design_plan
    from obsctl.baselining.designs.run import design_of

    cc = spec.comparison.for_class(workload_class)
    control = control_class or cc.control
    needs_control = design_of(design).needs_control
    control_baseline = _store(spec).current_baseline(control, b.signal) if needs_control and control else None
    return design_plan(spec, b, effect, design, cc.variant.traffic_share if cc.variant else 0.5, control_baseline)



@click.command("plan")
@spec_option
@click.option("--class", "workload_class", required=True, metavar="NAME", help="The workload class.")
@click.option("--signal", required=True, metavar="NAME", help="The signal to plan for (its current baseline is used).")
@click.option("--effect", type=float, required=True, metavar="RATIO", help="Expected relative change, e.g. 0.05 for +5 %.")
@click.option("--design", type=click.Choice(list(DESIGNS)), default=None,
              help="Comparison design to plan for (default: the spec's for the class): control adds the control class's "
                   "two windows, canary splits the traffic (variant.traffic_share) and needs no baseline period.")
@output_option
@wrap_errors
def plan(spec_path, workload_class, signal, effect, design, output):
    """How long a verify window must be, from the current baseline's memory and scale.

    Prints the window needed to detect EFFECT with verification.power (default 90 %) at
    verification.confidence (an interval valid at any number of looks), the smallest effect
    the default window can detect, and the window that reaches NO_CHANGE within
    +-min_effect_ratio (against this baseline, and with a baseline as long as the
    window). Method: docs/verification.md. Exit 1 without a current baseline.
    """
    _prefetch_statistics()
    from obsctl.baselining.plan import baseline_plan
    from obsctl.baselining.text.present import plan_lines
    from obsctl.errors import StoreError

    spec = load(spec_path)
    spec.workload_class(workload_class)
    spec.signal(signal)
    b = _store(spec).current_baseline(workload_class, signal)
    if b is None:
        raise StoreError(f"no current baseline for {workload_class}/{signal}; take one first: "
                         f"obsctl snapshot-baseline --class {workload_class} --signal {signal}")
    design = design or spec.comparison.for_class(workload_class).design
    p = _design_plan(spec, b, effect, workload_class, design) if design else baseline_plan(spec, b, effect)
    if output == "json":
        emit_json({"workload_class": workload_class, "signal": signal, "baseline_id": b.id, "design": design, **p.as_dict()})
        return
    for line in plan_lines(p, f"{workload_class}/{signal}"):
        click.echo(line)


# --- verify ------------------------------------------------------------------------------


@click.command("verify")
@spec_option
@click.option("--initiative", "initiative_id", default=None, metavar="ID", help="Initiative to verify.")
@click.option("--class", "workload_class", default=None, metavar="NAME",
              help="Or: the open initiative of this class (with --initiative: must be its class).")
@click.option("--window", default=None, metavar="DURATION",
              help="Window length up to --end (not with --start); refused where it would start after the initiative's start "
                   "(a look is cumulative from the start).")
@click.option("--start", default=None, metavar="RFC3339",
              help="Window start (RFC3339; without an offset, UTC): the initiative's start (the default; the end is then capped "
                   "at the planned length), or before it with --allow-before-start.")
@click.option("--end", default="now", show_default=True, metavar="RFC3339|now",
              help="Window end, aligned down to the step (RFC3339; without an offset, UTC).")
@click.option("--no-guards", is_flag=True, help="Judge the primary signal only (skip the class's other signals).")
@click.option("--allow-before-start", is_flag=True,
              help="Allow a --start/--end before the initiative's start (the window then measures the old state too).")
@click.option("--no-trim", is_flag=True,
              help="Judge the whole window from the start, the change's transition included (by default the transition is "
                   "excluded: the signals' look-back and the replicas restarted in the rollout; recorded either way).")
@click.option("--peek", is_flag=True,
              help="Show the initiative's last stored verdict again, read-only: no query, no look (exit code of that verdict).")
@click.option("--verbose", "-v", is_flag=True,
              help="Text output: the full statistics line and each note's diagnostic (the test, its statistic, p-value and "
                   "level, the model) under its plain words. JSON and the report always carry both.")
@output_option
@wrap_errors
def verify(spec_path, initiative_id, workload_class, window, start, end, no_guards, allow_before_start, output, peek=False, no_trim=False,
           verbose=False):
    """Compare an initiative's window with its baseline on its primary signal and guards.

    Default window: cumulative from the initiative's start up to its planned length.
    Every verify is a look at the change, logged in the store before its verdict is
    shown; the interval is a confidence sequence, so the error holds however often and
    whenever you look (the look number is on the 'statistics:' line, its boundary too with --verbose;
    docs/verification.md). A window that starts after the initiative's start is not a
    look and is refused.
    The change's transition is not judged: the window starts once it has left every
    input series (the longest look-back of the signals' PromQL through the recording
    rules, e.g. a rate's 5m range, and the last replica restart, new or gone series in
    the first 15 minutes, plus that look-back); the 'transition:' line (JSON: transition)
    says what was excluded and why; a window too short after it is INCONCLUSIVE with the
    time it will be long enough. --no-trim judges the whole window (recorded).
    Guards (verification.guards, default quality and cost) are non-inferiority tests;
    a REGRESSED guard makes the verdict REGRESSED, an undecided quality guard keeps it
    at most INCONCLUSIVE. Output: the verdict line, a 'guards:' line, the 'design:' lines
    (the initiative's comparison design: its effect, the control's own movement, demand
    and saturation of each period, a cycle or mix found; docs/verification-designs.md),
    coverage lines, the 'statistics:' line (the look and the window; --verbose: its
    boundary, memory, effective samples and dof), one 'note:' line per statistical note
    in plain words: what it means for the verdict and what to do (--verbose: each
    followed by a '  diagnostic:' line naming the test, statistic, p-value, level and
    model; JSON: notes and guards[].notes, each with kind, plain and detail; the report
    shows both). A placebo (A/A) initiative's verdict is followed by what it means
    (NO_CHANGE expected; anything else is a false alarm to report). Before-after turns
    INCONCLUSIVE when the
    baseline has a daily cycle, a primary that follows demand (throughput, cost per unit
    of work, ...) was demand-bound (not saturated in either period) or a mix shift
    explains most of the change.

    \b
    Verdict and exit code:
      IMPROVED      0   interval above 0 (direction-aware) and change >= min_effect_ratio
      NO_CHANGE    10   whole interval within +-min_effect_ratio
      INCONCLUSIVE 11   neither: more data needed
      REGRESSED    12   interval below 0 and change <= -min_effect_ratio
      INCONCLUSIVE 11   also: window too short for the signal's memory (the reason says how long)
      NO_DATA      13   no usable samples in the window, or the signal stopped (never a pass)
    Errors: 1 store refused, 2 bad spec or flag, 3 Prometheus unreachable.
    --peek shows the last stored verdict again without asking Prometheus and without a
    look (exit 1 when the initiative has none yet); obsctl report never adds a look either.
    If the look cannot be logged (read-only store...), no verdict is printed: the store
    error goes to stderr and the exit code is 1. If the look is logged but the result
    cannot be stored on the initiative, the verdict is printed, the error follows and
    the exit code is 1 (promote would refuse the unrecorded verdict).
    """
    _prefetch_statistics()
    from obsctl.baselining.verify import VERDICT_EXIT_CODES
    from obsctl.errors import UsageError

    spec = load(spec_path)
    not_saved = None
    if peek:
        from obsctl.baselining.verify import last_verdict

        if window or start or end != "now" or no_guards or allow_before_start or no_trim:
            raise UsageError("--peek shows the stored verdict as it was judged: drop --window, --start, --end, --no-guards, "
                             "--no-trim and --allow-before-start")
        initiative_, result = last_verdict(_store(spec), initiative_id, workload_class)
    else:
        initiative_, result, not_saved = _run_verify(spec, initiative_id, workload_class, window, start, end, no_guards, allow_before_start,
                                                     no_trim)
    _show_verdict(spec, initiative_, result, not_saved, output, VERDICT_EXIT_CODES, peek, verbose)


def _run_verify(spec, initiative_id, workload_class, window, start, end, no_guards, allow_before_start, no_trim=False):
    from obsctl.baselining.verify import Ask, VerdictNotSaved
    from obsctl.baselining.verify import verify as run_verify

    not_saved = None
    try:
        initiative_, result = run_verify(spec, _client(spec), _store(spec), Ask(
            initiative_id, workload_class, window, parse_instant(start, "--start") if start else None, parse_instant(end, "--end"),
            guards=not no_guards, allow_before_start=allow_before_start, trim=not no_trim))
    except VerdictNotSaved as exc:
        not_saved, initiative_, result = exc, exc.initiative, exc.result
    return initiative_, result, not_saved


def _show_verdict(spec, initiative_, result, not_saved, output, codes, peek, verbose=False):
    from obsctl.baselining.text.present import guards_line, note_lines, statistics_line, statistics_plain, verdict_line, verification_lines

    code = codes[result.verdict]
    unit = spec.signal(result.signal).unit if result.signal in {s.name for s in spec.signals} else ""
    if output == "json":
        emit_json({"initiative": initiative_.id, "workload_class": initiative_.workload_class,
                   "exit_code": not_saved.exit_code if not_saved else code, "verdict_exit_code": code,
                   "saved": not_saved is None, "save_error": str(not_saved) if not_saved else None, "peek": peek,
                   "placebo_initiative": initiative_.placebo,
                   "summary": verdict_line(result, unit), "guards_summary": guards_line(result),
                   "coverage_summary": verification_lines(result), "statistics_summary": statistics_line(result),
                   "statistics_plain": statistics_plain(result),
                   **result.model_dump(mode="json", exclude={"samples": True, "guards": {"__all__": {"samples"}}})})
    else:
        if peek:
            click.echo(f"stored verdict of {initiative_.id}, verified {rfc3339(result.verified_at)} (read again: no new look)")
        click.echo(verdict_line(result, unit))
        if initiative_.placebo:
            from obsctl.baselining.text.present import placebo_initiative_line

            click.echo(placebo_initiative_line(result.verdict))
        click.echo(guards_line(result))
        from obsctl.baselining.text.present import context_lines

        for line in context_lines(result.design_context, verbose):
            click.echo(line)
        for line in verification_lines(result):
            click.echo(line)
        stats = statistics_line(result) if verbose else statistics_plain(result)
        if stats:
            click.echo(stats)
        # The statistical notes in plain words (--verbose: with their diagnostics); JSON has both in notes.
        for line in note_lines(result, verbose):
            click.echo(line)
    if not_saved is not None:
        not_saved.reported = True
        raise not_saved
    sys.exit(code)


# --- report ------------------------------------------------------------------------------


@click.command("report")
@spec_option
@click.option("--initiative", "initiative_id", required=True, metavar="ID", help="Initiative to report on (see obsctl initiative list).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=str), help="Output directory.")
@output_option
@wrap_errors
def report(spec_path, initiative_id, out_dir, output):
    """Write a Markdown report and a PNG figure of the initiative's latest verification.

    Files: OUT/<initiative id>.md and OUT/<initiative id>.png, written atomically, both or
    neither: everything is read and rendered first, so a failure (a damaged look log...)
    leaves no new file. Exit 1 when the report cannot be made.
    """
    from pathlib import Path

    from obsctl.baselining.report import write_report

    md, png = write_report(_store(load(spec_path)), initiative_id, Path(out_dir))
    if output == "json":
        emit_json({"initiative": initiative_id, "markdown": str(md), "figure": str(png)})
    else:
        click.echo(f"wrote {md} and {png}")
