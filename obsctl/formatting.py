"""How obsctl writes numbers: percentages, confidence levels, values in a signal's unit.

One style everywhere (CLI lines, reasons, reports): a space before ``%`` (``+18.2 %``),
signed changes, and confidence levels that never round up to ``100 %``. Durations are
written by :func:`obsctl.durations.format_duration`.
"""

from __future__ import annotations

import math


def format_percent(ratio: float | None, sign: bool = True, digits: int = 1) -> str:
    """``0.182`` -> ``+18.2 %`` (``18.2 %`` with ``sign=False``); None, NaN or Inf -> ``n/a``."""
    if ratio is None or not math.isfinite(ratio):
        return "n/a"
    return f"{ratio * 100:{'+' if sign else ''}.{digits}f} %"


def format_confidence(confidence: float) -> str:
    """``0.95`` -> ``95 %``; a look's level ``0.99873`` -> ``99.87 %``; ``0.999996`` -> ``99.9996 %``.

    Up to two decimals, more only where fewer would print a level below 1 as ``100 %``.
    """
    for digits in range(2, 10):
        text = f"{confidence * 100:.{digits}f}".rstrip("0").rstrip(".")
        if text != "100" or confidence >= 1:
            return f"{text} %"
    return f"{confidence * 100!r} %"


def format_number(value: float | None) -> str:
    """``2410.3`` -> ``2,410``; ``0.8312`` -> ``0.8312``; None, NaN or Inf -> ``n/a``."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"
