"""Which guard signals an initiative's verdict checks, and their baselines."""

from __future__ import annotations

from obsctl.baselining.store import Store
from obsctl.records import Baseline, Initiative
from obsctl.spec import Spec


def guard_signals(spec: Spec, initiative: Initiative) -> list[str]:
    """The signal names ``verification.guards`` chooses for the initiative (categories or
    names), other than its primary, sorted: the guards its verdict must judge."""
    chosen = set(spec.verification.guards)
    return sorted(s.name for s in spec.signals if (s.name in chosen or s.category in chosen) and s.name != initiative.primary_signal)


def missing_guards(spec: Spec, store: Store, initiative: Initiative) -> list[str]:
    """The :func:`guard_signals` with no baseline for the initiative's class (none recorded
    at start, none current): guards that cannot be evaluated, sorted."""
    current = store.current_index().get(initiative.workload_class, {})
    return [sig for sig in guard_signals(spec, initiative) if not (initiative.guard_baseline_ids.get(sig) or current.get(sig))]


def guard_ids(spec: Spec, store: Store, initiative: Initiative) -> list[str]:
    """The guard signals' baseline ids: every signal chosen by ``verification.guards``
    (categories or names; default quality and cost) other than the primary that has a
    baseline for the initiative's class, sorted by signal name.

    A baseline recorded when the initiative started (``guard_baseline_ids``) is used
    when present, so a snapshot taken during the initiative cannot absorb its effect;
    otherwise the class x signal's current baseline (initiatives started before guards
    were recorded, or signals first baselined later). Signals no longer in the spec
    are skipped.
    """
    current = store.current_index().get(initiative.workload_class, {})
    chosen = set(spec.verification.guards)
    out = []
    for sig in sorted(s.name for s in spec.signals if s.name in chosen or s.category in chosen):
        if sig == initiative.primary_signal:
            continue
        baseline_id = initiative.guard_baseline_ids.get(sig) or current.get(sig)
        if baseline_id:
            out.append(baseline_id)
    return out


def guard_baselines(spec: Spec, store: Store, initiative: Initiative) -> list[Baseline]:
    """The baselines of :func:`guard_ids`, in its order."""
    return [store.baseline(baseline_id) for baseline_id in guard_ids(spec, store, initiative)]
