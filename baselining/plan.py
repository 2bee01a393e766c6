"""``obsctl plan`` and the planned window of an initiative.

From a class x signal's current baseline (its memory model and scale,
docs/verification.md) :func:`obsctl.baselining.statistics.power.plan` gives the window
needed to detect an effect with ``verification.power`` at ``verification.confidence``
over ``verification.planned_looks`` looks, the smallest effect the default window can
detect, and the window that reaches NO_CHANGE at ``min_effect_ratio``.

An initiative's **planned length** (the end of its cumulative looks) is
``max(verification.window, planner window for its --expected-impact)``; it is a pure
function of the stored baseline and the spec, so it is fixed when the initiative
starts (``initiative start`` prints it) and every ``verify`` recomputes the same value.
"""

from __future__ import annotations

import math

from obsctl.baselining.statistics import power as stats_planner
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.durations import parse_duration
from obsctl.errors import UsageError
from obsctl.records import Baseline, Initiative
from obsctl.spec import Spec


def memory_for(baseline: Baseline) -> MemoryModel | None:
    """The baseline's memory model; for baselines stored without one, fitted to its samples (``windows``)."""
    if baseline.memory is not None:
        return MemoryModel.from_dict(baseline.memory.model_dump())
    if len(baseline.samples) >= 20:
        return fit_memory([t for t, _ in baseline.samples], [v for _, v in baseline.samples], baseline.window.step_seconds, source="windows")
    return None


def baseline_plan(spec: Spec, baseline: Baseline, effect: float) -> stats_planner.Plan:
    """The plan for ``effect`` (ratio, e.g. 0.05) against ``baseline``.

    Raises:
        UsageError: the baseline has too few samples, a mean of 0, or the effect is 0 / not finite.
    """
    if not math.isfinite(effect) or effect == 0 or effect <= -1:
        raise UsageError(f"--effect {effect!r}: give a finite relative effect other than 0, e.g. 0.05 for +5 %")
    memory = memory_for(baseline)
    if memory is None or len(baseline.samples) < 2:
        raise UsageError(f"baseline {baseline.id} has {len(baseline.samples)} samples: too few to plan from; re-snapshot it")
    step = baseline.window.step_seconds
    side = side_estimate([t for t, _ in baseline.samples], [v for _, v in baseline.samples], step, memory)
    if side.mean == 0 or not math.isfinite(side.var_mean):
        raise UsageError(f"baseline {baseline.id}: mean 0 or too short for its memory: a relative effect cannot be planned; re-snapshot it longer")
    cfg = spec.verification
    return stats_planner.plan(memory, side, step, effect, cfg.confidence, cfg.min_effect_ratio, parse_duration(cfg.window, "verification.window"),
                              power=cfg.power, looks=cfg.planned_looks)


def planned_seconds(spec: Spec, initiative: Initiative, baseline: Baseline | None) -> float:
    """The initiative's planned length (s): see the module doc."""
    default = parse_duration(spec.verification.window, "verification.window")
    if initiative.planned_window_seconds:
        return initiative.planned_window_seconds
    if baseline is None or not initiative.expected_impact_ratio:
        return default
    try:
        plan = baseline_plan(spec, baseline, initiative.expected_impact_ratio)
    except UsageError:
        return default
    return max(default, plan.window_seconds) if plan.window_seconds else default


