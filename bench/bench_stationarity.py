"""Calibration of the baseline's stationarity test and of the window's variance-vs-memory checks.

Two groups of families, each replicate through the functions ``snapshot-baseline`` and
``verify`` call: the memory fitted on three days of history plus the baseline
(:func:`obsctl.baselining.statistics.memory.fit_memory`), the placebo checks of that
history (:func:`obsctl.baselining.statistics.placebo.placebo_check`), the baseline's
stationarity test (:func:`obsctl.baselining.measure.stationarity.baseline_stationarity`,
stored on the baseline), then three cumulative looks (1/3, 2/3 and all of the window)
through :func:`obsctl.baselining.statistics.comparison.judge` with the window checks of
statistics/assumptions.py, capped as :func:`obsctl.baselining.decide.verdict.judge_primary`
caps (:func:`obsctl.baselining.decide.caps.apply_caps` of
:func:`obsctl.baselining.decide.caps.stationarity_cap`, and the later-level check of
:mod:`obsctl.baselining.decide.later_level`: a suggestive baseline's window judged again
against the baseline's part after the split, or its least-squares line's end when the
trend is the likelier move).

Signal: AR(1), phi 0.95, 5 % sd, mean 100, 15 s step (bench/bench_calibration.py's).

- **Baselines that moved** (no change at the start: every IMPROVED / REGRESSED is false):
  a +8 % step at the middle of a 2 h and of a 1 h baseline, the window at the later
  level; a +8 % ramp over a 2 h baseline, flat after it (each also without the cap, on
  the same replicates: the contrast); steady 1 h and 2 h baselines (how often the test flags a baseline that
  did not move: the cap's price).
- **Variance apart from memory**: the window's fluctuations scaled by 1/sqrt(2) (variance
  halved) or sqrt(2) (doubled) at the change, memory unchanged, with and without a +10 %
  change of the mean, 1 h vs 1 h and 2 h vs 2 h.

Goals (docs/verification.md, "Baselines that moved inside their window"): false IMPROVED
and false REGRESSED at any look <= 5 % (Wilson 95 % upper bound); for the variance
families coverage >= 92 % at every look with >= 200 intervals, no INCONCLUSIVE
"assumption failed" for a variance change alone, and the power at +10 % reported.

Run: ``.venv/bin/python bench/bench_stationarity.py`` (``--reps 100`` for a quick look;
seeds are fixed per family, ``--seed`` moves them all; ``--family I`` runs moved families
by index; ``--no-line-end`` and ``--suggestive 0`` the check without the line's end and
without any later-level comparison, on the same seeds).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from bench_calibration import CONFIDENCE, HISTORY_STEPS, MARGIN, MU, PER_HOUR, SD, STEP, Tally, _Now, _one_blas_thread, ar1, pct

from obsctl.baselining.decide import later_level
from obsctl.baselining.decide.caps import apply_caps, stationarity_cap
from obsctl.baselining.measure.stationarity import baseline_stationarity
from obsctl.baselining.statistics import placebo as placebo_mod
from obsctl.baselining.statistics.comparison import BaselineSide, Criterion, LookContext, judge
from obsctl.baselining.statistics.memory import fit_memory
from obsctl.records import Memory

PHI = 0.95
LOOK_FRACTIONS = (1 / 3, 2 / 3, 1.0)


@dataclass(frozen=True)
class Scenario:
    """``shape(n, b0, base_steps) -> multiplier`` of the level over the whole series (1: flat);
    ``window_sd``: the window's fluctuations scaled by it; ``cap``: apply the stationarity cap."""

    name: str
    base_steps: int
    win_steps: int
    shape: object = None
    window_sd: float = 1.0
    cap: bool = True


def _step(at: float, size: float):
    def shape(n, b0, base):
        m = np.ones(n)
        m[b0 + round(at * base):] *= 1 + size
        return m
    return shape


def _ramp(size: float):
    def shape(n, b0, base):
        return 1 + size * np.clip((np.arange(n) - b0) / base, 0.0, 1.0)
    return shape


