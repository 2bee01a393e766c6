"""The one call from the comparison designs into the statistics package.

Every design reduces its comparison to means of **log series** on the step grid (the
treated/control log ratio at the same instants, or one period's level) and needs the
variance of each mean under the series' autocorrelation, with degrees of freedom for
the t quantile. That estimator lives in :mod:`obsctl.baselining.statistics` (its memory
model :func:`~obsctl.baselining.statistics.memory.fit_memory` and
:func:`~obsctl.baselining.statistics.lrv.side_estimate`); this module only adapts it, so
there is one estimator in the code base:

* the memory is fitted to ``history`` when the design has a stretch of the same series
  outside the compared periods (``source="history"``), else pooled over the compared
  periods themselves (``pooled_memory``: a lower bound on long memory);
* a history that is a *related* series (the control group's own signal for a canary,
  the baseline around its cycle for seasonal) lends only its memory, not its scale;
* :func:`side` returns the mean, the variance of the mean and its dof; a variance that
  is NaN means the stretch is too short for the memory (fewer than one independent
  sample's worth): the designs then report the effect as undefined, "window too short".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from obsctl.baselining.statistics import memory as _memory
from obsctl.baselining.statistics.lrv import side_estimate


@dataclass(frozen=True)
class SideFigures:
    """Mean of a series, variance of that mean, its dof and the effective sample size."""

    mean: float
    var_mean: float
    dof: float
    n_eff: float
    tau_seconds: float


def step_of(times: np.ndarray) -> float:
    """The grid step of sample times (s): the smallest positive spacing (>= 1 ms)."""
    d = np.diff(np.asarray(times, float))
    d = d[d > 1e-3]
    return float(d.min()) if d.size else 1.0


def memory(stretches: list[tuple[np.ndarray, np.ndarray]], step: float, history: tuple[np.ndarray, np.ndarray] | None = None):
    """The memory model: fitted to ``history`` when given (and long enough), else pooled over ``stretches``."""
    if history is not None and len(history[0]) >= 20:
        model = _memory.fit_memory(np.asarray(history[0], float), np.asarray(history[1], float), step, source="history")
        if model is not None:
            return model
    return _memory.pooled_memory([(np.asarray(t, float), np.asarray(v, float)) for t, v in stretches], step)


def side(times: np.ndarray, values: np.ndarray, step: float, model, history_scale: bool = True) -> SideFigures:
    """Mean, variance of the mean and dof of one stretch under ``model`` (None: white noise, n-1 dof).

    ``history_scale``: the history is the same series, so its variance may stand in for
    the stretch's own when consistent (the statistics package's rule); False when the
    history only lends its memory (a related series: the control group's signal, the
    baseline around its cycle)."""
    x = np.asarray(values, float)
    if model is None:
        var = float(x.var(ddof=1)) / x.size if x.size > 1 else float("nan")
        return SideFigures(float(x.mean()), var, float(x.size - 1), float(x.size), step)
    s = side_estimate(np.asarray(times, float), x, step, model, history_scale=history_scale)
    return SideFigures(s.mean, s.var_mean, s.dof, s.n_eff, model.tau_seconds)
