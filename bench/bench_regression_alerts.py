"""How often ``ObsctlSignalRegression`` fires on noise and on real regressions, on
simulated signals where the truth is known: the threshold from the baseline's spread
(:func:`obsctl.rules.regression.regression_threshold`) against the mean x (1 - tolerance)
rule it replaced.

A throughput signal, higher is better, as its recording rule reads it every 15 s: AR(1)
``x_t = mu (1 + sd z_t)``, ``z_t = phi z_{t-1} + sqrt(1 - phi^2) e_t`` (stationary start;
phi 0.95 per 15 s step: a memory of about 5 minutes, a 5-minute rate's). A baseline of one
day, then one week evaluated at every step, multiplied by ``1 + change`` (0: noise only).
An alert fires when the value has been past the threshold for ``for`` (10 or 20 minutes:
40 or 80 consecutive steps), as Prometheus' ``for:`` holds it; one episode per run past it.

Reported per cell (sd of the signal x change), for both rules (tolerance 10 %, floor 0 as
for a throughput): the share of weeks with at least one alert, firing episodes per week
(mean over replicates; a lasting regression that hovers at the threshold fires and
resolves several times) and the share of the week an alert is firing. Seeds are fixed per cell.

Run: ``.venv/bin/python bench/bench_regression_alerts.py`` (``--replicates 20`` for a quick look;
docs/rules.md#where-a-regression-alert-fires has the table).
"""

from __future__ import annotations

import argparse

import numpy as np

from obsctl.records import Statistics
from obsctl.rules.regression import regression_threshold
from obsctl.spec import Signal

STEP_SECONDS = 15
BASELINE_STEPS = 86400 // STEP_SECONDS
WEEK_STEPS = 7 * 86400 // STEP_SECONDS
FOR_STEPS = 600 // STEP_SECONDS  # the default alert_for, 10m
PHI = 0.95
TOLERANCE = 0.10
SIGNAL = Signal(name="tokens_per_second", category="throughput", query="sum(x{$selector})", unit="tokens/s",
                direction="higher_is_better", tolerance_ratio=TOLERANCE)


def ar1(rng: np.random.Generator, n: int, phi: float = PHI) -> np.ndarray:
    """A stationary AR(1) of unit variance, ``n`` steps."""
    e = rng.standard_normal(n) * np.sqrt(1 - phi * phi)
    z = np.empty(n)
    z[0] = rng.standard_normal()
    for i in range(1, n):  # a plain loop: short enough, and exact
        z[i] = phi * z[i - 1] + e[i]
    return z


def firing(below: np.ndarray, hold: int = FOR_STEPS) -> tuple[int, float]:
    """``(episodes, share)``: runs of at least ``hold`` consecutive True (a run fires once,
    from its ``hold``-th step on), and the share of the steps an alert is firing."""
    padded = np.concatenate(([False], below, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    lengths = edges[1::2] - edges[0::2]
    fired = lengths[lengths >= hold]
    return int(fired.size), float(np.sum(fired - hold + 1) / below.size)


#: The rules compared: (name, threshold kind, ``for:`` in steps).
RULES = (("spread, for 10m", "spread", 600 // STEP_SECONDS), ("spread, for 20m", "spread", 1200 // STEP_SECONDS),
         ("mean x (1 - tol), for 10m", "mean", 600 // STEP_SECONDS))


def week(seed: int, sd: float, change: float, mu: float = 1000.0) -> list[tuple[int, float]]:
    """Firing in one simulated week, ``(episodes, share of the week)`` per rule of :data:`RULES`."""
    rng = np.random.default_rng(seed)
    z = ar1(rng, BASELINE_STEPS + WEEK_STEPS)
    x = mu * (1 + sd * z)
    base, after = x[:BASELINE_STEPS], x[BASELINE_STEPS:] * (1 + change)
    m = float(np.mean(base))
    stats = Statistics(sample_count=base.size, mean=m, median=float(np.median(base)), p5=float(np.quantile(base, 0.05)),
                       p95=float(np.quantile(base, 0.95)), stddev=float(np.std(base)), batch_means=[m])
    thresholds = {"spread": regression_threshold(SIGNAL, stats), "mean": m * (1 - TOLERANCE)}
    return [firing(after < thresholds[kind], hold) for _, kind, hold in RULES]


def cell(sd: float, change: float, replicates: int, seed: int) -> list[dict]:
    """Per rule: weeks with an alert, episodes per week, share of the week firing."""
    runs = np.array([week(seed + i, sd, change) for i in range(replicates)])  # (replicate, rule, (episodes, share))
    return [{"rule": name, "any": float((runs[:, r, 0] > 0).mean()), "per_week": float(runs[:, r, 0].mean()),
             "share": float(runs[:, r, 1].mean())} for r, (name, _, _) in enumerate(RULES)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2600)
    args = parser.parse_args(argv)
    print(f"phi {PHI} per {STEP_SECONDS}s step (memory about 10 min), baseline 1 day, 1 week evaluated, tolerance "
          f"{TOLERANCE:.0%}, {args.replicates} weeks per cell, seed {args.seed}")
    print("| signal sd | change | rule | weeks with an alert | episodes/week | share of the week firing |")
    print("|---|---|---|---|---|---|")
    for k, sd in enumerate((0.05, 0.08, 0.12)):
        for j, change in enumerate((0.0, -0.15, -0.25)):
            for c in cell(sd, change, args.replicates, args.seed + 10_000 * k + 1_000 * j):
                print(f"| {sd:.0%} | {change:+.0%} | {c['rule']} | {c['any']:.0%} | {c['per_week']:.2f} | {c['share']:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
