"""Calibration of the batch-means fallback: a change that lengthens the signal's memory,
judged in windows that span 10-20 of the memory fitted on them.

Two tables:

1. **The method alone** (:func:`obsctl.baselining.statistics.batch_means.batch_side`): the
   Student t interval of a stationary AR(1) window's mean from ``B`` batch means, for windows
   of 8-40 integrated autocorrelation times (true ones) and ``B`` = 4, 5, 6, 8: coverage of
   the true mean and the interval's width over the true standard deviation of the mean.
2. **Through the verdict** (:func:`obsctl.baselining.statistics.comparison.judge`, with the
   window checks of statistics/assumptions.py and the placebo widening, as
   ``bench/bench_calibration.py``'s families): a 2 h baseline at phi 0.90 (15 s step, 3 days
   of history), the change moving phi to 0.98 or 0.99 at the same spread, windows of 4-12 h
   (three cumulative looks at 1/3, 2/3 and all of the window: 3-19 true memories), null and
   +5 %. Columns as bench_calibration's family table; "assumption failed" counts the looks
   still refused.

Goals (docs/verification.md): false IMPROVED and false REGRESSED at any look <= 5 % (Wilson
upper bound), coverage >= 92 % at every look with >= 200 intervals.

Run: ``.venv/bin/python bench/bench_memory_batches.py`` (``--reps 100`` for a quick look;
fixed seeds; ``--off --method-reps 0``: the families without the fallback, the contrast).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from bench_calibration import (
    FAMILY_HEADER,
    HISTORY_STEPS,
    PER_HOUR,
    Family,
    _one_blas_thread,
    _phi_change,
    family_cell,
    family_goals,
    family_row,
)
from scipy import stats as sps

from obsctl.baselining.statistics import batch_means
from obsctl.baselining.statistics.batch_means import batch_side

MU, SD = 100.0, 0.05


def _change(phi_after: float):
    def make(rng, n, start, effect):
        x = MU * (1 + SD * _phi_change(rng, n, start, 0.90, phi_after))
        x[start:] *= 1 + effect
        return x
    return make


FAMILIES = (
    Family("memory 0.90 -> 0.98 (tau 4.8 -> 24.8 min), 2 h baseline, 4 h window (3.2 / 6.5 / 9.7 tau)", _change(0.98), HISTORY_STEPS,
           2 * PER_HOUR, 4 * PER_HOUR),
    Family("memory 0.90 -> 0.98, 2 h baseline, 8 h window (6.5 / 12.9 / 19.4 tau)", _change(0.98), HISTORY_STEPS, 2 * PER_HOUR,
           8 * PER_HOUR),
    Family("memory 0.90 -> 0.99 (tau 49.8 min), 2 h baseline, 12 h window (4.8 / 9.6 / 14.5 tau)", _change(0.99), HISTORY_STEPS,
           2 * PER_HOUR, 12 * PER_HOUR),
)


def method_table(reps: int, seed: int, out=sys.stdout) -> None:
    """Table 1: the t interval from B batch means of AR(1) windows of 600 steps."""
    rng = np.random.default_rng(seed)
    n = 600
    print("| batches B | window / tau (true) | coverage of the mean % | width / true sd of the mean |\n|---|---|---|---|", file=out)
    for batches in (4, 5, 6, 8):
        for ratio in (8, 10, 14, 20, 40):
            tau = n / ratio
            phi = (tau - 1) / (tau + 1)
            q = sps.t.ppf(0.975, batches - 1)
            covered, widths, means = 0, [], []
            t = np.arange(n) * 15.0
            for _ in range(reps):
                e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
                z = np.empty(n)
                z[0] = rng.standard_normal()
                for i in range(1, n):
                    z[i] = phi * z[i - 1] + e[i]
                side = batch_side(t, z, 15.0, batches)
                covered += abs(side.mean) <= q * side.se
                widths.append(q * side.se)
                means.append(side.mean)
            print(f"| {batches} | {ratio} | {100 * covered / reps:.1f} | {np.mean(widths) / np.std(means):.2f} |", file=out, flush=True)


def _cell(index: int, reps: int, seed: int):
    return family_cell(FAMILIES[index], reps, seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="replicates per family and effect (default 300)")
    parser.add_argument("--method-reps", type=int, default=2000, help="replicates per cell of the method's table (default 2000)")
    parser.add_argument("--seed", type=int, default=7300)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--off", action="store_true", help="without the fallback (refused below 20 memories, as before it): the contrast")
    parser.add_argument("--min-span", type=float, default=None,
                        help="the fallback's fewest memories (default: batch_means.MIN_SPAN_MEMORIES): the trade table")
    args = parser.parse_args()
    if args.min_span is not None:
        batch_means.MIN_SPAN_MEMORIES = args.min_span
    if args.off:  # set before the workers fork, so they inherit it
        batch_means.MIN_SPAN_MEMORIES = math.inf
    started = time.time()
    with ProcessPoolExecutor(args.workers, initializer=_one_blas_thread) as pool:
        cells = [pool.submit(_cell, i, args.reps, args.seed + i) for i in range(len(FAMILIES))]
        if args.method_reps:
            method_table(args.method_reps, args.seed - 1)
            print(file=sys.stdout)
        print(FAMILY_HEADER)
        goals = []
        for family, fut in zip(FAMILIES, cells, strict=True):
            res = fut.result()
            print(family_row(family, res), flush=True)
            goals += family_goals(family.name.split(",")[0], res)
    print()
    for goal, passed in goals:
        print(("PASS  " if passed else "FAIL  ") + goal)
    print(f"\n{time.time() - started:.0f} s")
    return 0 if all(p for _, p in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
