"""The look log: every verify is a look at a change, and the error belongs to the change.

A change is a sequence of looks at one (workload class, signal) from one start: each
look judges the window cumulative from ``sequence_start`` on the confidence sequence of
:mod:`obsctl.baselining.statistics.anytime`, which holds at every look at once. So the
log only has to make sure that the looks a user makes are all on one sequence:

- every look is appended to ``STORE/looks/<class>/<signal>.jsonl`` before its verdict is
  shown (:meth:`obsctl.baselining.store.Store.append_looks`); a verify that cannot log
  its look shows no verdict;
- the first look fixes the sequence's level and its first information time ``t_min``; a later edit of
  ``verification.confidence`` does not rewrite them (:func:`context` says so);
- closing an initiative does not end its sequence: a new start at the same instant
  continues it, and a start whose window would take in data already looked at on
  another sequence is refused (:func:`check_start`): moving ``--started-at`` by a
  second buys no fresh error budget;
- a window that does not start at the change is not a term of the sequence:
  ``verify`` refuses it as a look (:func:`obsctl.baselining.verify.verification_window`).
"""

from __future__ import annotations

import datetime as dt

from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from obsctl.formatting import format_confidence
from obsctl.records import Initiative, Look, VerificationResult
from obsctl.timeutil import rfc3339, utcnow


def sequence(looks: list[Look], started_at: dt.datetime) -> list[Look]:
    """The looks of the sequence that starts at ``started_at``, oldest first."""
    return [look for look in looks if look.sequence_start == started_at]


def context(store: Store, initiative: Initiative, signal: str, confidence: float, planned_seconds: float | None,
            baseline_id: str | None = None) -> tuple[LookContext, str]:
    """The next look's place on its sequence, and a note when the spec's level moved since look 1.

    Args:
        confidence: the spec's ``verification.confidence`` now (used at a sequence's first look).
        planned_seconds: the initiative's planned window (where a new sequence's boundary is smallest).
        baseline_id: the baseline this look compares with (None: not known, e.g. a canary's control group).

    Returns:
        ``(LookContext with number, level and t_min, note or "")``.

    Raises:
        StoreError: the log is unreadable; it holds fewer of this initiative's looks at its
            primary signal than the initiative recorded verifications (the log was removed or
            cut: a fresh sequence would buy a fresh error budget); or the sequence's looks were
            judged against another baseline.
    """
    seq = sequence(store.looks(initiative.workload_class, signal), initiative.started_at)
    if signal == initiative.primary_signal:
        logged = sum(1 for look in seq if look.initiative == initiative.id and look.role == "primary")
        if logged < len(initiative.verifications):
            raise StoreError(f"{store.looks_file(initiative.workload_class, signal)}: the look log holds {logged} look(s) of initiative "
                             f"{initiative.id}, which recorded {len(initiative.verifications)} verification(s): the log was removed or cut; "
                             "restore it from history (its looks are what keeps repeated verifies honest)")
    _check_baseline(seq, initiative.workload_class, signal, baseline_id)
    if not seq:
        return LookContext(1, planned_seconds, None, confidence), ""
    first = seq[0]
    first_time = next((look.min_fraction for look in seq if look.min_fraction is not None), None)
    note = ""
    if abs(first.confidence - confidence) > 1e-12:
        note = (f"the sequence's level {format_confidence(first.confidence)} (fixed at its first look, {rfc3339(first.looked_at)}) "
                f"is kept; verification.confidence is now {format_confidence(confidence)}")
    return LookContext(len(seq) + 1, planned_seconds, first_time, first.confidence), note


def _check_baseline(seq: list[Look], workload_class: str, signal: str, baseline_id: str | None) -> None:
    # A sequence keeps the baseline of its first look: another one would be a second try at
    # the same change's data (baseline shopping).
    first = next((look.baseline_id for look in seq if look.baseline_id), None)
    if first and baseline_id and first != baseline_id:
        raise StoreError(f"{workload_class}/{signal}: the looks at the change from {rfc3339(seq[0].sequence_start)} compared with baseline "
                         f"{first}, this one would compare with {baseline_id}: a change keeps the baseline of its first look; "
                         f"make {first} current again (baseline promote), or start after the last look's window")


def check_start(store: Store, workload_class: str, signal: str, started_at: dt.datetime, baseline_id: str | None = None) -> None:
    """Refuse a start whose cumulative window would take in data already looked at.

    A start equal to an existing sequence's start continues that sequence (with the same
    baseline); any other start before the last window end of a sequence of
    ``workload_class``/``signal`` is refused.

    Raises:
        StoreError: one line naming the sequence, the data looked at, and the two ways on;
            or a continued sequence whose looks compared with another baseline than ``baseline_id``.
    """
    by_start: dict[dt.datetime, list[Look]] = {}
    for look in store.looks(workload_class, signal):
        by_start.setdefault(look.sequence_start, []).append(look)
    for start, looks in by_start.items():
        if start == started_at:
            _check_baseline(looks, workload_class, signal, baseline_id)
            continue
        last = max(look.window_end for look in looks)
        if started_at < last:
            raise StoreError(
                f"{workload_class}/{signal} was already looked at from {rfc3339(start)} to {rfc3339(last)} "
                f"({len(looks)} look(s), initiative {looks[-1].initiative}): a start at {rfc3339(started_at)} would judge that data again; "
                f"start after {rfc3339(last)} (--started-at), or continue that change's looks with --started-at {rfc3339(start)}")


def looks_of(initiative: Initiative, result: VerificationResult, primary: LookContext, guards: dict[str, LookContext]) -> list[Look]:
    """The look records of one verify: the primary's and each judged guard's."""
    now = utcnow()
    window = {"window_start": result.window.start, "window_end": result.window.end, "looked_at": now}
    out = [_look(initiative, primary, result.assessment, signal=result.signal, role="primary", verdict=result.primary_verdict,
                 change_ratio=result.change_ratio, ci_low=result.ci_low, ci_high=result.ci_high, baseline_id=initiative.baseline_id or None,
                 **window)]
    for g in result.guards:
        ctx = guards.get(g.signal)
        if ctx is None:
            continue
        out.append(_look(initiative, ctx, g.assessment, signal=g.signal, role="guard", verdict=g.verdict, change_ratio=g.change_ratio,
                         ci_low=g.ci_low, ci_high=g.ci_high, baseline_id=g.baseline_id, **window))
    return out


def _look(initiative: Initiative, ctx: LookContext, assessment, **fields) -> Look:
    # One look record: the sequence's place from ``ctx``, t_min from it or else the judged assessment.
    min_fraction = ctx.min_fraction or (assessment.min_fraction if assessment else None)
    return Look(workload_class=initiative.workload_class, sequence_start=initiative.started_at, number=ctx.number, initiative=initiative.id,
                confidence=ctx.confidence, min_fraction=min_fraction, **fields)
