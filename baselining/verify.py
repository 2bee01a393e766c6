"""``obsctl verify`` and ``obsctl baseline promote``: judge an initiative against its baseline.

The initiative's primary signal is measured over the verification window with the
baseline's PromQL (so both sides are the same expression), summarized into batch means
and compared with the baseline's batch means (:func:`obsctl.baselining.stats.assess`:
Fieller interval of the relative change, verdict rules in :func:`stats.decide`). The
regression alerts of the class that fired in the window are read from Prometheus'
``ALERTS`` series. The result is appended to the initiative (status ``verified``).

Exit codes of ``obsctl verify`` (one per verdict, for pipelines):
IMPROVED 0, NO_CHANGE 10, INCONCLUSIVE 11, REGRESSED 12, NO_DATA 13.
"""

from __future__ import annotations

import datetime as dt

from obsctl.baselining import stats
from obsctl.baselining.models import Baseline, Initiative, VerificationResult
from obsctl.baselining.promapi import PrometheusClient
from obsctl.baselining.snapshot import measure
from obsctl.baselining.store import Store
from obsctl.baselining.timeutil import align_down, parse_duration, utcnow
from obsctl.errors import StoreError, UsageError
from obsctl.spec import Spec, escape_label_value

#: ``obsctl verify`` exit code per verdict.
VERDICT_EXIT_CODES: dict[str, int] = {"IMPROVED": 0, "NO_CHANGE": 10, "INCONCLUSIVE": 11, "REGRESSED": 12, "NO_DATA": 13}


def resolve_initiative(store: Store, initiative_id: str | None, workload_class: str | None) -> Initiative:
    """The initiative named by ``--initiative``, or the active one of ``--class``.

    Raises:
        UsageError: neither given. StoreError: unknown id or no active initiative on the class.
    """
    if initiative_id:
        return store.initiative(initiative_id)
    if workload_class:
        active = store.open_initiative(workload_class)
        if active is None:
            raise StoreError(f"workload class {workload_class!r} has no open initiative (start one: obsctl initiative start)")
        return active
    raise UsageError("give --initiative ID or --class NAME")


def verification_window(
    initiative: Initiative, step_seconds: float, window: str, start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime | None = None
) -> tuple[dt.datetime, dt.datetime]:
    """``(start, end)`` of the verification window.

    ``end`` defaults to now and is aligned down to the step. ``start`` defaults to the
    initiative's start, capped so the window is at most ``window`` long (the most recent
    part is kept); an explicit ``start`` is used as given.

    Raises:
        UsageError: the window is empty (start not before end).
    """
    end_at = align_down(end or now or utcnow(), step_seconds)
    if start is None:
        start_at = max(initiative.started_at, end_at - dt.timedelta(seconds=parse_duration(window, "--window")))
    else:
        start_at = start
    if start_at >= end_at:
        raise UsageError(f"verification window is empty: start {start_at.isoformat()} is not before end {end_at.isoformat()}")
    return start_at, end_at


