"""Calibration of the drift check (``obsctl review``'s ``baseline_drifted``): false drift over
all the reviews of a baseline's life, detection of a step, under daily and weekly cycles.

Each replicate is one baseline's life, through the same function ``review`` calls
(:func:`obsctl.baselining.practice.drift.judge_drift`, with the memory fitted as
``snapshot-baseline`` fits it: on the history plus the baseline window; for the cycle, what
``review`` reads before each review's period: up to ``drift.HISTORY_SECONDS`` of the series
that Prometheus holds, the baseline and the earlier periods included, at the history
query's step):

- 60 s grid, mean 100, a 1-day baseline after ``history`` days, then ``REVIEWS`` (8)
  reviews of one cadence period each (7 days; 30 days for the monthly class, read at the
  300 s step the review reads a month at), each judging the period since the previous
  one; the first review starts ``age`` after the baseline's end (0 or 3 days);
- noise: AR(1) with phi 0.95 (5 % sd, tau about 39 min) and a multi-scale sum of three
  AR(1)s (phi 0.5 / 0.95 / 0.995, sds 3 / 3 / 2 %: memory from a minute to about 7 h);
- cycles (multiplicative): none; weekly (the two weekend days 10 % below the week);
  weekly + daily (that, times 1 + 0.10 sin over the day); the series starts on a uniform
  day of the week, so the baseline's day is uniform too; ``history`` is 3 days (the
  families without a cycle) or 16 days (a weekly cycle can be known);
- false drift: a replicate in which *any* of the 8 reviews says moved (goal <= 5 %,
  upper Wilson bound);
- detection: a step at a uniform time inside review 3's period; detected when review 3
  or review 4 says moved in the step's direction (goal >= 80 %, lower Wilson bound); the
  monthly cells also count review 3 alone (the step found inside its own period).

Run: ``.venv/bin/python bench/bench_drift.py`` (full: 800 lives per weekly null cell, 200
per step cell and monthly null cell; ``--scale 0.25`` for a quick look; ``--only
history-step`` and ``--only step-level``: the history's level step and the step search's
CUSUM on weeks without a step, apart). Seeds are fixed per cell.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.measure import history as prom_history
from obsctl.baselining.practice.drift import (
    HISTORY_SECONDS,
    CycleAdjustment,
    Rule,
    fit_profile,
    history_lrv,
    history_step,
    judge_drift,
    known_cycle,
    step_inside,
)
from obsctl.baselining.practice.movement import MAX_POINTS, block_means, review_confidence
from obsctl.baselining.statistics.memory import fit_memory

STEP = 60.0
DAY = int(86400 / STEP)
WEEK = 7 * DAY
MONTH = 30 * DAY
MU = 100.0
BASELINE = DAY
REVIEWS = 8
CONFIDENCE, MIN_EFFECT = 0.95, 0.02
FAMILIES = {
    "AR(1) phi 0.95": ((0.95, 0.05),),
    "multi-scale (phi 0.5, 0.95, 0.995)": ((0.5, 0.03), (0.95, 0.03), (0.995, 0.02)),
}
#: Cycle name -> (weekend level, daily half amplitude).
CYCLES = {"none": (0.0, 0.0), "weekly": (-0.10, 0.0), "weekly + daily": (-0.10, 0.10)}


def ar1(rng: np.random.Generator, phi: float, n: int) -> np.ndarray:
    """A stationary AR(1) path with unit marginal variance, shape ``(n,)``."""
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


def path(rng: np.random.Generator, family: tuple, n: int) -> np.ndarray:
    """``MU (1 + sum_k sd_k z_k)`` over ``n`` steps."""
    return MU * (1 + sum(sd * ar1(rng, phi, n) for phi, sd in family))


def cycle_factor(t: np.ndarray, cycle: str) -> np.ndarray:
    """The multiplicative cycle at unix seconds ``t``: the weekend (days 2 and 3 of the
    Unix week, Saturday and Sunday UTC) at ``1 + weekend``, times ``1 + daily sin(hour)``."""
    weekend, daily = CYCLES[cycle]
    day = np.floor(t / 86400.0).astype(np.int64) % 7
    f = np.where((day == 2) | (day == 3), 1.0 + weekend, 1.0)
    return f * (1.0 + daily * np.sin(2 * np.pi * np.mod(t, 86400.0) / 86400.0))


@dataclass
class Cell:
    family: str
    cycle: str
    history_days: int
    cadence_days: int
    age_days: int
    step: float
    lives: int
    hits: int
    seconds: float
    hits_same: int = 0

    @property
    def rate(self) -> float:
        return self.hits / self.lives

    def wilson(self, hits: int | None = None) -> tuple[float, float]:
        ci = sps.binomtest(self.hits if hits is None else hits, self.lives).proportion_ci(0.95, method="wilson")
        return float(ci.low), float(ci.high)


def before(t: np.ndarray, x: np.ndarray, lo: int) -> tuple[np.ndarray, np.ndarray]:
    """What ``review`` reads for the cycle before the sample ``lo`` where its period starts:
    ``drift.HISTORY_SECONDS`` back, as far as the series goes, at the history query's step."""
    every = int(round(prom_history.history_step(HISTORY_SECONDS, STEP) / STEP))
    start = max(0, lo - int(HISTORY_SECONDS / STEP))
    start += (lo - start) % every
    return t[start:lo:every], x[start:lo:every]


