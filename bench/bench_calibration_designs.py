"""Calibration of the comparison designs: seeded simulation, Wilson intervals.

Every cell simulates ``--replicates`` independent pairs of periods where the truth is
known and judges each through the code ``obsctl verify`` runs: the design's ``effect()``
(:mod:`obsctl.baselining.designs`), the checks (cycle, demand and saturation, mix) and
:func:`obsctl.baselining.designs.judge.judge`. It prints, per cell, the share of each
verdict, the interval's coverage of the true effect, each with a 95 % Wilson interval,
and whether the cell's goal holds **on the Wilson bound**.

Simulation model (docs/verification-designs.md states it in full): 15 s step; a signal
``y_t = level * cycle_t * drift_t * (1 + effect after the change) * exp(noise_t)`` with

- ``cycle_t = 1 + 0.30 sin(2 pi t / 1 day + theta)``, ``theta`` uniform per replicate
  (so the window falls at a random hour of day);
- ``drift_t = exp(g * t / 1 day)``, ``g`` uniform in [-0.2, 0.2] per replicate (demand drift);
- ``noise_t`` AR(1) with ``phi = 0.95`` per step and a 5 % marginal standard deviation
  (integrated autocorrelation time 39 steps, about 10 minutes);
- for ``control`` and ``canary`` the treated and the control series share the cycle, the
  drift and half of the noise variance (a common AR(1) component); the other half is
  each series' own.

Run: ``.venv/bin/python bench/bench_calibration_designs.py`` (1,000 replicates per cell,
2,000 where a goal is close, seed 20261201; about 2 minutes on 2 cores).
``--replicates N`` and ``--cells a,b`` make smaller runs (the tests use them).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.designs import (
    before_after,
    canary,
    control,
    cycle,
    demand,
    judge,
    mix,
    seasonal,
)
from obsctl.rules import saturation

STEP = 15
HOUR = 3600
DAY = 86400
PHI = 0.95
SIGMA = 0.05
CYCLE = 0.30
DRIFT = 0.20
CONFIDENCE = 0.95
MIN_EFFECT = 0.02
#: History before the compared periods that lends the memory model (as verify queries it).
HISTORY = 6 * HOUR
#: An epoch-aligned origin (midnight UTC) so baselines and windows sit on the 15 s grid.
T0 = 1_798_761_600


def ar1(rng: np.random.Generator, shape: tuple[int, int], sd: float, phi: float = PHI) -> np.ndarray:
    """Stationary AR(1) paths, ``shape = (replicates, n)``, marginal standard deviation ``sd``."""
    innov = rng.normal(0.0, sd * np.sqrt(1 - phi**2), shape)
    start = rng.normal(0.0, sd, shape[0])
    innov[:, 0] = start
    return spsignal.lfilter([1.0], [1.0, -phi], innov, axis=-1)


def grid(start: float, seconds: float) -> np.ndarray:
    """Instants ``start + step, ..., start + seconds`` (the ``(start, end]`` window)."""
    return start + STEP * np.arange(1, int(seconds // STEP) + 1)


@dataclass
class Shared:
    """What treated and control share: cycle phase, drift rate, the common noise of one stretch."""

    theta: np.ndarray
    g: np.ndarray

    def level(self, t: np.ndarray, cycle_amp: float = CYCLE, drift: bool = True) -> np.ndarray:
        c = 1 + cycle_amp * np.sin(2 * np.pi * t[None, :] / DAY + self.theta[:, None])
        d = np.exp(self.g[:, None] * (t[None, :] - T0) / DAY) if drift else 1.0
        return c * d


def shared(rng: np.random.Generator, reps: int, drift: bool = True) -> Shared:
    return Shared(rng.uniform(0, 2 * np.pi, reps), rng.uniform(-DRIFT, DRIFT, reps) if drift else np.zeros(reps))


def pair_noise(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Treated and control noise: a common AR(1) with half the variance, plus each one's own half."""
    half = SIGMA / np.sqrt(2)
    common = ar1(rng, (reps, n), half)
    return common + ar1(rng, (reps, n), half), common + ar1(rng, (reps, n), half)


