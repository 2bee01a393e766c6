"""The planner for each design: how the compared windows add up (issue 9).

The statistics package's planner (:func:`obsctl.baselining.statistics.planner.plan`)
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

from obsctl.baselining import planner
from obsctl.baselining.statistics import planner as stats_planner
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.timeutil import parse_duration

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


def design_plan(spec, baseline, effect: float, design: str, traffic_share: float = 0.5) -> stats_planner.Plan:
    """The plan for ``effect`` under ``design`` from ``baseline`` (the treated class's current one).

    Raises:
        UsageError: as :func:`obsctl.baselining.planner.baseline_plan`.
    """
    if design in ("before-after", "seasonal"):
        return planner.baseline_plan(spec, baseline, effect)
    memory = planner.memory_for(baseline)
    if memory is None or len(baseline.samples) < 2 or effect == 0:
        return planner.baseline_plan(spec, baseline, effect)  # raises its readable UsageError
    side = side_estimate([t for t, _ in baseline.samples], [v for _, v in baseline.samples], baseline.window.step_seconds, memory)
    fw, fb = factors(design, traffic_share)
    # The planner reads the window's relative variance from side.sd and the baseline's from var_mean.
    side = dataclasses.replace(side, sd=side.sd * fw**0.5, var_mean=side.var_mean * fb)
    cfg = spec.verification
    return stats_planner.plan(memory, side, baseline.window.step_seconds, effect, cfg.confidence, cfg.min_effect_ratio,
                              parse_duration(cfg.window, "verification.window"), power=cfg.power, looks=cfg.planned_looks)
