"""``obsctl verify`` and ``obsctl baseline promote``: judge an initiative against its baseline.

The initiative's primary signal is measured over the verification window with the
baseline's PromQL (so both sides are the same expression) and judged against the
baseline's samples by :func:`obsctl.baselining.statistics.comparison.judge`
(docs/verification.md): the baseline's memory model (estimated at snapshot time from
the days before it), the long-run variance of each side's mean, Fieller's interval of
the relative change at the level of the one boundary that holds for every cumulative
look at the change (:mod:`obsctl.baselining.statistics.anytime`; each look is logged,
:mod:`obsctl.baselining.looks`), then superiority / equivalence rules.
The regression alerts of the class that fired in the window are read from Prometheus'
``ALERTS`` series. The result is appended to the initiative (status ``verified``).

Default window: cumulative from the initiative's start to now, capped at the planned
length (:func:`obsctl.baselining.plan.planned_seconds`).

Guard signals (``verification.guards``: categories or names, default quality and cost):
each is measured over the same window with its own baseline's PromQL and judged as a
non-inferiority test with its margin ``guard_margin_ratio``, the family's error shared
by Holm's step-down (:func:`obsctl.baselining.decide.verdict.holm`). A REGRESSED guard turns
the overall verdict into REGRESSED (an "optimization" that degrades quality or cost is
a regression, DESIGN.md); a guard that is NO_DATA / INCONCLUSIVE, or chosen but without a
baseline (``guards_missing``: not evaluated), keeps it at most INCONCLUSIVE unless in
``verification.optional_guards`` (:func:`overall_verdict`).

Exit codes of ``obsctl verify`` (one per verdict, for pipelines):
IMPROVED 0, NO_CHANGE 10, INCONCLUSIVE 11, REGRESSED 12, NO_DATA 13.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from obsctl.baselining import evidence, looks
from obsctl.baselining.decide import verdict
from obsctl.baselining.designs import run as designs
from obsctl.baselining.guards import guard_ids, missing_guards
from obsctl.baselining.measure import transition as transitions
from obsctl.baselining.plan import planned_seconds
from obsctl.baselining.store import Store
from obsctl.baselining.workers import DaemonPool
from obsctl.durations import parse_duration
from obsctl.errors import StoreError, UsageError
from obsctl.promapi import PrometheusClient
from obsctl.records import Initiative, VerificationResult
from obsctl.spec import Spec, escape_label_value
from obsctl.timeutil import align_down, check_window_points, minus_seconds, rfc3339, utcnow

#: ``obsctl verify`` exit code per verdict.
#: Worker threads of one verify for the primary's window, its load context, the guards and the alerts query
#: (the calling thread loads the baseline and gathers the design's evidence; the load context has its own pool,
#: evidence.LOAD_CONCURRENCY).
VERIFY_CONCURRENCY = 4

VERDICT_EXIT_CODES: dict[str, int] = {"IMPROVED": 0, "NO_CHANGE": 10, "INCONCLUSIVE": 11, "REGRESSED": 12, "NO_DATA": 13}


def resolve_initiative(store: Store, initiative_id: str | None, workload_class: str | None) -> Initiative:
    """The initiative named by ``--initiative``, or the active one of ``--class``.

    With both, ``--class`` must be the initiative's class: a different one is refused
    rather than ignored (the user meant another initiative, or another class).

    Raises:
        UsageError: neither given, or a ``--class`` that is not the initiative's.
        StoreError: unknown id or no active initiative on the class.
    """
    if initiative_id:
        initiative = store.initiative(initiative_id)
        if workload_class and workload_class != initiative.workload_class:
            raise UsageError(f"--class {workload_class} does not match --initiative {initiative.id}, whose class is "
                             f"{initiative.workload_class}; give one of them, or the initiative's own class")
        return initiative
    if workload_class:
        active = store.open_initiative(workload_class)
        if active is None:
            # A store folder that is not there is more likely a wrong spec `store` than a class never started.
            missing = "" if store.path.exists() else f"; the store {store.path} does not exist (check the spec's store)"
            raise StoreError(f"workload class {workload_class!r} has no open initiative (start one: obsctl initiative start){missing}")
        return active
    raise UsageError("give --initiative ID or --class NAME")


def last_verdict(store: Store, initiative_id: str | None, workload_class: str | None) -> tuple[Initiative, VerificationResult]:
    """The initiative's last stored verdict (``verify --peek``): read-only, no query, no look.

    Raises:
        UsageError, StoreError: as :func:`resolve_initiative`; StoreError also when the
            initiative has no verdict yet.
    """
    initiative = resolve_initiative(store, initiative_id, workload_class)
    if not initiative.verifications:
        raise StoreError(f"initiative {initiative.id!r} has no verdict yet: run obsctl verify --initiative {initiative.id} (a look)")
    return initiative, initiative.verifications[-1]


def verification_window(
    initiative: Initiative, step_seconds: float, window: str, start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime | None = None,
    allow_before_start: bool = False,
) -> tuple[dt.datetime, dt.datetime]:
    """``(start, end)`` of the verification window.

    ``end`` defaults to now and is aligned down to the step. The window starts at the
    initiative's start: a look is the window cumulative from the change
    (:mod:`obsctl.baselining.looks`), so a ``window`` or ``start`` that would begin it
    later is refused; a ``window`` at least as long as the time since the start, or
    ``start`` equal to it, is the cumulative window.

    A window that begins before the initiative's ``started_at`` would measure the state
    before the change as its effect, so it is refused unless ``allow_before_start``.

    Raises:
        UsageError: the window is empty (start not before end), begins before the
            initiative started (naming ``--start``/``--end`` and ``started_at``) or after
            it (not a look on the change's sequence), or has
            more than ``promapi.MAX_RANGE_POINTS`` points at the step.
    """
    end_at = align_down(end or now or utcnow(), step_seconds)
    started = initiative.started_at
    if start is None:
        length = parse_duration(window, "--window")
        # Compare in seconds: end_at - a very long --window may not be a datetime.
        capped = end_at.timestamp() - length > started.timestamp()
        start_at = minus_seconds(end_at, length, "--window") if capped else started
        flag = "--window"
    else:
        start_at, flag = start, "--start"
    if not allow_before_start:
        if end_at <= started:
            raise UsageError(
                f"--end {rfc3339(end_at)} is not after the initiative's start {rfc3339(started)} ({initiative.id}): "
                "the window holds nothing measured after the change; use a later --end, or --allow-before-start"
            )
        if start is not None and start_at < started:
            raise UsageError(
                f"--start {rfc3339(start_at)} is before the initiative's start {rfc3339(started)} ({initiative.id}): "
                "that window measures the state before the change; use a later --start, or --allow-before-start"
            )
    if started < start_at < end_at:
        # A window that starts after the change is new data judged again: not a term of the
        # change's confidence sequence (looks.py), so not a look.
        raise UsageError(
            f"{flag} {window if flag == '--window' else rfc3339(start_at)} starts the window at {rfc3339(start_at)}, after the initiative's start "
            f"{rfc3339(started)} ({initiative.id}): a look judges the window cumulative from the start, whose error holds at every look; "
            f"a later start would test new data again. Drop {flag} (and use --end to look at an earlier moment)"
        )
    if start_at >= end_at:
        raise UsageError(f"verification window is empty: start {start_at.isoformat()} is not before end {end_at.isoformat()}")
    check_window_points(start_at, end_at, step_seconds, flag)
    return start_at, end_at


#: Alerts about obsctl's own state reaching Prometheus, not about the workload: never counted in a verdict.
NOT_ABOUT_THE_WORKLOAD = ("ObsctlBaselineMissing",)


def alerts_fired(client: PrometheusClient, workload_class: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    """Obsctl alerts of the class that were firing at any evaluation in ``(start, end]``.

    Queries ``count_over_time(ALERTS{alertname=~"Obsctl.*", alertname!~"<not about the
    workload>", workload_class="C", alertstate="firing"}[<window>s])`` at ``end``: every
    ``ALERTS`` sample Prometheus wrote in the window counts, however short the firing.
    Alerts that only say obsctl's own state had not reached Prometheus
    (:data:`NOT_ABOUT_THE_WORKLOAD`: ``ObsctlBaselineMissing`` while the rules with a new
    baseline load) are not counted.

    Returns:
        Sorted names, ``Alertname{signal="s"}`` when the alert has a ``signal`` label.
    """
    seconds = max(1, int(round((end - start).total_seconds())))
    query = (
        f'count_over_time(ALERTS{{alertname=~"Obsctl.*",alertname!~"{"|".join(NOT_ABOUT_THE_WORKLOAD)}",'
        f'workload_class="{escape_label_value(workload_class)}",'
        f'alertstate="firing"}}[{seconds}s])'
    )
    names = set()
    for sample in client.query(query, end):
        name = sample.metric.get("alertname", "?")
        signal = sample.metric.get("signal")
        names.add(f'{name}{{signal="{signal}"}}' if signal else name)
    return sorted(names)


@dataclass(frozen=True)
class Ask:
    """What ``obsctl verify`` is asked for: the initiative (``initiative_id``, else the open one
    of ``workload_class``), the window (``window`` back from ``end``, or ``start``; default the
    cumulative look), ``now`` (default the current time), whether to ``save`` the result, to
    judge ``guards``, and to ``allow_before_start`` a window that begins before the start."""

    initiative_id: str | None = None
    workload_class: str | None = None
    window: str | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    now: dt.datetime | None = None
    save: bool = True
    guards: bool = True
    allow_before_start: bool = False
    trim: bool = True


def verify(spec: Spec, client: PrometheusClient, store: Store, ask: Ask) -> tuple[Initiative, VerificationResult]:
    """Verify an initiative: measure its window, compare with its baseline, record the result.

    The baseline is the one current when the initiative started (``baseline_id``), so
    a snapshot taken during the initiative cannot absorb its effect. With ``guards``
    every other signal of the class with a baseline (:func:`guard_baselines`) is
    judged over the same window and can turn the verdict into REGRESSED
    (:func:`overall_verdict`).

    Returns:
        ``(initiative as saved, result)``; ``VERDICT_EXIT_CODES[result.verdict]`` is the
        exit code.

    Raises:
        UsageError, StoreError, PrometheusUnavailable: as the helpers above.
        VerdictNotSaved: the verdict was reached but could not be stored (it carries
            the initiative and the result, so the caller can still report the verdict).
    """
    initiative_id, workload_class, window, start, end, now = ask.initiative_id, ask.workload_class, ask.window, ask.start, ask.end, ask.now
    save, guards, allow_before_start = ask.save, ask.guards, ask.allow_before_start
    if start is not None and window is not None:
        # --window is a length back from --end, --start a fixed beginning: with both, one would be ignored.
        raise UsageError("--start and --window both set the window's beginning; give one of them (--window: the length up to --end)")
    if workload_class and not initiative_id:
        spec.workload_class(workload_class)  # a class the spec does not define: SpecError (exit 2) naming the valid ones
    initiative = resolve_initiative(store, initiative_id, workload_class)
    if initiative.status not in ("open", "verified"):
        raise StoreError(f"initiative {initiative.id!r} is {initiative.status}; only open or verified initiatives can be verified")
    cfg = spec.verification
    step = parse_duration(cfg.step, "verification.step")
    # The planned length is fixed at initiative start; a record without one is planned from its baseline now.
    baseline = None
    if initiative.planned_window_seconds:
        planned = initiative.planned_window_seconds
    else:
        baseline = store.baseline(initiative.baseline_id) if initiative.baseline_id else None
        planned = planned_seconds(spec, initiative, baseline)
    if window is None and start is None:
        # A look is the cumulative window from the initiative's start, up to the planned length.
        cap = initiative.started_at + dt.timedelta(seconds=planned)
        end = min(end or now or utcnow(), cap) if end is None or end > initiative.started_at else end
        start_at, end_at = verification_window(initiative, step, f"{planned:.0f}s", None, end, now, allow_before_start)
    else:
        start_at, end_at = verification_window(initiative, step, window or cfg.window, start, end, now, allow_before_start)
    # The Prometheus calls run on worker threads (the client's one session): the primary's
    # window (when its query is known from the baseline's record alone: not a canary without
    # a baseline) while its baseline's samples load here, the guards, the alerts query.
    # Errors surface in the sequential order: the primary's, then each guard's, then the alerts'.
    chosen = guard_ids(spec, store, initiative) if guards else []
    head = baseline or (store.baseline(initiative.baseline_id, samples=False) if initiative.baseline_id else None)
    # Daemon workers (baselining.workers): an error or Ctrl-C here ends the command without
    # waiting for the calls still in flight. The look lock is held from the looks' numbers
    # to their lines in the log: a concurrent verify waits and takes the next numbers.
    missing = tuple(missing_guards(spec, store, initiative)) if guards else ()
    transition = None
    if start_at == initiative.started_at:
        # The cumulative window judges what follows the change's transition (baselining.measure.transition).
        queries = [head.query if head is not None else spec.query_for(initiative.primary_signal, initiative.workload_class)]
        queries += [store.baseline(gid, samples=False).query for gid in chosen]
        transition = evidence.transition_of(spec, client, queries, start_at, end_at, step, ask.trim)
        start_at = dt.datetime.fromtimestamp(transition.judged_start, dt.UTC)
    # The looks expect a decision at the planned end: the judged part of the planned length is what is left after the transition.
    judged_planned = planned - (start_at - initiative.started_at).total_seconds() if start_at > initiative.started_at else planned
    req = evidence.Request(spec, initiative, baseline, start_at, end_at, step, judged_planned, guards, missing, transition)
    with store.looks_locked():
        with DaemonPool(max_workers=VERIFY_CONCURRENCY, thread_name_prefix="obsctl-verify") as pool:
            measured = None if head is None else pool.submit(evidence.measure_primary, spec, client, initiative, head, start_at, end_at, step)
            periods = designs.context_periods(initiative, head, start_at, end_at)
            loads = None if periods is None else (periods, pool.submit(evidence.period_loads, spec, client,
                                                                       spec.workload_class(initiative.workload_class), periods, step))
            pending = evidence.Pending(
                measured, loads,
                tuple(pool.submit(evidence.guard, req, client, store, gid) for gid in chosen),
                pool.submit(alerts_fired, client, initiative.workload_class, start_at, end_at))
            try:
                ev = evidence.gather(req, client, store, pending)
            finally:
                for future in [measured, loads[1] if loads else None, *pending.guards, pending.alerts]:
                    if future is not None:
                        future.cancel()
        return record(store, ev, verdict.decide(ev), save)


def result_of(ev: evidence.Evidence, v: verdict.Verdict) -> VerificationResult:
    """The :class:`~obsctl.records.VerificationResult` of a verdict on its evidence."""
    m, primary = ev.measurement, v.primary
    estimate, design, baseline = primary.estimate, primary.design, v.baseline
    result = VerificationResult(
        verdict=v.verdict,
        primary_verdict=primary.verdict,
        primary_reason=primary.reason,
        guards=list(v.guards),
        guards_evaluated=ev.guards_evaluated,
        guards_missing=list(ev.guards_missing),
        baseline_id=baseline.id,
        signal=baseline.signal,
        window=m.window,
        baseline_mean=estimate.baseline_mean if estimate else baseline.stats.mean,
        window_mean=estimate.window_mean if estimate else (m.stats.mean if m.stats else None),
        change_ratio=estimate.change if estimate else None,
        ci_low=estimate.low if estimate else None,
        ci_high=estimate.high if estimate else None,
        confidence=ev.look.confidence,  # the guarantee over all looks; the per-look level is in the assessment
        alerts_fired=list(ev.alerts),
        window_stats=m.stats,
        population=m.population,
        query=baseline.query,
        samples=m.samples,
        reason=v.reason,
        verified_at=utcnow(),
        coverage=m.coverage, warnings=m.warnings, partial=m.partial, assessment=primary.assessment,
        design=design.design, design_context=design.context,
        transition=None if ev.transition is None else transitions.record_of(ev.transition), notes=list(v.notes),
    )
    if ev.level_note and result.assessment is not None:
        result.assessment.notes.append(ev.level_note)
    return result


def record(store: Store, ev: evidence.Evidence, v: verdict.Verdict, save: bool) -> tuple[Initiative, VerificationResult]:
    """Log the look, then store the verdict on the initiative (``save``).

    Raises:
        StoreError: the look could not be logged (no verdict is shown).
        VerdictNotSaved: the verdict was reached but could not be stored.
    """
    initiative, result = ev.initiative, result_of(ev, v)
    # The look is logged before the verdict is shown: a verdict whose look is not in the log
    # would let looks escape the sequence's error guarantee (looks.py).
    new_looks = looks.looks_of(initiative, result, ev.look, {g.signal: e.look for g, e in zip(v.guards, ev.guards, strict=True)})
    try:
        with store.locked():
            store.append_looks(new_looks)
    except StoreError as exc:
        raise StoreError(f"no verdict shown: its look could not be logged ({exc})") from None
    if save:
        try:
            with store.locked():
                current = store.initiative(initiative.id)
                saved = current.model_copy(update={"status": "verified", "verifications": [*current.verifications, result]})
                store.save_initiative(saved)
        except StoreError as exc:
            raise VerdictNotSaved(str(exc), initiative, result) from None
        initiative = saved
    return initiative, result


class VerdictNotSaved(StoreError):
    """``verify`` reached a verdict but could not store it on the initiative (exit 1).

    Attributes:
        initiative: the initiative as it was (unchanged in the store).
        result: the verdict that was not stored; ``obsctl verify`` still prints it.
    """

    def __init__(self, message: str, initiative: Initiative, result: VerificationResult):
        super().__init__(f"verdict {result.verdict} not saved: {message}")
        self.initiative = initiative
        self.result = result


