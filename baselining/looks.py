"""The look log: every verify is a look at a change, and the error belongs to the change.

A change is a sequence of looks at one query from one start: each look judges the
window cumulative from ``sequence_start`` on the confidence sequence of
:mod:`obsctl.baselining.statistics.anytime`, which holds at every look at once. What is
looked at is the query's input data, not the names it goes by: :func:`query_key` reduces
the PromQL (its selector filled in) to its vector selectors, so a renamed class or signal,
a second class with the same selector, or ``sum(x{...}) * 1`` next to ``sum(x{...})``
continues the same sequence. Looks logged before keys were recorded (``query_key`` "")
are matched by class and signal. So the log only has to make sure that the looks a user
makes are all on one sequence:

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
  ``verify`` refuses it as a look (:func:`obsctl.baselining.verify.verification_window`);
- concurrent verifies get distinct numbers: a verify holds the store's look lock
  (:meth:`~obsctl.baselining.store.Store.looks_locked`) from its numbers to its lines;
- reading a verdict again (``verify --peek``, ``report``) is not a look.
"""

from __future__ import annotations

import datetime as dt
import re

from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from obsctl.formatting import format_confidence
from obsctl.records import Initiative, Look, VerificationResult
from obsctl.timeutil import rfc3339, utcnow

_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`)')


def query_key(query: str) -> str:
    """What a PromQL expression looks at: its vector selectors, each as its metric name and
    its label matchers sorted (quoting as written), sorted and joined by ``" | "``.

    ``sum(rate(x_total{job="a",model="m"}[5m])) * 1`` and ``sum(rate(x_total{model="m", job="a"}[1m]))``
    both give ``x_total{job="a",model="m"}``: the same input series, the same data. ``""``
    for a query without a selector."""
    from obsctl.baselining.measure.window import selectors_of

    keys = set()
    for selector in selectors_of(query):
        name, _, rest = selector.partition("{")
        matchers = sorted(f"{label}{op}{value}" for label, op, value in _MATCHER.findall(rest))
        keys.add(f"{name.strip()}{{{','.join(matchers)}}}")
    return " | ".join(sorted(keys))


def same_data(look: Look, workload_class: str, signal: str, key: str) -> bool:
    """True when ``look`` looked at the data of ``key`` (its own key equal), or, for a look
    logged without a key, at the same class and signal."""
    if look.query_key and key:
        return look.query_key == key
    return (look.workload_class, look.signal) == (workload_class, signal)


def looks_at(store: Store, workload_class: str, signal: str, query: str = "") -> list[Look]:
    """The store's looks at the data of ``query`` (:func:`same_data`), from every log;
    without a query, the looks of ``workload_class``/``signal`` only."""
    if not query:
        return store.looks(workload_class, signal)
    key = query_key(query)
    return [look for look in store.all_looks() if same_data(look, workload_class, signal, key)]


def sequence(looks: list[Look], started_at: dt.datetime) -> list[Look]:
    """The looks of the sequence that starts at ``started_at``, oldest first."""
    return [look for look in looks if look.sequence_start == started_at]


def context(store: Store, initiative: Initiative, signal: str, confidence: float, planned_seconds: float | None,
            baseline_id: str | None = None, query: str = "") -> tuple[LookContext, str]:
    """The next look's place on its sequence, and a note when the spec's level moved since look 1.

    Args:
        confidence: the spec's ``verification.confidence`` now (used at a sequence's first look).
        planned_seconds: the initiative's planned window (where a new sequence's boundary is smallest).
        baseline_id: the baseline this look compares with (None: not known, e.g. a canary's control group).
        query: the PromQL looked at (the sequence is the looks at its data, :func:`looks_at`); "": by class and signal.

    Returns:
        ``(LookContext with number, level and t_min, note or "")``.

    Raises:
        StoreError: the log is unreadable; it holds fewer of this initiative's looks at its
            primary signal than the initiative recorded verifications (the log was removed or
            cut: a fresh sequence would buy a fresh error budget); or the sequence's looks were
            judged against another baseline.
    """
    seq = sequence(looks_at(store, initiative.workload_class, signal, query), initiative.started_at)
    if signal == initiative.primary_signal:
        logged = sum(1 for look in seq if look.initiative == initiative.id and look.role == "primary")
        if logged < len(initiative.verifications):
            raise StoreError(f"{store.looks_file(initiative.workload_class, signal)}: the look log holds {logged} look(s) of initiative "
                             f"{initiative.id}, which recorded {len(initiative.verifications)} verification(s): the log was removed or cut; "
                             "restore it from history (its looks are what keeps repeated verifies honest)")
    _check_baseline([look for look in seq if (look.workload_class, look.signal) == (initiative.workload_class, signal)],
                    initiative.workload_class, signal, baseline_id)
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
                         f"start a new change after its last look's window, --started-at {rfc3339(max(look.window_end for look in seq))} "
                         "or later")


def check_start(store: Store, workload_class: str, signal: str, started_at: dt.datetime, baseline_id: str | None = None,
                query: str = "") -> None:
    """Refuse a start whose cumulative window would take in data already looked at.

    A start equal to an existing sequence's start continues that sequence (with the same
    baseline); any other start before the last window end of a sequence at the data of
    ``query`` (:func:`looks_at`: under any class or signal name; without a query, of
    ``workload_class``/``signal``) is refused.

    Raises:
        StoreError: one line naming the sequence, the data looked at, and the two ways on;
            or a continued sequence whose looks compared with another baseline than ``baseline_id``.
    """
    by_start: dict[dt.datetime, list[Look]] = {}
    for look in looks_at(store, workload_class, signal, query):
        by_start.setdefault(look.sequence_start, []).append(look)
    for start, looks in by_start.items():
        if start == started_at:
            _check_baseline([look for look in looks if (look.workload_class, look.signal) == (workload_class, signal)],
                            workload_class, signal, baseline_id)
            continue
        last = max(look.window_end for look in looks)
        if started_at < last:
            names = sorted({f"{look.workload_class}/{look.signal}" for look in looks} - {f"{workload_class}/{signal}"})
            also = f" (the same data as {', '.join(names)})" if names else ""
            raise StoreError(
                f"{workload_class}/{signal}{also} was already looked at from {rfc3339(start)} to {rfc3339(last)} "
                f"({len(looks)} look(s), initiative {looks[-1].initiative}): a start at {rfc3339(started_at)} would judge that data again; "
                f"start after {rfc3339(last)} (--started-at), or continue that change's looks with --started-at {rfc3339(start)}")


def looks_of(initiative: Initiative, result: VerificationResult, primary: LookContext, guards: dict[str, LookContext]) -> list[Look]:
    """The look records of one verify: the primary's and each judged guard's."""
    now = utcnow()
    window = {"window_start": result.window.start, "window_end": result.window.end, "looked_at": now}
    out = [_look(initiative, primary, result.assessment, signal=result.signal, role="primary", verdict=result.primary_verdict,
                 change_ratio=result.change_ratio, ci_low=result.ci_low, ci_high=result.ci_high, baseline_id=initiative.baseline_id or None,
                 query_key=query_key(result.query), **window)]
    for g in result.guards:
        ctx = guards.get(g.signal)
        if ctx is None:
            continue
        out.append(_look(initiative, ctx, g.assessment, signal=g.signal, role="guard", verdict=g.verdict, change_ratio=g.change_ratio,
                         ci_low=g.ci_low, ci_high=g.ci_high, baseline_id=g.baseline_id, query_key=query_key(g.query), **window))
    return out


def _look(initiative: Initiative, ctx: LookContext, assessment, **fields) -> Look:
    # One look record: the sequence's place from ``ctx``, t_min from it or else the judged assessment.
    min_fraction = ctx.min_fraction or (assessment.min_fraction if assessment else None)
    return Look(workload_class=initiative.workload_class, sequence_start=initiative.started_at, number=ctx.number, initiative=initiative.id,
                confidence=ctx.confidence, min_fraction=min_fraction, **fields)
