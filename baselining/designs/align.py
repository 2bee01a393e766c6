"""Time alignment of sample series: the designs compare values taken at the same instants.

Range queries at one step are evaluated on the grid ``start + i * step`` with ``end``
aligned to a multiple of the step (``obsctl.timeutil.align_down``), so the
treated and the control series of one window share their timestamps exactly, and a
baseline taken whole days earlier holds the same instants shifted by the period.
Timestamps are matched at millisecond resolution (Prometheus' own).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def as_arrays(samples: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``[(unix seconds, value), ...]`` -> ``(int64 milliseconds, float values)``, finite values only, time order."""
    arr = np.asarray(samples if isinstance(samples, np.ndarray) else list(samples), dtype=float).reshape(-1, 2)
    keep = np.isfinite(arr[:, 1]) & np.isfinite(arr[:, 0])
    arr = arr[keep]
    order = np.argsort(arr[:, 0], kind="stable")
    return np.round(arr[order, 0] * 1000).astype(np.int64), arr[order, 1]


def matched(a: Iterable[tuple[float, float]], b: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ms, a values, b values)`` at the instants both series have a finite sample."""
    ta, va = as_arrays(a)
    tb, vb = as_arrays(b)
    common, ia, ib = np.intersect1d(ta, tb, assume_unique=False, return_indices=True)
    return common, va[ia], vb[ib]


def log_ratio(ms: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """``((seconds, log(a / b)), dropped)`` where both are positive; ``dropped`` pairs had a value <= 0 (no log)."""
    ok = (a > 0) & (b > 0)
    return (ms[ok] / 1000.0, np.log(a[ok]) - np.log(b[ok])), int((~ok).sum())

