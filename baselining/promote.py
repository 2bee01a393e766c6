"""``obsctl baseline promote``: a verified window becomes the class's new baseline."""

from __future__ import annotations

from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from obsctl.records import Baseline, Initiative
from obsctl.spec import Spec
from obsctl.timeutil import utcnow


def promote(spec: Spec, store: Store, initiative_id: str, lesson: str = "", effort: str = "") -> tuple[Initiative, list[Baseline]]:
    """Make an IMPROVED initiative's verification window the current baseline(s).

    Only after an overall IMPROVED (so no guard regressed). The primary signal's window
    becomes its class x signal's current baseline (``source=promoted``), and so does
    every guard signal's window that has data (its verdict is not NO_DATA), each with
    its own baseline's PromQL, unit and direction. The old baselines stay in the
    history. The initiative becomes ``promoted`` (its class is free for the next one),
    with ``lesson`` (what it taught) and ``effort`` (what it cost, if not given at start)
    stored on it for the ledger.

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
                memory=old.memory,  # the memory is the signal's, estimated from the history before the old baseline
            )
            stored.append(store.save_baseline(baseline, make_current=True))
        promoted = initiative.model_copy(update={"status": "promoted", "ended_at": created, "lesson": lesson.strip(),
                                                 "effort": effort.strip() or initiative.effort})
        store.save_initiative(promoted)
    return promoted, stored
