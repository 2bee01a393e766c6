"""The initiative ledger: one change at a time per workload class.

An initiative names its lever, the class it changes, the primary signal its verdict is
based on and the expected impact. It is tied to the class x signal's current baseline
at start; a class with an active (open or verified) initiative refuses a second one,
because two simultaneous changes on one class cannot be told apart in the verdict.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from obsctl.baselining import looks
from obsctl.baselining.store import Store
from obsctl.errors import StoreError, UsageError
from obsctl.records import MAX_LEVER_DESCRIPTION, Initiative
from obsctl.spec import LEVERS, OWNER_PATTERN, Spec
from obsctl.timeutil import rfc3339, utcnow

if TYPE_CHECKING:
    from obsctl.baselining.designs.run import Choice

#: How far ``--started-at`` may lie in the future (clock skew between the machine that
#: rolled out the change and this one). A later start would block the class and leave
#: every verify window empty.
MAX_START_SKEW_SECONDS = 300.0


def slugify(name: str) -> str:
    """``"Batch size tuning!"`` -> ``batch-size-tuning`` (a-z, 0-9 and '-', at most 48 chars)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-")
    return slug or "initiative"


@dataclass(frozen=True)
class Start:
    """What ``initiative start`` is asked for (the fields of :func:`start_initiative`'s Args)."""

    name: str
    lever: str
    workload_class: str
    signal: str
    expected_impact_ratio: float | None = None
    started_at: dt.datetime | None = None
    notes: str = ""
    design: str | None = None
    control: str | None = None
    effort: str = ""
    owner: str | None = None
    due: dt.date | None = None
    lever_description: str = ""
    placebo: bool = False