def alerts_fired(client: PrometheusClient, workload_class: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    """Obsctl alerts of the class that were firing at any evaluation in ``(start, end]``.

    Queries ``count_over_time(ALERTS{alertname=~"Obsctl.*", workload_class="C",
    alertstate="firing"}[<window>s])`` at ``end``: every ``ALERTS`` sample Prometheus wrote
    in the window counts, however short the firing.

    Returns:
        Sorted names, ``Alertname{signal="s"}`` when the alert has a ``signal`` label.
    """
    seconds = max(1, int(round((end - start).total_seconds())))
    query = (
        f'count_over_time(ALERTS{{alertname=~"Obsctl.*",workload_class="{escape_label_value(workload_class)}",'
        f'alertstate="firing"}}[{seconds}s])'
    )
    names = set()
    for sample in client.query(query, end):
        name = sample.metric.get("alertname", "?")
        signal = sample.metric.get("signal")
        names.add(f'{name}{{signal="{signal}"}}' if signal else name)
    return sorted(names)


def verify(
    spec: Spec,
    client: PrometheusClient,
    store: Store,
    initiative_id: str | None = None,
    workload_class: str | None = None,
    window: str | None = None,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    now: dt.datetime | None = None,
    save: bool = True,
) -> tuple[Initiative, VerificationResult]:
    """Verify an initiative: measure its window, compare with its baseline, record the result.

    The baseline is the one current when the initiative started (``baseline_id``), so
    a snapshot taken during the initiative cannot absorb its effect.

    Returns:
        ``(initiative as saved, result)``; ``VERDICT_EXIT_CODES[result.verdict]`` is the
        exit code.

    Raises:
        UsageError, StoreError, PrometheusUnavailable: as the helpers above.
    """
    initiative = resolve_initiative(store, initiative_id, workload_class)
    if initiative.status not in ("open", "verified"):
        raise StoreError(f"initiative {initiative.id!r} is {initiative.status}; only open or verified initiatives can be verified")
    baseline = store.baseline(initiative.baseline_id)
    cfg = spec.verification
    step = parse_duration(cfg.step, "verification.step")
    start_at, end_at = verification_window(initiative, step, window or cfg.window, start, end, now)
    m = measure(client, baseline.query, start_at, end_at, step, cfg.batches, what=f"{initiative.workload_class}/{initiative.primary_signal}")
    verdict, reason, estimate = stats.assess(baseline.stats, m.stats, cfg.batches, cfg.confidence, baseline.direction, cfg.min_effect_ratio)
    fired = alerts_fired(client, initiative.workload_class, start_at, end_at)
    result = VerificationResult(
        verdict=verdict,
        baseline_id=baseline.id,
        signal=baseline.signal,
        window=m.window,
        baseline_mean=estimate.baseline_mean if estimate else baseline.stats.mean,
        window_mean=estimate.window_mean if estimate else (m.stats.mean if m.stats else None),
        change_ratio=estimate.change_ratio if estimate else None,
        ci_low=estimate.ci_low if estimate else None,
        ci_high=estimate.ci_high if estimate else None,
        confidence=cfg.confidence,
        alerts_fired=fired,
        window_stats=m.stats,
        population=m.population,
        query=baseline.query,
        samples=m.samples,
        reason=reason,
        verified_at=utcnow(),
    )
    if save:
        with store.locked():
            current = store.initiative(initiative.id)
            initiative = current.model_copy(update={"status": "verified", "verifications": [*current.verifications, result]})
            store.save_initiative(initiative)
    return initiative, result


def promote(spec: Spec, store: Store, initiative_id: str) -> tuple[Initiative, Baseline]:
    """Make an IMPROVED initiative's verification window the current baseline.

    The new baseline (``source=promoted``) takes the latest verification's window,
    statistics, population and samples; the old one stays in the history. The
    initiative becomes ``promoted`` (its class is free for the next initiative).

    Raises:
        StoreError: unknown initiative, not verified, or latest verdict not IMPROVED.
    """
    with store.locked():
        initiative = store.initiative(initiative_id)
        if initiative.status != "verified" or not initiative.verifications:
            raise StoreError(f"initiative {initiative_id!r} is {initiative.status}; promote needs a verified initiative (run obsctl verify first)")
        result = initiative.verifications[-1]
        if result.verdict != "IMPROVED" or result.window_stats is None:
            raise StoreError(f"initiative {initiative_id!r}: latest verdict is {result.verdict}; only an IMPROVED window can become the baseline")
        old = store.baseline(result.baseline_id)
        created = utcnow()
        baseline = Baseline(
            id=f"{old.workload_class}.{old.signal}.{created.strftime('%Y%m%dT%H%M%SZ')}",
            workload_class=old.workload_class, signal=old.signal, unit=old.unit, direction=old.direction,
            query=result.query or old.query, window=result.window,
            population=result.population or old.population, stats=result.window_stats,
            created_at=created, source="promoted", initiative=initiative.id, samples=result.samples,
        )
        stored = store.save_baseline(baseline, make_current=True)
        promoted = initiative.model_copy(update={"status": "promoted"})
        store.save_initiative(promoted)
    return promoted, stored


def format_number(value: float | None) -> str:
    """``2410.3`` -> ``2,410``; ``0.8312`` -> ``0.8312``; None -> ``n/a``."""
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def format_percent(ratio: float | None) -> str:
    """``2.184`` -> ``+218.4 %``."""
    return "n/a" if ratio is None else f"{ratio * 100:+.1f} %"


def verdict_line(result: VerificationResult, unit: str) -> str:
    """One readable line, e.g. ``IMPROVED: tokens_per_second +218.4 % (95 % CI +205.1 % .. +231.9 %),
    baseline 2,410 -> window 7,673 tokens/s; alerts fired: none``."""
    alerts = ", ".join(result.alerts_fired) or "none"
    if result.verdict == "NO_DATA":
        return f"NO_DATA: {result.signal}: {result.reason}; alerts fired: {alerts}"
    if result.ci_low is None or result.ci_high is None:
        interval = f"{result.confidence:.0%} CI undefined: {result.reason}".replace("%", " %", 1)
    else:
        interval = f"{result.confidence * 100:.0f} % CI {format_percent(result.ci_low)} .. {format_percent(result.ci_high)}"
    return (
        f"{result.verdict}: {result.signal} {format_percent(result.change_ratio)} ({interval}), "
        f"baseline {format_number(result.baseline_mean)} -> window {format_number(result.window_mean)} {unit}; alerts fired: {alerts}"
    )
