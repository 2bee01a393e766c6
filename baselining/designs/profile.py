"""``profile``: before-after on the signal with its known cycle divided out.

The default design when the signal's history shows a daily or weekly cycle
(:mod:`.knowledge`, learnt at snapshot, so chosen before the window is seen). Each
sample of the baseline and of the window is divided by the cycle's profile at its local
hour (``exp(p_h)``, the mean log offset of that hour of the week or day over the
history), then compared as before-after does: ``mean(W / e^p) / mean(B / e^p) - 1``
(:func:`obsctl.baselining.designs.effect.ratio_of_means_log`, one memory model pooled
over both periods). A weekend or a night in the window then compares with what the
baseline's hours say that weekend or night would have been.

The interval adds the profile's own error: the contrast ``sum_h (w_h - b_h) p_h`` (``w_h``,
``b_h`` the window's and the baseline's shares of hour ``h``) has variance
at most ``s^2 (sum_h |w_h - b_h| / sqrt(n_h))^2`` (Cauchy-Schwarz: the hours' estimates
share the profile's factors, so their covariances are bounded, not assumed 0), ``s^2`` the
residual variance of one clock hour's mean log around the profile and ``n_h`` the
effective cycles behind hour ``h`` (one over its leverage; ``CycleKnowledge.profile_variance``,
``profile_counts``), with Welch-Satterthwaite degrees of freedom. The history is before
the baseline window, so the profile's error is independent of both periods' noise.

Assumptions: the cycle repeats from one period to the next (the profile's level does not
move; a drift between cycles is not removed: ``control`` removes it); the cycle
multiplies the signal (it is divided out on the log scale). A window hour the history
never saw makes the effect undefined (INCONCLUSIVE, saying so). Source: classical
multiplicative decomposition, Hyndman & Athanasopoulos, *Forecasting: Principles and
Practice*, 3rd ed. (2021), sec. 3.4. Calibrated in bench/bench_cycles.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from obsctl.baselining.designs import align, knowledge
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Setting, baseline_and_window
from obsctl.errors import UsageError
from obsctl.records import CycleKnowledge

NAME = "profile"

#: How the effect's interval is reached, as the design's recorded assessment names it.
METHOD = ("profile: the log ratio of the periods' means with the known cycle divided out (delta method) under one AR memory model "
          "and long-run variance, plus the profile's own error, Welch t interval at the look's boundary")


def effect(baseline: Iterable[tuple[float, float]], window: Iterable[tuple[float, float]], cycles: CycleKnowledge | None,
           confidence: float) -> fx.Effect:
    """The profile design's effect (module doc) from the two periods' ``(unix s, value)`` samples.

    Returns:
        :class:`~obsctl.baselining.designs.effect.Effect` with ``context`` ``cycle``
        (``day`` | ``week``) and ``profile_shift`` (what the cycle alone moves the window
        against the baseline, as a ratio); undefined without a known cycle, with fewer than
        :data:`~obsctl.baselining.designs.effect.MIN_SAMPLES` positive samples on a side,
        or with a window hour the history never saw.
    """
    if not knowledge.present(cycles):
        return fx.undefined(NAME, confidence, "no cycle profile stored with the baseline (snapshot it again: the snapshot learns the "
                            "cycles from the signal's history)")
    tb, vb = align.as_arrays(baseline)
    tw, vw = align.as_arrays(window)
    if tw.size == 0 or tb.size == 0:
        return fx.undefined(NAME, confidence, "no samples in the window or the baseline", empty=True)
    kb, kw = vb > 0, vw > 0
    tb, vb, tw, vw = tb[kb] / 1000.0, vb[kb], tw[kw] / 1000.0, vw[kw]
    for name, v in (("baseline", vb), ("window", vw)):
        if v.size < fx.MIN_SAMPLES:
            return fx.undefined(NAME, confidence, f"the {name} has {v.size} positive sample(s), needs at least {fx.MIN_SAMPLES}")
    prof, counts = np.asarray(cycles.profile, float), np.asarray(cycles.profile_counts, float)
    hb = knowledge.hour_bins(tb, cycles.profile_cycle, cycles.timezone)
    hw = knowledge.hour_bins(tw, cycles.profile_cycle, cycles.timezone)
    context = {"cycle": cycles.profile_cycle}
    if (counts[hb] == 0).any() or (counts[hw] == 0).any():
        return fx.undefined(NAME, confidence, f"the {cycles.profile_cycle}'s profile has hours the history never saw that the baseline "
                            "or the window holds: snapshot again once the history covers them", **context)
    ob, ow = prof[hb], prof[hw]
    est = fx.ratio_of_means_log((tb, vb * np.exp(-ob)), (tw, vw * np.exp(-ow)))
    parts = [(est.var, est.dof)]
    if cycles.profile_variance is not None:
        bins = prof.size
        share = np.bincount(hw, minlength=bins) / hw.size - np.bincount(hb, minlength=bins) / hb.size
        used = share != 0
        # The hours' estimates share the profile's factors (a day's level, an hour's shape),
        # so their covariances are not 0: bounded by Cauchy-Schwarz (perfect correlation).
        var_p = float(cycles.profile_variance * np.sum(np.abs(share[used]) / np.sqrt(counts[used])) ** 2)
        parts.append((var_p, cycles.profile_dof or math.inf))
        est = dataclasses.replace(est, var=est.var + var_p, dof=fx.welch_dof(parts))
    context["profile_shift"] = math.expm1(float(ow.mean() - ob.mean()))
    return fx.from_log(NAME, est, confidence, {"baseline": int(vb.size), "window": int(vw.size)},
                       baseline_mean=float(vb.mean()), window_mean=float(vw.mean()), tau_seconds=est.tau_seconds, **context)


def check_start(spec, baseline) -> None:
    """``initiative start``'s check: the baseline's snapshot learnt a cycle from the history.

    Raises:
        UsageError: the baseline holds no cycle profile (naming the designs that need none).
    """
    if not knowledge.present(baseline.cycles):
        raise UsageError(f"--design profile divides out the cycle the snapshot learnt from the signal's history, but baseline {baseline.id} "
                         f"holds none ({knowledge.describe(baseline.cycles)}); use the default design, or --design control or canary")


def plan(ctx: Setting) -> Plan:
    """``verify``'s profile comparison asks for the demand of both periods."""
    return Plan(loads=baseline_and_window(ctx.baseline, ctx.start, ctx.end))


def branch(ctx: Setting, got: Gathered) -> Branch:
    """The window against the baseline with the known cycle divided out; refused when a
    cycle the history cannot rule out has phases in the window the baseline lacks."""
    b = ctx.baseline
    cycles = getattr(b, "cycles", None)
    found = effect(b.samples, ctx.window_samples, cycles, ctx.level)
    tb = knowledge.baseline_instants(b)
    tw = np.fromiter((t for t, _ in ctx.window_samples), float)
    check = knowledge.phase_check(cycles, tb, tw, ctx.start, b.window.end.timestamp())
    notes = [knowledge.describe(cycles)]
    shift = found.context.get("profile_shift")
    if isinstance(shift, float):
        notes.append(f"profile: the {found.context['cycle']}'s cycle alone moves the window {shift * 100:+.1f} % against the "
                     "baseline's hours; divided out of both")
    return Branch(found, tuple(got.loads), notes, cycle=check)


DESIGN = Design(NAME, plan, branch, effect, method=METHOD, check_start=check_start)
