"""Calibration of verify on a change rolled out with restarts, through a recording rule.

The truth is known: a fleet of ``--replicas`` replicas (default 4) each exports a token
counter ``vllm:generation_tokens_total``; its increments are Poisson counts at an
intensity ``base x exp(s z_t)`` (``z``: one AR(1) shared by the fleet, phi 0 at 15 s,
s 3 %: the load's own memory), scraped every 15 s (each replica at its own phase). The
change is rolled out with a rolling restart: replica ``r`` goes down at ``change + 30 s +
r x 60 s`` for 20 s (no scrape answers), comes back with its counter at 0 and its
intensity multiplied by ``1 + effect``. Prometheus' ``rate(x[5m])`` is computed as
Prometheus does (counter resets added back, extrapolation to the range's edges capped at
1.1 average intervals and at the counter's zero), every 15 s, and the recording rule
``workload_class:obsctl_tokens:rate5m = sum(rate(vllm:generation_tokens_total[5m]))`` sums
the replicas; the signal reads the recorded series.

Every replicate goes through the functions ``snapshot-baseline`` and ``verify`` call:
the baseline's memory from ``--history-hours`` of history before a 1 h baseline
(:func:`obsctl.baselining.measure.history.fit_history`), the look-back through the rule
(:func:`obsctl.rules.lookback.lookback`), the restarts found in the raw counters
(:func:`obsctl.baselining.measure.transition.detect_events`), the judged start
(:func:`obsctl.baselining.measure.transition.trim`), and the verdict
(:func:`obsctl.baselining.decide.verdict.decide` on the
:class:`obsctl.baselining.evidence.Evidence` built from the arrays, the spec's defaults).
The planned length is the default 1 h plus the 5 m transition (as the planner gives it);
three cumulative looks at 1/3, 2/3 and all of it.

Cells: effect 0 and +40 %, trimmed (the default) and ``--no-trim``. Goals (trimmed):
false IMPROVED and false REGRESSED at any look <= 5 % and coverage of the true change
>= 92 % at every look (Wilson 95 % bounds); a +40 % change found (IMPROVED) at the planned
length >= 80 % with the mean estimate within 5 points of +40 %.

Run: ``.venv/bin/python bench/bench_transitions.py`` (``--reps 400``; ``--reps 100`` for a
quick look). Seeds are fixed per cell (``--seed``, default 7300).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy import stats as sps

from obsctl.baselining.decide import verdict
from obsctl.baselining.designs import demand
from obsctl.baselining.designs.branch import Gathered, Setting
from obsctl.baselining.evidence import Evidence
from obsctl.baselining.measure import transition as T
from obsctl.baselining.measure.history import fit_history
from obsctl.baselining.measure.window import Measurement
from obsctl.baselining.statistics import comparison
from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Baseline, Initiative, Population, Window
from obsctl.rules.lookback import Rule, lookback, raw_selectors
from obsctl.spec import Spec, load_spec

STEP = 15.0
RANGE = 300.0
CHANGE = dt.datetime(2026, 11, 3, 12, tzinfo=dt.UTC).timestamp()
RULES = [Rule("workload_class:obsctl_tokens:rate5m", 'sum(rate(vllm:generation_tokens_total{model_name="m"}[5m]))', {"workload_class": "infer"})]
QUERY = 'sum(workload_class:obsctl_tokens:rate5m{workload_class="infer"})'
SIGNAL = "tokens_per_second"


@dataclass(frozen=True)
class Fleet:
    """The simulated fleet: replicas, per-replica tokens/s, the load's AR(1) (phi at 15 s, log sd), the rollout."""

    replicas: int = 4
    base: float = 500.0
    phi: float = 0.0
    sd: float = 0.03
    first_restart: float = 30.0
    restart_every: float = 60.0
    down: float = 20.0
    additive: bool = False


def spec_for(tmp: Path) -> Spec:
    path = tmp / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "infer", "kind": "inference", "selector": {"job": "infer"}}],
        "signals": [{"name": SIGNAL, "category": "throughput", "query": "sum(workload_class:obsctl_tokens:rate5m{$selector})", "unit": "tokens/s",
                     "direction": "higher_is_better"}],
    }))
    return load_spec(path)


