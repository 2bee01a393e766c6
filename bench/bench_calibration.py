"""Calibration of verify's verdicts on simulated windows where the truth is known.

AR(1) noise ``x_t = mu (1 + sd z_t)``, ``z_t = phi z_{t-1} + sqrt(1 - phi^2) e_t`` (stationary
start, 5 % sd, 15 s step), three days of history before the baseline (the memory is
fitted on history + baseline, as ``snapshot-baseline`` does), a baseline and a window
that follows it; the window is multiplied by ``1 + effect``. Every replicate goes
through the same in-process functions as ``obsctl verify``
(:func:`obsctl.baselining.statistics.comparison.judge`, ``fit_memory``, the planner).

Cells: null and +5 % / +10 % / -10 % for phi in {0, 0.9, 0.95, 0.99, 0.995} at 1 h vs
1 h, and phi = 0.95 and 0.99 at 6 h vs 6 h; NO_CHANGE at the planner's equal-length
window (phi = 0.95); 12 looks on a cumulative window up to the planner's length for
+10 % (phi = 0.95); look schedules on a null (a look every 5 minutes for 6 h, hourly
looks 6 h past a planned hour) against a fixed interval at every look; baseline
shopping (the lowest of six hourly baselines); the planner's window against the
group-sequential looks' (bench/group_sequential.py); three unchanged guards next to a
+10 % primary (family-wise false REGRESSED); an aged baseline with drift. Rates with Wilson 95 % intervals (scipy ``binomtest``); each goal is
judged on the Wilson bound and printed PASS/FAIL.

Run: ``.venv/bin/python bench/bench_calibration.py`` (full; ``--scale 0.1`` for a quick
look). Seeds are fixed per cell, so the table is reproducible.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field

import group_sequential
import numpy as np
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.statistics import power as planner
from obsctl.baselining.statistics.comparison import LookContext, judge
from obsctl.baselining.statistics.decision import Estimate, decide
from obsctl.baselining.statistics.lrv import Side, full_grid_n_eff, side_estimate
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.baselining.statistics.ratio import estimate_ratio

STEP = 15.0
MU, SD = 100.0, 0.05
HISTORY_STEPS = 3 * 86400 // 15
CONFIDENCE, MARGIN, TOLERANCE = 0.95, 0.02, 0.10
PER_HOUR = 240


def ar1(rng: np.random.Generator, phi: float, n: int) -> np.ndarray:
    """A stationary AR(1) path with unit marginal variance, shape ``(n,)``."""
    e = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    z0 = rng.standard_normal()
    return spsignal.lfilter([1.0], [1.0, -phi], e, zi=[phi * z0])[0]


def series(rng, phi: float, base_steps: int, win_steps: int):
    """(times, values) of history + baseline + window and the memory fitted on history + baseline."""
    n = HISTORY_STEPS + base_steps + win_steps
    x = MU * (1 + SD * ar1(rng, phi, n))
    t = np.arange(n) * STEP
    h = HISTORY_STEPS + base_steps
    memory = fit_memory(t[:h], x[:h], STEP)
    return t, x, memory


def wilson(k: int, n: int) -> tuple[float, float, float]:
    """(rate, low, high) with the Wilson 95 % interval."""
    if n == 0:
        return math.nan, math.nan, math.nan
    ci = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return k / n, float(ci.low), float(ci.high)


@dataclass
class Tally:
    """Counts per outcome."""

    n: int = 0
    counts: dict = field(default_factory=dict)

    def add(self, key: str, hit: bool = True) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(hit)

    def rate(self, key: str, n: int | None = None) -> tuple[float, float, float]:
        return wilson(self.counts.get(key, 0), self.n if n is None else n)


def fixed_cell(phi: float, hours: float, reps: int, seed: int) -> dict[float, Tally]:
    """Null and +5 %/+10 %/-10 % at one fixed look, baseline and window ``hours`` each."""
    rng = np.random.default_rng(seed)
    steps = int(hours * PER_HOUR)
    out = {e: Tally() for e in (0.0, 0.05, 0.10, -0.10)}
    for _ in range(reps):
        t, x, memory = series(rng, phi, steps, steps)
        b0 = HISTORY_STEPS
        base = (t[b0:b0 + steps], x[b0:b0 + steps])
        for effect, tally in out.items():
            j = judge(base, (t[b0 + steps:], x[b0 + steps:] * (1 + effect)), STEP, memory, CONFIDENCE, "higher_is_better", MARGIN, LookContext())
            tally.n += 1
            tally.add(j.verdict)
            tally.add("too_short", "too short" in j.reason)
            if j.low is not None:
                tally.add("interval")
                tally.add("covered", j.low <= effect <= j.high)
    return out


def true_model(phi: float) -> MemoryModel:
    """The exact AR(1) memory (for planning the design cells once, not per replicate)."""
    return MemoryModel(STEP, (phi,) if phi else (), (1.0, phi) if phi else (1.0,), (MU * SD) ** 2, MU, 10**6, 1e9, "history", dof=1e6)


def design_plan(phi: float, effect: float, base_hours: float, looks: int) -> planner.Plan:
    """The planner's answer for the design (true memory and scale, a baseline of ``base_hours``)."""
    model = true_model(phi)
    steps = int(base_hours * PER_HOUR)
    n_eff = full_grid_n_eff(model, steps, STEP)
    sigma = MU * SD
    base = Side(MU, sigma**2 / n_eff, model.dof, steps, n_eff, steps * STEP, sigma, "history", sigma)
    return planner.plan(model, base, STEP, effect, CONFIDENCE, MARGIN, base_hours * 3600, power=0.9)


