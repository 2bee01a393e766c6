"""Time helpers of the loop: RFC 3339 instants, step alignment (durations: :mod:`obsctl.durations`).

All instants are timezone-aware UTC datetimes; durations are seconds (float).
"""

from __future__ import annotations

import datetime as dt
import math

from obsctl.durations import format_duration
from obsctl.errors import UsageError

#: Instants accepted by :func:`parse_instant`: from the Unix epoch to the end of year 9999
#: (Python's datetime range; Prometheus data before 1970 does not exist in practice).
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


def utcnow() -> dt.datetime:
    """The current time, UTC, timezone-aware."""
    return dt.datetime.now(dt.UTC)


def parse_instant(text: str | None, what: str = "time", now: dt.datetime | None = None) -> dt.datetime:
    """An RFC 3339 time (``2026-01-31T12:00:00Z``), a Unix timestamp in seconds, or ``now``.

    A time without a zone is taken as UTC. ``None`` or ``now`` gives ``now`` (default: the
    current time).

    Raises:
        UsageError: unparseable text, or a time before 1970-01-01 or after year 9999
            (``what`` names the flag).
    """
    if text is None or str(text).strip().lower() == "now":
        return now or utcnow()
    raw = str(text).strip()
    out_of_range = UsageError(f"{what}: {raw!r} is out of range ({rfc3339(EARLIEST)} .. {rfc3339(LATEST)})")
    try:
        number = float(raw)
    except ValueError:
        number = None
    if number is not None:
        if math.isnan(number):
            raise UsageError(f"{what}: {raw!r} is not a time")
        if not EARLIEST.timestamp() <= number <= LATEST.timestamp():
            raise out_of_range
        value = dt.datetime.fromtimestamp(number, dt.UTC)
    else:
        try:
            value = dt.datetime.fromisoformat(raw.replace("z", "Z"))
        except ValueError:
            raise UsageError(f"{what}: {raw!r} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z), a Unix timestamp or 'now'") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    try:
        value = value.astimezone(dt.UTC)
    except OverflowError:
        raise out_of_range from None
    if not EARLIEST <= value <= LATEST:
        raise out_of_range
    return value


def window_points(start: dt.datetime, end: dt.datetime, step_seconds: float) -> int:
    """Evaluation points of the window ``(start, end]`` at ``step_seconds`` (``(end - start) / step``)."""
    return int((end.timestamp() - start.timestamp()) // step_seconds)


def check_window_points(start: dt.datetime, end: dt.datetime, step_seconds: float, what: str) -> None:
    """Refuse a window with more than ``promapi.MAX_RANGE_POINTS`` evaluation points.

    Raises:
        UsageError: naming ``what`` (the flag(s) that set the window), the points and the maximum.
    """
    from obsctl.promapi import MAX_RANGE_POINTS

    points = window_points(start, end, step_seconds)
    if points > MAX_RANGE_POINTS:
        longest = format_duration(MAX_RANGE_POINTS * step_seconds)
        raise UsageError(
            f"{what}: too long: the window {rfc3339(start)} .. {rfc3339(end)} has {points:,} points at the {step_seconds:g}s step, "
            f"more than the maximum of {MAX_RANGE_POINTS:,} (about {longest}); use a shorter window or a larger verification.step"
        )


def minus_seconds(instant: dt.datetime, seconds: float, what: str) -> dt.datetime:
    """``instant - seconds``, refusing a result before 1970 (UsageError naming ``what``)."""
    if instant.timestamp() - seconds < EARLIEST.timestamp():
        raise UsageError(f"{what}: out of range: the window would start before {rfc3339(EARLIEST)}")
    return instant - dt.timedelta(seconds=seconds)


def align_down(instant: dt.datetime, step_seconds: float) -> dt.datetime:
    """``instant`` rounded down to a multiple of ``step_seconds`` since the Unix epoch.

    Aligning query windows to the step makes two runs over the same window evaluate the
    same instants (and match the evaluation grid of recording rules).
    """
    ts = math.floor(instant.timestamp() / step_seconds) * step_seconds
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def rfc3339(instant: dt.datetime) -> str:
    """``2026-01-31T12:00:00Z`` (seconds precision, UTC)."""
    return instant.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
