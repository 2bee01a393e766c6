"""Summaries of a sample series: the statistics a baseline stores and a report draws.

:func:`summarize` gives the stored summary (mean, median, p5, p95, stddev) and the means
of :data:`SUMMARY_BATCHES` contiguous batches that the report's figure draws; verdicts do
not use the batch means (their interval comes from the signal's memory, :mod:`.lrv`).
:func:`is_constant` tells a side with no sampling error (:func:`.decision.exact_change`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from obsctl.baselining.statistics.decision import CONSTANT_RTOL
from obsctl.records import Statistics

#: Batches of the stored summary's ``batch_means`` (the report's figure draws them).
SUMMARY_BATCHES = 10


def is_constant(values: Iterable[float]) -> bool:
    """True when the values are all equal up to :data:`~.decision.CONSTANT_RTOL` (relative to the largest |value|)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return False
    scale = float(np.max(np.abs(arr)))
    return float(np.ptp(arr)) <= CONSTANT_RTOL * scale


def finite(values: Iterable[float]) -> np.ndarray:
    """The finite values as a float array (NaN and +-Inf dropped: PromQL gives NaN for 0/0)."""
    arr = np.asarray(list(values), dtype=float)
    return arr[np.isfinite(arr)]


def batch_means(values: Iterable[float], batches: int = SUMMARY_BATCHES) -> list[float]:
    """Means of ``batches`` contiguous, non-overlapping, equal-size batches of ``values``.

    With ``n`` values the batch size is ``b = n // batches``; the first ``n - batches*b``
    (oldest) values are dropped so every batch has the same size (Law & Kelton 2015,
    sec. 9.5.3 use equal batches; dropping the oldest is the usual warm-up deletion).

    Args:
        values: samples in time order (signal's unit).
        batches: ``k >= 1``.

    Returns:
        ``k`` batch means, oldest batch first; ``[]`` when fewer than ``k`` values.
    """
    arr = finite(values)
    size = len(arr) // batches
    if size == 0:
        return []
    kept = arr[len(arr) - size * batches :]
    return [float(m) for m in kept.reshape(batches, size).mean(axis=1)]


def summarize(values: Iterable[float], batches: int = SUMMARY_BATCHES) -> Statistics:
    """Summary statistics of a sample series (finite values only).

    Every statistic is computed over the samples the batch means use: when there are at
    least ``batches`` samples, the oldest ``n mod batches`` are dropped first (the same
    warm-up deletion as :func:`batch_means`), so ``mean`` equals the mean of the batch
    means and the headline, the report and a promoted baseline show one number.
    Percentiles use linear interpolation between order statistics (numpy's default,
    Hyndman & Fan type 7); ``stddev`` is the sample standard deviation (ddof=1, 0 for a
    single value). Raises ValueError when there is no finite value.
    """
    arr = finite(values)
    if arr.size == 0:
        raise ValueError("no finite samples to summarize")
    if arr.size >= batches:
        arr = arr[arr.size % batches :]
    # Finite samples near the float limit (1e308) can still overflow a sum: the result is
    # then +-Inf/NaN, which non_finite_fields() reports; numpy's warning is not for users.
    with np.errstate(over="ignore", invalid="ignore"):
        return Statistics(
            sample_count=int(arr.size),
            mean=float(arr.mean()),
            median=float(np.median(arr)),
            p5=float(np.percentile(arr, 5)),
            p95=float(np.percentile(arr, 95)),
            stddev=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
            batch_means=batch_means(arr, batches),
        )


def non_finite_fields(summary: Statistics) -> list[str]:
    """Names of the summary's fields that are NaN or +-Inf (``[]`` when all are finite).

    A summary with such a field cannot be a baseline or a window: its mean, interval and
    gap would be Inf/NaN (values that overflow the float range when summed, e.g. 1e308).
    """
    bad = [name for name in ("mean", "median", "p5", "p95", "stddev") if not math.isfinite(getattr(summary, name))]
    if not all(math.isfinite(m) for m in summary.batch_means):
        bad.append("batch_means")
    return bad