def ar1(rng, n: int, phi: float) -> np.ndarray:
    e = rng.standard_normal(n) * np.sqrt(1 - phi * phi)
    z = np.empty(n)
    z[0] = rng.standard_normal()
    for i in range(1, n):
        z[i] = phi * z[i - 1] + e[i]
    return z


def prom_rate(ts: np.ndarray, vs: np.ndarray, evals: np.ndarray, rng_s: float) -> np.ndarray:
    """``rate(x[rng_s])`` at each eval time, as Prometheus' extrapolatedRate computes it
    (promql/functions.go): samples in ``(t - range, t]``, NaN with fewer than 2."""
    drops = np.concatenate(([0.0], np.where(vs[1:] < vs[:-1], vs[:-1], 0.0)))
    corrected = vs + np.cumsum(drops)  # a reset adds back the value before it
    lo = np.searchsorted(ts, evals - rng_s, side="right")
    hi = np.searchsorted(ts, evals, side="right") - 1
    out = np.full(evals.shape, np.nan)
    ok = hi - lo >= 1
    lo, hi, ev = lo[ok], hi[ok], evals[ok]
    result = corrected[hi] - corrected[lo]
    first_t, last_t, first_v = ts[lo], ts[hi], vs[lo]
    sampled = last_t - first_t
    avg = sampled / (hi - lo)
    to_start, to_end = first_t - (ev - rng_s), ev - last_t
    with np.errstate(divide="ignore", invalid="ignore"):
        to_zero = np.where(result > 0, sampled * first_v / result, np.inf)
    to_start = np.where((result > 0) & (first_v >= 0) & (to_zero < to_start), to_zero, to_start)
    threshold = avg * 1.1
    interval = sampled + np.where(to_start < threshold, to_start, avg / 2) + np.where(to_end < threshold, to_end, avg / 2)
    out[ok] = result * interval / sampled / rng_s
    return out