def life(rng: np.random.Generator, family: tuple, age_days: int, step: float, cycle: str = "none", history_days: int = 3,
         cadence_days: int = 7) -> list[str]:
    """The verdicts of the ``REVIEWS`` reviews of one baseline's life (a step of ``step``
    inside review 3's period when ``step`` is not 0; "" for a review not run)."""
    history, gap, period = history_days * DAY, age_days * DAY, cadence_days * DAY
    n = history + BASELINE + gap + REVIEWS * period
    t = int(rng.integers(0, 7)) * 86400.0 + np.arange(n) * STEP
    x = path(rng, family, n) * cycle_factor(t, cycle)
    first = history + BASELINE + gap
    if step:
        at = first + 2 * period + int(rng.integers(0, period))
        x[at:] *= 1 + step
    memory = fit_memory(t[:history + BASELINE], x[:history + BASELINE], STEP)
    base = (t[history:history + BASELINE], x[history:history + BASELINE])
    every = max(1, math.ceil(period / MAX_POINTS))
    rule = Rule("higher_is_better", MIN_EFFECT, CONFIDENCE, REVIEWS)
    out = []
    for k in range(REVIEWS):
        if step and k not in (2, 3):
            out.append("")
            continue
        lo, hi = first + k * period, first + (k + 1) * period
        j = judge_drift(base, (t[lo:hi:every], x[lo:hi:every]), STEP * every, memory, rule, history=before(t, x, lo))
        out.append(j.judgement.verdict)
    return out


def run_cell(family: str, age_days: int, step: float, lives: int, seed: int, cycle: str = "none", history_days: int = 3,
             cadence_days: int = 7) -> Cell:
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    hits = same = 0
    want = "IMPROVED" if step > 0 else "REGRESSED"
    for _ in range(lives):
        verdicts = life(rng, FAMILIES[family], age_days, step, cycle, history_days, cadence_days)
        if step:
            hits += any(v == want for v in verdicts[2:4])
            same += verdicts[2] == want
        else:
            hits += any(v in ("IMPROVED", "REGRESSED") for v in verdicts)
    cell = Cell(family, cycle, history_days, cadence_days, age_days, step, lives, hits, time.perf_counter() - began, same)
    print("\n".join(render([cell]).splitlines()[2:]) + f" ({cell.seconds:.0f} s)", file=sys.stderr, flush=True)  # progress
    return cell


