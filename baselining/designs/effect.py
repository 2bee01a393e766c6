"""One definition of the effect for every comparison design: a ratio, estimated on logs.

=============  ====================================  ===========================================
design         effect (ratio)                        log series judged
=============  ====================================  ===========================================
before-after   after / before - 1                    log of each period's mean (delta method)
seasonal       window / same hours of baseline - 1   log W_t - log mean_k B_{t - k P} (paired)
control        (T_a / T_b) / (C_a / C_b) - 1         log T_t - log C_t, window minus baseline
canary         T / C - 1                             log T_t - log C_t in the window (paired)
=============  ====================================  ===========================================

The effect is ``exp(L) - 1`` with ``L`` the log-scale estimate; its interval is
``exp(L -+ t se) - 1``, ``se^2`` the variance of the mean(s) under autocorrelation from
the statistics package (:mod:`.estimator`, the same estimator as every before-after
verdict) and Welch-Satterthwaite degrees of freedom when two independent periods are
combined (Welch, Biometrika 34, 1947). Logs make the multiplicative confounders shared
by treated and control (a daily cycle, a demand drift) cancel exactly, and put the
interval of a ratio on the scale where it is symmetric. For before-after the log level
of a period is the log of its mean with the delta-method variance ``var(mean)/mean^2``,
so the point estimate is exactly ``mean_after / mean_before - 1``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from obsctl.baselining.designs import estimator
from obsctl.baselining.statistics import distributions as special
from obsctl.durations import format_duration

#: Fewest samples a series needs to be judged (the memory model needs a few lags).
MIN_SAMPLES = 6

Series = tuple[np.ndarray, np.ndarray]  # (unix seconds, values)


@dataclass(frozen=True)
class Effect:
    """The estimated effect of one comparison.

    Attributes:
        design: ``before-after`` | ``seasonal`` | ``control`` | ``canary``.
        ratio: ``exp(log_effect) - 1`` (0.10 = +10 %); None when undefined.
        ci_low, ci_high: the interval of ``ratio`` at ``confidence``; None when undefined.
        log_effect, log_se, dof: the log-scale estimate, its standard error and the t dof.
        samples: samples per side used, e.g. ``{"window": 240, "baseline": 240}``.
        context: design-specific figures for outputs (``control_change``: the control's
            own movement C_after/C_before - 1; ``cycles``: baseline cycles matched,
            ``tau_seconds``: the memory used, ...).
        reason: why the effect is undefined (``""`` when defined).
        empty: undefined because a side has no samples at all (the verdict is then NO_DATA).
        memory_source: where the memory model of the judged log series came from: ``history``
            (a stretch outside the compared periods) or ``windows`` (pooled over the compared
            periods, or white noise when they are too short to fit one: a lower bound); None
            when undefined before any was fitted.
        n_eff: effective samples of each judged log series under that memory, by the keys of
            ``samples`` (``window``; ``baseline`` for a design with a baseline period).
    """

    design: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    log_effect: float | None = None
    log_se: float | None = None
    dof: float | None = None
    samples: dict[str, int] = field(default_factory=dict)
    context: dict[str, float | int | str | None] = field(default_factory=dict)
    reason: str = ""
    empty: bool = False
    memory_source: str | None = None
    n_eff: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class LogEstimate:
    """A log-scale estimate ``L`` with what its variance rests on (the helpers below return it).

    Attributes:
        log_effect: ``L``; var: its variance; dof: Welch-Satterthwaite dof (inf: normal).
        tau_seconds: the memory used (the integrated autocorrelation time, s).
        memory_source: ``history`` | ``windows`` (:attr:`Effect.memory_source`).
        n_eff: effective samples of each judged series, ``{"window": ...}`` or ``{"baseline": ..., "window": ...}``.
    """

    log_effect: float
    var: float
    dof: float
    tau_seconds: float
    memory_source: str = "windows"
    n_eff: dict[str, float] = field(default_factory=dict)


def undefined(design: str, confidence: float, reason: str, samples: dict[str, int] | None = None, *, empty: bool = False,
              **context) -> Effect:
    """An :class:`Effect` with no estimate, saying why; ``empty``: a side has no samples at all (NO_DATA)."""
    return Effect(design, None, None, None, confidence, samples=dict(samples or {}), context=dict(context), reason=reason, empty=empty)


def from_log(design: str, est: LogEstimate, confidence: float, samples: dict[str, int], **context) -> Effect:
    """Build an :class:`Effect` from a log-scale estimate (:class:`LogEstimate`: ``L``, its variance and dof).

    A NaN variance (a stretch shorter than the signal's memory allows) gives an undefined
    effect whose reason names the memory (``context["tau_seconds"]``) and the window.
    """
    log_effect, var, dof = est.log_effect, est.var, est.dof
    if not math.isfinite(var):
        tau = context.get("tau_seconds")
        memory = f"the signal's memory is about {format_duration(tau)}; " if isinstance(tau, (int, float)) and math.isfinite(tau) else ""
        short = undefined(design, confidence, f"window too short: {memory}the compared stretches hold less than one independent sample",
                          samples, **context)
        return dataclasses.replace(short, memory_source=est.memory_source, n_eff=dict(est.n_eff))
    if not (math.isfinite(log_effect) and var >= 0):
        return undefined(design, confidence, "the log-ratio is not finite", samples, **context)
    se = math.sqrt(var)
    q = (1 + confidence) / 2
    t = float(special.ndtri(q)) if not math.isfinite(dof) else float(special.stdtrit(max(dof, 1.0), q))
    return Effect(design, math.expm1(log_effect), math.expm1(log_effect - t * se), math.expm1(log_effect + t * se), confidence,
                  log_effect, se, float(dof), dict(samples), dict(context), memory_source=est.memory_source, n_eff=dict(est.n_eff))


def welch_dof(parts: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite dof of a sum of variances ``[(v, dof)]`` (inf dof: known variance)."""
    total = sum(v for v, _ in parts)
    den = sum(v * v / d for v, d in parts if math.isfinite(d) and d > 0)
    return total * total / den if den > 0 else math.inf


def _source(model) -> str:
    # Where a memory model came from; no model (too few samples to fit one): white noise, a lower bound.
    return model.source if model is not None else "windows"


def paired_log(d: Series, history: Series | None = None, same_series: bool = True) -> LogEstimate:
    """The mean of one log series (e.g. ``log T_t - log C_t``) with the variance of that mean,
    its dof, the memory used and the series' effective samples (key ``window``).

    ``history``: a stretch for the memory model; ``same_series=False`` when it is a related
    series that lends only its memory (:func:`.estimator.side`)."""
    step = estimator.step_of(d[0])
    model = estimator.memory([d], step, history)
    s = estimator.side(d[0], d[1], step, model, history_scale=same_series)
    return LogEstimate(s.mean, s.var_mean, s.dof, s.tau_seconds, _source(model), {"window": s.n_eff})


def _periods_memory(before: Series, after: Series, history: Series | None):
    # One memory model for two periods; pooled over both on one step grid, else (a baseline
    # stored at another step than the window's) fitted to the baseline period alone.
    step_b, step_a = estimator.step_of(before[0]), estimator.step_of(after[0])
    if math.isclose(step_b, step_a, rel_tol=1e-6):
        return (step_b, step_a), estimator.memory([before, after], step_b, history)
    return (step_b, step_a), estimator.memory([before], step_b, history if history is not None else before)


def two_period_log(d_before: Series, d_after: Series, history: Series | None = None) -> LogEstimate:
    """``mean(d_after) - mean(d_before)`` with its variance and Welch dof: independent periods, one memory model."""
    (step_b, step_a), model = _periods_memory(d_before, d_after, history)
    b = estimator.side(d_before[0], d_before[1], step_b, model)
    a = estimator.side(d_after[0], d_after[1], step_a, model)
    return LogEstimate(a.mean - b.mean, a.var_mean + b.var_mean, welch_dof([(a.var_mean, a.dof), (b.var_mean, b.dof)]), b.tau_seconds,
                       _source(model), {"baseline": b.n_eff, "window": a.n_eff})


def ratio_of_means_log(before: Series, after: Series, history: Series | None = None, model=None) -> LogEstimate:
    """``log(mean_after / mean_before)`` of two positive series with its delta-method variance and Welch dof.

    ``model``: a memory model fitted elsewhere (a :class:`~obsctl.baselining.statistics.memory.MemoryModel`
    of the same series, e.g. the profile design's, fitted at snapshot); None: from ``history``
    or pooled over the two periods."""
    if model is None:
        (step_b, step_a), model = _periods_memory(before, after, history)
    else:
        step_b, step_a = estimator.step_of(before[0]), estimator.step_of(after[0])
    b = estimator.side(before[0], before[1], step_b, model)
    a = estimator.side(after[0], after[1], step_a, model)
    rb, ra = b.var_mean / b.mean**2, a.var_mean / a.mean**2
    return LogEstimate(math.log(a.mean / b.mean), ra + rb, welch_dof([(ra, a.dof), (rb, b.dof)]), b.tau_seconds, _source(model),
                       {"baseline": b.n_eff, "window": a.n_eff})