def simulate(rng, fleet: Fleet, effect: float, start: float, end: float):
    """``(eval times, recorded sum(rate[5m]) values, raw series per replica)`` over ``(start, end]``."""
    grid = np.arange(start - RANGE - 60.0, end + STEP, 1.0)  # 1 s intensity grid
    z = np.repeat(ar1(rng, grid.size // 15 + 2, fleet.phi), 15)[: grid.size]
    evals = np.arange(start + STEP, end + STEP / 2, STEP)
    total = np.zeros(evals.shape)
    raw = []
    for r in range(fleet.replicas):
        restart = CHANGE + fleet.first_restart + r * fleet.restart_every
        lift = np.where(grid >= restart + fleet.down, 1 + effect, 1.0)
        # multiplicative: the load's fluctuations scale with the throughput; additive: they do not
        lam = fleet.base * (lift + fleet.sd * z) if fleet.additive else fleet.base * np.exp(fleet.sd * z) * lift
        up = (grid < restart) | (grid >= restart + fleet.down)
        counts = rng.poisson(lam * up)
        phase = (r * 3.7) % STEP
        scrapes = np.arange(grid[0] + phase, grid[-1], STEP)
        scrapes = scrapes[(scrapes < restart) | (scrapes >= restart + fleet.down)]
        idx = np.searchsorted(grid, scrapes, side="right")
        before = np.cumsum(counts)
        # the counter: tokens since the process started (0 again after the restart)
        at_restart = before[np.searchsorted(grid, restart + fleet.down, side="left") - 1] if grid[-1] >= restart else 0.0
        vs = before[idx - 1].astype(float)
        vs = np.where(scrapes >= restart + fleet.down, vs - at_restart, vs)
        rate = prom_rate(scrapes, vs, evals, RANGE)
        total = total + np.nan_to_num(rate, nan=0.0)
        raw.append((f'{{pod="r{r}"}}', list(zip(scrapes.tolist(), vs.tolist(), strict=True))))
    return evals, total, raw


def measurement(t: np.ndarray, v: np.ndarray, start: float, end: float) -> Measurement:
    at = lambda s: dt.datetime.fromtimestamp(s, dt.UTC)  # noqa: E731
    return Measurement(QUERY, Window(start=at(start), end=at(end), step_seconds=STEP), list(zip(t.tolist(), v.tolist(), strict=True)),
                       Population(series_count=1), summarize(v.tolist()), columns=(t, v))


def replicate(spec: Spec, rng, fleet: Fleet, effect: float, history_hours: float, trim: bool, looks: int = 3):
    """The verdicts of ``looks`` cumulative looks on one simulated change;
    ``[(verdict, change, low, high, judged start - change (s), plain ratio of the means)]``."""
    lb = lookback(QUERY, RULES)
    planned = 3600.0 + lb.seconds
    hist_start = CHANGE - 3600.0 - history_hours * 3600.0
    t, v, raw = simulate(rng, fleet, effect, hist_start, CHANGE + planned)
    at = lambda s: dt.datetime.fromtimestamp(s, dt.UTC)  # noqa: E731
    b_mask = (t > CHANGE - 3600.0) & (t <= CHANGE)
    h_mask = t <= CHANGE - 3600.0
    bt, bv = t[b_mask], v[b_mask]
    memory = fit_history(list(zip(t[h_mask].tolist(), v[h_mask].tolist(), strict=True)), STEP, STEP, list(zip(bt.tolist(), bv.tolist(), strict=True)), (bt, bv))
    b = Baseline(id="infer.tokens_per_second.20261103T110000Z", workload_class="infer", signal=SIGNAL, unit="tokens/s",
                 direction="higher_is_better", query=QUERY, window=Window(start=at(CHANGE - 3600.0), end=at(CHANGE), step_seconds=STEP),
                 population=Population(series_count=1), stats=summarize(bv.tolist()), created_at=at(CHANGE),
                 samples=list(zip(bt.tolist(), bv.tolist(), strict=True)), memory=memory)
    i = Initiative(id="rollout-2026-11-03", name="rollout", lever="batch-size", workload_class="infer", primary_signal=SIGNAL,
                   baseline_id=b.id, started_at=at(CHANGE), design="before-after", planned_window_seconds=planned)
    assert raw_selectors(QUERY, RULES) == ['vllm:generation_tokens_total{model_name="m"}']
    out = []
    for k in range(1, looks + 1):
        end = CHANGE + planned * k / looks
        until = min(end, CHANGE + T.ROLLOUT_SECONDS)
        seen = [(labels, [(a, x) for a, x in pts if CHANGE - STEP <= a <= until]) for labels, pts in raw]
        events = T.detect_events(seen, True, CHANGE, until, STEP)
        tr = T.trim(CHANGE, end, lb, events, STEP, spec.verification.min_samples, trimmed=trim)
        start = tr.judged_start
        w = (t > start) & (t <= end)
        m = measurement(t[w], v[w], start, end)
        setting = Setting(spec, i, b, m.samples, start, end, STEP, spec.verification.confidence, spec.workload_class("infer"))
        unknown = tuple(demand.period_load(name, None, [None]) for name in ("baseline", "window"))
        ev = Evidence(spec, i, b, m, None, None, LookContext(k, planned, None, spec.verification.confidence), "", setting,
                      Gathered({}, unknown), transition=tr)
        d = verdict.decide(ev)
        e = d.primary.estimate
        plain = m.stats.mean / b.stats.mean - 1  # the windows' plain means, whatever the verdict
        out.append((d.verdict, e.change if e else None, e.low if e else None, e.high if e else None, start - CHANGE, plain))
    return out


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    ci = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return ci.low, ci.high


def cell(spec: Spec, fleet: Fleet, effect: float, trim: bool, reps: int, seed: int, history_hours: float, checks: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    saved = comparison.assumptions.check_window
    if not checks:  # the window checks off: what the transition does alone (as bench_calibration's family (e))
        comparison.assumptions.check_window = lambda t, y, s, memory, side, level=None: comparison.assumptions.WindowCheck(side, memory)
    try:
        rows = [replicate(spec, rng, fleet, effect, history_hours, trim) for _ in range(reps)]
    finally:
        comparison.assumptions.check_window = saved
    false_up = sum(any(r[0] == "IMPROVED" for r in rep) for rep in rows) if effect <= 0 else 0
    false_down = sum(any(r[0] == "REGRESSED" for r in rep) for rep in rows)
    covered, intervals = 0, 0
    worst_cov = 1.0
    for k in range(3):
        got = [rep[k] for rep in rows if rep[k][2] is not None and rep[k][3] is not None]
        c = sum(lo <= effect <= hi for _, _, lo, hi, *_ in got)
        covered, intervals = covered + c, intervals + len(got)
        if len(got) >= 20:
            worst_cov = min(worst_cov, c / len(got))
    final = [rep[-1] for rep in rows]
    found = sum(r[0] == "IMPROVED" for r in final)
    estimates = [r[1] for r in final if r[1] is not None]
    return {"effect": effect, "trim": trim, "reps": reps, "false_improved": false_up, "false_regressed": false_down,
            "covered": covered, "intervals": intervals, "worst_look_coverage": worst_cov, "found": found,
            "mean_estimate": float(np.mean(estimates)) if estimates else float("nan"),
            "judged_from_s": float(np.median([r[-1][4] for r in rows])), "plain": float(np.mean([r[-1][5] for r in rows]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="replicates per cell (default 400)")
    ap.add_argument("--seed", type=int, default=7300)
    ap.add_argument("--history-hours", type=float, default=12.0, help="history before the baseline for its memory (default 12)")
    ap.add_argument("--replicas", type=int, default=4)
    args = ap.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        spec = spec_for(Path(tmp))
    t0 = time.time()
    print(f"bench_transitions: {args.reps} reps per cell, seed {args.seed}, {args.replicas} replicas, {args.history_hours:g} h history")
    print("| load noise | effect | window | false IMPROVED (Wilson up) | false REGRESSED (Wilson up) | coverage, all looks (Wilson low) | worst look | "
          "found at 1 h (Wilson low) | mean estimate | plain means' ratio | judged from |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failures = []
    cells = [("multiplicative", 0.0, True, True), ("multiplicative", 0.40, True, True), ("additive", 0.0, True, True),
             ("additive", 0.40, True, True), ("multiplicative", 0.40, True, False), ("multiplicative", 0.0, False, True),
             ("multiplicative", 0.40, False, True)]
    for i, (noise, effect, trim, checks) in enumerate(cells):
        fleet = Fleet(replicas=args.replicas, additive=noise == "additive")
        r = cell(spec, fleet, effect, trim, args.reps, args.seed + i, args.history_hours, checks)
        n = r["reps"]
        fi, fr = wilson(r["false_improved"], n)[1], wilson(r["false_regressed"], n)[1]
        cov_low = wilson(r["covered"], r["intervals"])[0]
        found_low = wilson(r["found"], n)[0]
        name = ("trimmed" if trim else "--no-trim") + ("" if checks else ", window checks off")
        print(f"| {noise} | {effect:+.0%} | {name} | {r['false_improved']}/{n} ({fi:.1%}) | {r['false_regressed']}/{n} ({fr:.1%}) | "
              f"{r['covered']}/{r['intervals']} ({cov_low:.1%}) | {r['worst_look_coverage']:.1%} | "
              f"{r['found'] if effect else '-'}{'/' + str(n) + f' ({found_low:.1%})' if effect else ''} | {r['mean_estimate']:+.1%} | "
              f"{r['plain']:+.1%} | "
              f"+{r['judged_from_s']:.0f} s |")
        if trim and checks:
            label = f"{noise} {effect:+.0%}"
            if fi > 0.05 or fr > 0.05:
                failures.append(f"{label} false direction")
            if cov_low < 0.92 and r["intervals"]:
                failures.append(f"{label} coverage")
            if effect and (found_low < 0.80 or abs(r["mean_estimate"] - effect) > 0.05):
                failures.append(f"{label} power/estimate")
    print(f"goals (trimmed): {'PASS' if not failures else 'FAIL: ' + ', '.join(failures)}  ({time.time() - t0:.0f} s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