def start_initiative(spec: Spec, store: Store, ask: Start, now: dt.datetime | None = None) -> Initiative:
    """Open an initiative on ``ask.workload_class`` with ``ask.signal`` as its primary signal.

    Args (the fields of ``ask``, :class:`Start`, and ``now``):
        expected_impact_ratio: expected relative change of the signal (0.2 = +20 %).
        started_at: when the change went live (UTC; default now); ``obsctl verify``
            measures from here by default.
        design: comparison design (default: the spec's ``comparison`` for the class);
            ``control`` names the control class of the ``control`` design (default: the
            spec's). Recorded on the initiative (:func:`obsctl.baselining.designs.run.choose`).
        effort: what the change costs the team, as free text (``3 engineer-days``), for the ledger.
        owner: who answers for the initiative (the spec's owner pattern; None: the class's owner).
        due: the date it should be decided by (None: the start plus its planned window).
        lever_description: what the lever is, required for lever ``other`` (one printable
            line, at most 200 characters) and refused with any other lever.
        placebo: an A/A initiative (nothing changes; ``expected_impact_ratio`` must be None
            or 0 and is stored as None); recorded as such, shown by the ledger, never promoted.

    The class's other current baselines are recorded as the guard signals' baselines
    (``guard_baseline_ids``), so ``obsctl verify`` compares them with the state before
    the change even if a snapshot is taken meanwhile.

    Returns:
        The stored initiative (id ``<slug of name>-<YYYYMMDD>``, suffixed if taken).

    Raises:
        SpecError: unknown class or signal. UsageError: unknown lever, empty name, a
            non-finite expected impact, ``started_at`` more than 5 minutes after
            ``now`` (default: the current time), lever ``other`` without a description or
            a description with another lever, an owner the spec would refuse, or a due
            date before the start.
        StoreError: no current baseline for the class x signal (a ``canary`` needs none),
            the class already has an active initiative, the start would judge data of
            the class x signal already looked at on another change (:func:`.looks.check_start`), the class is the control of
            another active initiative, or the chosen control class has one of its own.
        UsageError: a design that cannot run (control without a control class, canary
            without a variant, seasonal on a baseline shorter than one cycle).
    """
    name, lever, workload_class, signal = ask.name, ask.lever, ask.workload_class, ask.signal
    expected_impact_ratio, started_at, notes, design, control = ask.expected_impact_ratio, ask.started_at, ask.notes, ask.design, ask.control
    effort, owner, due, lever_description, placebo = ask.effort, ask.owner, ask.due, ask.lever_description, ask.placebo
    if not name.strip():
        raise UsageError("--name must not be empty")
    if placebo and expected_impact_ratio not in (None, 0):
        raise UsageError(f"--placebo with --expected-impact {expected_impact_ratio:g}: a placebo (A/A) initiative changes nothing, "
                         "so it expects no change; give one of the two")
    if placebo or expected_impact_ratio == 0:
        # An expected impact of 0 is a placebo (A/A): nothing is changed.
        placebo, expected_impact_ratio = True, None
    if expected_impact_ratio is not None:
        from obsctl.baselining.plan import check_effect

        check_effect(expected_impact_ratio, "--expected-impact")
    lever_description = lever_description.strip()
    check_lever(lever, lever_description)
    if owner is not None and not (len(owner) <= 128 and re.match(OWNER_PATTERN, owner)):
        raise UsageError(f"--owner {owner!r} is not an owner name (printable, no leading or trailing space, at most 128 characters)")
    now = now or utcnow()
    if started_at is not None and (started_at - now).total_seconds() > MAX_START_SKEW_SECONDS:
        raise UsageError(
            f"--started-at {started_at.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} is in the future "
            f"(now is {now.strftime('%Y-%m-%dT%H:%M:%SZ')}; at most {MAX_START_SKEW_SECONDS:.0f}s ahead allowed): "
            "start the initiative when the change goes live"
        )
    spec.workload_class(workload_class)
    spec.signal(signal)
    from obsctl.baselining.designs import run as designs

    baseline = store.current_baseline(workload_class, signal)
    choice = designs.choose(spec, workload_class, design, control, baseline)
    if baseline is None and designs.design_of(choice.design).needs_baseline:
        raise StoreError(
            f"no current baseline for {workload_class}/{signal}; take one first: "
            f"obsctl snapshot-baseline --class {workload_class} --signal {signal}"
        )
    designs.check_start(spec, store, workload_class, choice, baseline)
    started = (started_at or now).astimezone(dt.UTC)
    # The class's targets meet the baseline the change is judged against (if nothing did
    # before): the change, once verified and promoted, counts toward them.
    from obsctl.baselining.practice.targets import anchor_all

    anchor_all(spec, store, now, {(t.workload_class, t.signal) for t in spec.targets if t.workload_class == workload_class})
    guards = {sig: bid for sig, bid in store.current_index().get(workload_class, {}).items() if sig != signal}
    _check_before_start(store, [b for b in [baseline] if b is not None], guards, started)
    if due is not None and due < started.date():
        raise UsageError(f"--due {due.isoformat()} is before the start {started.date().isoformat()}: give a later date")
    initiative = Initiative(
        id=f"{slugify(name)}-{started.strftime('%Y%m%d')}",
        name=name.strip(),
        lever=lever,  # type: ignore[arg-type]
        workload_class=workload_class,
        primary_signal=signal,
        expected_impact_ratio=expected_impact_ratio,
        baseline_id=baseline.id if baseline is not None else "",
        guard_baseline_ids=guards,
        design=choice.design,
        design_note=choice.why,
        control_class=choice.control_class,
        variant=choice.variant,
        planned_window_seconds=designs.planned_window(spec, workload_class, choice, baseline, expected_impact_ratio, store),
        baseline_cycle=designs.start_checks(choice, baseline),
        started_at=started,
        notes=notes,
        effort=effort.strip(),
        owner=owner,
        due=due,
        lever_description=lever_description,
        placebo=placebo,
    )
    # The baselines' sides of every verdict, fixed now like the cycle fit (sides.stored_side).
    from obsctl.baselining.decide.sides import stored_side

    sides = [stored_side(spec, b) for b in ([baseline] if baseline is not None else []) + [store.baseline(g) for g in guards.values()]]
    initiative = initiative.model_copy(update={"baseline_sides": [s for s in sides if s is not None]})
    if initiative.planned_window_seconds is None:
        # The planned length is fixed now (repeated looks, docs/verification.md); every
        # verify reads it instead of re-planning.
        from obsctl.baselining.plan import planned_seconds

        initiative = initiative.model_copy(update={"planned_window_seconds": planned_seconds(spec, initiative, baseline)})
    with store.locked():
        check_ledger(store, workload_class, choice)  # under the lock, as the one-per-class check
        # No fresh error budget on data already looked at, nor a baseline swapped inside a change's looks.
        looks.check_start(store, workload_class, signal, started, initiative.baseline_id or None, baseline.query if baseline else "")
        for sig, bid in guards.items():
            looks.check_start(store, workload_class, sig, started, bid, store.baseline(bid, samples=False).query)
        return store.add_initiative(initiative)


