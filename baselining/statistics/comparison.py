"""The verdict of one signal: a window against its baseline, read like docs/verification.md.

1. NO_DATA: a side has fewer than 2 finite samples.
2. Exact: both sides constant (no sampling error): judged on the change itself
   (:func:`.decision.exact_change`).
3. Memory: the baseline's model fitted to history (:mod:`.memory`); without one, a
   model pooled from the two sides (a lower bound: one window underestimates long memory).
4. Window too short: a side with fewer than ``N_EFF_MIN`` effective samples is
   INCONCLUSIVE, naming the memory, the independent samples it holds and the length
   needed.
5. Interval: Fieller (:mod:`.ratio`) on the two sides' means and long-run variances
   (:mod:`.lrv`) at the look's anytime-valid level (:mod:`.anytime`): one boundary for
   every cumulative window of the change, so every look holds its error at once.
6. Rules: the one decision rule, :func:`.decision.decide`; a guard is a non-inferiority
   test at its share of the family's error (``guard_alpha``, Holm's step-down in the verdict).
7. A window shorter than planned says so in the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from obsctl.baselining.statistics import anytime, assumptions, robust
from obsctl.baselining.statistics.decision import Estimate, decide, exact_change
from obsctl.baselining.statistics.distributions import ndtri
from obsctl.baselining.statistics.lrv import Side, side_estimate
from obsctl.baselining.statistics.memory import MIN_MEMORIES, MemoryModel, pooled_memory
from obsctl.baselining.statistics.power import N_EFF_MIN, shortest_window_seconds
from obsctl.baselining.statistics.ratio import estimate_ratio
from obsctl.baselining.statistics.summary import is_constant
from obsctl.durations import format_duration

METHOD = "AR memory + long-run variance, Fieller interval, one repeated-significance boundary for every cumulative look"


@dataclass(frozen=True)
class LookContext:
    """Where this evaluation sits in the change's sequence of looks.

    Attributes:
        number: this look's number in the sequence (1 = first look).
        planned_seconds: the planned window length (s): where a decision is expected;
            None: not planned.
        min_fraction: the sequence's ``t_min``, fixed at its first look; None: from the
            baseline's side (:func:`min_fraction_of`).
        confidence: the sequence's two-sided level over all looks, fixed at its first
            look; None: the :class:`Criterion`'s ``confidence`` :func:`judge` is given.
    """

    number: int = 1
    planned_seconds: float | None = None
    min_fraction: float | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class Criterion:
    """What decides a change: the level, the better direction and the margin it is judged
    at (:func:`.decision.decide`), and for a guard its non-inferiority margin and share of
    the family's error.

    Attributes:
        confidence: two-sided level over all looks (spec ``verification.confidence``).
        direction: ``higher_is_better`` | ``lower_is_better``.
        min_effect: the margin ``d`` (ratio).
        guard_tolerance: judge as a guard with this non-inferiority margin (ratio); None:
            not a guard.
        guard_alpha: the guard's two-sided level (its Bonferroni share), default
            ``1 - confidence``; used only with ``guard_tolerance``.
    """

    confidence: float
    direction: str
    min_effect: float
    guard_tolerance: float | None = None
    guard_alpha: float | None = None


@dataclass
class Judgement:
    """Everything a verdict rests on (fields None where not reached).

    ``confidence`` is the nominal level of the reported interval (the look's anytime-valid
    level); ``boundary`` the look's z critical value; ``min_fraction`` the sequence's
    ``t_min``. ``guard`` is the non-inferiority outcome for guards.
    """

    verdict: str
    reason: str
    baseline_mean: float | None = None
    window_mean: float | None = None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    dof: float | None = None
    exact: bool = False
    tau_seconds: float | None = None
    memory_source: str | None = None
    n_eff_baseline: float | None = None
    n_eff_window: float | None = None
    look: int | None = None
    min_fraction: float | None = None
    p_worse: float | None = None
    placebo: str | None = None
    boundary: float | None = None
    planned_seconds: float | None = None
    guard: str | None = None
    location: str | None = None
    #: The notes as data (:class:`.assumptions.Finding`: the window checks, the scale used).
    findings: list[assumptions.Finding] = field(default_factory=list)
    #: Notes the verdict adds beside the statistics' own, as data: the placebo check and the
    #: location judged (their text stays in ``placebo`` and ``location``, not in ``notes``).
    extra_findings: list[assumptions.Finding] = field(default_factory=list)
    #: A window check's refusal as data (:attr:`.assumptions.WindowCheck.failure`); its detail is ``reason``.
    failure: assumptions.Finding | None = None

    @property
    def notes(self) -> list[str]:
        """The findings' full diagnostics, in order."""
        return [f.detail for f in self.findings]

    def details(self) -> dict:
        """The statistical fields for JSON output and the store."""
        return {"method": METHOD, "tau_seconds": self.tau_seconds, "memory_source": self.memory_source,
                "n_eff_baseline": self.n_eff_baseline, "n_eff_window": self.n_eff_window, "dof": _finite(self.dof),
                "look": self.look, "min_fraction": self.min_fraction, "boundary_z": _finite(self.boundary),
                "interval_confidence": self.confidence, "planned_seconds": self.planned_seconds, "guard_test": self.guard,
                "p_worse": self.p_worse, "placebo": self.placebo, "location": self.location,
                "notes": list(self.notes)}


