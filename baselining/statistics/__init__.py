"""Dependence-robust statistics of the loop, one concern per module.

``memory``      the signal's memory: an AR(p) model fitted to history (integrated
                autocorrelation time, the autocorrelation function at any lag).
``lrv``         one side (baseline or window): its mean, the variance of that mean
                under the memory model on a step grid with holes, effective sample
                size and degrees of freedom.
``ratio``       the relative change of two sides: Fieller interval, log-ratio estimate.
``anytime``     one boundary for every cumulative look at a change (a confidence sequence).
``decision``    THE decision rule (superiority, equivalence by TOST, non-inferiority) on
                one :class:`~.decision.Estimate`; every design and guard uses it.
``summary``     the stored summary of a sample series (mean, percentiles, batch means).
``power``       window lengths for a given power, smallest detectable effect.
``comparison``  a window against its baseline: sides, memory, look, Fieller interval,
                then :func:`.decision.decide`.
``distributions`` the distribution functions (scipy.special, imported lazily).

Nothing here imports the loop above it (records and formatting from the core only);
``make lint`` enforces it with an import-linter contract.

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
