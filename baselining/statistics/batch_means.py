"""The variance of a window's mean from a few batch means, where the window's own memory is
too long against the window to be fitted.

Used by :func:`.assumptions.check_window` when the change altered the signal's memory and
the window spans fewer than :data:`.memory.MIN_MEMORIES` (20) of the memory fitted on it:
that fit is then a lower bound (a window's own autocorrelation estimate shrinks memory
longer than a fraction of the window), so an interval resting on it would be too narrow,
and the window it asks for grows with every window it is fitted on. Batch means need no
memory model: the window's grid span is cut into :data:`BATCHES` equal stretches, each
stretch's mean of its present samples is one batch mean ``m_b``, and the window's mean
``ybar`` (of all present samples) has the variance ``s_m^2 / B``, ``s_m^2`` the batch means'
sample variance, with ``B - 1`` degrees of freedom (Student t).

Source: the method of batch means (Schmeiser, "Batch size effects in the analysis of
simulation output", Operations Research 30(3), 1982, who recommends 10-30 batches for
size and few batches where batches must be long against the correlation); with the number
of batches fixed as the sample grows, ``(ybar - mu) / sqrt(s_m^2 / B)`` tends to Student's t
with ``B - 1`` dof for any weakly dependent stationary series (fixed-b asymptotics:
Kiefer & Vogelsang, Econometric Theory 21, 2005; Sun, Econometrics Journal 16, 2013, for
equal-weight batch means).

Assumptions: the window is stationary and each batch is long against its memory. Measured
(``bench/bench_memory_batches.py``, docs/verification.md "A change that lengthens the
memory"): with 4 batches the t interval of an AR(1) window's mean covers 92.2 % of the time
at 8, 93.2 % at 10 and 94.0 % at 20 integrated autocorrelation times of window (8 batches:
86.2 % at 8); through the verdict, where the memory is the one fitted on the window (a
lower bound), the false directions stay within 5 % (Wilson upper bound) on every family from
:data:`MIN_SPAN_MEMORIES` = 15 fitted memories (at 10 and 12, one family's false REGRESSED
reached 3.0 % [1.6, 5.6]). Holes are allowed; a batch without a sample, or a window with
fewer than ``2 B`` samples, gives no estimate.
"""

from __future__ import annotations

import math

import numpy as np

from obsctl.baselining.statistics.lrv import Side

#: Batches the window is cut into (``B``; ``B - 1`` dof).
BATCHES = 4

#: Fewest integrated autocorrelation times (fitted on the window) the window must span.
MIN_SPAN_MEMORIES = 15.0


def batch_side(times, values, step_seconds: float, batches: int = BATCHES) -> Side | None:
    """The window's :class:`~.lrv.Side` from ``batches`` batch means (module doc).

    Args:
        times: sample times (unix s) on the step grid, increasing; holes allowed.
        values: finite values (signal unit), same length.
        step_seconds: the grid step (s).
        batches: the number of equal stretches of the grid span (at least 2).

    Returns:
        The side (``var_mean`` = batch means' variance / ``batches``, ``dof`` = ``batches - 1``,
        ``n_eff`` = the sample variance over ``var_mean``, ``scale_source`` ``own``), or None
        when a batch holds no sample, the window has fewer than ``2 batches`` samples, or the
        batch means do not vary (a constant window: no variance to estimate).
    """
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    if batches < 2 or y.size < 2 * batches:
        return None
    idx = np.rint((t - t[0]) / step_seconds).astype(int)
    span_points = int(idx[-1]) + 1
    which = np.minimum(idx * batches // span_points, batches - 1)
    counts = np.bincount(which, minlength=batches)
    if np.any(counts == 0):
        return None
    means = np.bincount(which, weights=y, minlength=batches) / counts
    var_mean = float(np.var(means, ddof=1)) / batches
    sd = float(np.std(y, ddof=1))
    if not var_mean > 0 or not math.isfinite(var_mean):
        return None
    return Side(mean=float(y.mean()), var_mean=var_mean, dof=float(batches - 1), n=int(y.size),
                n_eff=min(float(y.size), sd * sd / var_mean), span_seconds=span_points * step_seconds, sd=sd,
                scale_source="own", own_sd=sd)