def samples(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.column_stack([t, y])


@dataclass
class Cell:
    """One calibration cell: a name, what it simulates, the truth, and its goal."""

    key: str
    title: str
    run: Callable[[np.random.Generator, int], list]
    truth: float
    goal: str
    check: Callable[[dict], bool]
    replicates_factor: int = 1


@dataclass
class Tally:
    verdicts: dict[str, int] = field(default_factory=lambda: {v: 0 for v in ("IMPROVED", "REGRESSED", "NO_CHANGE", "INCONCLUSIVE", "NO_DATA")})
    covered: int = 0
    defined: int = 0
    n: int = 0


def wilson(k: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion (scipy's binomtest)."""
    if n == 0:
        return (0.0, 1.0)
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def tally(judgements: list[tuple[judge.Judgement, tuple[float | None, float | None]]], truth: float) -> Tally:
    """Count verdicts and coverage; the interval is the judged one unless a cell gives another."""
    out = Tally()
    for j, (low, high) in judgements:
        out.n += 1
        out.verdicts[j.verdict] += 1
        if low is not None and high is not None:
            out.defined += 1
            out.covered += int(low <= truth <= high)
    return out


def _interval(j: judge.Judgement) -> tuple[float | None, float | None]:
    return j.effect.ci_low, j.effect.ci_high


# --- cells --------------------------------------------------------------------------


def cell_before_after_cycle(rng, reps, *, detect=True):
    """Null, +-30 % daily cycle, 24 h baseline then a 1 h window, before-after."""
    sh = shared(rng, reps, drift=False)
    tb, tw = grid(T0, DAY), grid(T0 + DAY, HOUR)
    noise = ar1(rng, (reps, tb.size + tw.size), SIGMA)
    yb = 1000 * sh.level(tb, drift=False) * np.exp(noise[:, : tb.size])
    yw = 1000 * sh.level(tw, drift=False) * np.exp(noise[:, tb.size :])
    out = []
    for i in range(reps):
        e = before_after.effect(samples(tb, yb[i]), samples(tw, yw[i]), CONFIDENCE)
        c = cycle.detect(samples(tb, yb[i]), MIN_EFFECT) if detect else None
        j = judge.judge(e, "higher_is_better", MIN_EFFECT, cycle=c)
        out.append((j, _interval(j)))
    return out


def cell_cycle_false_alarm(rng, reps, phi=PHI):
    """No cycle (AR(1) noise only), 24 h baseline, 1 h window, before-after with cycle detection."""
    sh = shared(rng, reps, drift=False)
    tb, tw = grid(T0, DAY), grid(T0 + DAY, HOUR)
    noise = ar1(rng, (reps, tb.size + tw.size), SIGMA, phi)
    yb = 1000 * sh.level(tb, cycle_amp=0.0) * np.exp(noise[:, : tb.size])
    yw = 1000 * sh.level(tw, cycle_amp=0.0) * np.exp(noise[:, tb.size :])
    out = []
    for i in range(reps):
        e = before_after.effect(samples(tb, yb[i]), samples(tw, yw[i]), CONFIDENCE)
        j = judge.judge(e, "higher_is_better", MIN_EFFECT, cycle=cycle.detect(samples(tb, yb[i]), MIN_EFFECT))
        out.append((j, _interval(j)))
    return out


def cell_seasonal(rng, reps, gain=0.0):
    """+-30 % daily cycle, 24 h stored baseline, the 1 h window right after it, seasonal."""
    sh = shared(rng, reps, drift=False)
    tb, tw = grid(T0, DAY), grid(T0 + DAY, HOUR)
    yb = 1000 * sh.level(tb, drift=False) * np.exp(ar1(rng, (reps, tb.size), SIGMA))
    yw = 1000 * (1 + gain) * sh.level(tw, drift=False) * np.exp(ar1(rng, (reps, tw.size), SIGMA))
    out = []
    for i in range(reps):
        e = seasonal.effect(samples(tb, yb[i]), samples(tw, yw[i]), "day", CONFIDENCE)
        j = judge.judge(e, "higher_is_better", MIN_EFFECT)
        out.append((j, _interval(j)))
    return out


def cell_control(rng, reps, gain=0.0, period=2 * HOUR):
    """Daily cycle + demand drift shared with a control class; baseline period then window, ``period`` each."""
    sh = shared(rng, reps)
    start = T0 + 10 * HOUR
    th, tb, tw = grid(start - HISTORY, HISTORY), grid(start, period), grid(start + period, period)
    t = np.concatenate([th, tb, tw])
    nt, nc = pair_noise(rng, reps, t.size)
    lvl = 1000 * sh.level(t)
    treated = lvl * np.exp(nt) * np.where(t > tb[-1], 1 + gain, 1.0)[None, :]
    ctrl = 800 * sh.level(t) * np.exp(nc)
    h, k = th.size, th.size + tb.size
    out = []
    for i in range(reps):
        hist = (th, np.log(treated[i, :h]) - np.log(ctrl[i, :h]))
        e = control.effect(samples(tb, treated[i, h:k]), samples(tb, ctrl[i, h:k]), samples(tw, treated[i, k:]), samples(tw, ctrl[i, k:]),
                           CONFIDENCE, history=hist)
        j = judge.judge(e, "higher_is_better", MIN_EFFECT)
        out.append((j, _interval(j)))
    return out


def cell_canary(rng, reps, gain=0.0, window=HOUR):
    """Daily cycle + demand drift shared by treatment and control replicas in one window."""
    sh = shared(rng, reps)
    start = T0 + 10 * HOUR
    th, tw = grid(start - HISTORY, HISTORY), grid(start, window)
    t = np.concatenate([th, tw])
    nt, nc = pair_noise(rng, reps, t.size)
    lvl = 1000 * sh.level(t)
    h = th.size
    treat, ctrl = lvl[:, h:] * (1 + gain) * np.exp(nt[:, h:]), lvl * np.exp(nc)
    out = []
    for i in range(reps):
        # The control group ran before the canary: its own history lends the memory.
        e = canary.effect(samples(tw, treat[i]), samples(tw, ctrl[i, h:]), CONFIDENCE, related=samples(th, ctrl[i, :h]))
        j = judge.judge(e, "higher_is_better", MIN_EFFECT)
        out.append((j, _interval(j)))
    return out


def _load(rng, n, busy, waiting):
    # Saturation inputs of one period: CPU busy (one core) with 2 % noise, and a queue depth.
    b = np.clip(busy * np.exp(rng.normal(0, 0.02, n)), 0, 1.2)
    q = np.clip(waiting + rng.normal(0, 0.3 * max(waiting, 0.1), n), 0, None) if waiting else np.zeros(n)
    return {"cpu_busy": b.tolist(), "cpus_allocated": [1.0] * n, "waiting": q.tolist()}


def cell_demand(rng, reps, saturated: bool):
    """Tokens/s primary, 1 h vs 1 h, offered load +20 %.

    Unsaturated: throughput follows demand (busy 0.5 -> 0.6, no queue), no efficiency change.
    Saturated: throughput is the capacity (busy 0.97, a queue of about 6), which rises 10 %.
    """
    th, tb, tw = grid(T0 - HISTORY, HISTORY), grid(T0, HOUR), grid(T0 + HOUR, HOUR)
    noise = ar1(rng, (reps, th.size + tb.size + tw.size), SIGMA)
    hist_noise, noise = noise[:, : th.size], noise[:, th.size :]
    demand_b, demand_a = 100.0, 120.0
    if saturated:
        level_b, level_a = 1000.0, 1100.0
    else:
        level_b, level_a = 1000.0, 1200.0
    yb, ya = level_b * np.exp(noise[:, : tb.size]), level_a * np.exp(noise[:, tb.size :])
    thr = saturation.Thresholds()
    out = []
    for i in range(reps):
        e = before_after.effect(samples(tb, yb[i]), samples(tw, ya[i]), CONFIDENCE, history=(th, level_b * np.exp(hist_noise[i])))
        if saturated:
            lb, la = _load(rng, tb.size, 0.97, 6.0), _load(rng, tw.size, 0.97, 6.0)
        else:
            lb, la = _load(rng, tb.size, 0.5, 0.0), _load(rng, tw.size, 0.6, 0.0)
        before = demand.period_load("baseline", demand_b * np.exp(rng.normal(0, 0.02, tb.size)), demand.states_of(lb, thr))
        after = demand.period_load("window", demand_a * np.exp(rng.normal(0, 0.02, tw.size)), demand.states_of(la, thr))
        j = judge.judge(e, "higher_is_better", MIN_EFFECT, load=demand.assess(before, after, "throughput", "tokens_per_second"))
        out.append((j, _interval(j)))
    return out


def cell_mix(rng, reps):
    """Efficiency (tokens per GPU-second) of two models, 1000 and 500; their shares move 50/50 -> 70/30.

    No model's efficiency changes: the aggregate rises +13.3 % by the mix alone. The
    interval judged is the mix-standardized (rate) part's; the verdict applies the mix rule.
    """
    th, tb, tw = grid(T0 - HISTORY, HISTORY), grid(T0, HOUR), grid(T0 + HOUR, HOUR)
    n = th.size + tb.size + tw.size
    rates = np.stack([1000 * np.exp(ar1(rng, (reps, n), SIGMA)), 500 * np.exp(ar1(rng, (reps, n), SIGMA))], axis=-1)
    wb, wa = np.array([0.5, 0.5]), np.array([0.7, 0.3])
    h, k = th.size, th.size + tb.size
    out = []
    for i in range(reps):
        rb, ra = rates[i, h:k], rates[i, k:]
        dec = mix.decompose("model", ("a", "b"), wb, rb.mean(axis=0), wa, ra.mean(axis=0))
        sb, sa = mix.standardized(wa, rb), mix.standardized(wa, ra)
        hist = (th, mix.standardized(wa, rates[i, :h]))
        e = before_after.effect(samples(tb, sb), samples(tw, sa), CONFIDENCE, history=hist)
        j = judge.judge(e, "higher_is_better", MIN_EFFECT, mix=dec)
        out.append((j, _interval(j)))
    return out


#: Cycle detector rows: (label, AR(1) phi, cycle amplitude); 24 h baselines, min effect 2 %.
DETECTOR_ROWS = [("no cycle", 0.90, 0.0), ("no cycle", 0.95, 0.0), ("no cycle", 0.99, 0.0),
                 ("+-2 % cycle", 0.95, 0.02), ("+-5 % cycle", 0.95, 0.05), ("+-30 % cycle", 0.95, 0.30)]


def detector_rates(replicates: int, seed: int) -> list[tuple[str, float, float, int, tuple[float, float, float]]]:
    """Share of 24 h baselines in which :func:`cycle.detect` finds a cycle, per row of :data:`DETECTOR_ROWS`."""
    out = []
    t = grid(T0, DAY)
    for label, phi, amp in DETECTOR_ROWS:
        rng = np.random.default_rng([seed, int(phi * 1000), int(amp * 1000)])
        theta = rng.uniform(0, 2 * np.pi, replicates)
        y = 1000 * (1 + amp * np.sin(2 * np.pi * t[None, :] / DAY + theta[:, None])) * np.exp(ar1(rng, (replicates, t.size), SIGMA, phi))
        k = sum(cycle.detect(samples(t, y[i]), MIN_EFFECT).detected for i in range(replicates))
        low, high = wilson(int(k), replicates)
        out.append((label, phi, amp, replicates, (k / replicates, low, high)))
    return out


def rate(t: Tally, verdict: str) -> tuple[float, float, float]:
    k = t.verdicts[verdict]
    low, high = wilson(k, t.n)
    return k / t.n, low, high


def coverage(t: Tally) -> tuple[float, float, float]:
    low, high = wilson(t.covered, t.defined)
    return (t.covered / t.defined if t.defined else float("nan")), low, high


CELLS: list[Cell] = [
    Cell("ba-cycle-raw", "null, +-30 % daily cycle, before-after, interval only (no cycle check)",
         lambda r, n: cell_before_after_cycle(r, n, detect=False), 0.0, "(the problem: no goal)", lambda m: True),
    Cell("ba-cycle", "null, +-30 % daily cycle, before-after with cycle detection",
         cell_before_after_cycle, 0.0, "false IMPROVED <= 5 %", lambda m: m["IMPROVED"][2] <= 0.05),
    Cell("cycle-false-alarm", "null, no cycle (AR(1) only), 24 h baseline, before-after with cycle detection",
         cell_cycle_false_alarm, 0.0, "false IMPROVED <= 5 %", lambda m: m["IMPROVED"][2] <= 0.05),
    Cell("seasonal-null", "null, +-30 % daily cycle, seasonal (24 h baseline, 1 h window)",
         cell_seasonal, 0.0, "false IMPROVED <= 5 %", lambda m: m["IMPROVED"][2] <= 0.05, 2),
    Cell("control-null", "null, daily cycle + drift, control (2 h periods)",
         cell_control, 0.0, "false IMPROVED <= 5 %", lambda m: m["IMPROVED"][2] <= 0.05, 2),
    Cell("canary-null", "null, daily cycle + drift, canary (1 h window)",
         cell_canary, 0.0, "false IMPROVED <= 5 %", lambda m: m["IMPROVED"][2] <= 0.05, 2),
    Cell("demand-unsaturated", "null, +20 % demand, unsaturated, tokens/s before-after",
         lambda r, n: cell_demand(r, n, saturated=False), 0.0, "IMPROVED <= 1 %", lambda m: m["IMPROVED"][2] <= 0.01, 2),
    Cell("demand-saturated", "+20 % demand, saturated, +10 % capacity, tokens/s before-after",
         lambda r, n: cell_demand(r, n, saturated=True), 0.10, "(power: no goal)", lambda m: True),
    Cell("mix-only", "mix-only shift (+13 % from the mix), before-after with mix decomposition",
         cell_mix, 0.0, "interval covers 0 >= 92 %, false IMPROVED <= 5 %",
         lambda m: m["coverage"][1] >= 0.92 and m["IMPROVED"][2] <= 0.05, 5),
    Cell("seasonal-gain", "+10 % efficiency, +-30 % daily cycle, seasonal (1 h window)",
         lambda r, n: cell_seasonal(r, n, gain=0.10), 0.10, "(power: no goal)", lambda m: True),
    Cell("control-gain", "+10 % efficiency, daily cycle + drift, control (2 h periods)",
         lambda r, n: cell_control(r, n, gain=0.10), 0.10, "power >= 80 %", lambda m: m["IMPROVED"][1] >= 0.80, 2),
    Cell("canary-gain", "+10 % efficiency, daily cycle + drift, canary (1 h window)",
         lambda r, n: cell_canary(r, n, gain=0.10), 0.10, "power >= 90 %", lambda m: m["IMPROVED"][1] >= 0.90, 2),
]


def run_cell(cell: Cell, replicates: int, seed: int) -> dict:
    """Simulate and judge one cell; returns ``{verdict: (rate, low, high), coverage: ..., pass: bool}``."""
    rng = np.random.default_rng([seed, sum(map(ord, cell.key))])
    reps = replicates * cell.replicates_factor
    t = tally(cell.run(rng, reps), cell.truth)
    metrics = {v: rate(t, v) for v in t.verdicts}
    metrics["coverage"] = coverage(t)
    metrics["n"] = t.n
    metrics["pass"] = cell.check(metrics)
    return metrics


def _pct(x: tuple[float, float, float]) -> str:
    return f"{x[0] * 100:5.1f} ({x[1] * 100:4.1f}-{x[2] * 100:5.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=1000, help="replicates per cell (x2 where a goal is close; default 1000)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--cells", default="", help="comma-separated cell keys (default: all)")
    args = parser.parse_args(argv)
    chosen = [c for c in CELLS if not args.cells or c.key in args.cells.split(",")]
    print(f"designs calibration: seed {args.seed}, {args.replicates} replicates per cell (x2 where marked), phi {PHI}, "
          f"sigma {SIGMA:.0%}, step {STEP}s, confidence {CONFIDENCE:.0%}, min effect {MIN_EFFECT:.0%}")
    print("rates in % with 95 % Wilson intervals")
    header = "| cell | n | IMPROVED | REGRESSED | NO_CHANGE | INCONCLUSIVE | coverage | goal | |"
    print(header)
    print("|" + "---|" * 9)
    failed = 0
    started = time.monotonic()
    for cell in chosen:
        m = run_cell(cell, args.replicates, args.seed)
        failed += not m["pass"]
        print(f"| {cell.key}: {cell.title} | {m['n']} | {_pct(m['IMPROVED'])} | {_pct(m['REGRESSED'])} | {_pct(m['NO_CHANGE'])} | "
              f"{_pct(m['INCONCLUSIVE'])} | {_pct(m['coverage'])} | {cell.goal} | {'PASS' if m['pass'] else 'FAIL'} |", flush=True)
    if not args.cells or "detector" in args.cells.split(","):
        print()
        print(f"cycle detector (24 h baselines, AR(1) noise {SIGMA:.0%}, level {cycle.ALPHA}, relevance "
              f"{cycle.MIN_AMPLITUDE_SHARE * MIN_EFFECT:.0%}): share of baselines called cyclic")
        print("| baseline | phi | n | detected |")
        print("|---|---|---|---|")
        for label, phi, _amp, n, r in detector_rates(max(100, args.replicates // 2), args.seed):
            print(f"| {label} | {phi} | {n} | {_pct(r)} |", flush=True)
    print(f"{len(chosen) - failed}/{len(chosen)} cells meet their goal; {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