H1, H2 = PER_HOUR, 2 * PER_HOUR
MOVED = (
    Scenario("+8 % step at the middle of a 2 h baseline, 2 h window at the later level", H2, H2, _step(0.5, 0.08)),
    Scenario("+8 % step at the middle of a 1 h baseline, 2 h window at the later level", H1, H2, _step(0.5, 0.08)),
    Scenario("+8 % ramp over a 2 h baseline, flat after it, 2 h window", H2, H2, _ramp(0.08)),
    Scenario("steady 1 h baseline, 1 h window", H1, H1),
    Scenario("steady 2 h baseline, 2 h window", H2, H2),
)
VARIANCE = (
    Scenario("variance halved at the change, 1 h vs 1 h", H1, H1, window_sd=math.sqrt(0.5)),
    Scenario("variance halved at the change, 2 h vs 2 h", H2, H2, window_sd=math.sqrt(0.5)),
    Scenario("variance doubled at the change, 1 h vs 1 h", H1, H1, window_sd=math.sqrt(2.0)),
    Scenario("variance doubled at the change, 2 h vs 2 h", H2, H2, window_sd=math.sqrt(2.0)),
)
EFFECT = 0.10


def replicate(rng: np.random.Generator, sc: Scenario, effect: float, placebo: bool = True,
              suggestive: float = later_level.SUGGESTIVE, line: bool = True) -> dict:
    """One replicate: the verdict at each look (capped: a moved baseline, and a suggestive one
    whose window disagrees against the level the baseline ended at, ``suggestive`` the
    threshold; ``line``: that level is the least-squares line's end when the trend test is
    the likelier move, else always the later part), the intervals, the stationarity test."""
    b0 = HISTORY_STEPS
    start = b0 + sc.base_steps
    n = start + sc.win_steps
    t = np.arange(n) * STEP
    z = ar1(rng, PHI, n)
    z[start:] *= sc.window_sd  # the window's fluctuations (an AR(1) scaled: the same memory)
    x = MU * (1 + SD * z)
    if sc.shape is not None:
        x *= sc.shape(n, b0, sc.base_steps)
    x[start:] *= 1 + effect
    memory = fit_memory(t[:start], x[:start], STEP)
    stored = Memory(**{k: v for k, v in memory.as_dict().items() if k != "tau_seconds"}) if memory is not None else None
    steady = baseline_stationarity((t[b0:start], x[b0:start]), STEP, stored)
    base = SimpleNamespace(id="bench", workload_class="bench", signal="x", stationarity=steady,
                           window=SimpleNamespace(end=_utc(t[start - 1]), step_seconds=STEP))
    cap = stationarity_cap(base) if sc.cap else (None, "")
    checks = []
    if placebo and memory.source == "history":
        checks = [c for c in (placebo_mod.placebo_check(t[:b0], x[:b0], STEP, memory, sc.base_steps * STEP, w)
                              for w in placebo_mod.window_lengths(sc.win_steps * STEP)) if c is not None]
    looks, later_capped = [], False
    tb, xb = t[b0:start], x[b0:start]
    use_line = sc.cap and steady is not None and later_level.reference(steady, line) == "line"
    end_side = BaselineSide(later_level.line_end(tb, xb, STEP, memory), False, STEP) if use_line else None
    for k, frac in enumerate(LOOK_FRACTIONS, 1):
        end = start + round(sc.win_steps * frac)
        check = placebo_mod.for_window(checks, (end - start) * STEP)
        j = judge((t[b0:start], x[b0:start]), (t[start:end], x[start:end]), STEP, memory, Criterion(CONFIDENCE, "higher_is_better", MARGIN),
                  LookContext(k, sc.win_steps * STEP), widen=check.widen if check else None)
        caps = [cap] if cap[0] else []
        if sc.cap and later_level.applies(j.verdict, j.change, steady, suggestive, line):
            # judge_primary's later_level_check: the window against the level the baseline ended at
            # (its least-squares line's end, or its part after the split).
            tl, xl = later_level.later_part(tb, xb, steady) if end_side is None else (tb, xb)
            jl = judge((tl, xl) if end_side is None else end_side, (t[start:end], x[start:end]), STEP, memory,
                       Criterion(CONFIDENCE, "higher_is_better", MARGIN), LookContext(k, sc.win_steps * STEP),
                       widen=check.widen if check else None)
            later = later_level.later_level_cap(j.verdict, jl.verdict, (jl.change, jl.low, jl.high), steady, tl.size, line=end_side is not None)
            caps += [later] if later[0] else []
            later_capped |= later[0] is not None
        verdict, reason = apply_caps(j.verdict, j.reason, caps)
        looks.append((verdict, reason, j.low, j.high, j.verdict))
    return {"looks": looks, "moved": bool(steady and steady.moved), "kind": steady.kind if steady else "", "later": later_capped,
            "suggestive": later_level.suggestive(steady, suggestive),
            "step_at": steady.step_at.timestamp() - t[b0] if steady else math.nan}


