"""``obsctl plan`` and the planned window of an initiative.

From a class x signal's current baseline (its memory model and scale,
docs/verification.md) :func:`obsctl.baselining.statistics.power.plan` gives the window
needed to detect an effect with ``verification.power`` at ``verification.confidence``
(on the confidence sequence: valid at any number of looks), the smallest effect the default window can
detect, and the window that reaches NO_CHANGE at ``min_effect_ratio``.

**Never shorter than verify accepts.** A query with a range selector (``rate(x[5m])``)
or a subquery averages its input over that range, so samples closer than the range share
input: the signal's memory is at least about the range, whatever a fit at a coarser
history step or on a quiet stretch found. :func:`memory_for` raises the memory to an AR(1)
whose integrated time is the query's longest range (:func:`range_floor`), and every window
the plan gives is at least the shortest window with the minimum effective samples under it
and at least the range itself (:func:`floored`): the plan never promises a window that
``verify``'s too-short rule would refuse for the same baseline.

An initiative's **planned length** (the end of its cumulative looks) is
``max(verification.window, planner window for its --expected-impact)`` plus the change's
transition (the primary's look-back, :func:`transition_seconds`: ``verify`` judges the
window after it, :mod:`obsctl.baselining.measure.transition`; replicas restarted in the
rollout can trim more, which the plan cannot know); it is a pure
function of the stored baseline and the spec, so it is fixed when the initiative
starts (``initiative start`` prints it) and every ``verify`` recomputes the same value.
"""

from __future__ import annotations

import dataclasses
import math
import re

from obsctl.baselining.statistics import power as stats_planner
from obsctl.baselining.statistics.lrv import side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.durations import parse_duration
from obsctl.errors import SpecError, UsageError
from obsctl.records import Baseline, Initiative
from obsctl.rules.lookback import signal_lookback
from obsctl.spec import Spec

#: A range selector ``[5m]`` or a subquery's range ``[1h:1m]`` (group 1: the range).
_RANGE = re.compile(r"\[\s*([0-9][0-9A-Za-z]*)\s*(?::[^\]]*)?\]")
#: PromQL string literals ("...", '...', `...`): a label value may hold ``[5m]``.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def longest_range_seconds(query: str) -> float:
    """The longest range selector or subquery range in PromQL ``query`` (s); 0 without one.

    ``sum(rate(a[5m])) / sum(rate(b[1m]))`` -> 300.0; ``max_over_time(x[1h:1m])`` -> 3600.0.
    Ranges inside string literals do not count; one that is not a Prometheus duration is skipped.
    """
    longest = 0.0
    for match in _RANGE.finditer(_STRING.sub('""', query)):
        try:
            longest = max(longest, parse_duration(match.group(1), "range"))
        except UsageError:
            continue
    return longest


def range_floor(memory: MemoryModel, range_seconds: float, step_seconds: float) -> MemoryModel:
    """``memory``, or an AR(1) whose integrated time is ``range_seconds`` when that is longer.

    A moving average of independent increments over ``r`` has an integrated
    autocorrelation time of ``r``; the AR(1) at ``step_seconds`` with
    ``phi = (T - 1) / (T + 1)``, ``T = r / step_seconds`` steps, has the same
    (``(1 + phi) / (1 - phi) = T``). Variance, mean, samples, span, source and dof are kept.
    """
    steps = range_seconds / step_seconds
    if steps <= 1 or memory.tau_seconds >= range_seconds:
        return memory
    phi = (steps - 1) / (steps + 1)
    return MemoryModel(step_seconds, (phi,), (1.0, phi), memory.variance, memory.mean, memory.samples, memory.span_seconds,
                       memory.source, memory.dof)


def memory_for(baseline: Baseline) -> MemoryModel | None:
    """The memory the plan assumes for ``baseline``: its stored model (for baselines stored
    without one, fitted to its samples: ``windows``), at least the memory of the query's
    longest range (:func:`range_floor`)."""
    step = baseline.window.step_seconds
    if baseline.memory is not None:
        memory = MemoryModel.from_dict(baseline.memory.model_dump())
    elif len(baseline.samples) >= 20:
        memory = fit_memory([t for t, _ in baseline.samples], [v for _, v in baseline.samples], step, source="windows")
    else:
        return None
    return range_floor(memory, longest_range_seconds(baseline.query), step)