def no_change_cell(phi: float, reps: int, seed: int) -> tuple[Tally, float]:
    """A null at the planner's equal-length NO_CHANGE window."""
    plan = design_plan(phi, 0.10, 1.0, 1)
    steps = round(plan.no_change_equal_seconds / STEP)
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(reps):
        t, x, memory = series(rng, phi, steps, steps)
        b0 = HISTORY_STEPS
        j = judge((t[b0:b0 + steps], x[b0:b0 + steps]), (t[b0 + steps:], x[b0 + steps:]), STEP, memory, CONFIDENCE, "higher_is_better", MARGIN,
                  LookContext())
        tally.n += 1
        tally.add(j.verdict)
    return tally, plan.no_change_equal_seconds


def cumulative_setup(rng, phi: float, base_steps: int, total: int):
    """``(times, values, memory, baseline (t, v), index of the window's first sample)`` of one replicate."""
    t, x, memory = series(rng, phi, base_steps, total)
    b0 = HISTORY_STEPS
    return t, x, memory, (t[b0:b0 + base_steps], x[b0:b0 + base_steps]), b0 + base_steps


def sequential_cell(phi: float, effect: float, looks: int, reps: int, seed: int, hours: float | None = None) -> tuple[Tally, float]:
    """``looks`` equally spaced looks on a cumulative window up to ``hours`` (default: the
    planner's window for +10 %); stop at the first direction, as an SRE who looks until
    the verdict says something would."""
    plan = design_plan(phi, 0.10, 1.0, looks)
    planned = plan.window_seconds if hours is None else hours * 3600
    total = round(planned / STEP)
    base_steps = PER_HOUR
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(reps):
        t, x, memory, base, w0 = cumulative_setup(rng, phi, base_steps, total)
        final = "INCONCLUSIVE"
        for k in range(1, looks + 1):
            end = w0 + max(2, round(total * k / looks))
            j = judge(base, (t[w0:end], x[w0:end] * (1 + effect)), STEP, memory, CONFIDENCE, "higher_is_better", MARGIN,
                      LookContext(k, plan.window_seconds))
            final = j.verdict
            if j.verdict in ("IMPROVED", "REGRESSED"):
                break
        tally.n += 1
        tally.add(final)
    return tally, planned


