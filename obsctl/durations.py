"""Durations: the one grammar obsctl reads and the one style it writes.

Read: a Prometheus duration (``prometheus/common`` ``model.ParseDuration``): integer
counts of the units ``y w d h m s ms``, each at most once and in that order, e.g.
``15s``, ``1h30m``, ``7d``, ``500ms``. The spec, every CLI flag and the exporter's flags
read durations with :func:`parse_duration`, so a value that works in one place works in
all of them; ``1m1h`` (units out of order) and ``1.5s`` (fractions) are refused, as
Prometheus refuses them.

Write: :func:`format_duration` writes the same grammar, rounded to at most two units
(``90`` -> ``1m30s``, ``5.9e3`` -> ``1h38m``), so a duration printed by one command can be
pasted as the flag of the next.
"""

from __future__ import annotations

import math
import re

from obsctl.errors import UsageError

#: Seconds per unit, largest first (Prometheus: a year is 365 days).
UNITS: tuple[tuple[str, float], ...] = (("y", 31536000.0), ("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0),
                                        ("s", 1.0), ("ms", 0.001))
_GRAMMAR = re.compile(r"^" + "".join(rf"(?:(\d+){unit})?" for unit, _ in UNITS) + r"$")

#: Longest duration accepted (100 years): beyond it datetime arithmetic overflows, and no
#: query window is that long.
MAX_DURATION_SECONDS = 100 * 31536000.0


def parse_duration(text: object, what: str = "duration") -> float:
    """Seconds (float, > 0) in a Prometheus duration such as ``15s``, ``1h30m`` or ``7d``.

    Args:
        text: the duration as typed.
        what: the flag or field it came from, named in the error.

    Raises:
        UsageError: not a Prometheus duration, zero, or longer than 100 years.
    """
    value = str(text).strip()
    match = _GRAMMAR.match(value)
    if not value or match is None:
        raise UsageError(f"{what}: {value!r} is not a Prometheus duration such as 500ms, 15s, 1h30m or 7d "
                         "(whole numbers, units y w d h m s ms in that order)")
    seconds = sum(int(count) * size for count, (_, size) in zip(match.groups(), UNITS, strict=True) if count is not None)
    if seconds <= 0:
        raise UsageError(f"{what}: {value!r} must be longer than zero")
    if seconds > MAX_DURATION_SECONDS:
        raise UsageError(f"{what}: {value!r} is too long (at most 100y)")
    return float(seconds)


def is_duration(text: object) -> bool:
    """True when :func:`parse_duration` accepts ``text``."""
    try:
        parse_duration(text)
    except UsageError:
        return False
    return True


def format_duration(seconds: float) -> str:
    """``seconds`` in the grammar above, rounded to its two largest units.

    ``0.25`` -> ``250ms``, ``90`` -> ``1m30s``, ``930`` -> ``15m30s``, ``21600`` -> ``6h``,
    ``1.3e5`` -> ``1d12h``; a non-finite value -> ``unbounded``; 0 or less -> ``0s``.
    """
    if not math.isfinite(seconds):
        return "unbounded"
    if seconds < 0.0005:
        return "0s"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    units = [(u, s) for u, s in UNITS if u not in ("ms", "w", "y")]  # d h m s read most easily
    lead = next(i for i, (_, size) in enumerate(units) if seconds >= size)
    rest = round(seconds / units[lead:lead + 2][-1][1]) * units[lead:lead + 2][-1][1]
    if lead > 0 and rest >= units[lead - 1][1]:  # rounding carried into the larger unit (86399.9 s -> 1d)
        lead -= 1
        rest = round(seconds / units[lead:lead + 2][-1][1]) * units[lead:lead + 2][-1][1]
    pair = units[lead:lead + 2]
    parts = []
    for unit, size in pair:
        count = int(rest // size)
        rest -= count * size
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