def _finite(x):
    return x if x is None or math.isfinite(x) else None


def _white(step: float) -> MemoryModel:
    return MemoryModel(step, (), (1.0,), 0.0, 0.0, 0, 0.0, "windows")


@dataclass(frozen=True)
class BaselineSide:
    """A baseline's side of every verdict, computed once: :func:`side_estimate` of its
    samples under its memory model at ``step_seconds``, and whether they are constant
    (``initiative start`` stores it; :func:`baseline_side` makes it)."""

    side: Side
    constant: bool
    step_seconds: float


def baseline_side(times, values, step_seconds: float, memory: MemoryModel) -> BaselineSide:
    """The :class:`BaselineSide` of a baseline's ``(times s, values)`` finite samples."""
    x = np.asarray(values, dtype=float)
    return BaselineSide(side_estimate(np.asarray(times, dtype=float), x, step_seconds, memory), bool(is_constant(x)), step_seconds)


def judge(baseline: tuple[np.ndarray, np.ndarray] | BaselineSide, window: tuple[np.ndarray, np.ndarray], step_seconds: float,
          memory: MemoryModel | None, criterion: Criterion, look: LookContext | None = None,
          widen: tuple[float, float] | None = None, location: robust.Location | None = None) -> Judgement:
    """The verdict of ``window`` against ``baseline``.

    Args:
        baseline, window: ``(times s, values)`` of finite samples on the step grid; the
            baseline may instead be its precomputed :class:`BaselineSide` (at this step,
            under ``memory``, which must then be given): the same judgement without its
            samples.
        step_seconds: the grid step (s).
        memory: the baseline's memory model (None: estimated from the two sides).
        criterion: what decides (:class:`Criterion`: level, direction, margin, guard).
        look: the look on the change's sequence (:mod:`.anytime`: the boundary of every
            look); None: a one-off comparison at ``criterion.confidence`` that nobody looks
            at again.
        widen: ``(factor >= 1, dof)`` from a calibration that found the model's variance
            too small (:mod:`.placebo`'s comparisons in the baseline's history, or the
            movement test's placebo periods): both sides' variances of the
            mean are multiplied by ``factor`` and carry at most ``dof`` degrees of freedom.
        location: the location judged (:mod:`.robust`); a trimmed one needs the baseline's
            samples (not a precomputed side): each side is winsorised at its own quantiles
            for the memory, scale and window checks, then carries its trimmed mean.
    """
    stored = baseline if isinstance(baseline, BaselineSide) else None
    if stored is not None and (memory is None or not math.isclose(stored.step_seconds, step_seconds)):
        raise ValueError("a precomputed baseline side needs its memory model and the step it was computed at")
    confidence, direction, min_effect = criterion.confidence, criterion.direction, criterion.min_effect
    guard_tolerance, guard_alpha = criterion.guard_tolerance, criterion.guard_alpha
    trimmed = robust.Trimmed.of(location, stored is not None)  # the mean: every step below an identity
    if stored is None:
        tx, x = (np.asarray(a, dtype=float) for a in baseline)
        x = trimmed.baseline(x)
        x_n, x_constant = x.size, x.size >= 2 and is_constant(x)
    else:
        x_n, x_constant = stored.side.n, stored.constant
    ty, y = (np.asarray(a, dtype=float) for a in window)
    y = trimmed.window(y)
    if y.size < 2:
        return Judgement("NO_DATA", f"the window has {y.size} sample(s), needs at least 2")
    if x_n < 2:
        return Judgement("NO_DATA", f"the baseline has {x_n} sample(s), needs at least 2")
    if x_constant and is_constant(y):
        est = exact_change(stored.side.mean if stored else float(x.mean()), float(y.mean()), confidence)
        verdict, reason = decide(est, direction, min_effect)
        return Judgement(verdict, reason, est.baseline_mean, est.window_mean, est.change, est.low, est.high, confidence, exact=True)
    if memory is None:
        memory = pooled_memory([(tx, x), (ty, y)], step_seconds) or _white(step_seconds)
    one_off = look is None
    look = look or LookContext()
    confidence = look.confidence or confidence
    sx = stored.side if stored is not None else side_estimate(tx, x, step_seconds, memory)
    sy = side_estimate(ty, y, step_seconds, memory)
    checked = assumptions.check_window(ty, y, step_seconds, memory, sy)  # memory and scale unchanged by the change (assumptions.py)
    if checked.reason:
        return Judgement("INCONCLUSIVE", checked.reason, sx.mean, sy.mean, tau_seconds=memory.tau_seconds, memory_source=memory.source,
                         n_eff_baseline=sx.n_eff, n_eff_window=sy.n_eff, look=look.number, findings=list(checked.findings),
                         location=robust.Location.text_of(location), failure=checked.failure)
    sy = checked.side
    sx, sy = trimmed.sides(sx, sy)  # the trimmed means, their variance from the winsorised sides (robust.py)
    if widen is not None and widen[0] > 1:
        factor, dof = widen
        sx, sy = (replace(s, var_mean=s.var_mean * factor, dof=min(s.dof, dof)) for s in (sx, sy))
    j = Judgement("INCONCLUSIVE", "", sx.mean, sy.mean, tau_seconds=memory.tau_seconds, memory_source=memory.source,
                  n_eff_baseline=sx.n_eff, n_eff_window=sy.n_eff, look=look.number, planned_seconds=look.planned_seconds)
    j.findings.extend(checked.findings)
    j.location = robust.Location.text_of(location)
    if sx.mean != 0:
        j.change = sy.mean / sx.mean - 1
    alpha = guard_alpha if guard_tolerance is not None and guard_alpha is not None else 1 - confidence
    # The look's boundary on the change's sequence (anytime.py): fixed by the baseline, set
    # before the too-short rule because a design judges its own effect at this level.
    if one_off:  # one comparison that is never looked at again (the review's drift check)
        j.boundary = float(ndtri(1 - alpha / 2))
        j.confidence = anytime.confidence_of(j.boundary)
    else:
        j.min_fraction = look.min_fraction or min_fraction_of(sx)
        if j.min_fraction is not None:
            j.boundary = anytime.boundary(j.min_fraction, alpha)
            j.confidence = anytime.confidence_of(j.boundary)
    short = _too_short(sx, sy, memory, step_seconds) or ("" if one_off else _memory_not_honest(memory))
    if short:
        j.reason = short
        return j
    if sx.mean == 0:
        j.reason = "baseline mean is 0: a relative change is undefined"
        return j
    crit = j.boundary
    est = estimate_ratio(sx, sy)
    j.dof = est.dof
    interval = est.interval(j.confidence) if j.confidence < 1 else None
    if interval is None:
        j.reason = "the baseline varies too much to tell its mean from 0 (Fieller interval unbounded)"
        return j
    j.low, j.high = interval
    # The interval holds at ``1 - alpha`` over every look at once: that is the level it claims
    # (the per-look nominal level, ``j.confidence``, is how it is computed).
    estimate = Estimate(j.change, j.low, j.high, 1 - alpha, j.dof, baseline_mean=sx.mean, window_mean=sy.mean)
    j.verdict, j.reason = decide(estimate, direction, min_effect, guard_tolerance)
    if guard_tolerance is not None:
        j.guard = {"NO_CHANGE": "pass", "IMPROVED": "pass", "REGRESSED": "regressed"}.get(j.verdict, "undecided")
        j.p_worse = _p_worse(j.change, sx, sy, direction, j.min_fraction)
    if sy.scale_source == "own" and memory.source == "history":
        j.findings.append(assumptions.Finding("scale-own", f"the window's spread (sd {sy.own_sd:.4g}) differs from the history's "
                                                           f"(sd {math.sqrt(memory.variance):.4g}): its own scale was used"))
    if look.planned_seconds and sy.span_seconds < look.planned_seconds * 0.999 and j.verdict in ("INCONCLUSIVE", "NO_CHANGE"):
        j.reason += (f"; the window ({format_duration(sy.span_seconds)}) is shorter than the planned {format_duration(look.planned_seconds)}"
                     f" (look {look.number}, boundary z = {crit:.2f}; a decision is expected at the planned length)")
    return j


