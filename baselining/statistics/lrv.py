"""One side of a comparison: the mean of a signal over a window and the variance of
that mean under the signal's memory (its long-run variance), on a step grid with holes.

Method. With ``n`` present samples at grid positions ``i`` and the memory model's
autocorrelation ``rho`` (:mod:`.memory`), ``Var(mean) = sigma^2 Q / n^2`` with
``Q = sum_ij rho_|i-j|`` exactly, for any pattern of holes (Anderson, *The Statistical
Analysis of Time Series*, 1971, sec. 8.2: the variance of a linear form of a stationary
series). For a full grid and ``n >> tau``, ``Q / n -> tau`` and this is the long-run
variance ``sigma^2 tau / n`` (for AR(1): ``sigma_e^2 / (1 - phi)^2 / n``). Working on
positions of the time grid, not on sample counts, makes every stretch of time weigh
by its length: a hole does not pull distant samples together.

Scale. ``sigma^2`` comes from the history when the memory model was fitted to history
and the window's own scale is consistent with it (two-sided F test at
:data:`SCALE_TEST_LEVEL`; the history has hundreds of effective dof, the window a few
dozen); otherwise from the side itself, ``SS / (n - Q/n)`` (unbiased under the model;
the plain sample variance is biased low by ``Q/n^2`` relative), with the
Satterthwaite degrees of freedom of :func:`.memory.scale_dof`. Taking the memory from
history and testing the scale follows the issue's design; its effect on coverage is
measured in bench/bench_calibration.py.

Effective sample size: ``n_eff = n^2 / Q`` (independent samples worth of information).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from obsctl.baselining.statistics import distributions as special
from obsctl.baselining.statistics.memory import (
    MemoryModel,
    grid_index,
    quadratic_forms,
    scale_dof,
)

#: Two-sided level of the test that the side's scale agrees with the history's.
SCALE_TEST_LEVEL = 0.05


@dataclass(frozen=True)
class Side:
    """A side's mean and the variance of that mean.

    Attributes:
        mean: mean of the present samples (signal unit).
        var_mean: variance of ``mean`` (unit squared); NaN when the window is shorter
            than the memory allows (``n_eff <= 1``).
        dof: degrees of freedom of ``var_mean`` (inf: scale known).
        n: present samples; n_eff: ``n^2 / Q``; span_seconds: grid length x step.
        sd: the scale ``sigma`` used; scale_source: ``history`` or ``own``.
        own_sd: the side's own corrected scale (NaN if undefined).
    """

    mean: float
    var_mean: float
    dof: float
    n: int
    n_eff: float
    span_seconds: float
    sd: float
    scale_source: str
    own_sd: float

    @property
    def se(self) -> float:
        """Standard error of the mean (unit)."""
        return math.sqrt(self.var_mean) if self.var_mean >= 0 else math.nan


def side_estimate(times, values, step_seconds: float, memory: MemoryModel, history_scale: bool = True) -> Side:
    """Mean and variance of the mean of one side.

    Args:
        times: sample times (unix s) on the step grid (holes allowed), increasing.
        values: finite values (signal unit), same length, at least 2.
        step_seconds: the grid step (s).
        memory: the signal's memory model (:func:`.memory.fit_memory`).
        history_scale: allow the memory's (history) scale when consistent.

    Raises:
        ValueError: fewer than 2 samples.
    """
    t = np.asarray(times, dtype=float)
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError("need at least 2 samples")
    idx = grid_index(t, step_seconds)
    lags = int(idx[-1]) + 1
    q, q2 = quadratic_forms(idx, memory.acf_at(lags, step_seconds))
    n = int(x.size)
    mean = float(x.mean())
    denom = n - q / n
    own_var, own_dof = math.nan, 0.0
    if denom > 1e-9:
        own_var = float(((x - mean) ** 2).sum()) / denom
        own_dof = scale_dof(n, q, q2)
    var, dof, source = own_var, own_dof, "own"
    history_ok = history_scale and memory.source == "history" and math.isfinite(memory.dof) and memory.variance > 0
    # The history's scale when the side's own is undefined or agrees with it (F test).
    if history_ok and (own_dof <= 0.5 or not math.isfinite(own_var) or scale_consistent(own_var, own_dof, memory.variance, memory.dof)):
        var, dof, source = memory.variance, memory.dof, "history"
    var_mean = var * q / (n * n) if math.isfinite(var) and own_dof > 0.5 else math.nan
    return Side(mean, var_mean, dof, n, n * n / q, lags * step_seconds, math.sqrt(var) if var >= 0 else math.nan, source,
                math.sqrt(own_var) if own_var >= 0 else math.nan)


def scale_consistent(var_a: float, dof_a: float, var_b: float, dof_b: float, level: float = SCALE_TEST_LEVEL) -> bool:
    """Two-sided F test that two variance estimates share one variance (True: not rejected)."""
    if var_b <= 0:
        return var_a <= 0
    f = var_a / var_b
    # scipy.special's F and chi-square CDFs (the distributions' own, without scipy.stats' per-call overhead).
    cdf = float(special.fdtr(dof_a, dof_b, f)) if math.isfinite(dof_b) else float(special.chdtr(dof_a, f * dof_a))
    return 2 * min(cdf, 1 - cdf) >= level


def full_grid_n_eff(memory: MemoryModel, steps: int, step_seconds: float) -> float:
    """Effective samples ``L^2 / Q(L)`` of a window of ``steps`` grid points without holes."""
    rho = memory.acf_at(steps, step_seconds)
    k = np.arange(1, steps, dtype=float)
    q = steps + 2.0 * float(((steps - k) * rho[1:]).sum())
    return steps * steps / q