def table(scale: float = 1.0, seed: int = 20260601, only: str | None = None) -> list[Cell]:
    """Every cell. Without a cycle (3 days of history): null x {age 0, 3 d} and +-10 %
    steps for each noise family. Under the cycles (16 days of history), AR(1) noise: null
    (age 0, 3 d) and a -10 % step, and the multi-scale null under the weekly cycle. Monthly cadence: null and a +15 % step, without a
    cycle and under the weekly one. ``only``: ``plain``, ``cycles``, ``short-history`` or
    ``monthly`` (``history-step`` is :func:`history_steps`, ``step-level`` :func:`step_levels`)."""
    weekly_null, step_lives, monthly_null = (max(10, round(k * scale)) for k in (800, 200, 200))
    cells = []
    if only in (None, "plain"):
        for f, family in enumerate(FAMILIES):
            for a, age in enumerate((0, 3)):
                cells.append(run_cell(family, age, 0.0, weekly_null, seed + 100 * f + a))
            for s, step in enumerate((0.10, -0.10)):
                cells.append(run_cell(family, 0, step, step_lives, seed + 100 * f + 10 + s))
    ar = "AR(1) phi 0.95"
    if only in (None, "cycles"):
        for c, cycle in enumerate(("weekly", "weekly + daily")):
            for a, age in enumerate((0, 3)):
                cells.append(run_cell(ar, age, 0.0, weekly_null, seed + 1000 + 100 * c + a, cycle, 16))
            cells.append(run_cell(ar, 0, -0.10, step_lives, seed + 1000 + 100 * c + 10, cycle, 16))
        cells.append(run_cell("multi-scale (phi 0.5, 0.95, 0.995)", 0, 0.0, weekly_null, seed + 1300, "weekly", 16))
    if only in (None, "short-history"):
        # A weekly cycle that 3 days of history cannot show: the sides are compared as they are.
        cells.append(run_cell(ar, 0, 0.0, weekly_null, seed + 1500, "weekly", 3))
        cells.append(run_cell(ar, 0, -0.10, step_lives, seed + 1510, "weekly", 3))
    if only in (None, "monthly"):
        for c, (cycle, days) in enumerate((("none", 3), ("weekly", 16))):
            cells.append(run_cell(ar, 0, 0.0, monthly_null, seed + 2000 + 100 * c, cycle, days, 30))
            cells.append(run_cell(ar, 0, 0.15, step_lives, seed + 2000 + 100 * c + 10, cycle, days, 30))
    return cells