def fixed_level_verdict(base, window, memory) -> str:
    """The verdict of one look at the fixed 95 % level (no sequence): what re-running a
    fixed interval at every look would say."""
    sx, sy = (side_estimate(t, v, STEP, memory) for t, v in (base, window))
    est = estimate_ratio(sx, sy)
    interval = est.interval(CONFIDENCE) if sy.n_eff >= planner.N_EFF_MIN else None
    if interval is None:
        return "INCONCLUSIVE"
    return decide(Estimate(est.change, *interval, CONFIDENCE, est.dof), "higher_is_better", MARGIN)[0]


def peeking_cell(phi: float, every_minutes: float, hours: float, reps: int, seed: int) -> Tally:
    """A null, a 1 h baseline, a look every ``every_minutes`` on the cumulative window up to
    ``hours``: the first direction any look calls, with the anytime boundary (``any``) and
    with a fixed 95 % interval at every look (``fixed``)."""
    rng = np.random.default_rng(seed)
    base_steps, total = PER_HOUR, int(hours * PER_HOUR)
    every = max(2, round(every_minutes * 60 / STEP))
    tally = Tally()
    for _ in range(reps):
        t, x, memory, base, w0 = cumulative_setup(rng, phi, base_steps, total)
        seq = fixed = "none"
        for k, end in enumerate(range(w0 + every, w0 + total + 1, every), 1):
            window = (t[w0:end], x[w0:end])
            if seq == "none":
                v = judge(base, window, STEP, memory, CONFIDENCE, "higher_is_better", MARGIN, LookContext(k, 3600.0)).verdict
                seq = v if v in ("IMPROVED", "REGRESSED") else seq
            if fixed == "none":
                v = fixed_level_verdict(base, window, memory)
                fixed = v if v in ("IMPROVED", "REGRESSED") else fixed
        tally.n += 1
        tally.add(f"any {seq}")
        tally.add(f"fixed {fixed}")
    return tally


def shopping_cell(phi: float, reps: int, seed: int) -> Tally:
    """A null; six hourly baselines before the start and the lowest one chosen (a gain looks
    largest against it), one look at the hour after the start. ``verify`` replaces a baseline
    that ended an hour or more before the start by the hour right before it
    (:func:`obsctl.baselining.verdict.aged`), so only the last hour can be chosen in effect."""
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(reps):
        t, x, memory = series(rng, phi, 6 * PER_HOUR, PER_HOUR)
        b0 = HISTORY_STEPS
        hours = [(t[b0 + h * PER_HOUR:b0 + (h + 1) * PER_HOUR], x[b0 + h * PER_HOUR:b0 + (h + 1) * PER_HOUR]) for h in range(6)]
        window = (t[b0 + 6 * PER_HOUR:], x[b0 + 6 * PER_HOUR:])
        lowest = min(range(6), key=lambda h: hours[h][1].mean())
        naive = judge(hours[lowest], window, STEP, memory, CONFIDENCE, "higher_is_better", MARGIN).verdict  # fixed level, across the gap
        used = hours[5]  # an aged choice is replaced by the hour before the start
        verdict = judge(used if lowest < 5 else hours[lowest], window, STEP, memory, CONFIDENCE, "higher_is_better", MARGIN, LookContext()).verdict
        tally.n += 1
        tally.add(f"naive {naive}")
        tally.add(f"verify {verdict}")
    return tally