def floored(plan: stats_planner.Plan, baseline: Baseline) -> stats_planner.Plan:
    """``plan`` with every window at least the shortest one ``verify`` accepts: the window
    with the minimum effective samples (``plan.min_window_seconds``) and the query's
    longest range (:func:`longest_range_seconds`); None (not reachable) stays None."""
    floor = max(plan.min_window_seconds or 0.0, longest_range_seconds(baseline.query))
    at_least = lambda s: None if s is None else max(s, floor)  # noqa: E731
    return dataclasses.replace(plan, window_seconds=at_least(plan.window_seconds), min_window_seconds=at_least(plan.min_window_seconds),
                               no_change_window_seconds=at_least(plan.no_change_window_seconds),
                               no_change_equal_seconds=at_least(plan.no_change_equal_seconds))


#: Largest relative effect planned for (+10,000 %): beyond it the window's variance under
#: ``(1 + effect)^2`` scaling overflows, and no real initiative expects it.
MAX_EFFECT = 100.0


def check_effect(effect: float, flag: str) -> None:
    """Refuse an effect that is 0, not finite, a fall of 100 % or more, or above :data:`MAX_EFFECT`.

    Raises:
        UsageError: one line naming ``flag``.
    """
    if not (math.isfinite(effect) and -1 < effect <= MAX_EFFECT) or effect == 0:
        raise UsageError(f"{flag} {effect!r}: give a relative effect other than 0, above -1 and at most {MAX_EFFECT:g} "
                         "(e.g. 0.05 for +5 %)")


def baseline_plan(spec: Spec, baseline: Baseline, effect: float) -> stats_planner.Plan:
    """The plan for ``effect`` (ratio, e.g. 0.05) against ``baseline``.

    Raises:
        UsageError: the baseline has too few samples, a mean of 0, or the effect is 0 / not finite.
    """
    check_effect(effect, "--effect")
    memory = memory_for(baseline)
    if memory is None or len(baseline.samples) < 2:
        raise UsageError(f"baseline {baseline.id} has {len(baseline.samples)} samples: too few to plan from; re-snapshot it")
    step = baseline.window.step_seconds
    side = side_estimate([t for t, _ in baseline.samples], [v for _, v in baseline.samples], step, memory)
    if side.mean == 0 or not math.isfinite(side.var_mean):
        raise UsageError(f"baseline {baseline.id}: mean 0 or too short for its memory: a relative effect cannot be planned; re-snapshot it longer")
    cfg = spec.verification
    request = stats_planner.PlanRequest(effect, cfg.confidence, cfg.min_effect_ratio, parse_duration(cfg.window, "verification.window"),
                                        power=cfg.power)
    plan = stats_planner.plan(memory, side, step, request)
    return floored(plan, baseline)


def transition_seconds(spec: Spec, initiative: Initiative, baseline: Baseline | None) -> float:
    """The transition the planned length adds (s): the look-back of the primary's PromQL
    through the spec's recording rules (:func:`obsctl.rules.lookback.signal_lookback`),
    which ``verify`` excludes from the judged window (:mod:`obsctl.baselining.measure.transition`)."""
    query = baseline.query if baseline is not None else spec.query_for(initiative.primary_signal, initiative.workload_class)
    return signal_lookback(spec, query).seconds


def planned_seconds(spec: Spec, initiative: Initiative, baseline: Baseline | None) -> float:
    """The initiative's planned length (s): see the module doc; the judged window
    (``verification.window`` or the planner's) plus the change's transition (:func:`transition_seconds`)."""
    default = parse_duration(spec.verification.window, "verification.window")
    if initiative.planned_window_seconds:
        return initiative.planned_window_seconds
    try:
        transition = transition_seconds(spec, initiative, baseline)
    except (SpecError, UsageError):  # a signal or class the spec no longer has: no look-back known
        transition = 0.0
    if baseline is None or not initiative.expected_impact_ratio:
        return default + transition
    try:
        plan = baseline_plan(spec, baseline, initiative.expected_impact_ratio)
    except UsageError:
        return default + transition
    return (max(default, plan.window_seconds) if plan.window_seconds else default) + transition


