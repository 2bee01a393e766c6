"""The synthetic history of the loop's live tests (tests/integration, tests/faults) and
the specs that measure it; the fixtures serving it are in those folders' conftest.py.

History (``HISTORY``): three hours at 15 s ending 10 minutes before :data:`HISTORY_NOW` (a
fixed instant: every test names its times from the history, none from the wall clock), gauge
``obsctl_synthetic_tokens_per_second{job="synthetic",workload=...}`` per class, after
:data:`PRE_HOURS` of the same unchanged processes before hour 0 (the history a baseline of
hour 0 fits its memory on: without it no verdict is given):

- ``steady``: 1000 tokens/s + AR(1) noise in hour 0, then a +30 % step (1300) in hours 1-2;
- ``noisy``: 1000 + AR(1) noise throughout (no change), plus a firing
  ``ALERTS{alertname="ObsctlSignalRegression"}`` series for 5 minutes inside hour 1;
- ``vanishing``: hour 0 only, then the series stops;
- ``missing``: no series at all.

Guard signals (``History.guards[metric][class]``, used by the guard spec ``guard_spec``):

- ``steady``: quality ratio exactly 1.0 throughout (constant: the exact rule), request
  latency 0.2 s + small AR(1) noise throughout (flat), GPU utilization 0.6 + noise in
  the first half hour only (no data in the verification window: a backfilled series
  without staleness markers is still returned for Prometheus' 5 minute lookback);
- ``degrading``: throughput 1000 -> 1300 (+30 %) at hour 1 like ``steady``, but the
  quality ratio drops 10 % (0.95 -> 0.855) at the same moment; latency flat.

The values written are kept in ``History.values`` / ``History.guards`` so tests compute
expected statistics from them independently of obsctl.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

STEP = 15
HOUR = 3600
#: The "now" the session's history is built for (2026-12-01T06:40:00Z).
HISTORY_NOW = 1_796_107_200
#: Hours of history before hour 0 (at least 20 memories of the AR(1) noise, tau 135 s).
PRE_HOURS = 3
METRIC = "obsctl_synthetic_tokens_per_second"
QUALITY = "obsctl_synthetic_quality_ratio"
LATENCY = "obsctl_synthetic_request_seconds"
UTILIZATION = "obsctl_synthetic_gpu_utilization_ratio"


@dataclass
class History:
    """What was backfilled: ``t0`` (unix seconds, start of hour 0) and per-class ``{ts: value}``."""

    t0: int
    values: dict[str, dict[int, float]] = field(default_factory=dict)
    guards: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    prometheus_url: str = ""

    def window(self, cls: str, start: int, end: int, metric: str = METRIC) -> list[float]:
        """Values written at ``start < ts <= end`` (the snapshot/verify window semantics)."""
        series = self.values[cls] if metric == METRIC else self.guards[metric].get(cls, {})
        return [v for ts, v in sorted(series.items()) if start < ts <= end]

    def at(self, hours: float) -> int:
        return int(self.t0 + hours * HOUR)

    def iso(self, hours: float) -> str:
        return dt.datetime.fromtimestamp(self.at(hours), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ar1(rng: np.random.Generator, n: int, phi: float = 0.8, sd: float = 20.0) -> np.ndarray:
    # Autocorrelated noise, like a rate over a window evaluated every step.
    out = np.empty(n)
    e = 0.0
    for i in range(n):
        e = phi * e + rng.normal(0.0, sd)
        out[i] = e
    return out


def build_history(now: float) -> History:
    """Synthetic history ending 10 minutes before ``now`` (aligned to the hour grid of 15 s)."""
    end = int(math.floor((now - 600) / STEP) * STEP)
    t0 = end - 3 * HOUR
    rng = np.random.default_rng(20260105)
    n = 3 * HOUR // STEP + 1
    stamps = [t0 + i * STEP for i in range(n)]
    history = History(t0=t0)
    steady_noise, noisy_noise, vanishing_noise = _ar1(rng, n), _ar1(rng, n), _ar1(rng, n)
    history.values["steady"] = {ts: round(float((1000.0 if ts <= t0 + HOUR else 1300.0) + e), 6) for ts, e in zip(stamps, steady_noise, strict=True)}
    history.values["noisy"] = {ts: round(float(1000.0 + e), 6) for ts, e in zip(stamps, noisy_noise, strict=True)}
    history.values["vanishing"] = {ts: round(float(800.0 + e), 6) for ts, e in zip(stamps, vanishing_noise, strict=True) if ts <= t0 + HOUR}
    # Guard series from their own generator, so the series above stay as they were.
    g = np.random.default_rng(20260106)
    after = [ts > t0 + HOUR for ts in stamps]
    degrading_noise = _ar1(g, n)
    history.values["degrading"] = {ts: round(float((1300.0 if a else 1000.0) + e), 6) for ts, a, e in zip(stamps, after, degrading_noise, strict=True)}
    history.guards[QUALITY] = {
        "steady": {ts: 1.0 for ts in stamps},
        "degrading": {ts: round(float((0.855 if a else 0.95) + e), 6) for ts, a, e in zip(stamps, after, _ar1(g, n, sd=0.002), strict=True)},
    }
    history.guards[LATENCY] = {cls: {ts: round(float(0.2 + e), 6) for ts, e in zip(stamps, _ar1(g, n, sd=0.001), strict=True)} for cls in ("steady", "degrading")}
    history.guards[UTILIZATION] = {"steady": {ts: round(float(0.6 + e), 6) for ts, e in zip(stamps, _ar1(g, n, sd=0.01), strict=True) if ts <= t0 + HOUR // 2}}
    _prepend(history, np.random.default_rng(20260108))
    return history


def _prepend(history: History, rng: np.random.Generator) -> None:
    # PRE_HOURS before hour 0: every series' hour-0 level with fresh noise of the same
    # process (its own generator, so the values from hour 0 on stay as they were).
    n = PRE_HOURS * HOUR // STEP
    stamps = [history.t0 - (n - i) * STEP for i in range(n)]
    for series in [*history.values.values(), *(s for per_class in history.guards.values() for s in per_class.values())]:
        if not series:
            continue
        first = series[min(series)]
        constant = len(set(series.values())) == 1
        sd = 0.0 if constant else float(np.std(list(series.values())[:HOUR // STEP])) * math.sqrt(1 - 0.8**2)
        level = float(np.mean(list(series.values())[:HOUR // STEP])) if not constant else first
        noise = _ar1(rng, n, sd=sd) if sd > 0 else np.zeros(n)
        before = {ts: round(float(level + e), 6) for ts, e in zip(stamps, noise, strict=True)}
        series.update(before)


def openmetrics(history: History) -> str:
    """The history as OpenMetrics text with timestamps (for promtool's backfill)."""
    lines = [f"# TYPE {METRIC} gauge", f"# HELP {METRIC} Synthetic throughput for obsctl tests."]
    for cls, values in history.values.items():
        for ts, value in sorted(values.items()):
            lines.append(f'{METRIC}{{job="synthetic",workload="{cls}"}} {value!r} {ts}')
    for metric, per_class in history.guards.items():
        lines += [f"# TYPE {metric} gauge", f"# HELP {metric} Synthetic guard signal for obsctl tests."]
        for cls, values in per_class.items():
            for ts, value in sorted(values.items()):
                lines.append(f'{metric}{{job="synthetic",workload="{cls}"}} {value!r} {ts}')
    lines += ["# TYPE ALERTS gauge", "# HELP ALERTS Backfilled firing alert."]
    for ts in range(history.at(1.25), history.at(1.25) + 300 + 1, STEP):
        lines.append(
            'ALERTS{alertname="ObsctlSignalRegression",alertstate="firing",severity="warning",'
            f'signal="tokens_per_second",workload_class="noisy"}} 1 {ts}'
        )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write_spec(path: Path, prometheus_url: str, store: Path) -> Path:
    """A spec with the four synthetic classes and the throughput signal."""
    spec = {
        "version": 1,
        "prometheus": {"url": prometheus_url, "timeout_seconds": 10},
        "store": str(store),
        "workload_classes": [
            {"name": name, "kind": "inference", "selector": {"job": "synthetic", "workload": name}}
            for name in ("steady", "noisy", "vanishing", "missing")
        ],
        "signals": [
            {
                "name": "tokens_per_second",
                "category": "throughput",
                "query": f"sum({METRIC}{{$selector}})",
                "unit": "tokens/s",
                "direction": "higher_is_better",
            }
        ],
        "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


GUARD_SIGNALS = [
    {"name": "quality_ratio", "category": "quality", "query": f"avg({QUALITY}{{$selector}})", "unit": "ratio", "direction": "higher_is_better"},
    {"name": "request_seconds", "category": "saturation", "query": f"avg({LATENCY}{{$selector}})", "unit": "s", "direction": "lower_is_better"},
    {"name": "gpu_utilization", "category": "utilization", "query": f"avg({UTILIZATION}{{$selector}})", "unit": "ratio", "direction": "higher_is_better"},
]


def write_guard_spec(path: Path, prometheus_url: str, store: Path) -> Path:
    """The spec of :func:`write_spec` plus the ``degrading`` class and three guard signals."""
    write_spec(path, prometheus_url, store)
    spec = yaml.safe_load(path.read_text())
    spec["workload_classes"].append({"name": "degrading", "kind": "inference", "selector": {"job": "synthetic", "workload": "degrading"}})
    spec["signals"] += GUARD_SIGNALS
    # Guards default to the quality and cost categories; these tests guard all three.
    spec["verification"]["guards"] = ["quality", "saturation", "utilization"]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
