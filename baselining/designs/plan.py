"""The planner for each design: how the compared windows add up.

The statistics package's planner (:func:`obsctl.baselining.statistics.power.plan`)
takes the baseline's memory model and scale and finds the window that detects an
effect with the spec's power over the planned looks. What differs by design is which
variances add up in the log effect:

=============  =======================================================================
before-after   baseline mean + window mean (the planner as it is)
seasonal       the same: the baseline's same hours + the window
control        four windows: treated and control, baseline period and window; the
               treated/control log ratio is planned with twice the signal's relative
               variance (no credit for noise the two classes share: conservative)
canary         no baseline period; the two groups split the traffic, treatment share
               ``p`` (spec ``variant.traffic_share``): a group doing a share ``p`` of the
               class's work has ``1/p`` of its relative variance, so the log ratio has
               ``1/p + 1/(1-p)`` times it (4x at 50/50)
=============  =======================================================================

Assumption: the signal's noise comes from the work each side does (a group with half the
traffic is twice as noisy in relative terms); shared noise would only make the designs
more precise than planned.
"""

from __future__ import annotations

import dataclasses

from obsctl.baselining import plan as planner
from obsctl.baselining.statistics import power as stats_planner
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.durations import parse_duration
from obsctl.errors import UsageError


def factors(design: str, traffic_share: float = 0.5) -> tuple[float, float]:
    """``(window variance factor, baseline variance factor)`` of a design vs before-after."""
    if design == "control":
        return 2.0, 2.0
    if design == "canary":
        if not 0 < traffic_share < 1:
            raise UsageError(f"variant.traffic_share {traffic_share!r} must be between 0 and 1")
        return 1 / traffic_share + 1 / (1 - traffic_share), 0.0
    return 1.0, 1.0


def _log_ratio_plan(spec, baseline, control_baseline, effect: float) -> stats_planner.Plan | None:
    # control with the control class's baseline over the same instants: plan on the
    # treated/control log ratio itself (its own memory and scale: a cycle both classes
    # share is not memory here). None when the two baselines do not share 20 instants.
    from obsctl.baselining.designs import align
    from obsctl.baselining.statistics.memory import fit_memory

    ms, t, c = align.matched(baseline.samples, control_baseline.samples)
    (times, d), _ = align.log_ratio(ms, t, c)
    if d.size < 20:
        return None
    step = baseline.window.step_seconds
    memory = fit_memory(times, d, step, source="windows")
    if memory is None:
        return None
    # The query's range smooths both classes alike: at least its memory (planner.range_floor).
    memory = planner.range_floor(memory, planner.longest_range_seconds(baseline.query), step)
    side = side_estimate(times, d, step, memory, history_scale=False)
    # The planner reads relative variances (sd / mean): on a log series they are absolute, so mean 1.
    side = dataclasses.replace(side, mean=1.0)
    cfg = spec.verification
    plan = stats_planner.plan(memory, side, step, stats_planner.PlanRequest(effect, cfg.confidence, cfg.min_effect_ratio,
                                                                            parse_duration(cfg.window, "verification.window"), power=cfg.power))
    return planner.floored(plan, baseline)


def design_plan(spec, baseline, effect: float, design: str, traffic_share: float = 0.5, control_baseline=None) -> stats_planner.Plan:
    """The plan for ``effect`` under ``design`` from ``baseline`` (the treated class's current one).

    ``control_baseline``: for ``control``, the control class's baseline of the same signal;
    when it covers the same instants the plan is made on the treated/control log ratio
    itself (its memory and scale), else by the variance factors of :func:`factors`.

    Raises:
        UsageError: as :func:`obsctl.baselining.plan.baseline_plan`.
    """
    if design in ("before-after", "seasonal"):
        return planner.baseline_plan(spec, baseline, effect)
    if design == "control" and control_baseline is not None and effect != 0:
        p = _log_ratio_plan(spec, baseline, control_baseline, effect)
        if p is not None:
            return p
    memory = planner.memory_for(baseline)
    if memory is None or len(baseline.samples) < 2 or effect == 0:
        return planner.baseline_plan(spec, baseline, effect)  # raises its readable UsageError
    side = side_estimate([t for t, _ in baseline.samples], [v for _, v in baseline.samples], baseline.window.step_seconds, memory)
    fw, fb = factors(design, traffic_share)
    # The planner reads the window's relative variance from side.sd and the baseline's from var_mean.
    side = dataclasses.replace(side, sd=side.sd * fw**0.5, var_mean=side.var_mean * fb)
    cfg = spec.verification
    plan = stats_planner.plan(memory, side, baseline.window.step_seconds,
                              stats_planner.PlanRequest(effect, cfg.confidence, cfg.min_effect_ratio,
                                                        parse_duration(cfg.window, "verification.window"), power=cfg.power))
    return planner.floored(plan, baseline)
