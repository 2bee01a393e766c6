"""``obsctl verify`` and ``obsctl baseline promote``: judge an initiative against its baseline.

The initiative's primary signal is measured over the verification window with the
baseline's PromQL (so both sides are the same expression), summarized into batch means
and compared with the baseline's batch means (:func:`obsctl.baselining.stats.assess`:
Fieller interval of the relative change, verdict rules in :func:`stats.decide`). The
regression alerts of the class that fired in the window are read from Prometheus'
``ALERTS`` series. The result is appended to the initiative (status ``verified``).

Guard signals: every other signal of the class that has a baseline (the one recorded
when the initiative started, else the current one) is measured over the same window
with its own baseline's PromQL and judged the same way. A REGRESSED guard turns the
overall verdict into REGRESSED (an "optimization" that degrades quality or cost is a
regression, DESIGN.md); NO_DATA / INCONCLUSIVE guards are reported only
(:func:`overall_verdict`).

Exit codes of ``obsctl verify`` (one per verdict, for pipelines):
IMPROVED 0, NO_CHANGE 10, INCONCLUSIVE 11, REGRESSED 12, NO_DATA 13.
"""

from __future__ import annotations

import datetime as dt
import math

from obsctl.baselining import coverage, stats
from obsctl.baselining.models import Baseline, GuardResult, Initiative, Verdict, VerificationResult
from obsctl.baselining.promapi import PrometheusClient
from obsctl.baselining.snapshot import measure
from obsctl.baselining.store import Store
from obsctl.baselining.timeutil import align_down, check_window_points, minus_seconds, parse_duration, rfc3339, utcnow
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
    initiative: Initiative, step_seconds: float, window: str, start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime | None = None,
    allow_before_start: bool = False,
) -> tuple[dt.datetime, dt.datetime]:
    """``(start, end)`` of the verification window.

    ``end`` defaults to now and is aligned down to the step. ``start`` defaults to the
    initiative's start, capped so the window is at most ``window`` long (the most recent
    part is kept); an explicit ``start`` is used as given.

    A window that begins before the initiative's ``started_at`` would measure the state
    before the change as its effect, so it is refused unless ``allow_before_start``.

    Raises:
        UsageError: the window is empty (start not before end), begins before the
            initiative started (naming ``--start``/``--end`` and ``started_at``), or has
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
    if start_at >= end_at:
        raise UsageError(f"verification window is empty: start {start_at.isoformat()} is not before end {end_at.isoformat()}")
    check_window_points(start_at, end_at, step_seconds, flag)
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


def guard_baselines(spec: Spec, store: Store, initiative: Initiative) -> list[Baseline]:
    """The guard signals' baselines: every signal of the spec other than the primary
    that has a baseline for the initiative's class, sorted by signal name.

    A baseline recorded when the initiative started (``guard_baseline_ids``) is used
    when present, so a snapshot taken during the initiative cannot absorb its effect;
    otherwise the class x signal's current baseline (initiatives started before guards
    were recorded, or signals first baselined later). Signals no longer in the spec
    are skipped.
    """
    current = store.current_index().get(initiative.workload_class, {})
    out = []
    for sig in sorted(s.name for s in spec.signals):
        if sig == initiative.primary_signal:
            continue
        baseline_id = initiative.guard_baseline_ids.get(sig) or current.get(sig)
        if baseline_id:
            out.append(store.baseline(baseline_id))
    return out


def evaluate_guard(spec: Spec, client: PrometheusClient, baseline: Baseline, start_at: dt.datetime, end_at: dt.datetime, step: float) -> GuardResult:
    """Measure one guard signal over ``(start_at, end_at]`` with its baseline's PromQL and judge it.

    Raises:
        PrometheusUnavailable: as :func:`obsctl.baselining.snapshot.measure`.
    """
    cfg = spec.verification
    m = measure(client, baseline.query, start_at, end_at, step, cfg.batches, what=f"{baseline.workload_class}/{baseline.signal} (guard)",
                on_change=baseline.signal in cfg.fresh_on_change)
    verdict, reason, est = stats.assess(baseline.stats, m.stats, cfg.batches, cfg.confidence, baseline.direction, cfg.min_effect_ratio)
    reason = _window_reason(m, cfg.batches, verdict, reason)
    # Coverage, partial answers and a partial baseline cap the verdict (H7D, coverage.py).
    verdict, reason = coverage.cap_verdict(verdict, reason, m, baseline, cfg.min_coverage_ratio)
    category = next((s.category for s in spec.signals if s.name == baseline.signal), "unknown")
    return GuardResult(
        signal=baseline.signal, category=category, unit=baseline.unit, direction=baseline.direction,
        baseline_id=baseline.id, query=baseline.query, verdict=verdict, reason=reason,
        baseline_mean=est.baseline_mean if est else baseline.stats.mean,
        window_mean=est.window_mean if est else (m.stats.mean if m.stats else None),
        change_ratio=est.change_ratio if est else None, ci_low=est.ci_low if est else None, ci_high=est.ci_high if est else None,
        exact=bool(est and est.exact), window_stats=m.stats, population=m.population, samples=m.samples,
        coverage=m.coverage, warnings=m.warnings, partial=m.partial,
    )


def _window_reason(m, batches: int, verdict: Verdict, reason: str) -> str:
    # A NO_DATA window says why in the measurement's words ("240 samples, all NaN/Inf").
    if verdict == "NO_DATA" and m.no_data_reason(batches):
        return f"window: {m.no_data_reason(batches)}"
    return reason


def overall_verdict(primary: Verdict, primary_reason: str, guards: list[GuardResult], confidence: float) -> tuple[Verdict, str]:
    """The overall verdict from the primary's and the guards' verdicts.

    Precedence: a primary NO_DATA or REGRESSED stands (no data is never a pass; a
    regression is already the worst verdict). Otherwise any REGRESSED guard makes the
    overall verdict REGRESSED, with a reason naming each such guard, e.g. ``quality
    guard probe_cosine_similarity regressed -3.1 % (95 % CI -4.0 % .. -2.2 %)``.
    Guards that are IMPROVED, NO_CHANGE, INCONCLUSIVE or NO_DATA never change it.

    Returns:
        ``(verdict, reason)``.
    """
    text = guard_regressions(guards, confidence)
    if primary in ("NO_DATA", "REGRESSED") or not text:
        return primary, primary_reason
    return "REGRESSED", f"{text}; primary was {primary} ({primary_reason})"


def guard_regressions(guards: list[GuardResult], confidence: float) -> str:
    """``quality guard q regressed -10.0 % (95 % CI -11.2 % .. -8.8 %)`` for each REGRESSED guard, ``; ``-joined ("" if none)."""
    return "; ".join(
        f"{g.category} guard {g.signal} regressed {format_percent(g.change_ratio) if g.change_ratio is not None else f'from {format_number(g.baseline_mean)} to {format_number(g.window_mean)}'} "
        f"({_interval(g.ci_low, g.ci_high, confidence, g.exact)})"
        for g in guards if g.verdict == "REGRESSED"
    )


def _interval(low: float | None, high: float | None, confidence: float, exact: bool = False) -> str:
    if exact:
        return "exact: both sides constant"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{confidence * 100:.0f} % CI undefined"
    return f"{confidence * 100:.0f} % CI {format_percent(low)} .. {format_percent(high)}"


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
    guards: bool = True,
    allow_before_start: bool = False,
) -> tuple[Initiative, VerificationResult]:
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
    initiative = resolve_initiative(store, initiative_id, workload_class)
    if initiative.status not in ("open", "verified"):
        raise StoreError(f"initiative {initiative.id!r} is {initiative.status}; only open or verified initiatives can be verified")
    baseline = store.baseline(initiative.baseline_id)
    cfg = spec.verification
    step = parse_duration(cfg.step, "verification.step")
    start_at, end_at = verification_window(initiative, step, window or cfg.window, start, end, now, allow_before_start)
    m = measure(client, baseline.query, start_at, end_at, step, cfg.batches, what=f"{initiative.workload_class}/{initiative.primary_signal}",
                on_change=baseline.signal in cfg.fresh_on_change)
    verdict, reason, estimate = stats.assess(baseline.stats, m.stats, cfg.batches, cfg.confidence, baseline.direction, cfg.min_effect_ratio)
    reason = _window_reason(m, cfg.batches, verdict, reason)
    # Coverage, partial answers and a partial baseline cap the verdict (H7D, coverage.py).
    verdict, reason = coverage.cap_verdict(verdict, reason, m, baseline, cfg.min_coverage_ratio)
    guard_results = [evaluate_guard(spec, client, b, start_at, end_at, step) for b in guard_baselines(spec, store, initiative)] if guards else []
    overall, overall_reason = overall_verdict(verdict, reason, guard_results, cfg.confidence)
    fired = alerts_fired(client, initiative.workload_class, start_at, end_at)
    result = VerificationResult(
        verdict=overall,
        primary_verdict=verdict,
        guards=guard_results,
        guards_evaluated=guards,
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
        reason=overall_reason,
        verified_at=utcnow(),
        coverage=m.coverage, warnings=m.warnings, partial=m.partial,
    )
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


def promote(spec: Spec, store: Store, initiative_id: str) -> tuple[Initiative, list[Baseline]]:
    """Make an IMPROVED initiative's verification window the current baseline(s).

    Only after an overall IMPROVED (so no guard regressed). The primary signal's window
    becomes its class x signal's current baseline (``source=promoted``), and so does
    every guard signal's window that has data (its verdict is not NO_DATA), each with
    its own baseline's PromQL, unit and direction. The old baselines stay in the
    history. The initiative becomes ``promoted`` (its class is free for the next one).

    Returns:
        ``(initiative, [primary baseline, guard baselines...])`` as stored.

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
        created = utcnow()
        sides = [(store.baseline(result.baseline_id), result.query, result.window_stats, result.population, result.samples)]
        for g in result.guards:
            if g.verdict != "NO_DATA" and g.window_stats is not None:
                sides.append((store.baseline(g.baseline_id), g.query, g.window_stats, g.population, g.samples))
        stored = []
        for old, query, window_stats, population, samples in sides:
            baseline = Baseline(
                id=f"{old.workload_class}.{old.signal}.{created.strftime('%Y%m%dT%H%M%SZ')}",
                workload_class=old.workload_class, signal=old.signal, unit=old.unit, direction=old.direction,
                query=query or old.query, window=result.window,
                population=population or old.population, stats=window_stats,
                created_at=created, source="promoted", initiative=initiative.id, samples=samples,
            )
            stored.append(store.save_baseline(baseline, make_current=True))
        promoted = initiative.model_copy(update={"status": "promoted"})
        store.save_initiative(promoted)
    return promoted, stored


