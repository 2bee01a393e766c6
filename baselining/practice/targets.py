"""Targets that stay put: a relative target's anchor, its value, progress and deadline.

A relative target (``relative: -0.30``) means "30 % below where we were when we set it".
Computed against the *current* baseline it would move every time a verified gain is
promoted: a met target falls back to missed. So the first time a target meets a baseline
(whichever comes first: ``snapshot-baseline``, ``initiative start``, ``rules generate``,
``review``, ``target show``) obsctl records the anchor, the baseline current then, with its
date, in ``STORE/targets/<class>.<signal>.yaml``; the target's value is ``anchor x (1 +
relative)`` from then on, and the generated rules publish that value as a constant
(:func:`anchored_values`), so Prometheus, the dashboards, the alerts, the CLI and the
review show one number, and a verified change promoted later counts toward it. A target whose ``relative`` or ``deadline`` is edited in the spec is a new
target and is anchored afresh. An absolute target's value needs no anchor, but its
progress does: it is measured from the same anchor (the baseline current when it was
first seen), so a promotion moves the current level, not the start. Every record keeps
the time it was first seen (the start of its elapsed time) and when it was last reviewed
(``review --write``).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from obsctl.atomicio import atomic_write_yaml
from obsctl.errors import StoreError
from obsctl.spec import Signal, Target


class TargetRecord(BaseModel):
    """What the store remembers of one target (``STORE/targets/<class>.<signal>.yaml``).

    Attributes:
        workload_class, signal: the target's identity.
        relative, absolute, deadline: the target as it was when anchored (a change is a new target).
        anchor_baseline_id: the baseline current when first seen (None: none yet).
        anchor_value: that baseline's mean (signal unit), or None: a relative target's
            value is ``anchor_value x (1 + relative)``, and every target's progress starts there.
        anchored_at: when first seen (UTC): the start of the target's progress.
        reviewed_at: the last written review that covered it (UTC), or None.
    """

    model_config = ConfigDict(extra="forbid")

    workload_class: str
    signal: str
    relative: float | None = None
    absolute: float | None = None
    deadline: dt.date
    anchor_baseline_id: str | None = None
    anchor_value: float | None = None
    anchored_at: dt.datetime
    reviewed_at: dt.datetime | None = None


def record_path(store, target: Target) -> Path:
    """``STORE/targets/<class>.<signal>.yaml`` (class and signal are spec identifiers: safe names)."""
    return store.path / "targets" / f"{target.workload_class}.{target.signal}.yaml"


def read_record(store, target: Target) -> TargetRecord | None:
    """The stored record of ``target``, None when there is none or the spec changed the target.

    Raises:
        StoreError: the file exists but is not a valid record (one line naming it).
    """
    path = record_path(store, target)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        record = TargetRecord.model_validate(data)
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError, ValidationError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: not a target record: {str(exc).splitlines()[0]}") from None
    if (record.relative, record.absolute, record.deadline) != (target.relative, target.absolute, target.deadline):
        return None
    return record


def anchor(store, target: Target, now: dt.datetime, write: bool = True) -> TargetRecord:
    """The target's record, made from the current baseline when there is none (and
    written when ``write``; a read-only review passes False and anchors in memory only).

    Raises:
        StoreError: as :func:`read_record`, or the record cannot be written.
    """
    record = read_record(store, target)
    if record is not None and record.anchor_baseline_id is not None:
        return record
    base = store.current_baseline(target.workload_class, target.signal, samples=False)
    usable = base is not None and math.isfinite(base.stats.mean)
    if record is not None and not usable:
        return record  # still nothing to anchor to: the record stands as it is
    with store.locked():
        record = read_record(store, target)
        if record is not None and record.anchor_baseline_id is not None:
            return record
        base = store.current_baseline(target.workload_class, target.signal, samples=False)
        usable = base is not None and math.isfinite(base.stats.mean)
        record = TargetRecord(workload_class=target.workload_class, signal=target.signal, relative=target.relative,
                              absolute=target.absolute, deadline=target.deadline,
                              anchor_baseline_id=base.id if usable else None,
                              anchor_value=base.stats.mean if usable else None,
                              anchored_at=record.anchored_at if record is not None else now)
        if write:
            save(store, record)
    return record


def anchor_all(spec, store, now: dt.datetime, pairs: set[tuple[str, str]] | None = None, write: bool = True) -> dict[tuple[str, str], TargetRecord]:
    """:func:`anchor` every target of ``spec`` (only those whose ``(class, signal)`` is in
    ``pairs`` when given): ``{(class, signal): record}``. Raises StoreError as :func:`anchor`."""
    return {(t.workload_class, t.signal): anchor(store, t, now, write=write) for t in spec.targets
            if pairs is None or (t.workload_class, t.signal) in pairs}


def anchored_values(spec, records: dict[tuple[str, str], TargetRecord]) -> dict[tuple[str, str], tuple[float, TargetRecord]]:
    """``{(class, signal): (value, record)}`` of the relative targets with an anchor: the
    value ``anchor_value x (1 + relative)`` every reader uses (the rules' constant)."""
    out = {}
    for t in spec.targets:
        record = records.get((t.workload_class, t.signal))
        if t.relative is not None and record is not None and record.anchor_value is not None:
            out[(t.workload_class, t.signal)] = (record.anchor_value * (1 + t.relative), record)
    return out


def save(store, record: TargetRecord) -> None:
    """Write ``record`` atomically (the caller holds the store lock or accepts a last-writer-wins update)."""
    path = store.path / "targets" / f"{record.workload_class}.{record.signal}.yaml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_yaml(path, record.model_dump(mode="json"))
    except OSError as exc:
        raise StoreError(f"{path}: cannot write the target record: {exc.strerror or exc}") from None


def mark_reviewed(store, target: Target, when: dt.datetime) -> None:
    """Record that a written review covered ``target`` at ``when``."""
    with store.locked():
        record = anchor(store, target, when)
        save(store, record.model_copy(update={"reviewed_at": when}))


@dataclass(frozen=True)
class TargetState:
    """A target against the signal's current level.

    Attributes:
        value: the target value (signal unit), None when a relative target has no anchor.
        start: the level progress is measured from (the anchor; an absolute target
            anchored before it had a baseline: the current baseline's mean), or None.
        current: the signal's current level (the mean over the last cadence period), or None.
        progress: ``(current - start) / (value - start)`` (1 = met), None where undefined.
        elapsed: the share of the time from ``anchored_at`` to the deadline that has passed (0-1+).
        met: ``current`` is at or beyond ``value`` in the signal's direction.
        overdue: the deadline has passed and the target is not met.
        days_left: days to the deadline (negative past it).
    """

    value: float | None
    start: float | None
    current: float | None
    progress: float | None
    elapsed: float
    met: bool
    overdue: bool
    days_left: float


def state(target: Target, signal: Signal, record: TargetRecord, current: float | None, start_level: float | None,
          now: dt.datetime) -> TargetState:
    """The :class:`TargetState` of ``target`` (see its attributes).

    Args:
        record: the target's anchor record.
        current: the signal's current level (signal unit), None when unknown.
        start_level: the level progress starts from when an absolute target has no anchor
            (the current baseline's mean), ignored otherwise.
        now: the instant judged (UTC).
    """
    if target.absolute is not None:
        value = target.absolute
        start = record.anchor_value if record.anchor_value is not None else start_level
    else:
        start = record.anchor_value
        value = start * (1 + target.relative) if start is not None else None
    deadline = dt.datetime.combine(target.deadline, dt.time(0, 0), tzinfo=dt.UTC)
    span = (deadline - record.anchored_at).total_seconds()
    elapsed = 1.0 if span <= 0 else max(0.0, (now - record.anchored_at).total_seconds() / span)
    days_left = (deadline - now).total_seconds() / 86400
    sign = 1.0 if signal.direction == "higher_is_better" else -1.0
    met = value is not None and current is not None and sign * (current - value) >= 0
    progress = None
    if value is not None and current is not None and start is not None and value != start:
        progress = (current - start) / (value - start)
    return TargetState(value, start, current, progress, elapsed, met, days_left < 0 and not met, days_left)