def _p_worse(change: float, sx: Side, sy: Side, direction: str, t_min: float | None) -> float:
    """The p-value of "worse than the baseline" that holds at every look: the two-sided
    crossing probability (:func:`.anytime.crossing`) of the change's z statistic on the
    worse side (delta method: ``se = sqrt(V_y + R^2 V_x) / |xbar|``); 1 on the better side.
    A one-off comparison (``t_min`` None) gives the fixed-level ``2 (1 - Phi(z))``."""
    se = math.sqrt(sy.var_mean + (1 + change) ** 2 * sx.var_mean) / abs(sx.mean)
    z = (-change if direction == "higher_is_better" else change) / se if se > 0 else math.inf
    if not z > 0:
        return 1.0
    return anytime.crossing(z, math.log(1 / t_min)) if t_min is not None else anytime.crossing(z, 0.0)


def min_fraction_of(baseline: Side) -> float | None:
    """The sequence's ``t_min``: the information time of a window of ``N_EFF_MIN`` effective
    samples at the baseline's scale, ``V_x / (V_x + sd^2 / N_EFF_MIN)``; None when the
    baseline's variance is undefined (too short: the too-short rule says so)."""
    try:
        return anytime.min_fraction(baseline.var_mean, baseline.sd ** 2 / N_EFF_MIN)
    except ValueError:
        return None