def _utc(seconds: float):
    import datetime as dt

    return dt.datetime.fromtimestamp(float(seconds) + 1.7e9, tz=dt.UTC)


def cell(sc: Scenario, reps: int, seed: int, effects: tuple[float, ...], placebo: bool = True,
         suggestive: float = later_level.SUGGESTIVE, line: bool = True) -> dict[float, Tally]:
    """``reps`` replicates per effect; counts as bench_calibration's families plus ``flagged``
    (the stationarity test said the baseline moved), ``assumption`` (INCONCLUSIVE
    "assumption failed" at some look), ``later`` (the later-level check made a look
    INCONCLUSIVE) and ``quiet IMPROVED`` (an IMPROVED at some look on a baseline whose test
    was neither flagged nor suggestive: one no check of the baseline could withhold)."""
    rng = np.random.default_rng(seed)
    out = {e: Tally() for e in effects}
    for _ in range(reps):
        for effect, tally in out.items():
            r = replicate(rng, sc, effect, placebo, suggestive, line)
            tally.n += 1
            tally.add("later", r["later"])
            tally.add("flagged", r["moved"])
            tally.add(f"kind {r['kind']}", r["moved"])
            seen = raw = refused = False
            for k, (verdict, reason, low, high, uncapped) in enumerate(r["looks"], 1):
                if verdict in ("IMPROVED", "REGRESSED") and not seen:
                    tally.add(f"any {verdict}")
                    tally.add(f"quiet {verdict}", not r["moved"] and not r["suggestive"])
                    seen = True
                if uncapped in ("IMPROVED", "REGRESSED") and not raw:  # the same replicate without the cap: the contrast
                    tally.add(f"uncapped {uncapped}")
                    raw = True
                refused |= reason.startswith("assumption failed")
                if low is not None:
                    tally.add(f"interval {k}")
                    tally.add(f"covered {k}", low <= effect <= high)
            tally.add("assumption", refused)
            tally.add(f"last {r['looks'][-1][0]}")
    return out


def _cell_at(group: str, index: int, reps: int, seed: int, effects: tuple[float, ...],
             suggestive: float = later_level.SUGGESTIVE, line: bool = True) -> dict[float, Tally]:
    return cell((MOVED if group == "moved" else VARIANCE)[index], reps, seed, effects, suggestive=suggestive, line=line)


def coverage(res: dict[float, Tally]) -> tuple[float, float, float]:
    rates = [t.rate(f"covered {k}", t.counts.get(f"interval {k}", 0)) for t in res.values() for k in range(1, 4)
             if t.counts.get(f"interval {k}", 0) >= 200]
    return min(rates, key=lambda r: r[1]) if rates else (math.nan, math.nan, math.nan)


def run(reps: int, seed: int, pool=None, out=sys.stdout, groups: tuple[str, ...] = ("moved", "variance"),
        suggestive: float = later_level.SUGGESTIVE, line: bool = True, only: tuple[int, ...] | None = None) -> list[tuple[str, bool]]:
    """Both tables (``groups``: which; ``suggestive``: the later-level check's threshold,
    :data:`obsctl.baselining.decide.later_level.SUGGESTIVE`, 0: off; ``line``: compare with
    the line's end after a likelier trend; ``only``: the moved families by index);
    returns ``[(goal, passed)]``."""
    pool = pool or _Now()
    picked = [(i, sc) for i, sc in enumerate(MOVED) if only is None or i in only]
    moved = ([(sc, pool.submit(_cell_at, "moved", i, reps, seed + i, (0.0,) if sc.shape is not None else (0.0, EFFECT), suggestive, line))
              for i, sc in picked] if "moved" in groups else [])
    variance = ([pool.submit(_cell_at, "variance", i, reps, seed + 100 + i, (0.0, EFFECT), suggestive, line) for i in range(len(VARIANCE))]
                if "variance" in groups else [])
    goals: list[tuple[str, bool]] = []
    if moved:
        _moved_table(moved, goals, out)
    if variance:
        _variance_table(variance, goals, out)
    for goal, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}  {goal}", file=out)
    return goals


