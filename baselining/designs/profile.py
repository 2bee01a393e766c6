"""``profile``: before-after on the signal with its known cycle divided out.

The default design when the signal's history shows a daily or weekly cycle
(:mod:`.knowledge`, learnt at snapshot, so chosen before the window is seen). Each
sample of the baseline and of the window is divided by the cycle's profile at its local
hour (``exp(p_h)``, the mean log offset of that hour of the week or day over the
history), then compared as before-after does: ``mean(W / e^p) / mean(B / e^p) - 1``
(:func:`obsctl.baselining.designs.effect.ratio_of_means_log`, one memory model for both
periods). A weekend or a night in the window then compares with what the baseline's hours
say that weekend or night would have been.

The memory model is the one the snapshot fitted to the days before the baseline with the
profile divided out (``CycleKnowledge.memory``, :func:`memory_of`; without enough history
to fit it: pooled over the two periods). Neither of the others is honest here: fitted to
the raw history, the cycle reads as long memory; pooled over a one-hour baseline and a
one-hour first look it is a lower bound (an AR fit to 120 samples of a memory of ~10),
which made the first look's interval too narrow with too many dof.

The look boundary (:mod:`obsctl.baselining.statistics.anytime`) rests on this design's own
information time (:func:`min_fraction`: the baseline's variance on the divided series plus
the profile's error at its hours, against one sample's), not on the before-after
comparison of the raw series: there the cycle inflates the baseline's variance (``t_min``
near 0.8 instead of about 0.45), and a window check that refuses the raw window leaves no
``t_min`` at all, so the looks were judged at a level that barely corrects for repeating
them.

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
multiplies the signal (it is divided out on the log scale); the noise left after dividing
it out keeps the memory it had in the days before the baseline (the profile is estimated
on a longer history that includes those days, so their residuals are in-sample: with 16
days the hour means' share of the variance they miss is about 1/16). A window hour the history
never saw makes the effect undefined (INCONCLUSIVE, saying so). Source: classical
multiplicative decomposition, Hyndman & Athanasopoulos, *Forecasting: Principles and
Practice*, 3rd ed. (2021), sec. 3.4; the variance of a mean under an AR memory model
fitted to the deseasonalised series, Brockwell & Davis, *Time Series: Theory and
Methods*, 2nd ed. (1991), sec. 7.1 and 8.1. Calibrated in bench/bench_cycles.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from obsctl.baselining.designs import align, estimator, knowledge
from obsctl.baselining.designs import effect as fx
from obsctl.baselining.designs.branch import Branch, Design, Gathered, Plan, Setting, baseline_and_window
from obsctl.baselining.statistics import anytime
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.baselining.statistics.power import N_EFF_MIN
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
    est = fx.ratio_of_means_log((tb, vb * np.exp(-ob)), (tw, vw * np.exp(-ow)), model=memory_of(cycles))
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


def memory_of(cycles: CycleKnowledge) -> MemoryModel | None:
    """The memory model of the series with the cycle divided out, fitted at snapshot to the
    history before the baseline (``CycleKnowledge.memory``, :func:`.knowledge.divide_out`);
    None without one (too little history to fit it): the model is then pooled over the two
    periods, a lower bound."""
    m = cycles.memory
    if m is None or m.source != "history":
        return None
    return MemoryModel.from_dict(m.model_dump())


def min_fraction(ctx: Setting) -> float | None:
    """The information time ``t_min`` of the profile comparison (the look boundary's, module doc).

    ``V_x / (V_x + s^2 / N_EFF_MIN)`` as :func:`obsctl.baselining.statistics.comparison.min_fraction_of`
    defines it, on the series the design judges: ``V_x`` the relative variance of the
    baseline's mean with the cycle divided out (under :func:`memory_of`, else the baseline's
    own) plus the profile's own error at the baseline's hours, ``s^2`` one sample's relative
    variance. Known from the baseline and its cycles alone (before any window); None when a
    figure is undefined (the before-after comparison's then stands)."""
    cycles = getattr(ctx.baseline, "cycles", None)
    if not knowledge.present(cycles):
        return None
    tb, vb = align.as_arrays(ctx.baseline.samples)
    keep = vb > 0
    tb, vb = tb[keep] / 1000.0, vb[keep]
    prof, counts = np.asarray(cycles.profile, float), np.asarray(cycles.profile_counts, float)
    hb = knowledge.hour_bins(tb, cycles.profile_cycle, cycles.timezone)
    if vb.size < fx.MIN_SAMPLES or (counts[hb] == 0).any():
        return None
    x = vb * np.exp(-prof[hb])
    step = estimator.step_of(tb)
    side = estimator.side(tb, x, step, memory_of(cycles) or estimator.memory([(tb, x)], step))
    rel = side.var_mean / side.mean**2
    var_p = 0.0
    if cycles.profile_variance is not None:
        share = np.bincount(hb, minlength=prof.size) / hb.size
        used = share > 0
        var_p = float(cycles.profile_variance * np.sum(share[used] / np.sqrt(counts[used])) ** 2)
    try:
        return anytime.min_fraction(rel + var_p, rel * side.n_eff / N_EFF_MIN)
    except ValueError:
        return None


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


DESIGN = Design(NAME, plan, branch, effect, method=METHOD, check_start=check_start, min_fraction=min_fraction)