def _memory_not_honest(memory: MemoryModel) -> str:
    """Why the memory cannot carry a verdict ("" when it can): fitted on the compared windows
    alone, or on less history than :data:`MIN_MEMORIES` of its own length."""
    tau = memory.tau_seconds
    need = format_duration(MIN_MEMORIES * tau)
    if memory.source == "windows":
        return (f"no history before the baseline to fit the signal's memory: from the windows alone it is at least {format_duration(tau)}, "
                f"a lower bound that makes the interval too narrow; snapshot the baseline with at least {need} of history before it "
                "(verification.memory_history)")
    if memory.span_seconds < MIN_MEMORIES * tau:
        return (f"the signal's memory ({format_duration(tau)}) was fitted on {format_duration(memory.span_seconds)} of history, fewer than "
                f"{MIN_MEMORIES:.0f} of its own lengths: it is a lower bound; snapshot the baseline with at least {need} of history "
                "(verification.memory_history)")
    return ""


def _too_short(sx: Side, sy: Side, memory: MemoryModel, step_seconds: float) -> str:
    for name, side in (("baseline", sx), ("window", sy)):
        if side.n_eff >= N_EFF_MIN and math.isfinite(side.var_mean):
            continue
        tau = memory.tau_seconds
        bound = "at least" if memory.source == "windows" else "about"
        need = shortest_window_seconds(memory, step_seconds)
        need_text = format_duration(need) if need is not None else "more than the 173-day query limit"
        fix = "re-snapshot the baseline with --window" if name == "baseline" else "use a window of"
        return (f"{name} too short for the signal's memory: the memory is {bound} {format_duration(tau)}"
                f" (integrated autocorrelation time, from "
                f"{'the windows only' if memory.source == 'windows' else format_duration(memory.span_seconds) + ' of history'});"
                f" the {format_duration(side.span_seconds)} {name} holds about {side.n_eff:.1f} independent samples, fewer than {N_EFF_MIN:.0f};"
                f" {fix} at least {need_text}")
    return ""