def format_number(value: float | None) -> str:
    """``2410.3`` -> ``2,410``; ``0.8312`` -> ``0.8312``; None -> ``n/a``."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def format_percent(ratio: float | None) -> str:
    """``2.184`` -> ``+218.4 %``; None, NaN or Inf -> ``n/a``."""
    return "n/a" if ratio is None or not math.isfinite(ratio) else f"{ratio * 100:+.1f} %"


def guards_line(result: VerificationResult) -> str:
    """``guards: usd_per_million_tokens IMPROVED -48.0 %, probe_cosine_similarity NO_CHANGE, gpu_utilization NO_DATA``.

    The change is shown for IMPROVED, REGRESSED and INCONCLUSIVE guards when defined.
    """
    if not result.guards_evaluated:
        return "guards: not evaluated"
    if not result.guards:
        return "guards: none (no other signal of the class has a baseline)"
    parts = []
    for g in result.guards:
        show = g.verdict in ("IMPROVED", "REGRESSED", "INCONCLUSIVE") and g.change_ratio is not None
        parts.append(f"{g.signal} {g.verdict}" + (f" {format_percent(g.change_ratio)}" if show else ""))
    return "guards: " + ", ".join(parts)


def verdict_line(result: VerificationResult, unit: str) -> str:
    """One readable line, e.g. ``IMPROVED: tokens_per_second +218.4 % (95 % CI +205.1 % .. +231.9 %),
    baseline 2,410 -> window 7,673 tokens/s; alerts fired: none``.

    When a guard overrode the primary's verdict the line starts with the overall
    verdict and its reason, then the primary: ``REGRESSED: quality guard q regressed
    -10.0 % (95 % CI ..); primary tokens_per_second IMPROVED +30.0 % (..), baseline ..``."""
    alerts = ", ".join(result.alerts_fired) or "none"
    primary = result.primary_verdict or result.verdict
    if primary != result.verdict:
        return (
            f"{result.verdict}: {guard_regressions(result.guards, result.confidence)}; primary {result.signal} {primary} {format_percent(result.change_ratio)} "
            f"({_interval(result.ci_low, result.ci_high, result.confidence)}), "
            f"baseline {format_number(result.baseline_mean)} -> window {format_number(result.window_mean)} {unit}; alerts fired: {alerts}"
        )
    if result.verdict == "NO_DATA":
        return f"NO_DATA: {result.signal}: {result.reason}; alerts fired: {alerts}"
    if result.ci_low is None or result.ci_high is None or not (math.isfinite(result.ci_low) and math.isfinite(result.ci_high)):
        interval = f"{result.confidence:.0%} CI undefined: {result.reason}".replace("%", " %", 1)
    else:
        interval = f"{result.confidence * 100:.0f} % CI {format_percent(result.ci_low)} .. {format_percent(result.ci_high)}"
    return (
        f"{result.verdict}: {result.signal} {format_percent(result.change_ratio)} ({interval}), "
        f"baseline {format_number(result.baseline_mean)} -> window {format_number(result.window_mean)} {unit}; alerts fired: {alerts}"
    )
