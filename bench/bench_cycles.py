"""Calibration of verdicts under daily and weekly cycles: seeded simulation through ``decide``.

Each replicate simulates a signal with a known truth, builds the records ``snapshot-baseline``
and ``initiative start`` would have stored (the baseline with its memory model from the 3 days
before it, :func:`obsctl.baselining.measure.history.fit_history`, and its cycle knowledge from
the history Prometheus holds, :func:`obsctl.baselining.designs.knowledge.learn`, with the memory
model of the series with that profile divided out, :func:`obsctl.baselining.snapshot.with_cycle_memory`; the design by
:func:`obsctl.baselining.designs.run.choose` with no flag, as the CLI's default), then judges
cumulative looks from the change with :func:`obsctl.baselining.decide.verdict.decide` on
:class:`~obsctl.baselining.evidence.Evidence` built from the arrays (the function ``verify``
calls), each look at its place on the sequence.

Model: 60 s step; ``y_t = 100 * daily_t * weekly_t * (1 + effect after the change) * exp(noise_t)``,
``noise_t`` AR(1) with ``phi = 0.81`` per step (0.95 per 15 s) and a 5 % marginal sd;
``daily_t = 1 + A_d sin(2 pi (t - 6 h) / 1 day)``; ``weekly_t = 1 - A_w`` on Saturday and Sunday
(UTC), else 1. The baseline is the hour before the change; the history Prometheus holds before
it is ``history`` days (read at 300 s, as the snapshot does). Changes fall on every weekday at the
hours of ``--hours`` (the family ``friday`` keeps the audit's Friday 17:00).

Looks: cumulative windows from the change ending at 1, 6, 12, 24, 48 and 72 h (``--looks``).
Per family: false IMPROVED / REGRESSED = share of null replicates with that verdict at any look;
coverage = share of judged looks (an interval reported, not refused) whose interval holds the
truth; power = share of +10 % replicates IMPROVED at a look within 24 h; refused = share of
replicates with a ``cycle-unknown`` refusal at some look. Wilson 95 % intervals; goals on the bound.

Run: ``.venv/bin/python bench/bench_cycles.py`` (200 replicates per cell, seed 20261205);
``--reps 40`` for a reduced run; ``--families a,b`` to pick families; ``--before`` adds the
audit scenario judged without cycle knowledge (what verify did before).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy import signal as spsignal
from scipy import stats as sps

from obsctl.baselining.decide import verdict
from obsctl.baselining.designs import demand, knowledge
from obsctl.baselining.designs import run as designs
from obsctl.baselining.designs.branch import Gathered, Setting
from obsctl.baselining.evidence import Evidence
from obsctl.baselining.measure.history import fit_history
from obsctl.baselining.measure.window import Measurement
from obsctl.baselining.snapshot import with_cycle_memory
from obsctl.baselining.statistics.comparison import LookContext
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Baseline, Initiative, Population, Window
from obsctl.spec import Spec, load_spec

STEP = 60.0
HIST_STEP = 300.0
PHI = 0.95 ** 4
SIGMA = 0.05
LEVEL = 100.0
MONDAY = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)  # a Monday 00:00 UTC
SIGNAL = "tokens_per_joule"
LOOKS_H = (1, 6, 12, 24, 48, 72)
MEMORY_HISTORY = 3 * 86400.0


@dataclass(frozen=True)
class Family:
    """One scenario: cycle amplitudes, the history Prometheus holds (days) and the change instants."""

    name: str
    daily: float
    weekend: float
    history_days: float
    friday_only: bool = False
    knowledge: bool = True  # False: the baseline as stored before cycle knowledge (the "before" figure)


FAMILIES = {
    "friday-short": Family("friday-short", 0.0, 0.10, 10, friday_only=True),
    "friday-known": Family("friday-known", 0.0, 0.10, 16, friday_only=True),
    "weekly-known": Family("weekly-known", 0.0, 0.10, 16),
    "weekly-short": Family("weekly-short", 0.0, 0.10, 10),
    "daily-known": Family("daily-known", 0.15, 0.0, 16),
    "daily-3d": Family("daily-3d", 0.15, 0.0, 3),
    "daily-short": Family("daily-short", 0.15, 0.0, 1.5),
    "both-known": Family("both-known", 0.15, 0.10, 16),
    "none-known": Family("none-known", 0.0, 0.0, 16),
}
BEFORE = Family("friday-before", 0.0, 0.10, 10, friday_only=True, knowledge=False)


def make_spec(folder: Path) -> Spec:
    path = folder / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "workload_classes": [{"name": "infer", "kind": "inference", "selector": {"job": "infer"}}],
        "signals": [{"name": SIGNAL, "category": "utilization", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}],
    }))
    return load_spec(path)


def simulate(rng: np.random.Generator, fam: Family, change: float, effect: float, hours: float) -> tuple[np.ndarray, np.ndarray]:
    """``(unix s, values)`` at :data:`STEP` from ``history_days + 1 h`` before the change to ``hours`` after it."""
    t0 = change - fam.history_days * 86400 - 3600
    t = np.arange(t0 + STEP, change + hours * 3600 + STEP / 2, STEP)
    e = rng.normal(0.0, SIGMA * np.sqrt(1 - PHI**2), t.size)
    e[0] = rng.normal(0.0, SIGMA)
    noise = spsignal.lfilter([1.0], [1.0, -PHI], e)
    daily = 1 + fam.daily * np.sin(2 * np.pi * (t - 6 * 3600) / 86400)
    weekly = np.where(np.isin(knowledge.week_phase(t) // 86400, knowledge.WEEKEND), 1 - fam.weekend, 1.0)
    return t, LEVEL * daily * weekly * np.where(t > change, 1 + effect, 1.0) * np.exp(noise)


def _pairs(t: np.ndarray, v: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(t.tolist(), v.tolist(), strict=True))


def _at(s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(s, dt.UTC)


def replicate(rng, spec: Spec, fam: Family, change: float, effect: float, looks: tuple[int, ...]) -> list[verdict.Verdict]:
    """The verdicts of one replicate's looks (the module doc's model and records)."""
    t, v = simulate(rng, fam, change, effect, max(looks))
    base = (t > change - 3600) & (t <= change)
    tb, vb = t[base], v[base]
    mem = (t > change - 3600 - MEMORY_HISTORY) & (t <= change - 3600)
    memory = fit_history(_pairs(t[mem], v[mem]), STEP, STEP, _pairs(tb, vb), (tb, vb))
    hist = (t <= change - 3600) & (np.mod(t, HIST_STEP) == 0)
    cycles = knowledge.learn((t[hist], v[hist]), (tb, vb), spec.verification.min_effect_ratio) if fam.knowledge else None
    cycles = with_cycle_memory(cycles, _pairs(t[mem], v[mem]), STEP, STEP, (tb, vb))  # as snapshot-baseline stores it
    b = Baseline(id=f"infer.{SIGNAL}.{_at(change).strftime('%Y%m%dT%H%M%SZ')}", workload_class="infer", signal=SIGNAL, unit="1",
                 direction="higher_is_better", query="sum(x{job=\"infer\"})",
                 window=Window(start=_at(change - 3600), end=_at(change), step_seconds=STEP), population=Population(series_count=1),
                 stats=summarize(vb.tolist()), created_at=_at(change), samples=_pairs(tb, vb), memory=memory, cycles=cycles)
    choice = designs.choose(spec, "infer", None, None, b)
    i = Initiative(id="change-20261102", name="change", lever="batch-size", workload_class="infer", primary_signal=SIGNAL,
                   baseline_id=b.id, started_at=_at(change), design=choice.design, design_note=choice.why,
                   baseline_cycle=designs.start_checks(choice, b))
    out = []
    unknown = tuple(demand.period_load(name, None, [None]) for name in ("baseline", "window"))
    for k, h in enumerate(looks, start=1):
        end = change + h * 3600
        win = (t > change) & (t <= end)
        tw, vw = t[win], v[win]
        m = Measurement(b.query, Window(start=_at(change), end=_at(end), step_seconds=STEP), _pairs(tw, vw), Population(series_count=1),
                        summarize(vw.tolist()), columns=(tw, vw))
        setting = Setting(spec, i, b, m.samples, change, end, STEP, spec.verification.confidence, spec.workload_class("infer"))
        look = LookContext(k, None, None, spec.verification.confidence)
        out.append(verdict.decide(Evidence(spec, i, b, m, None, None, look, "", setting, Gathered({}, unknown))))
    return out


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z = sps.norm.ppf(0.975)
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, c - h), min(1.0, c + h)


def _refused(v: verdict.Verdict) -> bool:
    cyc = v.primary.design.context.get("cycle") or {}
    return cyc.get("refusal") == "cycle-unknown"


def changes(fam: Family, hours: tuple[int, ...], reps: int) -> list[float]:
    """``reps`` change instants cycling over the weekdays and ``hours`` (a Friday 17:00 only for ``friday_only``)."""
    start = (MONDAY + dt.timedelta(weeks=3)).timestamp()
    combos = [(4, 17)] if fam.friday_only else [(d, h) for d in range(7) for h in hours]
    return [start + combos[r % len(combos)][0] * 86400 + combos[r % len(combos)][1] * 3600 + (r // len(combos)) * 7 * 86400
            for r in range(reps)]


def run_family(spec: Spec, fam: Family, reps: int, seed: int, hours: tuple[int, ...], looks: tuple[int, ...]) -> dict:
    rng = np.random.default_rng(seed)
    at = changes(fam, hours, reps)
    row: dict = {"family": fam.name, "reps": reps}
    false_i = false_r = refused = covered = judged = 0
    designs_seen: set[str] = set()
    for c in at:
        vs = replicate(rng, spec, fam, c, 0.0, looks)
        designs_seen.add(vs[0].primary.design.design)
        false_i += any(v.verdict == "IMPROVED" for v in vs)
        false_r += any(v.verdict == "REGRESSED" for v in vs)
        refused += any(_refused(v) for v in vs)
        for v in vs:
            e = v.primary.estimate
            if not _refused(v) and e is not None and e.low is not None and e.high is not None:
                judged += 1
                covered += e.low <= 0.0 <= e.high
    found = refused_p = 0
    for c in at:
        vs = replicate(rng, spec, fam, c, 0.10, looks)
        found += any(v.verdict == "IMPROVED" for v, h in zip(vs, looks, strict=True) if h <= 24)
        refused_p += any(_refused(v) for v in vs)
        for v in vs:
            e = v.primary.estimate
            if not _refused(v) and e is not None and e.low is not None and e.high is not None:
                judged += 1
                covered += e.low <= 0.10 <= e.high
    row.update(design="/".join(sorted(designs_seen)), false_improved=(false_i, wilson(false_i, reps)),
               false_regressed=(false_r, wilson(false_r, reps)), coverage=(covered, judged, wilson(covered, judged)),
               power=(found, wilson(found, reps)), refused=(refused + refused_p, 2 * reps))
    return row


def _pct(k: int, n: int, ci: tuple[float, float]) -> str:
    return f"{100 * k / max(n, 1):5.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="replicates per cell (null and +10 %% each)")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated: " + ", ".join(FAMILIES))
    ap.add_argument("--hours", default="3,9,14,17,21", help="change hours (UTC) crossed with every weekday")
    ap.add_argument("--looks", default=",".join(map(str, LOOKS_H)), help="look ends, hours after the change")
    ap.add_argument("--before", action="store_true", help="also the audit scenario without cycle knowledge")
    args = ap.parse_args(argv)
    hours = tuple(int(x) for x in args.hours.split(","))
    looks = tuple(int(x) for x in args.looks.split(","))
    fams = [FAMILIES[n] for n in args.families.split(",") if n]
    if args.before:
        fams = [BEFORE, *fams]
    with tempfile.TemporaryDirectory() as d:
        spec = make_spec(Path(d))
    print("| family | design | false IMPROVED % [Wilson] | false REGRESSED % [Wilson] | coverage % [Wilson] | "
          "+10 % found <= 24 h % | refused (cycle unknown) | goals |")
    print("|---|---|---|---|---|---|---|---|")
    ok_all = True
    for j, fam in enumerate(fams):
        t0 = time.perf_counter()
        r = run_family(spec, fam, args.reps, args.seed + j, hours, looks)
        fi, fr, cov, pw = r["false_improved"], r["false_regressed"], r["coverage"], r["power"]
        goal = fi[1][1] <= 0.05 and fr[1][1] <= 0.05 and (cov[1] == 0 or cov[2][0] >= 0.92 or cov[0] / cov[1] >= 0.92)
        if fam.name in ("weekly-known", "friday-known", "both-known"):
            goal = goal and pw[1][0] >= 0.80 if args.reps >= 200 else goal and pw[0] / args.reps >= 0.80
        ok_all &= goal or not fam.knowledge
        print(f"| {fam.name} | {r['design']} | {_pct(fi[0], args.reps, fi[1])} | {_pct(fr[0], args.reps, fr[1])} | "
              f"{_pct(cov[0], cov[1], cov[2])} | {_pct(pw[0], args.reps, pw[1])} | {r['refused'][0]}/{r['refused'][1]} | "
              f"{'met' if goal else 'MISSED'} |", flush=True)
        print(f"<!-- {fam.name}: {time.perf_counter() - t0:.0f} s -->", file=sys.stderr)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