def group_sequential_window(phi: float, effect: float, looks: int = 12, power: float = 0.9) -> float:
    """The window the group-sequential looks (Lan-DeMets O'Brien-Fleming, ``looks`` equal
    looks, bench/group_sequential.py) needed for ``effect`` at ``power`` against a 1 h
    baseline: the reference for the anytime boundary's price."""
    model = true_model(phi)
    base = design_plan(phi, effect, 1.0, looks)
    n_eff = full_grid_n_eff(model, PER_HOUR, STEP)
    v_x = SD**2 / n_eff
    curve = planner._Curve(model, STEP, 40 * PER_HOUR, SD**2)

    def ok(steps: int) -> bool:
        sizes = [max(2, round(steps * (k + 1) / looks)) for k in range(looks)]
        ses = [math.sqrt((1 + effect) ** 2 * (curve.var(s) + v_x)) for s in sizes]
        fractions = [ses[-1] ** 2 / se**2 for se in ses]
        crit = group_sequential.boundaries(fractions, 1 - CONFIDENCE)
        crit = [c if curve.n_eff(s) >= planner.N_EFF_MIN else math.inf for c, s in zip(crit, sizes)]
        ups, _ = group_sequential.crossing(fractions, crit, abs(effect) / ses[-1])
        return sum(ups) >= power

    steps = curve.shortest(ok, round((base.window_seconds or 3600) / STEP / 2))
    return math.inf if steps is None else steps * STEP


def guards_cell(phi: float, guards: int, reps: int, seed: int) -> Tally:
    """A +10 % primary with ``guards`` unchanged guards (independent AR(1) signals)."""
    rng = np.random.default_rng(seed)
    steps = PER_HOUR
    tally = Tally()
    b0 = HISTORY_STEPS
    for _ in range(reps):
        regressed = undecided = False
        for _g in range(guards):
            t, x, memory = series(rng, phi, steps, steps)
            j = judge((t[b0:b0 + steps], x[b0:b0 + steps]), (t[b0 + steps:], x[b0 + steps:]), STEP, memory, CONFIDENCE, "higher_is_better",
                      MARGIN, LookContext(), guard_tolerance=TOLERANCE, guard_alpha=2 * (1 - CONFIDENCE) / guards)
            regressed |= j.verdict == "REGRESSED"
            undecided |= j.verdict in ("INCONCLUSIVE", "NO_DATA")
        tally.n += 1
        tally.add("any_regressed", regressed)
        tally.add("any_undecided", undecided)
    return tally


def aging_cell(phi: float, drift_per_day: float, gap_hours: float, reps: int, seed: int) -> Tally:
    """A null with a linear drift, the 1 h baseline ending ``gap_hours`` before the start:
    the verdict on the first hour after the start against the aged baseline ("without")
    and, as ``verify`` judges an aged baseline, against the hour right before the start
    ("with", :func:`obsctl.baselining.verdict.before_start`)."""
    rng = np.random.default_rng(seed)
    steps, gap = PER_HOUR, int(gap_hours * PER_HOUR)
    b0 = HISTORY_STEPS
    tally = Tally()
    for _ in range(reps):
        n = b0 + steps + gap + steps
        t = np.arange(n) * STEP
        x = MU * (1 + SD * ar1(rng, phi, n)) * (1 + drift_per_day * t / 86400)
        memory = fit_memory(t[:b0 + steps], x[:b0 + steps], STEP)
        base = (t[b0:b0 + steps], x[b0:b0 + steps])
        start = b0 + steps + gap
        window = (t[start:], x[start:])
        j = judge(base, window, STEP, memory, CONFIDENCE, "higher_is_better", MARGIN)  # one fixed-level look: the confound
        before = judge((t[start - steps:start], x[start - steps:start]), window, STEP, memory, CONFIDENCE, "higher_is_better", MARGIN, LookContext())
        tally.n += 1
        tally.add(f"without {j.verdict}")
        tally.add(f"with {before.verdict}")
        if before.low is not None:
            tally.add("interval")
            tally.add("covered", before.low <= 0 <= before.high)
    return tally


def pct(r: tuple[float, float, float]) -> str:
    rate, lo, hi = r
    return "n/a" if math.isnan(rate) else f"{rate * 100:5.1f} [{lo * 100:4.1f}, {hi * 100:5.1f}]"