def render(cells: list[Cell]) -> str:
    lines = ["| null / step | family | cycle | history | cadence | baseline age at review 1 | lives | rate | Wilson 95 % | goal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        low, high = c.wilson()
        cadence = "monthly" if c.cadence_days == 30 else "weekly"
        if c.step == 0:
            what, goal = (f"false drift over 8 {cadence} reviews",
                          f"upper {high * 100:.1f} % <= 5 %: {'PASS' if high <= 0.05 else 'FAIL'}")
        else:
            what, goal = (f"{c.step * 100:+.0f} % step detected within 2 reviews",
                          f"lower {low * 100:.1f} % >= 80 %: {'PASS' if low >= 0.80 else 'FAIL'}")
        lines.append(f"| {what} | {c.family} | {c.cycle} | {c.history_days} d | {cadence} | {c.age_days} d | {c.lives} | "
                     f"{c.rate * 100:.1f} % | {low * 100:.1f} .. {high * 100:.1f} % | {goal} |")
        if c.step and c.cadence_days == 30:
            low, high = c.wilson(c.hits_same)
            lines.append(f"| {c.step * 100:+.0f} % step detected by the review whose period holds it | {c.family} | {c.cycle} | "
                         f"{c.history_days} d | {cadence} | {c.age_days} d | {c.lives} | {c.hits_same / c.lives * 100:.1f} % | "
                         f"{low * 100:.1f} .. {high * 100:.1f} % | lower {low * 100:.1f} % >= 80 %: {'PASS' if low >= 0.80 else 'FAIL'} |")
    return "\n".join(lines)


def history_steps(scale: float = 1.0, seed: int = 20260701) -> str:
    """The level step set aside in the history a review reads (``drift.history_step``):
    21 days at the history query's 120 s step, every noise family and cycle; null
    histories (how often a step is set aside) and a -10 % step at a uniform time in the
    last week (how often it is set aside, its time and size, and the hour-of-week
    profile's error against the one the same noise gives without the step)."""
    rng = np.random.default_rng(seed)
    lives = max(10, round(300 * scale))
    n = 21 * DAY
    lines = ["| history | family | cycle | histories | step set aside | Wilson 95 % | time error (median) | size (median) | "
             "profile error, plain / set aside (mean abs, log) |", "|---|---|---|---|---|---|---|---|---|"]
    for family in FAMILIES:
        for cycle in CYCLES:
            for step in (0.0, -0.10):
                hits, when, size, plain, kept = 0, [], [], [], []
                for _ in range(lives):
                    t = int(rng.integers(0, 7)) * 86400.0 + np.arange(n) * STEP
                    clean = path(rng, FAMILIES[family], n) * cycle_factor(t, cycle)
                    at = n - WEEK + int(rng.integers(0, WEEK))
                    x = clean.copy()
                    x[at:] *= 1 + step
                    t2, x2 = t[::2], x[::2]
                    found = history_step(t2, np.log(x2), 2 * STEP)
                    adjusted = known_cycle((t2, x2), MIN_EFFECT)
                    hits += found is not None
                    if found is not None and step:
                        when.append(abs(found.at - t[at]) / 3600)
                        size.append(found.change)
                    if step and cycle != "none":
                        truth = fit_profile((t2, clean[::2]), "week")
                        plain.append(np.abs(fit_profile((t2, x2), "week") - truth).mean())
                        profile = adjusted.profile if adjusted.cycle == "week" and adjusted.profile is not None else fit_profile((t2, x2), "week")
                        kept.append(np.abs(profile - truth).mean())
                ci = sps.binomtest(hits, lives).proportion_ci(0.95, method="wilson")
                what = "null" if not step else f"{step * 100:+.0f} % step in the last week"
                lines.append(f"| {what} | {family} | {cycle} | {lives} | {hits / lives * 100:.1f} % | {ci.low * 100:.1f} .. {ci.high * 100:.1f} % | "
                             + (f"{np.median(when):.1f} h | {np.median(size) * 100:+.1f} % | " if when else "- | - | ")
                             + (f"{np.mean(plain):.4f} / {np.mean(kept):.4f} |" if plain else "- |"))
    return "\n".join(lines)


def step_levels(scale: float = 1.0, seed: int = 20261206) -> str:
    """The step search's CUSUM on weeks without a step (``drift.step_inside``): how often it
    rejects with the long-run variance of the window's AR fit alone and with the history's
    estimates beside it (``drift.history_lrv``), for 4, 7 and 21 days of history read at the
    history query's step, hourly blocks (a 1-day baseline's), at the level a weekly review's
    step path uses (half of ``1 - review_confidence(0.95, 8)``) and at 0.01."""
    rng = np.random.default_rng(seed)
    weeks = max(10, round(2000 * scale))
    level = (1.0 - review_confidence(CONFIDENCE, REVIEWS)) / 2
    every = int(round(prom_history.history_step(HISTORY_SECONDS, STEP) / STEP))
    none = CycleAdjustment(None, True, HISTORY_SECONDS, "")
    lines = [f"| family | history | weeks | p < {level:.2g}: window AR alone | with the history | p < 0.01: window AR alone | with the history |",
             "|---|---|---|---|---|---|---|"]
    for family in FAMILIES:
        for days in (4, 7, 21):
            alone, beside = [], []
            cut = days * DAY
            for _ in range(weeks):
                t = np.arange(cut + WEEK) * STEP
                x = path(rng, FAMILIES[family], t.size)
                times, means = block_means(t[cut:], x[cut:], 3600.0, STEP)
                past = history_lrv((t[:cut:every], x[:cut:every]), 3600.0, none)
                alone.append(step_inside(times, means, 3600.0)[2])
                beside.append(step_inside(times, means, 3600.0, past * float(np.mean(means)) ** 2)[2])
            cells = []
            for cut_p in (level, 0.01):
                for ps in (alone, beside):
                    hits = sum(p < cut_p for p in ps)
                    ci = sps.binomtest(hits, weeks).proportion_ci(0.95, method="wilson")
                    cells.append(f"{hits / weeks * 100:.2f} % [{ci.low * 100:.2f}, {ci.high * 100:.2f}]")
            lines.append(f"| {family} | {days} d | {weeks} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full replicate counts")
    parser.add_argument("--only", choices=("plain", "cycles", "short-history", "monthly", "history-step", "step-level"), help="run one group of cells")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    if args.only in ("history-step", "step-level"):
        print((history_steps if args.only == "history-step" else step_levels)(args.scale))
        print(f"\n{time.perf_counter() - began:.0f} s")
        return 0
    cells = table(args.scale, only=args.only)
    print(render(cells))
    print(f"\n{sum(c.lives for c in cells)} lives in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
