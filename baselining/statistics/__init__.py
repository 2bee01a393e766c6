"""Dependence-robust statistics of the loop, one concern per module.

``memory``      the signal's memory: an AR(p) model fitted to history (integrated
                autocorrelation time, the autocorrelation function at any lag).
``lrv``         one side (baseline or window): its mean, the variance of that mean
                under the memory model on a step grid with holes, effective sample
                size and degrees of freedom.
``ratio``       the relative change of two sides: Fieller interval, log-ratio estimate.
``sequential``  Lan-DeMets O'Brien-Fleming-type alpha spending over repeated looks.
``equivalence`` the decision rules: superiority, equivalence (TOST), non-inferiority.
``planner``     window lengths for a given power, smallest detectable effect.
``verdict``     the verdict of one signal, read top to bottom like docs/verification.md.

The functional API other designs build on (control, canary, seasonal):
``side_estimate(times, values, step, memory) -> Side`` and
``estimate_ratio(baseline_side, window_side) -> RatioEstimate`` (point, se, dof,
``interval(confidence)``), ``estimate_log_ratio(a, b) -> Estimate``.
"""

from obsctl.baselining.statistics.lrv import Side, side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.baselining.statistics.ratio import (
    Estimate,
    RatioEstimate,
    estimate_log_ratio,
    estimate_ratio,
)

__all__ = ["Estimate", "MemoryModel", "RatioEstimate", "Side", "estimate_log_ratio", "estimate_ratio", "fit_memory", "side_estimate"]