def run(scale: float = 1.0, out=sys.stdout) -> list[tuple[str, bool]]:
    """Run every cell (replicates x ``scale``), print the tables, return ``[(goal, passed)]``."""
    goals: list[tuple[str, bool]] = []
    n = lambda full: max(50, int(full * scale))
    print("| cell | reps | false IMPROVED | false REGRESSED | NO_CHANGE | INCONCLUSIVE (too short) | coverage (with interval) "
          "| IMPROVED at +5 % | IMPROVED at +10 % | REGRESSED at -10 % |", file=out)
    print("|---|---|---|---|---|---|---|---|---|---|", file=out)
    cells = [(0.0, 1.0, 1000), (0.9, 1.0, 1000), (0.95, 1.0, 5000), (0.99, 1.0, 1000), (0.995, 1.0, 1000), (0.95, 6.0, 400), (0.99, 6.0, 1000)]
    for i, (phi, hours, full) in enumerate(cells):
        t0 = time.perf_counter()
        res = fixed_cell(phi, hours, n(full), seed=1000 + i)
        null = res[0.0]
        fi, fr = null.rate("IMPROVED"), null.rate("REGRESSED")
        cov = null.rate("covered", null.counts.get("interval", 0))
        short = null.rate("too_short")
        p10 = res[0.10].rate("IMPROVED")
        print(f"| phi={phi}, {hours:g} h vs {hours:g} h | {null.n} | {pct(fi)} | {pct(fr)} | {pct(null.rate('NO_CHANGE'))} | "
              f"{pct(null.rate('INCONCLUSIVE'))} ({pct(short)}) | {pct(cov)} | {pct(res[0.05].rate('IMPROVED'))} | {pct(p10)} | "
              f"{pct(res[-0.10].rate('REGRESSED'))} |", file=out, flush=True)
        goals.append((f"phi={phi} {hours:g}h: false IMPROVED <= 5 %", fi[2] <= 0.05))
        goals.append((f"phi={phi} {hours:g}h: false REGRESSED <= 5 %", fr[2] <= 0.05))
        if phi <= 0.95:
            goals.append((f"phi={phi} {hours:g}h: coverage >= 92 %", cov[1] >= 0.92))
        if phi == 0.95 and hours == 6.0:
            goals.append(("phi=0.95 6h vs 6h: power at +10 % >= 85 %", p10[1] >= 0.85))
        if phi >= 0.99 and hours == 1.0:
            goals.append((f"phi={phi} 1h: mostly INCONCLUSIVE 'too short'", short[1] > 0.5))
        print(f"cell phi={phi} {hours:g} h: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(file=out)
    tally, seconds = no_change_cell(0.95, n(1000), seed=2000)
    r = tally.rate("NO_CHANGE")
    print(f"NO_CHANGE at the planner's equal-length window ({seconds / 3600:.1f} h vs {seconds / 3600:.1f} h), phi=0.95 null, {tally.n} reps: "
          f"NO_CHANGE {pct(r)}, false IMPROVED {pct(tally.rate('IMPROVED'))}, false REGRESSED {pct(tally.rate('REGRESSED'))}", file=out, flush=True)
    goals.append(("NO_CHANGE at the planner's window >= 80 %", r[1] >= 0.80))
    null, planned = sequential_cell(0.95, 0.0, 12, n(1000), seed=3000)
    alt, _ = sequential_cell(0.95, 0.10, 12, n(1000), seed=3001)
    fi, pw = null.rate("IMPROVED"), alt.rate("IMPROVED")
    print(f"12 looks up to the planned {planned / 60:.0f} min (phi=0.95, baseline 1 h, planned for +10 % at 90 % power): "
          f"null false IMPROVED at any look {pct(fi)}, false REGRESSED {pct(null.rate('REGRESSED'))}; +10 % IMPROVED by the last look {pct(pw)} "
          f"({null.n} + {alt.n} reps)", file=out, flush=True)
    goals.append(("12 looks: false IMPROVED at any look <= 5 %", fi[2] <= 0.05))
    goals.append(("12 looks: power by the last look >= 80 %", pw[1] >= 0.80))
    print(file=out)
    print("| look schedule (null, phi=0.95, baseline 1 h) | reps | false IMPROVED, anytime boundary | false REGRESSED, anytime | "
          "false IMPROVED, fixed 95 % at every look | false REGRESSED, fixed |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    for label, every, hours, full, seed in (("cumulative, every 5 min for 6 h (72 looks)", 5, 6.0, 400, 3100),
                                            ("cumulative, hourly for 6 h past a planned 1 h (6 looks)", 60, 6.0, 400, 3101)):
        p = peeking_cell(0.95, every, hours, n(full), seed=seed)
        a_i, a_r = p.rate("any IMPROVED"), p.rate("any REGRESSED")
        print(f"| {label} | {p.n} | {pct(a_i)} | {pct(a_r)} | {pct(p.rate('fixed IMPROVED'))} | {pct(p.rate('fixed REGRESSED'))} |", file=out, flush=True)
        goals.append((f"{label}: false IMPROVED <= 5 %", a_i[2] <= 0.05))
        goals.append((f"{label}: false REGRESSED <= 5 %", a_r[2] <= 0.05))
    print("| latest-window looks (`--window 1h` after the first hour), a start moved after looks, close-and-restart | - | refused: "
          "not a look on the change's sequence (verify, initiative start) | | | |", file=out)
    shop = shopping_cell(0.95, n(400), seed=3102)
    s_i = shop.rate("verify IMPROVED")
    print(f"| the lowest of six hourly baselines chosen, one look | {shop.n} | {pct(s_i)} | {pct(shop.rate('verify REGRESSED'))} | "
          f"{pct(shop.rate('naive IMPROVED'))} (compared across the gap) | {pct(shop.rate('naive REGRESSED'))} |", file=out, flush=True)
    goals.append(("baseline shopping: false IMPROVED <= 5 %", s_i[2] <= 0.05))
    gs = group_sequential_window(0.95, 0.10)
    ratio = planned / gs
    print(f"\nPrice of anytime validity (phi=0.95, baseline 1 h, +10 % at 90 % power): the planner's window {planned / 60:.0f} min "
          f"against {gs / 60:.0f} min for 12 group-sequential looks: {ratio:.2f}x", file=out, flush=True)
    goals.append(("the planned window grows at most 2.5x against the group-sequential plan", ratio <= 2.5))
    g = guards_cell(0.95, 3, n(1000), seed=4000)
    fw = g.rate("any_regressed")
    print(f"3 unchanged guards (phi=0.95, 1 h vs 1 h, tolerance {TOLERANCE:.0%}, Bonferroni): family-wise false REGRESSED {pct(fw)}, "
          f"any guard undecided {pct(g.rate('any_undecided'))} ({g.n} reps)", file=out, flush=True)
    goals.append(("guards: family-wise false REGRESSED <= 5 %", fw[2] <= 0.05))
    a = aging_cell(0.9, 0.02, 23.0, n(400), seed=5000)
    print(f"+2 %/day drift, no change, 1 h baseline ending 1 day before the start (phi=0.9): false IMPROVED against the aged baseline "
          f"{pct(a.rate('without IMPROVED'))}, against the hour before the start (verify) {pct(a.rate('with IMPROVED'))}; false REGRESSED "
          f"{pct(a.rate('with REGRESSED'))}; coverage of 0 {pct(a.rate('covered', a.counts.get('interval', 0)))} ({a.n} reps)", file=out, flush=True)
    goals.append(("aged baseline (+2 %/day): false IMPROVED <= 5 %", a.rate("with IMPROVED")[2] <= 0.05))
    print(file=out)
    for goal, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}  {goal}", file=out)
    return goals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="replicates x this factor (1 = the documented run)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    goals = run(args.scale)
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0 if all(ok for _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
