"""``control``: a control class (or control replicas) the change does not touch.

The effect is ``(T_after / T_before) / (C_after / C_before) - 1``, estimated as a
difference in differences on logs over time-aligned samples: in each period the
treated/control log ratio ``log T_t - log C_t`` at the same instants, then the change
of its mean from the baseline period to the window. A daily cycle, a demand drift or a
node-wide slowdown that moves both classes by the same factor cancels; the two periods'
means are independent, so their variances add (Welch dof).

Assumptions (parallel trends, on the log scale): without the change, the treated/control
ratio would have stayed where it was; the control is not touched by the change (the
ledger refuses an initiative on a class that is another open initiative's control).
Source: Angrist & Pischke, *Mostly Harmless Econometrics* (2009), ch. 5.2.
"""

from __future__ import annotations

from collections.abc import Iterable

from obsctl.baselining.designs import align
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Query, Setting, baseline_and_window, history

NAME = "control"

#: How the effect's interval is reached, as the design's recorded assessment names it.
METHOD = ("control: the difference in differences of log T_t - log C_t (window minus baseline period) under one AR memory model "
          "and long-run variance, Welch t interval at the look's boundary")

Samples = Iterable[tuple[float, float]]


def effect(treated_before: Samples, control_before: Samples, treated_after: Samples, control_after: Samples, confidence: float,
           history: fx.Series | None = None) -> fx.Effect:
    """The difference-in-differences effect with its interval.

    Args:
        treated_before, control_before: the baseline period's samples of the treated and the control class.
        treated_after, control_after: the verification window's samples (same step).
        confidence: two-sided level.
        history: optional ``(seconds, log T - log C)`` before the baseline period, for the
            memory; else the memory is pooled over the two periods.

    Returns:
        :class:`~obsctl.baselining.designs.effect.Effect` whose ``context`` holds the
        control's own movement ``control_change`` (C_after / C_before - 1) and the treated
        class's raw ``treated_change``; undefined with too few matched positive pairs in a period.
    """
    mb, tb, cb = align.matched(treated_before, control_before)
    ma, ta, ca = align.matched(treated_after, control_after)
    db, drop_b = align.log_ratio(mb, tb, cb)
    da, drop_a = align.log_ratio(ma, ta, ca)
    context = {
        "control_change": float(ca.mean() / cb.mean() - 1) if ca.size and cb.size and cb.mean() != 0 else None,
        "treated_change": float(ta.mean() / tb.mean() - 1) if ta.size and tb.size and tb.mean() != 0 else None,
        "dropped_non_positive": drop_a + drop_b,
    }
    for name, d in (("baseline period", db), ("window", da)):
        if d[1].size < fx.MIN_SAMPLES:
            return fx.undefined(NAME, confidence, f"the {name} has {d[1].size} instant(s) where the treated and the control class both "
                                f"have a positive value, needs at least {fx.MIN_SAMPLES}", **context)
    est = fx.two_period_log(db, da, history)
    return fx.from_log(NAME, est, confidence, {"baseline": int(db[1].size), "window": int(da[1].size)},
                       tau_seconds=est.tau_seconds, **context)


def plan(ctx: Setting) -> Plan:
    """``verify``'s difference in differences asks for: the treated class over the baseline
    period (only when the stored baseline has no samples), the two classes' stretch before
    the baseline for the memory (at the baseline's own step), the control class over the
    baseline period and the window, and the demand of both periods."""
    cwc = ctx.spec.workload_class(ctx.initiative.control_class)
    q_t, q_c = ctx.baseline.query, ctx.spec.query_for(ctx.signal, cwc)
    b = ctx.baseline.window
    bs, be, b_step = b.start.timestamp(), b.end.timestamp(), b.step_seconds
    queries = [] if ctx.baseline.samples else [Query("treated_before", q_t, bs, be, b_step)]
    queries += [history("treated_history", q_t, ctx, bs, b_step), history("control_history", q_c, ctx, bs, b_step),
                Query("control_before", q_c, bs, be, b_step), Query("control_after", q_c, ctx.start, ctx.end, ctx.step)]
    return Plan(tuple(queries), baseline_and_window(ctx.baseline, ctx.start, ctx.end))


def branch(ctx: Setting, got: Gathered) -> Branch:
    """The difference in differences from the gathered series; the two classes' log-ratio
    before the baseline lends the memory when it holds at least 20 instants."""
    s = got.series
    treated_before = ctx.baseline.samples or s["treated_before"]
    ms, t, c = align.matched(s["treated_history"], s["control_history"])
    d, _ = align.log_ratio(ms, t, c)
    found = effect(treated_before, s["control_before"], ctx.window_samples, s["control_after"], ctx.level,
                   history=d if d[1].size >= 20 else None)
    own = {"control": {"class": ctx.initiative.control_class, "change": found.context.get("control_change"),
                       "treated_change": found.context.get("treated_change")}}
    return Branch(found, tuple(got.loads), [f"control class {ctx.initiative.control_class}"], context=own)


DESIGN = Design(NAME, plan, branch, effect, planned=True, needs_control=True, method=METHOD)
