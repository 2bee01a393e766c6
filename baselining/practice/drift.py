"""The drift check under daily and weekly cycles, and a step inside the review period.

:func:`judge_drift` is the movement test ``obsctl review`` runs (:func:`obsctl.baselining.practice.movement.movement`
calls it): :func:`~obsctl.baselining.practice.movement.judge_movement` on the two sides as
they are would compare a week that holds a weekend with a baseline taken on a Tuesday,
and would read a step half-way through a month as noise (its placebo periods spread).
Three parts:

1. **Which cycle** (:func:`known_cycle`). The history before the review period, as far
   back as :data:`HISTORY_SECONDS` and Prometheus' retention allow (the days before the
   baseline, the baseline and the earlier review periods: a baseline two weekly reviews
   old with three days of history before it already shows 17 days; its level may have
   moved, but the cycle's shape is what counts), is tested for a weekly cycle (when it
   spans two weeks) and a daily cycle (when it spans two days) with the harmonic Wald test of
   :mod:`obsctl.baselining.designs.cycle` (its level ``ALPHA`` and relevance
   ``MIN_AMPLITUDE_SHARE`` of the minimum effect). History shorter than two weeks cannot
   rule a weekly cycle out; the finding says so. A level step inside that history (a
   drift an earlier review saw, or one in the period a later review judges again) would
   be read into the profile's shape, so on two weeks or more it is set aside first
   (:func:`history_step`): a step of the hourly means around their hour-of-week means,
   found by the CUSUM below at level :data:`HISTORY_STEP_ALPHA`, its time and size
   fitted by least squares together with the profile; the part after it is shifted back
   by the step's size before the cycle is tested and its profile fitted, and the note
   says so.
2. **Like with like** (:func:`fit_profile`, :func:`deseasonalise`). Under a known cycle of
   period ``P`` the profile is the mean of the log signal in each hour of the period
   (hour of day, or hour of week) over that history, centred to mean 0 over the period;
   both sides are divided by ``exp(profile)`` at their own hours, and the movement test
   runs on what remains. Assumptions: the cycle is multiplicative and keeps its shape over
   the baseline's life (its level may move: that is the drift looked for); a profile hour
   without history is not adjusted. The profile's own error at the baseline's hours is
   an error every review shares; the window's placebo periods of the movement test see it
   (each placebo day carries the profile error of its hours) and widen the interval by it.
   Source: classical decomposition with a seasonal index per period position, Hyndman &
   Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed. (2021), sec. 3.4.
3. **A step inside the period** (:func:`step_inside`). The CUSUM of the window's
   (deseasonalised) block means, ``max_k |S_k - k/n S_n| / sqrt(n lrv)``, has the
   Kolmogorov distribution of the supremum of a Brownian bridge under a constant mean
   (Csorgo & Horvath, *Limit Theorems in Change-Point Analysis*, Wiley 1997, ch. 1) when
   ``lrv`` is the block means' long-run variance. ``lrv`` is the largest of three
   estimates: an AR model of the window's block means around the best single step
   (:func:`obsctl.baselining.statistics.memory.fit_memory`), and, from the history before
   the period (:func:`history_lrv`: its block means in logs, with its level step set aside
   and the cycle's profile removed), an AR model and the mean of the lowest
   ``blocks / DANIELL_BLOCKS`` periodogram ordinates (a Daniell estimate of the spectrum
   at frequency 0: Brockwell & Davis, *Time Series: Theory and Methods*, 2nd ed., 1991,
   sec. 10.4). Why: a week of hourly means is too short for the AR fit alone, which
   reads a slow component under faster ones short and is itself noisy; on the multi-scale
   noise of ``bench/bench_drift.py`` (a 7-hour memory under minutes) the CUSUM with it
   rejected at 0.001 in 2.3-2.7 % of weeks without a step, with the history's estimates
   beside it in 0.15-0.55 % (4 to 21 days of history; AR(1) noise: 0.9-1.3 % and
   0.10-0.15 %; ``bench_drift.py --only step-level``). The history's estimates assume its
   memory is the window's; a level the history moved through beyond the step set aside
   only inflates them (less power, not more false steps). When it rejects,
   the part of the window after the step is judged against the baseline by the same
   movement test; the finding gives the step's time. Without a known weekly cycle a
   weekend looks like a step, so the later part must then span at least a week.

Error. Each review's level ``alpha_r`` (:func:`~obsctl.baselining.practice.movement.review_confidence`)
is split: the whole window is judged at ``alpha_r / 2``; the step path needs the CUSUM
to reject at ``alpha_r / 2`` (under a constant mean it fires about that often: part 3) and
then the later part to move at ``alpha_r``. By the union bound a review flags an unmoved
signal at most ``alpha_r`` as before. Calibration: ``bench/bench_drift.py`` (weekly and
daily cycles, a step inside a monthly period), table in docs/verification.md.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

import numpy as np

from obsctl.baselining.designs import cycle as cycles
from obsctl.baselining.practice.movement import _subgrid, block_means, block_seconds, judge_movement, review_confidence
from obsctl.baselining.statistics import comparison
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.durations import format_duration
from obsctl.timeutil import rfc3339

#: Cycle name -> period (s).
PERIODS: dict[str, float] = {"day": 86400.0, "week": 7 * 86400.0}
#: Width of one profile position (s): the hour of the day or of the week.
PHASE_SECONDS = 3600.0
#: Whole periods of history a cycle needs to be tested (and its profile fitted).
MIN_PERIODS = 2
#: History ``obsctl review`` reads for the cycle, before the review period (s): two whole weeks and a margin.
HISTORY_SECONDS = 21 * 86400.0
#: Level of the CUSUM that sets a level step in the history aside before the cycle is fitted.
HISTORY_STEP_ALPHA = 0.001
#: Fewest blocks on each side of a step the CUSUM considers.
MIN_SEGMENT_BLOCKS = 6
#: Shortest later part judged without a known (or ruled out) weekly cycle (s).
UNKNOWN_CYCLE_MIN_LATER = 7 * 86400.0
#: Blocks of history per periodogram ordinate averaged for the long-run variance
#: (:func:`history_lrv`): only periods of at least 28 blocks count, above a daily cycle's 24 hours.
DANIELL_BLOCKS = 28


@dataclass(frozen=True)
class HistoryStep:
    """A level step in the history, set aside before the cycle was fitted.

    Attributes:
        at: the first hour after the step (unix s).
        change: the step's size as a ratio (-0.10: the later part 10 % lower).
        p_value: the CUSUM's Kolmogorov p-value around the profile fitted with the step
            (nominal: the step's place was chosen on the same data).
    """

    at: float
    change: float
    p_value: float

    def removed(self, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Log values ``y`` at times ``t`` (unix s) with the step taken out of the part after it."""
        return y - math.log1p(self.change) * (t >= self.at)

    def describe(self) -> str:
        """One readable clause."""
        at = rfc3339(dt.datetime.fromtimestamp(self.at, dt.UTC))
        return f"a level step of {self.change:+.1%} at {at} in the history was set aside before the cycle was fitted (p = {self.p_value:.2g})"


@dataclass(frozen=True)
class CycleAdjustment:
    """What the drift check knew about cycles.

    Attributes:
        cycle: ``week`` or ``day`` when the sides were deseasonalised by that cycle's
            profile, None when they were compared as they are.
        weekly_known: the history could tell a weekly cycle (it spans two weeks).
        history_seconds: the history's span (s).
        note: one readable line (the cycle adjusted for, or why none; a step set aside).
        profile: the log profile of ``cycle`` (:func:`fit_profile`'s shape) fitted on the
            history with its level step set aside; None without a cycle (or when built by hand).
        history_step: the level step set aside in the history (:func:`history_step`), or None.
    """

    cycle: str | None
    weekly_known: bool
    history_seconds: float
    note: str
    profile: np.ndarray | None = field(default=None, compare=False, repr=False)
    history_step: HistoryStep | None = None

    def as_dict(self) -> dict:
        """JSON-ready fields."""
        return {"cycle_adjusted": self.cycle, "weekly_cycle_known": self.weekly_known,
                "cycle_history_seconds": self.history_seconds, "cycle_note": self.note}


@dataclass(frozen=True)
class StepFound:
    """A step the CUSUM found inside the window.

    Attributes:
        at: the first block after the step (unix s).
        statistic, p_value: the normalised CUSUM maximum and its Kolmogorov p-value.
        judgement: the later part (from ``at``) judged against the baseline, or None when
            that part was too short to judge.
    """

    at: float
    statistic: float
    p_value: float
    judgement: comparison.Judgement | None


@dataclass(frozen=True)
class DriftJudgement:
    """:func:`judge_drift`'s answer: the judgement that decides, and what was adjusted.

    Attributes:
        judgement: the later part's judgement when the step path moved, else the whole window's.
        whole: the whole window's judgement.
        adjustment: the cycle the sides were compared under.
        step: the step found inside the window (None when the CUSUM did not reject).
        moved_by_step: the verdict comes from the later part after ``step``.
    """

    judgement: comparison.Judgement
    whole: comparison.Judgement
    adjustment: CycleAdjustment
    step: StepFound | None
    moved_by_step: bool


def _positive(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t, v = np.asarray(times, float), np.asarray(values, float)
    ok = np.isfinite(t) & np.isfinite(v) & (v > 0)
    return t[ok], v[ok]


def known_cycle(history: tuple[np.ndarray, np.ndarray] | None, min_effect: float) -> CycleAdjustment:
    """The cycle the history shows (module doc, part 1).

    Args:
        history: ``(unix s, values)`` of the signal before the review period (as far back
            as :data:`HISTORY_SECONDS`), or None.
        min_effect: the spec's minimum effect (ratio): a cycle smaller than
            ``cycle.MIN_AMPLITUDE_SHARE`` of it is not adjusted for.

    Returns:
        :class:`CycleAdjustment`; ``cycle`` is ``week`` when a weekly cycle is found (its
        hour-of-week profile holds the daily one too), else ``day``, else None; its
        ``profile`` is fitted on the history with a level step set aside (:func:`history_step`).
    """
    if history is None:
        return CycleAdjustment(None, False, 0.0, "no history before the review period was read: cycles unknown")
    t, v = _positive(*history)
    step = float(np.median(np.diff(t))) if t.size >= 2 else 0.0
    span = float(t[-1] - t[0] + step) if t.size else 0.0
    weekly_known = span >= MIN_PERIODS * PERIODS["week"] - 1e-6
    if span < MIN_PERIODS * PERIODS["day"] - 1e-6 or t.size < 96:
        return CycleAdjustment(None, False, span, f"{format_duration(span)} of history before the review period, under two days: "
                               "daily and weekly cycles unknown, the sides are compared as they are")
    y = np.log(v)
    moved = history_step(t, y, step) if weekly_known else None
    if moved is not None:
        y = moved.removed(t, y)
    aside = f"; {moved.describe()}" if moved is not None else ""
    relevant = cycles.MIN_AMPLITUDE_SHARE * min_effect
    tested = [("week", (PERIODS["day"],))] if weekly_known else []
    tested.append(("day", ()))
    for name, nuisance in tested:
        p, amplitude, _ = cycles.harmonic_test(t, y, PERIODS[name], nuisance, step)
        if p < cycles.ALPHA and amplitude >= relevant:
            return CycleAdjustment(name, weekly_known, span, f"compared like with like under the {'weekly' if name == 'week' else 'daily'} "
                                   f"cycle found in {format_duration(span)} of history before the review period "
                                   f"(+-{amplitude:.1%}, p = {p:.2g}){aside}", _log_profile(t, y, name), moved)
    if weekly_known:
        return CycleAdjustment(None, True, span, f"no daily or weekly cycle past +-{relevant:.1%} in {format_duration(span)} of history "
                               f"before the review period{aside}", None, moved)
    return CycleAdjustment(None, False, span, f"no daily cycle past +-{relevant:.1%} in {format_duration(span)} of history before the "
                           "review period; a weekly cycle cannot be ruled out with less than two weeks")


def _phase(times: np.ndarray, period: float) -> np.ndarray:
    return np.floor(np.mod(np.asarray(times, float), period) / PHASE_SECONDS).astype(np.int64)


def _log_profile(t: np.ndarray, y: np.ndarray, cycle: str) -> np.ndarray:
    period = PERIODS[cycle]
    size = int(round(period / PHASE_SECONDS))
    pos = _phase(t, period)
    counts = np.bincount(pos, minlength=size)
    sums = np.bincount(pos, weights=y, minlength=size)
    held = counts > 0
    profile = np.zeros(size)
    profile[held] = sums[held] / counts[held]
    profile[held] -= profile[held].mean()
    return profile


def fit_profile(history: tuple[np.ndarray, np.ndarray], cycle: str) -> np.ndarray:
    """The log profile of ``cycle`` (module doc, part 2): shape ``(period / 1 h,)``, mean 0
    over the positions the history holds, 0 at positions it does not hold (UTC hours).
    The history is taken as it is (:func:`known_cycle` sets a level step aside first)."""
    t, v = _positive(*history)
    return _log_profile(t, np.log(v), cycle)


def history_step(t: np.ndarray, y: np.ndarray, step_seconds: float, cycle: str = "week") -> HistoryStep | None:
    """The largest level step in a log history around its cycle's profile (module doc, part 1).

    The history's hourly means (UTC hours holding at least half their samples) are fitted
    by least squares on one indicator per hour of the ``cycle`` and a step's (every hour
    at least ``MIN_SEGMENT_BLOCKS`` from either end tried as the step's first): fitted
    around the plain hour-of-cycle means instead, the step would miss the part that the
    hours after it absorbed into their means. The step counts when :func:`step_inside`
    rejects at :data:`HISTORY_STEP_ALPHA` on the hourly means minus the profile fitted
    with it (the step's place was chosen on the same data: a liberal test, whose false
    steps are of the noise's size and barely move the profile).

    Args:
        t, y: sample times (unix s) and log values, shapes ``(n,)``, on a ``step_seconds`` grid.
        cycle: the profile's period name (:data:`PERIODS`).

    Returns:
        :class:`HistoryStep`, or None when the CUSUM does not reject (or the history holds
        fewer than ``2 x MIN_SEGMENT_BLOCKS`` hours).
    """
    hour = np.floor(np.asarray(t, float) / PHASE_SECONDS).astype(np.int64)
    held, index = np.unique(hour, return_inverse=True)
    counts = np.bincount(index)
    keep = counts >= 0.5 * max(1.0, round(PHASE_SECONDS / step_seconds))
    times = held[keep] * PHASE_SECONDS
    means = (np.bincount(index, weights=y) / counts)[keep]
    n = means.size
    if n < 2 * MIN_SEGMENT_BLOCKS:
        return None
    _, position = np.unique(_phase(times, PERIODS[cycle]), return_inverse=True)
    per = np.bincount(position)
    resid = means - (np.bincount(position, weights=means) / per)[position]
    # Least squares of the step jointly with the profile, for every candidate start k: the
    # step's indicator d minus its mean in each hour of the cycle, against the residuals r
    # (r sums to 0 in each hour of the cycle): sum(d~ r) = the sum of r from k on, and
    # sum(d~^2) = sum over the hours p of a_p (1 - a_p / n_p), a_p of the n_p means of
    # hour p falling from k on.
    starts = np.arange(MIN_SEGMENT_BLOCKS, n - MIN_SEGMENT_BLOCKS + 1)
    onehot = np.zeros((n, per.size))
    onehot[np.arange(n), position] = 1.0
    a = per - np.cumsum(onehot, axis=0)[starts - 1]
    num = np.cumsum(resid[::-1])[::-1][starts]
    den = (a * (1.0 - a / per)).sum(axis=1)
    if not np.any(den > 1e-12):
        return None
    best = int(np.argmax(np.where(den > 1e-12, num * num / np.maximum(den, 1e-12), -np.inf)))
    shift = float(num[best] / den[best])
    # The CUSUM on the means around the profile fitted with that step set aside (the
    # profile fitted as it is would hold part of the step and hide it).
    later = np.arange(n) >= starts[best]
    profile = np.bincount(position, weights=means - shift * later) / per
    got = step_inside(times, means - profile[position], PHASE_SECONDS)
    if got is None or got[2] >= HISTORY_STEP_ALPHA:
        return None
    return HistoryStep(float(times[starts[best]]), math.expm1(shift), got[2])


def deseasonalise(times: np.ndarray, values: np.ndarray, profile: np.ndarray, cycle: str) -> np.ndarray:
    """``values / exp(profile at each sample's hour of the cycle)``, shape of ``values``."""
    return np.asarray(values, float) / np.exp(profile[_phase(times, PERIODS[cycle])])


def history_lrv(history: tuple[np.ndarray, np.ndarray], block: float, adjustment: CycleAdjustment) -> float | None:
    """The long-run variance of log block means, from the history before the period (module doc, part 3).

    Args:
        history: ``(unix s, values)`` before the review period, on its step grid.
        block: the block length (s) of the window's CUSUM.
        adjustment: the cycle found in that history (:func:`known_cycle`): its level step
            is set aside and its profile removed first.

    Returns:
        The larger of an AR model's ``variance x tau`` and the mean of the lowest
        ``max(2, blocks // DANIELL_BLOCKS)`` periodogram ordinates (``|sum e^(-iwj) r_j|^2 / n``,
        frequency 0 left out), of the history's log block means around their mean (log
        units squared: multiply by the window's level squared for its units); the
        periodogram only on a whole block grid. None when the history's step is longer than
        a block or it holds fewer than ``2 x MIN_SEGMENT_BLOCKS`` blocks.
    """
    t, v = _positive(*history)
    if t.size < 2:
        return None
    step = float(np.median(np.diff(t)))
    if step > block * (1 + 1e-9):
        return None
    y = np.log(v)
    if adjustment.history_step is not None:
        y = adjustment.history_step.removed(t, y)
    if adjustment.cycle is not None:
        profile = adjustment.profile if adjustment.profile is not None else _log_profile(t, y, adjustment.cycle)
        y = y - profile[_phase(t, PERIODS[adjustment.cycle])]
    times, means = block_means(t, y, block, step)
    n = means.size
    if n < 2 * MIN_SEGMENT_BLOCKS:
        return None
    means = means - means.mean()
    estimates = []
    model = fit_memory(times, means, block)
    if model is not None and model.variance > 0:
        estimates.append(model.variance * model.tau_steps)
    ordinates = max(2, n // DANIELL_BLOCKS)
    if int(round((times[-1] - times[0]) / block)) + 1 == n and n // 2 > ordinates:
        estimates.append(float(np.mean(np.abs(np.fft.rfft(means)[1:ordinates + 1]) ** 2 / n)))
    return max(estimates) if estimates else None


def step_inside(times: np.ndarray, means: np.ndarray, block: float, lrv_floor: float = 0.0) -> tuple[int, float, float] | None:
    """The CUSUM test for one step in the block means (module doc, part 3).

    Args:
        times, means: block start times (s) and block means, shapes ``(n,)``.
        block: the block length (s).
        lrv_floor: another estimate of the means' long-run variance (unit squared, e.g.
            :func:`history_lrv` scaled to the window's level); the larger one is used.

    Returns:
        ``(index of the first block after the step, statistic, p-value)``; None with fewer
        than ``2 x MIN_SEGMENT_BLOCKS`` blocks or no memory model.
    """
    n = means.size
    if n < 2 * MIN_SEGMENT_BLOCKS:
        return None
    s = np.cumsum(means - means.mean())[:-1]
    k = np.arange(1, n)
    inner = (k >= MIN_SEGMENT_BLOCKS) & (k <= n - MIN_SEGMENT_BLOCKS)
    # The split for the long-run variance: the best one inside the allowed range.
    best = int(k[inner][np.argmax(np.abs(s[inner]))])
    resid = means.copy()
    resid[:best] -= means[:best].mean()
    resid[best:] -= means[best:].mean()
    model: MemoryModel | None = fit_memory(times, resid, block)
    if model is None or not model.variance > 0:
        return None
    lrv = max(model.variance * model.tau_steps, lrv_floor)
    stat = float(np.max(np.abs(s[inner]))) / math.sqrt(n * lrv)
    from scipy import stats as sps  # lazy: scipy.stats loads scipy.special (~0.3 s) on every command otherwise

    return best, stat, float(sps.kstwobign.sf(stat))


@dataclass(frozen=True)
class Rule:
    """How a review judges: the signal's ``direction`` (``higher_is_better`` |
    ``lower_is_better``), the spec's ``min_effect`` (ratio), the ``confidence`` over the
    baseline's life and the ``reviews`` of that life (>= 1)."""

    direction: str
    min_effect: float
    confidence: float = 0.95
    reviews: int = 8


def judge_drift(baseline: tuple[np.ndarray, np.ndarray], window: tuple[np.ndarray, np.ndarray], step_seconds: float,
                memory: MemoryModel | None, rule: Rule, history: tuple[np.ndarray, np.ndarray] | None = None,
                adjustment: CycleAdjustment | None = None) -> DriftJudgement:
    """The drift check of one review on samples in hand (module doc).

    Args:
        baseline, window: ``(unix s, values)`` of finite samples on their step grids.
        step_seconds: the window's grid step (s), a whole multiple of the baseline's.
        memory: the baseline's memory model (as :func:`~obsctl.baselining.practice.movement.judge_movement`).
        rule: direction, minimum effect, confidence and reviews (:class:`Rule`).
        history: ``(unix s, values)`` of the signal before the review period (as far back
            as :data:`HISTORY_SECONDS`: the baseline and the earlier periods included when
            Prometheus still holds them), for the cycle; None: cycles unknown.
        adjustment: the cycle already found by :func:`known_cycle` (saves refitting).

    Returns:
        :class:`DriftJudgement`.
    """
    bt, bv = (np.asarray(a, dtype=float) for a in baseline)
    wt, wv = (np.asarray(a, dtype=float) for a in window)
    if adjustment is None:
        adjustment = known_cycle(history, rule.min_effect)
    profile = adjustment.profile
    if adjustment.cycle is not None and profile is None and history is not None:
        profile = fit_profile(history, adjustment.cycle)
    if adjustment.cycle is not None and profile is not None:
        bv = deseasonalise(bt, bv, profile, adjustment.cycle)
        wv = deseasonalise(wt, wv, profile, adjustment.cycle)
    judge = lambda w, reviews: judge_movement((bt, bv), w, step_seconds, memory, rule.direction, rule.min_effect,  # noqa: E731
                                              rule.confidence, reviews)
    whole = judge((wt, wv), 2 * rule.reviews)
    found = _step(bt, (wt, wv), step_seconds, rule, adjustment, judge, history)
    if whole.verdict not in ("IMPROVED", "REGRESSED") and found is not None and found.judgement is not None \
            and found.judgement.verdict in ("IMPROVED", "REGRESSED"):
        return DriftJudgement(found.judgement, whole, adjustment, found, True)
    return DriftJudgement(whole, whole, adjustment, found, False)


def _step(bt: np.ndarray, window: tuple[np.ndarray, np.ndarray], step_seconds: float, rule: Rule, adjustment: CycleAdjustment,
          judge, history: tuple[np.ndarray, np.ndarray] | None) -> StepFound | None:
    wt, wv = window
    if wt.size < 2 or bt.size < 2:
        return None
    if np.median(np.diff(bt)) < step_seconds * (1 - 1e-9):
        bt = _subgrid(bt, bt, step_seconds)[0]
    block = block_seconds(float(bt[-1] - bt[0]) + step_seconds, step_seconds)
    times, means = block_means(wt, wv, block, step_seconds)
    past = history_lrv(history, block, adjustment) if history is not None and times.size else None
    got = step_inside(times, means, block, past * float(np.mean(means)) ** 2 if past is not None else 0.0)
    alpha = 1.0 - review_confidence(rule.confidence, rule.reviews)
    if got is None or got[2] >= alpha / 2:
        return None
    index, stat, p = got
    at = float(times[index])
    later = wt >= at
    judged = None
    long_enough = adjustment.weekly_known or float(wt[-1] - at) + step_seconds >= UNKNOWN_CYCLE_MIN_LATER
    if long_enough and later.sum() >= 2:
        judged = judge((wt[later], wv[later]), rule.reviews)
    return StepFound(at, stat, p, judged)
