"""Has a signal moved since its baseline? The one movement-since-baseline test.

A stored baseline documents a state; the signal may leave it without any initiative (a new
model version, traffic mix, a driver upgrade). :func:`movement` measures a window of the
signal with the baseline's own PromQL (:func:`obsctl.baselining.measure.window.measure`),
judges it against the stored baseline under the baseline's memory model
(:func:`obsctl.baselining.statistics.comparison.judge`: long-run variances, Fieller
interval) and decides with the one rule (:func:`obsctl.baselining.statistics.decision.decide`)
at the spec's minimum effect: the signal **moved** when the verdict is IMPROVED or
REGRESSED (the interval excludes 0 and the change is at least ``min_effect``). Coverage,
partial answers and a partial baseline cap the verdict as in ``verify``
(:func:`obsctl.baselining.decide.caps.cap_verdict`): a capped window never counts as moved.

Callers: ``obsctl review``'s ``baseline_drifted`` finding (the window is the class's last
cadence period) and ``verify``'s aging check (the window is the period right before the
initiative's start). :func:`judge_movement` is the same test on samples already in hand
(the benchmark and the tests call it).

The test. Both sides are cut into blocks of the baseline's span / :data:`BASELINE_BLOCKS`
(a 1-day baseline: hourly means; a baseline of 24 steps or fewer is judged on its steps
with its stored model). The memory of the block means is fitted on the review window's
blocks and on both sides pooled, and the longer of the two is kept: an AR fit on the
baseline's few days of history misses slow memory (a component of several hours), and the
window holds days that history did not.

Placebo periods. Even the longer fit misses part of a memory with several time scales
(a sum of AR(1)s whose slowest part lasts hours: its block means are an AR(1) plus noise,
which a low-order AR fit reads as shorter memory), and the baseline's mean, one period of
the signal, is the error every review shares. The window holds many periods of the
baseline's length in which nothing was changed on purpose: the spread of their means
(overlapping batch means, one block apart: Meketon & Schmeiser, "Overlapping batch means",
Winter Simulation Conference 1984; their variance is about 2/3 of non-overlapping batch
means', hence ``1.5 (m - 1)`` degrees of freedom for ``m`` periods) is a direct estimate of
the variance of a baseline-length mean at every time scale up to the period. When it
exceeds the model's, both sides' variances are widened by the ratio and carry the
placebos' degrees of freedom (:func:`placebo_widening`); it never narrows them. It needs
:data:`PLACEBO_MIN` whole periods in the window (a weekly review of a 1-day baseline has 7).
Assumption: the signal is stationary over the window (a drift inside it widens the
interval, which costs power, not error).

Error over a baseline's life. A baseline is reviewed once per cadence period for
``reviews`` periods (``review.baseline_life``, default 8: two months of weekly reviews)
before it is stale. Each review is tested at ``alpha / (MODEL_MARGIN x reviews)``: by
Bonferroni's inequality (Dunn, "Multiple comparisons among means", JASA 56(293), 1961)
``alpha / reviews`` keeps the chance that *any* review flags an unmoved signal at most
``alpha`` whatever the dependence between the reviews (they share the baseline's side), and
:data:`MODEL_MARGIN` holds two thirds of it back for the error of the estimated memory and
scale at these far tails. The anytime boundary of :mod:`.statistics.anytime` does not
apply: it covers *cumulative* windows growing from one start, while each review's window
is a new, disjoint period against a fixed baseline.
Calibration (false drift over all the reviews of a baseline's life, detection of a +-10 %
step, under cycles): ``bench/bench_drift.py``, tables in docs/practice.md and docs/verification.md.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from obsctl.baselining.measure.window import Measurement, MeasureRequest, measure
from obsctl.baselining.statistics import comparison
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory, pooled_memory
from obsctl.promapi import PrometheusClient
from obsctl.records import Baseline, Population

if TYPE_CHECKING:
    from obsctl.baselining.practice.drift import CycleAdjustment

#: Reviews of a baseline's life when the caller does not say (``review.baseline_life``).
DEFAULT_REVIEWS = 8

#: Each review is tested at ``alpha / (MODEL_MARGIN x reviews)``: Bonferroni over the
#: reviews would be ``alpha / reviews``, and two thirds of that are held back for the error
#: of the memory and scale estimated from the data at these far tails (with the placebo
#: widening, a margin of 2 left 3.0-3.8 % false drift over a multi-scale baseline's life,
#: at the 5 % bound's Wilson edge; bench/bench_drift.py).
MODEL_MARGIN = 3

#: Most points one range query of the window asks for (Prometheus refuses more than 11,000
#: points per series); a longer window is read at a multiple of the baseline's step.
MAX_POINTS = 10_000

MOVED_VERDICTS = ("IMPROVED", "REGRESSED")

#: Fewest whole placebo periods (each as long as the baseline) the window must hold for
#: the placebo calibration (module doc, "Placebo periods"): below it the model stands alone.
PLACEBO_MIN = 4

#: Blocks the baseline is cut into (module doc, "The test"): enough for its scale to have
#: about 20 degrees of freedom when the blocks are nearly independent.
BASELINE_BLOCKS = 24


def review_confidence(confidence: float, reviews: int) -> float:
    """The level of one review: ``1 - (1 - confidence) / (MODEL_MARGIN x reviews)``
    (Bonferroni over the reviews, with the margin for the estimated memory; module doc).

    ``review_confidence(0.95, 8)`` = 0.997917 (z = 3.08 two-sided)."""
    return 1.0 - (1.0 - confidence) / (MODEL_MARGIN * max(1, int(reviews)))


def window_step(baseline_step: float, start: dt.datetime, end: dt.datetime) -> float:
    """The step a window ``[start, end]`` is read at: the baseline's step, or the smallest
    whole multiple of it that keeps the query within :data:`MAX_POINTS` points (s)."""
    points = (end - start).total_seconds() / baseline_step
    return baseline_step * max(1, math.ceil(points / MAX_POINTS))


@dataclass(frozen=True)
class Movement:
    """What the movement test said about one baseline.

    Attributes:
        baseline_id, workload_class, signal: the baseline tested.
        start, end: the window judged (UTC).
        verdict: the one rule's verdict of the window against the baseline, after the
            coverage / partial caps: IMPROVED | REGRESSED (moved), NO_CHANGE (within the
            minimum effect), INCONCLUSIVE, NO_DATA.
        moved: ``verdict`` is IMPROVED or REGRESSED.
        change, low, high: the relative change of the window mean against the baseline
            mean (0.06 = +6 %) and its interval at ``confidence``; None where undefined.
        confidence: the level of this review's interval (:func:`review_confidence`).
        reviews: the reviews of the baseline's life the error is spread over.
        baseline_mean, window_mean: the two sides' means (signal unit).
        reason: the rule's one-line reason.
        population: the window's input series (for the population check), None without a measurement.
        samples: finite samples in the window.
        cycle: the cycle the test compared like with like under, or why none
            (:class:`obsctl.baselining.practice.drift.CycleAdjustment`); None when no
            history was read (``verify``'s aging check).
        step_at: the start of a step found inside the window (UTC), else None.
        moved_by_step: the verdict judges the part of the window after ``step_at``.
    """

    baseline_id: str
    workload_class: str
    signal: str
    start: dt.datetime
    end: dt.datetime
    verdict: str
    moved: bool
    change: float | None
    low: float | None
    high: float | None
    confidence: float
    reviews: int
    baseline_mean: float | None
    window_mean: float | None
    reason: str
    population: Population | None = field(default=None, compare=False)
    samples: int = 0
    cycle: CycleAdjustment | None = field(default=None, compare=False)
    step_at: dt.datetime | None = None
    moved_by_step: bool = False

    def as_dict(self) -> dict:
        """JSON-ready evidence fields."""
        extra = {} if self.cycle is None else {**self.cycle.as_dict(), "step_at": self.step_at.isoformat() if self.step_at else None,
                                               "moved_after_step": self.moved_by_step}
        return {**extra, "baseline_id": self.baseline_id, "window_start": self.start.isoformat(), "window_end": self.end.isoformat(),
                "verdict": self.verdict, "moved": self.moved, "change_ratio": self.change, "ci_low": self.low,
                "ci_high": self.high, "interval_confidence": self.confidence, "reviews_per_baseline": self.reviews,
                "baseline_mean": self.baseline_mean, "window_mean": self.window_mean, "reason": self.reason,
                "window_samples": self.samples}


def _subgrid(times: np.ndarray, values: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    # The baseline's samples on a coarser grid (every k-th point of its own grid), so both
    # sides are read at the window's step.
    if times.size == 0:
        return times, values
    keep = np.isclose(np.mod(times - times[0] + step / 2, step), step / 2, atol=1e-6 * step)
    return times[keep], values[keep]


def block_seconds(baseline_span_seconds: float, step_seconds: float) -> float:
    """The block length both sides are averaged over: the baseline's span over
    :data:`BASELINE_BLOCKS`, a whole multiple of ``step_seconds`` and at least one step (s)."""
    return step_seconds * max(1, math.floor(baseline_span_seconds / BASELINE_BLOCKS / step_seconds))


def block_means(times: np.ndarray, values: np.ndarray, block: float, step_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Means of consecutive blocks of ``block`` seconds from the first sample, each kept
    when at least half its grid points are present: ``(block start times, means)``."""
    if times.size == 0:
        return times, values
    index = np.floor((times - times[0]) / block + 1e-9).astype(np.int64)
    counts = np.bincount(index)
    sums = np.bincount(index, weights=values)
    keep = counts >= 0.5 * max(1.0, round(block / step_seconds))
    positions = np.flatnonzero(keep)
    return times[0] + positions * block, sums[keep] / counts[keep]


def judge_movement(baseline: tuple[np.ndarray, np.ndarray], window: tuple[np.ndarray, np.ndarray], step_seconds: float,
                   memory: MemoryModel | None, direction: str, min_effect: float, confidence: float = 0.95,
                   reviews: int = DEFAULT_REVIEWS) -> comparison.Judgement:
    """The movement test on samples in hand (module doc, "The test").

    Args:
        baseline, window: ``(times s, values)`` of finite samples on their step grids,
            shapes ``(n,)``.
        step_seconds: the window's grid step (s), a whole multiple of the baseline's.
        memory: the baseline's memory model, used as it is when the blocks are single
            steps (None: fitted to the window).
        direction, min_effect: the signal's direction and the minimum effect (ratio).
        confidence: the level over the whole life of the baseline (spec ``verification.confidence``).
        reviews: reviews of the baseline's life (>= 1).

    Returns:
        The :class:`comparison.Judgement` (verdict, change, interval, reason) of
        :func:`comparison.judge` at :func:`review_confidence`, widened by the window's
        placebo periods where they spread more than the model says (:func:`placebo_widening`).
    """
    bt, bv = (np.asarray(a, dtype=float) for a in baseline)
    wt, wv = (np.asarray(a, dtype=float) for a in window)
    if bt.size >= 2 and np.median(np.diff(bt)) < step_seconds * (1 - 1e-9):
        bt, bv = _subgrid(bt, bv, step_seconds)
    span = float(bt[-1] - bt[0]) + step_seconds if bt.size else 0.0
    block = block_seconds(span, step_seconds)
    level = review_confidence(confidence, reviews)
    if block <= step_seconds:
        model = memory or fit_memory(wt, wv, step_seconds)
        return comparison.judge((bt, bv), (wt, wv), step_seconds, model, comparison.Criterion(level, direction, min_effect))
    bt, bv = block_means(bt, bv, block, step_seconds)
    wt, wv = block_means(wt, wv, block, step_seconds)
    model = _longer(fit_memory(wt, wv, block), pooled_memory([(bt, bv), (wt, wv)], block))
    widen = None
    if model is not None and bv.size >= 2:
        predicted = comparison.baseline_side(bt, bv, block, model).side.var_mean
        widen = placebo_widening(wt, wv, span, predicted)
    return comparison.judge((bt, bv), (wt, wv), block, model, comparison.Criterion(level, direction, min_effect), widen=widen)


def placebo_widening(times: np.ndarray, means: np.ndarray, span_seconds: float, predicted: float) -> tuple[float, float] | None:
    """The placebo calibration of the baseline side's variance (module doc, "Placebo periods").

    Args:
        times, means: the window's block start times (s) and block means, shapes ``(n,)``.
        span_seconds: the baseline's span (s): the length of each placebo period.
        predicted: the model's variance of the baseline's mean (unit squared).

    Returns:
        ``(factor, dof)`` for :func:`comparison.judge`'s ``widen`` when the spread of the
        window's placebo means exceeds ``predicted`` (factor > 1); None when the model
        holds, or the window holds fewer than :data:`PLACEBO_MIN` whole periods.
    """
    if times.size == 0 or not (math.isfinite(predicted) and predicted > 0):
        return None
    step = float(np.median(np.diff(times))) if times.size >= 2 else span_seconds
    grid = np.round((times - times[0]) / step).astype(np.int64)
    per = max(1, int(round(span_seconds / step)))
    full = np.full(int(grid[-1]) + 1, np.nan)
    full[grid] = means
    periods = full.size / per
    if periods < PLACEBO_MIN:
        return None
    # Every placebo period of the baseline's length, one block apart (overlapping batch
    # means); a period missing more than half its blocks is skipped.
    present = np.isfinite(full)
    csum = np.concatenate(([0.0], np.cumsum(np.where(present, full, 0.0))))
    ccount = np.concatenate(([0], np.cumsum(present)))
    counts = ccount[per:] - ccount[:-per]
    ok = counts >= 0.5 * per
    if ok.sum() < 2:
        return None
    placebos = (csum[per:] - csum[:-per])[ok] / counts[ok]
    observed = float(np.mean((placebos - np.nanmean(full)) ** 2)) * periods / (periods - 1)
    dof = 1.5 * (periods - 1)
    return (observed / predicted, dof) if observed > predicted else None


def _longer(a: MemoryModel | None, b: MemoryModel | None) -> MemoryModel | None:
    # Of two fits of the same memory, the one with the longer integrated time: an AR fit
    # underestimates slow memory, so the longer one errs on the safe side.
    if a is None or b is None:
        return a or b
    return b if b.tau_seconds > a.tau_seconds else a


@dataclass(frozen=True)
class Criteria:
    """What a movement test holds a window to (spec ``verification``, as ``verify``).

    Attributes:
        min_effect: the minimum effect (ratio, ``verification.min_effect_ratio``).
        confidence: the level over the baseline's life (``verification.confidence``).
        reviews: reviews of the baseline's life the error is spread over (>= 1).
        min_samples: fewer finite samples in the window are NO DATA (``verification.min_samples``).
        min_coverage: real-sample coverage below this caps the verdict (``verification.min_coverage_ratio``).
        on_change: the signal is in ``verification.fresh_on_change``.
    """

    min_effect: float
    confidence: float = 0.95
    reviews: int = DEFAULT_REVIEWS
    min_samples: int = 10
    min_coverage: float = 0.9
    on_change: bool = False


def movement(client: PrometheusClient, baseline: Baseline, start: dt.datetime, end: dt.datetime, criteria: Criteria, *,
             measurement: Measurement | None = None, history_seconds: float = 0.0) -> Movement:
    """Whether the signal of ``baseline`` moved over ``(start, end]`` (module doc).

    Args:
        client: the Prometheus client.
        baseline: the stored baseline, with its samples (``Store.current_baseline``).
        start, end: the window (UTC); the step is :func:`window_step` of the baseline's.
        criteria: the minimum effect, the level and the data the window must hold (:class:`Criteria`).
        measurement: the window already measured at :func:`window_step` (no request then).
        history_seconds: read this much of the signal before ``start`` (one range query,
            :func:`obsctl.baselining.measure.history.read_history`, as far back as
            Prometheus holds: the baseline and the earlier periods included) and judge
            under the cycle it shows, with the step search (:mod:`.drift`); 0: the plain test.

    Raises:
        PrometheusUnavailable: Prometheus cannot answer.
        UsageError: the baseline's query now returns more than one series.
    """
    from obsctl.baselining.decide.caps import cap_verdict
    from obsctl.baselining.decide.sides import columns, memory_of

    min_effect, confidence, reviews, min_samples = criteria.min_effect, criteria.confidence, criteria.reviews, criteria.min_samples
    step = window_step(baseline.window.step_seconds, start, end)
    m = measurement or measure(client, MeasureRequest(baseline.query, start, end, step, min_samples,
                                                      what=f"{baseline.workload_class}/{baseline.signal} (drift)", on_change=criteria.on_change))
    level = review_confidence(confidence, reviews)
    common = dict(baseline_id=baseline.id, workload_class=baseline.workload_class, signal=baseline.signal, start=start, end=end,
                  confidence=level, reviews=max(1, int(reviews)), population=m.population, samples=len(m.samples))
    if m.stats is None or len(m.samples) < max(2, min_samples):
        why = m.no_data_reason(min_samples) or f"{len(m.samples)} sample(s) in the window"
        return Movement(verdict="NO_DATA", moved=False, change=None, low=None, high=None, baseline_mean=baseline.stats.mean,
                        window_mean=None, reason=f"window: {why}", **common)
    sides = (columns(baseline.samples), m.columns if m.columns is not None else columns(m.samples))
    drift = {}
    if history_seconds > 0:
        from obsctl.baselining.measure.history import read_history
        from obsctl.baselining.practice.drift import Rule, judge_drift

        # The cycle is read from all the history before the window that Prometheus still
        # holds: the days before the baseline, the baseline and the earlier periods (drift module doc).
        past = read_history(client, baseline.query, start, baseline.window.step_seconds, history_seconds)
        d = judge_drift(*sides, step, memory_of(baseline), Rule(baseline.direction, min_effect, confidence, reviews),
                        history=columns(past) if past else None)
        j = d.judgement
        drift = dict(cycle=d.adjustment, moved_by_step=d.moved_by_step,
                     step_at=dt.datetime.fromtimestamp(d.step.at, dt.UTC) if d.step is not None else None)
    else:
        j = judge_movement(*sides, step, memory_of(baseline), baseline.direction, min_effect, confidence, reviews)
    verdict, reason = cap_verdict(j.verdict, j.reason, m, baseline, criteria.min_coverage)
    return Movement(verdict=verdict, moved=verdict in MOVED_VERDICTS, change=j.change, low=j.low, high=j.high,
                    baseline_mean=j.baseline_mean if j.baseline_mean is not None else baseline.stats.mean,
                    window_mean=j.window_mean if j.window_mean is not None else m.stats.mean, reason=reason, **common, **drift)