def _check_before_start(store: Store, baselines: list, guards: dict[str, str], started: dt.datetime) -> None:
    # A baseline that ends after the start holds data from after the change: the comparison
    # would judge the change against itself, and a baseline taken after looking could be chosen.
    for b in [*baselines, *(store.baseline(bid, samples=False) for bid in guards.values())]:
        if b.window.end > started:
            raise UsageError(
                f"baseline {b.id} ends at {rfc3339(b.window.end)}, after the start {rfc3339(started)}: its window would hold data from "
                f"after the change; snapshot a baseline that ends at or before the start (snapshot-baseline --end {rfc3339(started)}), "
                "or start later")


def check_lever(lever: str, description: str) -> None:
    """Refuse an unknown lever, ``other`` without a description, a description with a listed
    lever, and a description that is not one printable line of at most 200 characters.

    Raises:
        UsageError: one line naming the flag.
    """
    if lever not in LEVERS:
        raise UsageError(f"--lever {lever!r} is not one of: {', '.join(LEVERS)}")
    if lever == "other" and not description:
        raise UsageError("--lever other needs --lever-description TEXT: say what the lever is, e.g. 'KV-cache offload to CPU'")
    if lever != "other" and description:
        raise UsageError(f"--lever-description is for --lever other; {lever!r} is a listed lever: drop the description")
    if len(description) > MAX_LEVER_DESCRIPTION or any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in description):
        raise UsageError(f"--lever-description must be one line of at most {MAX_LEVER_DESCRIPTION} printable characters")


def close_initiative(store: Store, initiative_id: str, note: str = "", lesson: str = "", effort: str = "") -> Initiative:
    """Close an open or verified initiative without promoting it (frees its class), with
    ``lesson`` (what it taught) and ``effort`` (what it cost, if not given at start).

    Raises:
        StoreError: unknown id, or already promoted/closed.
    """
    with store.locked():
        initiative = store.initiative(initiative_id)
        if initiative.status not in ("open", "verified"):
            raise StoreError(f"initiative {initiative_id!r} is already {initiative.status}")
        notes = "\n".join(p for p in (initiative.notes, note) if p)
        closed = initiative.model_copy(update={"status": "closed", "notes": notes, "ended_at": utcnow(),
                                               "lesson": lesson.strip(), "effort": effort.strip() or initiative.effort})
        store.save_initiative(closed)
    return closed


def record_lesson(store: Store, initiative_id: str, lesson: str) -> Initiative:
    """Keep ``lesson`` (what it taught) on a promoted or closed initiative that has none yet
    or replace it (an open or verified one gets it at ``baseline promote`` / ``initiative close``).

    Raises:
        UsageError: an empty lesson. StoreError: unknown id, or the initiative is still open
            or verified.
    """
    if not lesson.strip():
        raise UsageError("--lesson must not be empty: say what the initiative taught")
    with store.locked():
        initiative = store.initiative(initiative_id)
        if initiative.status in ("open", "verified"):
            raise StoreError(f"initiative {initiative_id!r} is {initiative.status}: give the lesson when it ends "
                             f"(obsctl baseline promote / initiative close --initiative {initiative_id} --lesson TEXT)")
        kept = initiative.model_copy(update={"lesson": lesson.strip()})
        store.save_initiative(kept)
    return kept


def check_ledger(store, workload_class: str, choice: Choice) -> None:
    """The ledger's rules for controls (call under the store lock).

    Raises:
        StoreError: the class is the control of an active initiative (naming it), or the
            chosen control class has an active initiative of its own (it is changing).
    """
    for other in store.initiatives(status=None):
        if other.status not in ("open", "verified"):
            continue
        if other.control_class == workload_class:
            raise StoreError(f"workload class {workload_class!r} is the control of initiative {other.id!r} ({other.status}) "
                             f"on {other.workload_class}; a control must stay unchanged: close or promote {other.id} first")
        if choice.control_class and other.workload_class == choice.control_class:
            raise StoreError(f"control class {choice.control_class!r} has its own open initiative {other.id!r}: "
                             "it is changing, so it cannot be a control")


