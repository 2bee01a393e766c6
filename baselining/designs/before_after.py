"""``before-after``: the window against the stored baseline (the default design).

The effect is ``mean_after / mean_before - 1`` (:func:`obsctl.baselining.designs.effect.ratio_of_means_log`).
It confounds the change with anything else that moved between the periods; the checks
that say so live beside it: a daily or weekly cycle in the baseline
(:mod:`obsctl.baselining.designs.cycle`), a demand change on an unsaturated class
(:mod:`.demand`), a mix shift (:mod:`.mix`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from obsctl.baselining.designs import align, cycle, knowledge
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Setting, baseline_and_window

NAME = "before-after"

#: How the effect's interval is reached, as the design's recorded assessment names it.
METHOD = ("before-after: the log of each period's mean (delta method) under one AR memory model and long-run variance, "
          "Welch t interval at the look's boundary")


def effect(before: Iterable[tuple[float, float]], after: Iterable[tuple[float, float]], confidence: float,
           history: fx.Series | None = None) -> fx.Effect:
    """``after / before - 1`` with its interval, from the two periods' positive samples.

    ``history``: optional ``(seconds, values)`` of the signal before the baseline, for the
    memory (else pooled over the two periods).

    Returns:
        :class:`~obsctl.baselining.designs.effect.Effect`; undefined when a side has fewer
        than :data:`~obsctl.baselining.designs.effect.MIN_SAMPLES` samples, or a value <= 0
        (a ratio of means of a signal that can be 0 or negative has no log).
    """
    tb, vb = align.as_arrays(before)
    ta, va = align.as_arrays(after)
    for name, v in (("baseline", vb), ("window", va)):
        if v.size < fx.MIN_SAMPLES:
            return fx.undefined(NAME, confidence, f"the {name} has {v.size} sample(s), needs at least {fx.MIN_SAMPLES}")
        if v.mean() <= 0:
            return fx.undefined(NAME, confidence, f"the {name}'s mean is {v.mean():.6g}: a ratio of means needs positive means")
    est = fx.ratio_of_means_log((tb / 1000.0, vb), (ta / 1000.0, va), history)
    return fx.from_log(NAME, est, confidence, {"baseline": int(vb.size), "window": int(va.size)},
                       baseline_mean=float(vb.mean()), window_mean=float(va.mean()), tau_seconds=est.tau_seconds)


def plan(ctx: Setting) -> Plan:
    """``verify``'s before-after asks for the demand of both periods and, when the spec
    names a mix label, the rate/mix decomposition on the first one."""
    mix_labels = ctx.spec.comparison.for_class(ctx.wc.name).mix
    return Plan(loads=baseline_and_window(ctx.baseline, ctx.start, ctx.end), mix=mix_labels[0] if mix_labels else None)


def branch(ctx: Setting, got: Gathered) -> Branch:
    """``verify``'s before-after: no effect of its own (the statistics package's estimate
    stands), but the checks of what it cannot remove: the baseline's own cycle (stored at
    initiative start), the demand of both periods, and a mix decomposition when the spec
    names a mix label."""
    baseline, initiative = ctx.baseline, ctx.initiative
    stored = initiative.baseline_cycle if baseline.id == initiative.baseline_id else None
    span = (baseline.window.end - baseline.window.start).total_seconds()
    found_cycle = cycle.detect(baseline.samples, ctx.spec.verification.min_effect_ratio, stored, span)
    # What the signal's history says (learnt at snapshot): a known cycle this design does
    # not remove, or an unknown one whose phases the window holds beyond the baseline's.
    known = getattr(baseline, "cycles", None)
    if not found_cycle.detected:
        tb = knowledge.baseline_instants(baseline)
        tw = np.fromiter((t for t, _ in ctx.window_samples), float)
        found_cycle = (knowledge.cycle_check(known, False, "profile")
                       or knowledge.phase_check(known, tb, tw, ctx.start, baseline.window.end.timestamp()) or found_cycle)
    notes = [got.mix_note] if got.mix_note else []
    if known is not None:
        notes.append(knowledge.describe(known))
    return Branch(None, tuple(got.loads), notes, cycle=found_cycle, mix=got.mix)


DESIGN = Design(NAME, plan, branch, effect, own_baseline=True, cycle_checked=True, needs_samples=False, method=METHOD)
