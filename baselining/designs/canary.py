"""``canary``: treated and control replicas of one class side by side in the same window.

The effect is ``T / C - 1``: the mean over the window of ``log T_t - log C_t`` (the two
groups' signal at the same instants), exponentiated. Whatever moves both groups at once
(the hour of day, demand, the node's other load) cancels; no baseline period is needed.
The groups are told apart by one label of the class's series (spec ``variant: {label,
control, treatment}``); the label is used only in the queries.

Assumptions: the traffic is split between the groups at random (so each group sees the
same mix), and the groups' noise beyond the shared part is stationary over the window.
Source: the design of Kayenta / Netflix's canary analysis (Netflix Technology Blog,
"Automated Canary Analysis at Netflix with Kayenta", 2018).
"""

from __future__ import annotations

from collections.abc import Iterable

from obsctl.baselining.designs import align
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Query, Setting, history, with_labels
from obsctl.baselining.designs.cycle import detrended

NAME = "canary"

#: How the effect's interval is reached, as the design's recorded assessment names it.
METHOD = ("canary: the mean of log T_t - log C_t in the window (paired) under an AR memory model and long-run variance, "
          "t interval at the look's boundary")


def effect(treatment: Iterable[tuple[float, float]], control: Iterable[tuple[float, float]], confidence: float,
           history: fx.Series | None = None, related: Iterable[tuple[float, float]] | None = None) -> fx.Effect:
    """The canary effect ``T / C - 1`` with its interval.

    Args:
        treatment, control: ``(unix seconds, value)`` samples of the signal per group, same window and step.
        confidence: two-sided level, e.g. 0.95.
        history: optional ``(seconds, log T - log C)`` of the two groups before the window
            (an A/A stretch), for the memory model.
        related: else, the control group's own ``(unix seconds, value)`` samples before the
            window: their log, detrended (:func:`obsctl.baselining.designs.cycle.detrended`),
            lends its memory (assumption: the treated/control difference forgets no slower
            than the signal itself; shared slow movements cancel in it). Without either,
            the memory is pooled from the window (a lower bound on long memory).

    Returns:
        :class:`~obsctl.baselining.designs.effect.Effect`; undefined (``reason`` set) with
        fewer than :data:`~obsctl.baselining.designs.effect.MIN_SAMPLES` matched positive pairs.
    """
    ts, t, c = align.matched(treatment, control)
    d, dropped = align.log_ratio(ts, t, c)
    context = {"treatment_mean": float(t.mean()) if t.size else None, "control_mean": float(c.mean()) if c.size else None,
               "dropped_non_positive": dropped}
    if d[1].size < fx.MIN_SAMPLES:
        return fx.undefined(NAME, confidence, f"{d[1].size} instant(s) where both the treatment and the control have a positive value, "
                            f"needs at least {fx.MIN_SAMPLES}", **context)
    same = history is not None
    if history is None and related is not None:
        rt, rv = align.as_arrays(related)
        history = detrended(rt / 1000.0, rv)
    est = fx.paired_log(d, history, same_series=same)
    return fx.from_log(NAME, est, confidence, {"window": int(d[1].size)}, tau_seconds=est.tau_seconds, **context)


def _variant(ctx: Setting) -> dict:
    cc = ctx.spec.comparison.for_class(ctx.wc.name)
    return ctx.initiative.variant or (cc.variant.model_dump() if cc.variant else {})


def plan(ctx: Setting) -> Plan:
    """``verify``'s canary asks for the control group over the window and its own earlier
    stretch (which lends the memory), and the demand of the whole class in the window."""
    variant = _variant(ctx)
    q_c = ctx.spec.query_for(ctx.signal, with_labels(ctx.wc, **{variant["label"]: variant["control"]}))
    return Plan((history("related", q_c, ctx, ctx.start), Query("control", q_c, ctx.start, ctx.end, ctx.step)),
                (("window (whole class)", ctx.start, ctx.end),))


def branch(ctx: Setting, got: Gathered) -> Branch:
    """The treatment group as ``verify`` measured it against the control group in the same
    window; both groups share the whole class's demand, so before and after are one."""
    variant = _variant(ctx)
    label = variant["label"]
    found = effect(ctx.window_samples, got.series["control"], ctx.level, related=got.series["related"] or None)
    whole = got.loads[0]
    note = f"canary: {label}={variant['treatment']} vs {label}={variant['control']} in the same window"
    means = (found.context.get("control_mean"), found.context.get("treatment_mean"))
    return Branch(found, (whole, whole), [note], treatment=ctx.window_samples, means=means, context={"variant": ctx.initiative.variant})


def window_query(spec, initiative, baseline) -> str:
    """The treatment group's PromQL: the class's signal with the variant label added to the selector."""
    if initiative.variant:
        v = initiative.variant
        return spec.query_for(initiative.primary_signal, with_labels(spec.workload_class(initiative.workload_class), **{v["label"]: v["treatment"]}))
    return baseline.query


DESIGN = Design(NAME, plan, branch, effect, window_query=window_query, load_periods=None, planned=True, needs_variant=True,
                needs_baseline=False, method=METHOD)