def _moved_table(moved, goals, out) -> None:
    print("| baseline (AR(1) phi 0.95, 5 % sd; no change at the start) | reps | baseline flagged as moved | capped by the later-level check | "
          "false IMPROVED (any look) | of which on a baseline neither flagged nor suggestive | false REGRESSED (any look) | "
          "INCONCLUSIVE at the last look | without the caps: false IMPROVED / REGRESSED | +10 %: IMPROVED at some look (without the caps) |",
          file=out)
    print("|---|---|---|---|---|---|---|---|---|---|", file=out)
    for sc, fut in moved:
        res = fut.result()
        null, alt = res[0.0], res.get(EFFECT)
        fi, fr = null.rate("any IMPROVED"), null.rate("any REGRESSED")
        power = f"{pct(alt.rate('any IMPROVED'))} ({pct(alt.rate('uncapped IMPROVED'))})" if alt is not None else "n/a"
        print(f"| {sc.name} | {null.n} | {pct(null.rate('flagged'))} | {pct(null.rate('later'))} | {pct(fi)} | "
              f"{null.counts.get('quiet IMPROVED', 0)} of {null.counts.get('any IMPROVED', 0)} | {pct(fr)} | "
              f"{pct(null.rate('last INCONCLUSIVE'))} | {pct(null.rate('uncapped IMPROVED'))} / {pct(null.rate('uncapped REGRESSED'))} | "
              f"{power} |", file=out, flush=True)
        if sc.cap:
            goals.append((f"{sc.name}: false IMPROVED <= 5 %", fi[2] <= 0.05))
            goals.append((f"{sc.name}: false REGRESSED <= 5 %", fr[2] <= 0.05))
    print(file=out)


def _variance_table(variance, goals, out) -> None:
    print("| window (AR(1) phi 0.95, 5 % sd, memory unchanged) | reps | false IMPROVED (null) | false REGRESSED (null) | "
          "refused 'assumption failed' (null / +10 %) | coverage, worst look (null and +10 %) | +10 %: IMPROVED at some look | "
          "baseline flagged |", file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    for sc, fut in zip(VARIANCE, variance, strict=False):  # variance is empty when its group is not run
        res = fut.result()
        null, alt = res[0.0], res[EFFECT]
        fi, fr, cov = null.rate("any IMPROVED"), null.rate("any REGRESSED"), coverage(res)
        print(f"| {sc.name} | {null.n} | {pct(fi)} | {pct(fr)} | {pct(null.rate('assumption'))} / {pct(alt.rate('assumption'))} | "
              f"{pct(cov)} | {pct(alt.rate('any IMPROVED'))} | {null.rate('flagged')[0] * 100:.1f} |", file=out, flush=True)
        goals.append((f"{sc.name}: false IMPROVED <= 5 %", fi[2] <= 0.05))
        goals.append((f"{sc.name}: false REGRESSED <= 5 %", fr[2] <= 0.05))
        if not math.isnan(cov[1]):
            goals.append((f"{sc.name}: coverage >= 92 %", cov[1] >= 0.92))
        goals.append((f"{sc.name}: no refusal for the variance alone (<= 1 %)", null.rate("assumption")[0] <= 0.01))
    print(file=out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="replicates per family and effect (300: the documented run)")
    parser.add_argument("--seed", type=int, default=8100, help="first seed (the families' seeds follow it)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes the cells run in")
    parser.add_argument("--only", choices=("moved", "variance"), default=None, help="one table only")
    parser.add_argument("--suggestive", type=float, default=later_level.SUGGESTIVE,
                        help="the later-level check's threshold on the stationarity test's smaller p-value (0: off)")
    parser.add_argument("--no-line-end", action="store_true",
                        help="judge a suggestive baseline's window against its part after the split only, never against its "
                             "least-squares line's end (the check as it was before the line's end)")
    parser.add_argument("--family", type=int, action="append", default=None,
                        help=f"a moved family by index (0-{len(MOVED) - 1}, the table's order; repeatable; default: all)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, args.workers), initializer=_one_blas_thread) as pool:
        goals = run(args.reps, args.seed, pool, groups=(args.only,) if args.only else ("moved", "variance"), suggestive=args.suggestive,
                    line=not args.no_line_end, only=tuple(args.family) if args.family else None)
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0 if all(ok for _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
