"""``obsctl baseline promote``: a verified window becomes the class's new baseline."""

from __future__ import annotations

from obsctl.baselining.guards import guard_signals
from obsctl.baselining.store import Store
from obsctl.errors import StoreError, UsageError
from obsctl.records import Baseline, Initiative, VerificationResult
from obsctl.spec import Spec
from obsctl.timeutil import rfc3339, utcnow


def unjudged_guards(spec: Spec, initiative: Initiative, result: VerificationResult) -> list[str]:
    """Why ``result`` was not judged with the spec's guards: one phrase per gap, ``[]`` when
    every guard :func:`~obsctl.baselining.guards.guard_signals` chooses now was judged with data.

    Gaps: a verify with ``--no-guards`` (when the spec chooses any guard); a chosen guard
    without a baseline (``guards_missing``) or absent from the result (chosen since); a
    guard whose verdict is NO_DATA (optional or not: it was not checked).
    """
    names = guard_signals(spec, initiative)
    if names and not result.guards_evaluated:
        return [f"verified with --no-guards ({', '.join(names)} not judged)"]
    judged = {g.signal: g for g in result.guards}
    gaps = []
    for name in names:
        g = judged.get(name)
        if g is None:
            gaps.append(f"guard {name} not evaluated (no baseline)")
        elif g.verdict == "NO_DATA":
            gaps.append(f"guard {name} NO_DATA ({g.reason})" if g.reason else f"guard {name} NO_DATA")
    return gaps


def promote(spec: Spec, store: Store, initiative_id: str, lesson: str = "", effort: str = "",
            override_reason: str | None = None) -> tuple[Initiative, list[Baseline]]:
    """Make an IMPROVED initiative's verification window the current baseline(s).

    Only after an overall IMPROVED judged with every guard the spec chooses
    (:func:`unjudged_guards` empty: no ``--no-guards``, no guard without a baseline or
    without data), so no guard regressed or went unchecked. ``override_reason`` (``baseline
    promote --override-reason``) promotes anyway a verdict whose primary is IMPROVED and
    whose only gap is unjudged guards (no guard REGRESSED); the reason and the gaps are
    kept on the initiative (``promote_override``), which the ledger and the report show.
    The primary signal's window
    becomes its class x signal's current baseline (``source=promoted``), and so does
    every guard signal's window that has data (its verdict is not NO_DATA), each with
    its own baseline's PromQL, unit and direction. The old baselines stay in the
    history. The initiative becomes ``promoted`` (its class is free for the next one),
    with ``lesson`` (what it taught) and ``effort`` (what it cost, if not given at start)
    stored on it for the ledger.

    Returns:
        ``(initiative, [primary baseline, guard baselines...])`` as stored.

    Raises:
        UsageError: an ``override_reason`` that is empty or holds a control character.
        StoreError: unknown initiative, not verified, latest verdict not IMPROVED, or a
            verdict not judged with the spec's guards (without an override).
    """
    if override_reason is not None and not override_reason.strip():
        raise UsageError("--override-reason must not be empty: say why this verdict may become the baseline without its guards")
    if override_reason is not None and any(not ch.isprintable() for ch in override_reason):
        raise UsageError("--override-reason holds a control character (newline, tab, escape): give it as one line of plain text")
    with store.locked():
        initiative = store.initiative(initiative_id)
        if initiative.status != "verified" or not initiative.verifications:
            raise StoreError(f"initiative {initiative_id!r} is {initiative.status}; promote needs a verified initiative (run obsctl verify first)")
        if initiative.placebo:
            raise StoreError(f"initiative {initiative_id!r} is a placebo (A/A): nothing was changed, so its window never becomes "
                             f"the baseline; close it with what it showed (obsctl initiative close --initiative {initiative_id} --lesson TEXT)")
        result = initiative.verifications[-1]
        gaps = unjudged_guards(spec, initiative, result)
        regressed = result.verdict == "REGRESSED" or any(g.verdict == "REGRESSED" for g in result.guards)
        overridable = bool(gaps) and override_reason is not None and result.primary_verdict == "IMPROVED" and not regressed
        if result.window_stats is None or (result.verdict != "IMPROVED" and not overridable):
            remedy = ""
            if gaps and result.primary_verdict == "IMPROVED" and not regressed:
                remedy = (f" ({'; '.join(gaps)}): verify again with every guard judged, or give --override-reason TEXT "
                          "to promote without them (recorded in the ledger)")
            raise StoreError(f"initiative {initiative_id!r}: latest verdict is {result.verdict}; only an IMPROVED window can become "
                             f"the baseline{remedy}")
        if gaps and override_reason is None:
            raise StoreError(f"initiative {initiative_id!r}: the IMPROVED verdict was not judged with the spec's guards "
                             f"({'; '.join(gaps)}): verify again without --no-guards (snapshot a baseline for a guard that has none: "
                             f"obsctl snapshot-baseline --class {initiative.workload_class} --signal NAME --end {rfc3339(initiative.started_at)}), "
                             "or give --override-reason TEXT to promote without them (recorded in the ledger)")
        override = f"{override_reason.strip()} (unjudged: {'; '.join(gaps)})" if gaps and override_reason is not None else ""
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
                memory=old.memory,  # the memory is the signal's, estimated from the history before the old baseline
                tails=old.tails,  # so are its tail test and the trimmed mean's memory
            )
            stored.append(store.save_baseline(baseline, make_current=True))
        promoted = initiative.model_copy(update={"status": "promoted", "ended_at": created, "lesson": lesson.strip(),
                                                 "effort": effort.strip() or initiative.effort, "promote_override": override})
        store.save_initiative(promoted)
    return promoted, stored
