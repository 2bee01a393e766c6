"""Calibration of the drift check (``obsctl review``'s ``baseline_drifted``): false drift over
all the weekly reviews of a baseline's life, and detection of a step.

Each replicate is one baseline's life, through the same function ``review`` calls
(:func:`obsctl.baselining.practice.movement.judge_movement`, with the memory fitted as
``snapshot-baseline`` fits it: on the history plus the baseline window):

- 60 s grid, mean 100, three days of history, a 1-day baseline, then ``REVIEWS`` (8)
  weekly reviews, each judging the 7 days since the previous one against the baseline at
  the level of :func:`obsctl.baselining.practice.movement.review_confidence`; the first review starts ``age`` after the
  baseline's end (0 or 3 days: baselines of different ages);
- nulls: AR(1) with phi 0.95 (5 % sd, tau about 39 min) and a multi-scale sum of three
  AR(1)s (phi 0.5 / 0.95 / 0.995, sds 3 / 3 / 2 %: memory from a minute to about 7 h);
- false drift: a replicate in which *any* of the 8 reviews says moved (goal <= 5 %, upper
  Wilson bound);
- detection: a step of +10 % or -10 % at a uniform time inside review 3's week; detected
  when review 3 or review 4 says moved in the step's direction (goal >= 80 %, lower
  Wilson bound).

Run: ``.venv/bin/python bench/bench_drift.py`` (full: 800 lives per null cell, 200 per
step cell; ``--scale 0.25`` for a quick look). Seeds are fixed per cell.
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

from obsctl.baselining.practice.movement import judge_movement
from obsctl.baselining.statistics.memory import fit_memory

STEP = 60.0
DAY = int(86400 / STEP)
WEEK = 7 * DAY
MU = 100.0
HISTORY, BASELINE = 3 * DAY, DAY
REVIEWS = 8
CONFIDENCE, MIN_EFFECT = 0.95, 0.02
FAMILIES = {
    "AR(1) phi 0.95": ((0.95, 0.05),),
    "multi-scale (phi 0.5, 0.95, 0.995)": ((0.5, 0.03), (0.95, 0.03), (0.995, 0.02)),
}


def ar1(rng: np.random.Generator, phi: float, n: int) -> np.ndarray:
    """A stationary AR(1) path with unit marginal variance, shape ``(n,)``."""
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]


def path(rng: np.random.Generator, family: tuple, n: int) -> np.ndarray:
    """``MU (1 + sum_k sd_k z_k)`` over ``n`` steps."""
    return MU * (1 + sum(sd * ar1(rng, phi, n) for phi, sd in family))


@dataclass
class Cell:
    family: str
    age_days: int
    step: float
    lives: int
    hits: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.hits / self.lives

    def wilson(self) -> tuple[float, float]:
        ci = sps.binomtest(self.hits, self.lives).proportion_ci(0.95, method="wilson")
        return float(ci.low), float(ci.high)


def life(rng: np.random.Generator, family: tuple, age_days: int, step: float) -> list[str]:
    """The verdicts of the ``REVIEWS`` reviews of one baseline's life (a step of ``step``
    inside review 3's week when ``step`` is not 0)."""
    gap = age_days * DAY
    n = HISTORY + BASELINE + gap + REVIEWS * WEEK
    x = path(rng, family, n)
    t = np.arange(n) * STEP
    first = HISTORY + BASELINE + gap
    if step:
        at = first + 2 * WEEK + int(rng.integers(0, WEEK))
        x[at:] *= 1 + step
    memory = fit_memory(t[:HISTORY + BASELINE], x[:HISTORY + BASELINE], STEP)
    base = (t[HISTORY:HISTORY + BASELINE], x[HISTORY:HISTORY + BASELINE])
    out = []
    for k in range(REVIEWS):
        if step and k not in (2, 3):
            out.append("")
            continue
        lo, hi = first + k * WEEK, first + (k + 1) * WEEK
        j = judge_movement(base, (t[lo:hi], x[lo:hi]), STEP, memory, "higher_is_better", MIN_EFFECT, CONFIDENCE, REVIEWS)
        out.append(j.verdict)
    return out


def run_cell(family: str, age_days: int, step: float, lives: int, seed: int) -> Cell:
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    hits = 0
    want = "IMPROVED" if step > 0 else "REGRESSED"
    for _ in range(lives):
        verdicts = life(rng, FAMILIES[family], age_days, step)
        if step:
            hits += any(v == want for v in verdicts[2:4])
        else:
            hits += any(v in ("IMPROVED", "REGRESSED") for v in verdicts)
    return Cell(family, age_days, step, lives, hits, time.perf_counter() - began)


def table(scale: float = 1.0, seed: int = 20260601) -> list[Cell]:
    """Every cell: null x {age 0, 3 d} and +-10 % steps (age 0) for each family."""
    cells = []
    for f, family in enumerate(FAMILIES):
        for a, age in enumerate((0, 3)):
            cells.append(run_cell(family, age, 0.0, max(10, round(800 * scale)), seed + 100 * f + a))
        for s, step in enumerate((0.10, -0.10)):
            cells.append(run_cell(family, 0, step, max(10, round(200 * scale)), seed + 100 * f + 10 + s))
    return cells


def render(cells: list[Cell]) -> str:
    lines = ["| null / step | family | baseline age at review 1 | lives | rate | Wilson 95 % | goal |",
             "|---|---|---|---|---|---|---|"]
    for c in cells:
        low, high = c.wilson()
        if c.step == 0:
            what, goal = "false drift over 8 weekly reviews", f"upper {high * 100:.1f} % <= 5 %: {'PASS' if high <= 0.05 else 'FAIL'}"
        else:
            what, goal = (f"{c.step * 100:+.0f} % step detected within 2 reviews",
                          f"lower {low * 100:.1f} % >= 80 %: {'PASS' if low >= 0.80 else 'FAIL'}")
        lines.append(f"| {what} | {c.family} | {c.age_days} d | {c.lives} | {c.rate * 100:.1f} % | "
                     f"{low * 100:.1f} .. {high * 100:.1f} % | {goal} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full replicate counts")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    cells = table(args.scale)
    print(render(cells))
    print(f"\n{sum(c.lives for c in cells)} lives in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
