"""Time helpers of the loop: PromQL durations, RFC 3339 instants, step alignment.

All instants are timezone-aware UTC datetimes; durations are seconds (float).
"""

from __future__ import annotations

import datetime as dt
import math
import re

from obsctl.errors import UsageError

# Units of a Prometheus duration (prometheus/common model.ParseDuration).
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
_WHOLE = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in a Prometheus duration such as ``15s``, ``1h30m`` or ``7d``.

    Raises:
        UsageError: not a Prometheus duration, or zero (``what`` names the flag/field).
    """
    text = str(text).strip()
    if not _WHOLE.match(text):
        raise UsageError(f"{what}: {text!r} is not a Prometheus duration such as 15s, 30m, 1h or 7d")
    seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
    if seconds <= 0:
        raise UsageError(f"{what}: {text!r} must be longer than zero")
    return float(seconds)


def utcnow() -> dt.datetime:
    """The current time, UTC, timezone-aware."""
    return dt.datetime.now(dt.timezone.utc)


def parse_instant(text: str | None, what: str = "time", now: dt.datetime | None = None) -> dt.datetime:
    """An RFC 3339 time (``2026-01-31T12:00:00Z``), a Unix timestamp in seconds, or ``now``.

    A time without a zone is taken as UTC. ``None`` or ``now`` gives ``now`` (default: the
    current time).

    Raises:
        UsageError: unparseable text (``what`` names the flag).
    """
    if text is None or str(text).strip().lower() == "now":
        return now or utcnow()
    raw = str(text).strip()
    try:
        value = dt.datetime.fromtimestamp(float(raw), dt.timezone.utc)
    except ValueError:
        try:
            value = dt.datetime.fromisoformat(raw.replace("z", "Z"))
        except ValueError:
            raise UsageError(f"{what}: {raw!r} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z), a Unix timestamp or 'now'") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def align_down(instant: dt.datetime, step_seconds: float) -> dt.datetime:
    """``instant`` rounded down to a multiple of ``step_seconds`` since the Unix epoch.

    Aligning query windows to the step makes two runs over the same window evaluate the
    same instants (and match the evaluation grid of recording rules).
    """
    ts = math.floor(instant.timestamp() / step_seconds) * step_seconds
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc)


def to_datetime(seconds: float) -> dt.datetime:
    """A Unix timestamp in seconds as a UTC datetime."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def rfc3339(instant: dt.datetime) -> str:
    """``2026-01-31T12:00:00Z`` (seconds precision, UTC)."""
    return instant.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_duration(seconds: float) -> str:
    """``3600`` -> ``1h``, ``5400`` -> ``1h30m``, ``90`` -> ``1m30s``."""
    seconds = int(round(seconds))
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)