def aged_warning(spec: Spec, store: Store, initiative: Initiative) -> str | None:
    """The warning ``initiative start`` prints when the before-after baseline ended long
    before the start (:func:`obsctl.baselining.decide.verdict.aged`: verify would compare with the
    period right before the start instead), with the exact commands that bind the
    initiative to a baseline ending at the start; None otherwise."""
    from obsctl.baselining.decide.verdict import AGED_AFTER_SECONDS, aged
    from obsctl.durations import format_duration
    from obsctl.timeutil import rfc3339

    if not initiative.baseline_id:
        return None
    b = store.baseline(initiative.baseline_id, samples=False)
    if not aged(initiative, b):
        return None
    gap = (initiative.started_at - b.window.end).total_seconds()
    length = format_duration((b.window.end - b.window.start).total_seconds())
    return (f"baseline {b.id} ended {format_duration(gap)} before the start (more than {format_duration(AGED_AFTER_SECONDS)}): "
            f"verify will compare with the period right before the start instead. To judge against a baseline that ends at "
            f"the start, before the first verify: obsctl snapshot-baseline --class {initiative.workload_class} --signal "
            f"{initiative.primary_signal} --window {length} --end {rfc3339(initiative.started_at)} && obsctl initiative rebase "
            f"--initiative {initiative.id} --reason 'baseline ended {format_duration(gap)} before the start'")


def rebase_initiative(spec: Spec, store: Store, initiative_id: str, reason: str, now: dt.datetime | None = None) -> Initiative:
    """Bind an open initiative, before its first look, to the class's current baselines.

    The primary's and the guards' baselines become the current ones (which must end at or
    before the start), with their sides and cycle fit recomputed as ``initiative start``
    computes them; the planned length stays. The change is logged on the initiative
    (``rebased``: when, from, to, why) and in its notes. After a look it is refused: a
    baseline chosen after seeing the data would be a second try at the same change.

    Raises:
        UsageError: an empty reason; a current baseline that ends after the start.
        StoreError: unknown id; the initiative is not open, or has looked (a verdict or a
            logged look); no current baseline, or the current one is already its own.
    """
    from obsctl.baselining.decide.sides import stored_side
    from obsctl.baselining.designs import run as designs
    from obsctl.timeutil import rfc3339

    if not reason.strip() or any(not ch.isprintable() for ch in reason):
        raise UsageError("--reason must be one line of plain text: say why the initiative gets a fresh baseline")
    now = now or utcnow()
    with store.locked():
        i = store.initiative(initiative_id)
        looked = [look for look in store.all_looks() if look.initiative == i.id]
        if i.status != "open" or i.verifications or looked:
            last = max((look.window_end for look in looked), default=None)
            after = f" after {rfc3339(last)}" if last else ""
            raise StoreError(f"initiative {i.id!r} is {i.status} with {max(len(i.verifications), len(looked))} look(s): its baseline "
                             f"can change only before the first look (a baseline chosen after seeing the data is a second try); "
                             f"close it (obsctl initiative close --initiative {i.id}) and start a new change{after}")
        baseline = store.current_baseline(i.workload_class, i.primary_signal)
        if baseline is None or baseline.id == i.baseline_id:
            raise StoreError(f"initiative {i.id!r}: no fresher baseline of {i.workload_class}/{i.primary_signal} than {i.baseline_id or 'none'}; "
                             f"take one that ends at the start first: obsctl snapshot-baseline --class {i.workload_class} "
                             f"--signal {i.primary_signal} --end {rfc3339(i.started_at)}")
        guards = {sig: bid for sig, bid in store.current_index().get(i.workload_class, {}).items() if sig != i.primary_signal}
        _check_before_start(store, [baseline], guards, i.started_at)
        looks.check_start(store, i.workload_class, i.primary_signal, i.started_at, baseline.id, baseline.query)
        choice = designs.choose(spec, i.workload_class, i.design, i.control_class)
        sides = [stored_side(spec, b) for b in [baseline, *(store.baseline(g) for g in guards.values())]]
        entry = {"at": rfc3339(now), "from": i.baseline_id, "to": baseline.id, "reason": reason.strip()}
        note = f"rebased {entry['at']}: baseline {entry['from'] or 'none'} -> {entry['to']} ({entry['reason']})"
        rebased = i.model_copy(update={
            "baseline_id": baseline.id, "guard_baseline_ids": guards, "baseline_sides": [x for x in sides if x is not None],
            "baseline_cycle": designs.start_checks(choice, baseline), "rebased": [*i.rebased, entry],
            "notes": f"{i.notes}\n{note}".strip()})
        store.save_initiative(rebased)
    return rebased
