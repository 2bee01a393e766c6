"""The practice on a cadence: one review of every class's baselines, targets, initiatives
and money, as findings ranked by USD at stake (``obsctl review``; rules in docs/practice.md).

:func:`review` reads the spec, the store and Prometheus and returns a :class:`ReviewResult`.
Each :class:`Finding` has a kind, the class and signal it is about, a severity, the USD per
month at stake where there is a price for it, a one-line action and its evidence. Kinds:

- baseline discipline: ``baseline_missing``, ``baseline_stale`` (its window ended more
  than ``max_age`` ago, by default ``review.stale_periods`` (2) cadence periods), ``baseline_drifted`` (the movement
  test, :mod:`obsctl.baselining.practice.movement`, on the last cadence period aligned to its step:
  :func:`movement_window`, under the daily or weekly cycle the history shows and with a
  search for a step inside the period: :mod:`obsctl.baselining.practice.drift`), ``data_missing`` (no usable window for that test: stale or
  missing data is never a pass), ``baseline_young`` (info: the baseline ended too
  recently for ``verification.min_samples`` steps; the evidence gives ``first_test_at``),
  ``population_changed`` (accelerator models, replica count or model label differ from
  the baseline's), ``owner_missing``;
- targets: ``target_impossible``, ``target_met``, ``target_unrealistic``, ``target_behind``,
  ``target_review_due`` (:mod:`obsctl.baselining.practice.targets` anchors relative targets);
- initiatives: ``initiative_overdue``, ``initiative_unpromoted``, ``episodic``,
  ``lesson_missing`` (promoted, or closed after a decisive verdict, without a lesson) and
  ``prediction_accuracy`` (per class, how far ``--expected-impact`` was from the verified
  change: :func:`prediction_errors`);
- money: ``opportunity`` (per class, the lever most likely to pay, priced), and one
  cluster-wide ``opportunity`` for unattributed GPUs (``workload_class`` None);
- context (info): ``regression_alerts`` (the class's regression alerts that fired in the
  last period) and ``saturation_unknown`` (no saturation state series in the last period,
  so a throughput change may be demand).

A month is :data:`HOURS_PER_MONTH` hours; a cost series' USD/month is its mean over the
last cadence period times that.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from obsctl.baselining.measure.coverage import LegCache
from obsctl.baselining.measure.window import Measurement, MeasureRequest, measure
from obsctl.baselining.practice import targets as target_rules
from obsctl.baselining.practice.drift import HISTORY_SECONDS as DRIFT_HISTORY_SECONDS
from obsctl.baselining.practice.movement import Criteria, Movement, movement, window_step
from obsctl.durations import format_duration, parse_duration
from obsctl.formatting import format_number, format_percent
from obsctl.promapi import PrometheusClient
from obsctl.records import Baseline, Initiative, Population
from obsctl.rules import canonical as C
from obsctl.spec import CADENCE_SECONDS, Spec, WorkloadClass, value_bound_error
from obsctl.timeutil import align_down, rfc3339

if TYPE_CHECKING:
    from obsctl.baselining.store import Store

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")

#: Hours in a month: 365 x 24 / 12.
HOURS_PER_MONTH = 730.0
#: Days in a quarter: 365.25 / 4.
QUARTER_DAYS = 91.3125
#: Verdicts that decide an initiative (anything else leaves it open).
DECISIVE = ("IMPROVED", "NO_CHANGE", "REGRESSED")

#: Labels that name a population's accelerator model, its replicas and its served model,
#: in the order they are looked for (NVML/obsctl, DCGM; Kubernetes, Prometheus; vLLM/TGI).
ACCELERATOR_LABELS = ("gpu_model", "modelName", "accelerator")
REPLICA_LABELS = ("pod", "instance", "replica")
MODEL_LABELS = ("model", "model_name", "served_model_name")

#: Typical impact of each lever on the signal it moves, as a range of ratios: illustrative
#: figures from public write-ups, a starting estimate for ``--expected-impact``, never a
#: promise (docs/practice.md).
LEVER_IMPACT: dict[str, tuple[float, float]] = {
    "batch-size": (0.10, 0.30), "scheduling": (0.05, 0.20), "storage-tiering": (0.05, 0.15),
    "quantization": (0.20, 0.50), "right-sizing": (0.10, 0.40), "topology": (0.05, 0.15),
    "prefix-caching": (0.10, 0.40), "speculative-decoding": (0.20, 0.60), "chunked-prefill": (0.05, 0.20),
}


@dataclass(frozen=True)
class Finding:
    """One finding of a review.

    Attributes:
        kind: see the module doc.
        workload_class: the class (None: cluster-wide).
        signal: the signal (None: the class as a whole).
        severity: ``info`` | ``warning`` | ``critical``.
        usd_per_month: the money at stake (USD/month), None where nothing prices it.
        summary: what was found, one line.
        action: what to do, one line.
        owner: who answers for it (the target's, else the class's owner), None if nobody.
        evidence: the figures behind it (JSON-ready: numbers, strings, lists).
    """

    kind: str
    workload_class: str | None
    signal: str | None
    severity: Severity
    usd_per_month: float | None
    summary: str
    action: str
    owner: str | None = None
    evidence: dict = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict:
        """The JSON form: ``kind, workload_class, signal, severity, usd_per_month, summary, action, owner, evidence``."""
        return {"kind": self.kind, "workload_class": self.workload_class, "signal": self.signal, "severity": self.severity,
                "usd_per_month": self.usd_per_month, "summary": self.summary, "action": self.action, "owner": self.owner,
                "evidence": self.evidence}


@dataclass
class ReviewResult:
    """A review: when (``as_of``, UTC), the classes reviewed, their cadences and the ranked findings."""

    as_of: dt.datetime
    classes: list[str]
    cadences: dict[str, str]
    findings: list[Finding]

    def worst(self) -> str | None:
        """The highest severity among the findings, None without findings."""
        return max((f.severity for f in self.findings), key=SEVERITIES.index, default=None)

    def fails(self, threshold: str) -> bool:
        """True when some finding is at ``threshold`` severity or above."""
        return any(SEVERITIES.index(f.severity) >= SEVERITIES.index(threshold) for f in self.findings)

    def as_dict(self) -> dict:
        """``{"as_of": RFC 3339, "classes", "cadences", "findings": [...]}``."""
        from obsctl.timeutil import rfc3339

        return {"as_of": rfc3339(self.as_of), "classes": self.classes, "cadences": self.cadences,
                "findings": [f.as_dict() for f in self.findings]}


def rank(findings: list[Finding]) -> list[Finding]:
    """Most money first (unpriced last), then severity, then class, kind and signal."""
    return sorted(findings, key=lambda f: (-(f.usd_per_month if f.usd_per_month is not None else -1.0),
                                           -SEVERITIES.index(f.severity), f.workload_class or "", f.kind, f.signal or ""))


# --- the class's context -----------------------------------------------------------------------


def _seconds_text(seconds: float) -> str:
    return f"{int(round(seconds))}s"


def _scalar(client: PrometheusClient, promql: str, at: dt.datetime) -> float | None:
    answer = client.query(promql, at)
    values = [s.value for s in answer if math.isfinite(s.value)]
    return sum(values) if values else None


def monthly(client: PrometheusClient, series: str, period_seconds: float, at: dt.datetime) -> float | None:
    """USD/month of a USD/hour series selector: its mean over the period before ``at`` x :data:`HOURS_PER_MONTH`."""
    hourly = _scalar(client, f"sum(avg_over_time({series}[{_seconds_text(period_seconds)}]))", at)
    return None if hourly is None else hourly * HOURS_PER_MONTH


def _by_class(client: PrometheusClient, promql: str, at: dt.datetime) -> dict[str, float]:
    """``{workload_class: value}`` of an instant answer grouped by ``workload_class`` (finite values only)."""
    return {s.metric["workload_class"]: s.value for s in client.query(promql, at)
            if s.metric.get("workload_class") and math.isfinite(s.value)}


def class_monthly(client: PrometheusClient, name: str, periods: dict[str, float], at: dt.datetime) -> dict[str, float | None]:
    """:func:`monthly` of each class's own ``name`` series (``{class: period seconds}``):
    ``{class: USD/month or None}``, one query per distinct period for every class at once
    (``sum by (workload_class)`` adds the same series as the per-class ``sum``)."""
    out: dict[str, float | None] = {}
    for period in sorted(set(periods.values())):
        hourly = _by_class(client, f"sum by (workload_class) (avg_over_time({name}{{{C.OWN_SERIES}}}[{_seconds_text(period)}]))", at)
        out |= {c: (hourly[c] * HOURS_PER_MONTH if c in hourly else None) for c, p in periods.items() if p == period}
    return out


def class_cadence(spec: Spec, wc: WorkloadClass, cost_per_month: float | None) -> str:
    """The class's cadence: its own ``cadence``, else weekly when it costs more than
    ``review.weekly_above_usd_per_month``, else the spec's ``cadence``."""
    if wc.cadence:
        return wc.cadence
    limit = spec.review.weekly_above_usd_per_month
    if limit is not None and cost_per_month is not None and cost_per_month > limit:
        return "weekly"
    return spec.cadence


def max_age_seconds(spec: Spec, period_seconds: float) -> float:
    """``review.max_age``, else ``review.stale_periods`` periods (s): older is stale."""
    if spec.review.max_age:
        return parse_duration(spec.review.max_age, "review.max_age")
    return spec.review.stale_periods * period_seconds


def reviews_per_life(spec: Spec, period_seconds: float) -> int:
    """The movement test's Bonferroni count: the reviews a baseline gets before ``review.max_age``
    when set, else ``review.baseline_life`` (spending the error over more reviews than a
    baseline gets before it is stale only makes each test stricter)."""
    if spec.review.max_age:
        return max(1, math.ceil(max_age_seconds(spec, period_seconds) / period_seconds - 1e-9))
    return max(1, spec.review.baseline_life)


@dataclass(frozen=True)
class PopulationShape:
    """What identifies a population for the population check (docs/practice.md)."""

    accelerators: tuple[str, ...]
    models: tuple[str, ...]
    replicas: int | None

    @classmethod
    def of(cls, population: Population) -> PopulationShape | None:
        """None when the population holds no label sets (nothing to compare)."""
        sets = population.label_sets
        if not sets:
            return None

        def values(labels: tuple[str, ...]) -> tuple[str, ...]:
            found: set[str] = set()
            for name in labels:
                found |= {s[name] for s in sets if s.get(name)}
                if found:
                    break
            return tuple(sorted(found))

        replica_label = next((n for n in REPLICA_LABELS if any(s.get(n) for s in sets)), None)
        complete = population.series_count <= len(sets)
        replicas = len({s.get(replica_label) for s in sets if s.get(replica_label)}) if replica_label and complete else None
        return cls(values(ACCELERATOR_LABELS), values(MODEL_LABELS), replicas)

    def differences(self, now: PopulationShape) -> list[str]:
        """What differs, one phrase each (empty: the same population)."""
        out = []
        if self.accelerators != now.accelerators:
            out.append(f"accelerators {', '.join(self.accelerators) or 'none'} -> {', '.join(now.accelerators) or 'none'}")
        if self.replicas is not None and now.replicas is not None and self.replicas != now.replicas:
            out.append(f"replicas {self.replicas} -> {now.replicas}")
        if self.models != now.models:
            out.append(f"model {', '.join(self.models) or 'none'} -> {', '.join(now.models) or 'none'}")
        return out


# --- the review ------------------------------------------------------------------------------


#: Worker threads of one review for the per-signal window reads (range, coverage and series
#: requests of :func:`obsctl.baselining.measure.window.measure`); the calling thread reads
#: the store, judges, writes and reports progress.
REVIEW_CONCURRENCY = 4
#: Class x signal windows read ahead of the one being judged (bounds the answers held).
READ_AHEAD = 8


def review(spec: Spec, store, client: PrometheusClient, as_of: dt.datetime, classes: list[str] | None = None,
           write_anchors: bool = True, progress: Callable[[str], None] = lambda _msg: None) -> ReviewResult:
    """Review ``classes`` (default: all) at ``as_of`` (UTC): the ranked findings.

    The figures read per class (cost, idle cost, cost per token, saturation shares, the
    regression alerts fired) are read for every class at once, one query per figure and
    cadence period; each class x signal's window is read by :data:`REVIEW_CONCURRENCY`
    worker threads, at most :data:`READ_AHEAD` pairs ahead of the one judged, with a
    coverage selector shared by several signals read once (:class:`~obsctl.baselining.measure.coverage.LegCache`).
    Findings are the same as class by class, one request at a time.

    Args:
        spec, store, client: the spec, the :class:`~obsctl.baselining.store.Store`, the Prometheus client.
        as_of: the instant reviewed; every window ends there.
        classes: class names (each must be in the spec), None: all.
        write_anchors: record first-seen target anchors in the store (False: in memory only).
        progress: called once per class reviewed, e.g. ``[3/200] embed-online ... 2 findings``.

    Raises:
        SpecError: an unknown class. PrometheusUnavailable: Prometheus cannot answer.
        StoreError: an unreadable store record.
    """
    from obsctl.baselining.workers import DaemonPool
    from obsctl.rules.signals import class_signals

    names = list(classes) if classes else [c.name for c in spec.workload_classes]
    chosen = [spec.workload_class(n) for n in names]
    findings: list[Finding] = []
    monthly_period = CADENCE_SECONDS["monthly"]
    costs = class_monthly(client, C.COST_USD_PER_HOUR, {wc.name: monthly_period for wc in chosen}, as_of)
    cadences = {wc.name: class_cadence(spec, wc, costs[wc.name]) for wc in chosen}
    periods = {wc.name: CADENCE_SECONDS[cadences[wc.name]] for wc in chosen}
    fleet = _fleet_cost_per_token(client, spec, cadences, as_of)
    idle = class_monthly(client, C.IDLE_WASTE_USD_PER_HOUR, periods, as_of)
    shares = _saturation_shares(client, periods, as_of)
    fired = _regressions_fired(client, periods, as_of)
    index = store.current_index()
    # Every class x signal with a baseline, in review order: its window is read ahead.
    reads: list[tuple[Baseline, dt.datetime, dt.datetime]] = []
    plan: dict[tuple[str, str], int] = {}
    for wc in chosen:
        for sig in class_signals(spec, wc):
            b = store.current_baseline(wc.name, sig.name, index=index)
            if b is not None:
                plan[(wc.name, sig.name)] = len(reads)
                start, end, _ = movement_window(b, periods[wc.name], as_of)
                reads.append((b, start, end))
    legs = LegCache()
    with DaemonPool(max_workers=REVIEW_CONCURRENCY, thread_name_prefix="obsctl-review") as pool:
        futures: list = []

        def measured(k: int) -> Measurement | None:
            while len(futures) < min(len(reads), k + 1 + READ_AHEAD):
                b, start, end = reads[len(futures)]
                futures.append(pool.submit(_measure, client, spec, b, start, end, legs))
            return futures[k].result()

        run = _Pass(spec, store, client, as_of, write_anchors, fleet)
        for n, wc in enumerate(chosen, start=1):
            figures = _ClassFigures(cadences[wc.name], costs[wc.name], idle[wc.name], shares.get(wc.name, {}), fired.get(wc.name, []))
            got = _review_class(run, wc, figures, lambda sig, name=wc.name: _read(plan, reads, measured, name, sig))
            findings += got
            progress(f"[{n}/{len(chosen)}] {wc.name} ... {len(got)} finding{'' if len(got) == 1 else 's'}")
    if not classes:
        findings += _unattributed(client, spec, as_of)
    return ReviewResult(as_of, names, cadences, rank(findings))


def _read(plan: dict, reads: list, measured: Callable, wc: str, sig: str) -> tuple[Baseline | None, Measurement | None]:
    """The pair's current baseline and its window's measurement (None, None without a baseline)."""
    k = plan.get((wc, sig))
    return (None, None) if k is None else (reads[k][0], measured(k))


@dataclass(frozen=True)
class _Pass:
    """What every class's review in one :func:`review` reads from: the spec, the store, the
    Prometheus client, the instant reviewed, whether target anchors are written, and the
    fleet's cost per token (``{class: (accelerator model, USD per 1M tokens)}``)."""

    spec: Spec
    store: Store
    client: PrometheusClient
    as_of: dt.datetime
    write_anchors: bool
    fleet: dict


@dataclass(frozen=True)
class _ClassFigures:
    """The figures read for one class before its review: its cadence, its cost and idle
    cost (USD/month, None: unknown), its saturation shares over its period
    (``{state: share}``) and the regression alerts that fired in it."""

    cadence: str
    cost: float | None
    idle: float | None
    shares: dict[str, float]
    fired: list[str]


def _review_class(run: _Pass, wc: WorkloadClass, figures: _ClassFigures,
                  read: Callable[[str], tuple[Baseline | None, Measurement | None]]) -> list[Finding]:
    from obsctl.rules.signals import class_signals

    spec, store, as_of = run.spec, run.store, run.as_of
    cadence, cost, idle, shares, fired = figures.cadence, figures.cost, figures.idle, figures.shares, figures.fired
    period = CADENCE_SECONDS[cadence]
    out: list[Finding] = []
    if not wc.owner:
        out.append(Finding("owner_missing", wc.name, None, "warning", None, f"{wc.name} has no owner",
                           f"set owner: <team> on workload class {wc.name} in the spec", None, {"cadence": cadence}))
    initiatives = store.initiatives(wc.name)
    active = [i for i in initiatives if i.status in ("open", "verified")]
    levels: dict[str, float | None] = {}
    for sig in class_signals(spec, wc):
        b, m = read(sig.name)
        out += _review_signal(run, wc, sig, period, bool(active), levels, b, m)
    out += _review_targets(run, wc, period, cost, levels, initiatives)
    out += _review_initiatives(spec, wc, initiatives, period, as_of)
    out += _regression_alerts(wc, fired, period, as_of)
    if not shares:
        out.append(Finding("saturation_unknown", wc.name, None, "info", None,
                           f"{wc.name}: saturation state unknown over the last {format_duration(period)} "
                           f"(no {C.SATURATION_STATE} series): a throughput change may only be demand",
                           f"give {wc.name} a source or a queue/latency signal and regenerate the rules (obsctl rules generate)",
                           wc.owner, {"period_seconds": period}))
    opportunity = _opportunity(spec, wc, cadence, cost, run.fleet, idle, shares)
    if opportunity is not None:
        out.append(opportunity)
    return out


#: The alerts the review lists as regressions of a class's signals.
REGRESSION_ALERTS = ("ObsctlSignalRegression",)


def _regressions_fired(client: PrometheusClient, periods: dict[str, float], as_of: dt.datetime) -> dict[str, list[str]]:
    """``{class: sorted names}`` of the regression alerts (:data:`REGRESSION_ALERTS`) that
    fired at any evaluation of each class's last period (``{class: period seconds}``), one
    query per distinct period: ``count_over_time(ALERTS{alertname=~"...", alertstate="firing"}[<period>s])``
    at ``as_of``, as ``verify`` reads them (:func:`obsctl.baselining.verify.alerts_fired`);
    a name is ``Alertname{signal="s"}`` when the alert has a ``signal`` label."""
    out: dict[str, set[str]] = {}
    for period in sorted(set(periods.values())):
        answer = client.query(f'count_over_time(ALERTS{{alertname=~"{"|".join(REGRESSION_ALERTS)}",alertstate="firing",'
                              f'workload_class!=""}}[{_seconds_text(period)}])', as_of)
        for s in answer:
            c, name, signal = s.metric.get("workload_class"), s.metric.get("alertname", "?"), s.metric.get("signal")
            if c in periods and periods[c] == period:
                out.setdefault(c, set()).add(f'{name}{{signal="{signal}"}}' if signal else name)
    return {c: sorted(names) for c, names in out.items()}


def _regression_alerts(wc: WorkloadClass, fired: list[str], period: float, as_of: dt.datetime) -> list[Finding]:
    """One ``regression_alerts`` finding (info) naming the class's regression alerts that
    fired in the last period (``fired``: :func:`_regressions_fired`), none when none fired."""
    if not fired:
        return []
    start = as_of - dt.timedelta(seconds=period)
    return [Finding("regression_alerts", wc.name, None, "info", None,
                    f"{wc.name}: {len(fired)} regression alert(s) fired in the last {format_duration(period)}: {', '.join(fired)}",
                    "find the change behind each (a release, a config, demand); verify a fix with obsctl initiative start",
                    wc.owner, {"alerts": fired, "start": rfc3339(start), "end": rfc3339(as_of)})]


def _review_signal(run: _Pass, wc: WorkloadClass, sig, period: float, initiative_active: bool, levels: dict,
                   b: Baseline | None, m: Measurement | None) -> list[Finding]:
    """One signal's findings from its current baseline ``b`` and the measurement ``m`` of
    its window (:func:`movement_window`; None when that is empty)."""
    spec, client, as_of = run.spec, run.client, run.as_of
    cfg = spec.verification
    name = f"{wc.name}/{sig.name}"
    if b is None:
        return [Finding("baseline_missing", wc.name, sig.name, "warning", None, f"{name} has no baseline",
                        f"obsctl snapshot-baseline --class {wc.name} --signal {sig.name}", wc.owner)]
    age = (as_of - b.window.end).total_seconds()
    limit = max_age_seconds(spec, period)
    evidence = {"baseline_id": b.id, "baseline_end": b.window.end.isoformat(), "age_seconds": age, "max_age_seconds": limit}
    start, end, step = movement_window(b, period, as_of)
    levels[sig.name] = m.stats.mean if m is not None and m.stats is not None else None
    if age > limit:
        return [Finding("baseline_stale", wc.name, sig.name, "warning", None,
                        f"{name} baseline is {format_duration(age)} old (limit {format_duration(limit)})",
                        f"obsctl snapshot-baseline --class {wc.name} --signal {sig.name}", wc.owner, evidence)]
    if initiative_active:
        return []  # an open initiative's window is verify's to judge
    first_test = start + dt.timedelta(seconds=max(2, cfg.min_samples) * step)
    if end < first_test:
        # Too young to test (right after a snapshot or a promote): not missing data.
        return [Finding("baseline_young", wc.name, sig.name, "info", None,
                        f"{name} baseline {b.id} is too young to test: its window ended {rfc3339(b.window.end)}, "
                        f"the first movement test can run at {rfc3339(first_test)}",
                        f"nothing to do now; a review at or after {rfc3339(first_test)} tests it", wc.owner,
                        {**evidence, "first_test_at": rfc3339(first_test), "step_seconds": step,
                         "min_samples": cfg.min_samples})]
    before, now = PopulationShape.of(b.population), PopulationShape.of(m.population) if m is not None else None
    changed = before.differences(now) if before is not None and now is not None else []
    if changed:
        return [Finding("population_changed", wc.name, sig.name, "warning", None,
                        f"{name} population changed since baseline {b.id}: {'; '.join(changed)}",
                        f"take a new baseline (obsctl snapshot-baseline --class {wc.name} --signal {sig.name}); the old one no longer describes this workload",
                        wc.owner, {**evidence, "changes": changed, "baseline_series": b.population.series_count,
                                   "window_series": m.population.series_count})]
    criteria = Criteria(min_effect=cfg.min_effect_ratio, confidence=cfg.confidence, reviews=reviews_per_life(spec, period),
                        min_samples=cfg.min_samples, min_coverage=cfg.min_coverage_ratio, on_change=sig.name in cfg.fresh_on_change)
    mv = movement(client, b, start, end, criteria, measurement=m, history_seconds=DRIFT_HISTORY_SECONDS)
    if mv.verdict == "NO_DATA":
        return [Finding("data_missing", wc.name, sig.name, "warning", None, f"{name}: no usable data over the last period ({mv.reason})",
                        f"check that {wc.name}'s {sig.name} series are scraped and fresh", wc.owner, {**evidence, **mv.as_dict()})]
    if mv.moved:
        return [Finding("baseline_drifted", wc.name, sig.name, "warning", None, _drift_text(name, mv, b),
                        f"find what changed, then re-baseline (obsctl snapshot-baseline --class {wc.name} --signal {sig.name})",
                        wc.owner, {**evidence, **mv.as_dict()})]
    return []


def _drift_text(name: str, mv: Movement, b: Baseline) -> str:
    from obsctl.formatting import format_confidence

    interval = f" ({format_confidence(mv.confidence)} CI {format_percent(mv.low)} .. {format_percent(mv.high)})" if mv.low is not None else ""
    step = f" after a step at {rfc3339(mv.step_at)}" if mv.moved_by_step and mv.step_at is not None else ""
    cycle = f" ({mv.cycle.note})" if mv.cycle is not None else ""
    return f"{name} moved {format_percent(mv.change)}{interval} since baseline {b.id}{step}{cycle}"


def _align_up(instant: dt.datetime, step: float) -> dt.datetime:
    down = align_down(instant, step)
    return down if down >= instant else down + dt.timedelta(seconds=step)


def movement_window(b: Baseline, period: float, as_of: dt.datetime) -> tuple[dt.datetime, dt.datetime, float]:
    """``(start, end, step)`` of the movement test of baseline ``b`` at ``as_of``: the last
    cadence ``period`` (s) up to ``as_of``, never before the baseline's window ends, read at
    :func:`~obsctl.baselining.practice.movement.window_step`, both ends aligned to that step since
    the Unix epoch (``end`` down, ``start`` up).

    An unaligned ``as_of`` (``review`` at "now") would put the grid between the scrapes and
    its last point past the end; aligned, every grid point is an instant the coverage
    measurement evaluates, and a scrape landing after ``as_of`` is outside the window.
    ``start >= end`` when the baseline ended less than a step ago."""
    raw_start = max(as_of - dt.timedelta(seconds=period), b.window.end)
    step = window_step(b.window.step_seconds, raw_start, as_of)
    for _ in range(3):  # the aligned span may need a smaller multiple of the baseline's step
        end = align_down(as_of, step)
        start = _align_up(max(end - dt.timedelta(seconds=period), b.window.end), step)
        again = window_step(b.window.step_seconds, start, end) if start < end else step
        if again == step:
            break
        step = again
    return start, end, step


def _measure(client: PrometheusClient, spec: Spec, b: Baseline, start: dt.datetime, end: dt.datetime,
             cache: LegCache | None = None) -> Measurement | None:
    if start >= end:
        return None
    cfg = spec.verification
    return measure(client, MeasureRequest(b.query, start, end, window_step(b.window.step_seconds, start, end), cfg.min_samples,
                                          what=f"{b.workload_class}/{b.signal} (review)", on_change=b.signal in cfg.fresh_on_change), cache)


# --- targets ---------------------------------------------------------------------------------


def team_rate(initiatives: list[Initiative], signal: str, direction: str, as_of: dt.datetime) -> float | None:
    """The class's verified improvement per quarter on ``signal``: the promoted
    initiatives of the last year, their verified changes compounded, per quarter (ratio);
    None without any."""
    sign = 1.0 if direction == "higher_is_better" else -1.0
    gains = []
    for i in initiatives:
        if i.status != "promoted" or i.primary_signal != signal or not i.verifications:
            continue
        v = i.verifications[-1]
        if v.change_ratio is None or (as_of - v.verified_at).days > 365:
            continue
        gains.append(1 + sign * v.change_ratio)
    if not gains:
        return None
    total = math.prod(max(g, 1e-9) for g in gains)
    return total ** (1 / 4) - 1


def required_per_quarter(current: float, value: float, direction: str, days_left: float) -> float | None:
    """The compounded improvement per quarter (ratio) that takes ``current`` to ``value`` in ``days_left``."""
    if days_left <= 0 or current <= 0 or value <= 0:
        return None
    factor = value / current if direction == "higher_is_better" else current / value
    return factor ** (QUARTER_DAYS / days_left) - 1


def gap_usd(category: str, direction: str, current: float, value: float, cost: float | None) -> float | None:
    """The class's cost the gap stands for (USD/month), for throughput, cost and
    utilization signals: the share of the class's cost that reaching ``value`` would save."""
    if cost is None or category not in ("throughput", "cost", "utilization") or current <= 0 or value <= 0:
        return None
    share = (current - value) / current if direction == "lower_is_better" else 1 - current / value
    return max(0.0, share) * cost


def _shortfall(st: target_rules.TargetState) -> float:
    # How far the level is short of where the schedule puts it (signal unit): the share of
    # the way it lags, times the way.
    return (min(st.elapsed, 1.0) - st.progress) * abs(st.value - st.start)


def behind(st: target_rules.TargetState, min_effect: float) -> bool:
    """True when the target is behind its schedule by more than noise: its progress is
    below the share of its time elapsed, and the level is short of where that share puts
    it by more than ``min_effect`` (``verification.min_effect_ratio``, the smallest change
    the practice treats as real) of the anchor. A wobble of a percent the day after the
    anchor (progress -20 % with 0.001 % of the time gone on a +6 % target) is not behind;
    the same level halfway to the deadline is."""
    if st.progress is None or st.start is None or st.value is None or st.progress >= st.elapsed:
        return False
    return _shortfall(st) > min_effect * abs(st.start)


def progress_phrase(st: target_rules.TargetState, unit: str) -> str:
    """How far a target is, in words: ``40 % done``, or, when the signal moved away from
    the target since its start (negative progress), the start, the current level and the
    target (a "-250 % done" says nothing an SRE can act on)."""
    if st.progress is not None and st.progress >= 0:
        return f"{format_percent(st.progress, sign=False)} done"
    return (f"moved away from its start ({format_number(st.start)} -> {format_number(st.current)} {unit}, "
            f"target {format_number(st.value)})")


def _review_targets(run: _Pass, wc: WorkloadClass, period: float, cost: float | None, levels: dict,
                    initiatives: list[Initiative]) -> list[Finding]:
    spec, store, as_of = run.spec, run.store, run.as_of
    out = []
    band = spec.review
    for t in spec.targets:
        if t.workload_class != wc.name:
            continue
        sig = spec.signal(t.signal)
        name = f"{wc.name}/{t.signal}"
        owner = t.owner or wc.owner
        record = target_rules.anchor(store, t, as_of, write=run.write_anchors)
        base = store.current_baseline(wc.name, t.signal, samples=False)
        current = levels.get(t.signal)
        st = target_rules.state(t, sig, record, current, base.stats.mean if base else None, as_of)
        evidence = {"target": st.value, "current": st.current, "start": st.start, "progress": st.progress,
                    "elapsed": st.elapsed, "deadline": t.deadline.isoformat(), "days_left": st.days_left,
                    "anchor_baseline_id": record.anchor_baseline_id, "driver": t.driver, "unit": sig.unit}
        due = record.reviewed_at is None or (as_of - record.reviewed_at).total_seconds() > period
        if due:
            out.append(Finding("target_review_due", wc.name, t.signal, "info", None,
                               f"{name} target not reviewed within the cadence" + (f" (last {record.reviewed_at.date()})" if record.reviewed_at else ""),
                               "review it in this cycle's meeting (obsctl review --write records it)", owner,
                               {"reviewed_at": record.reviewed_at.isoformat() if record.reviewed_at else None}))
        if st.value is None:
            continue  # a relative target without a baseline: baseline_missing says what to do
        bound = value_bound_error(st.value, sig)
        if bound:
            out.append(Finding("target_impossible", wc.name, t.signal, "critical", None, f"{name} target {bound}",
                               "set a target within the physical bound in the spec", owner, evidence))
            continue
        if current is None:
            continue  # no current level: data_missing / baseline_missing say so
        if st.met:
            out.append(Finding("target_met", wc.name, t.signal, "info", None,
                               f"{name} target met: {format_number(current)} vs {format_number(st.value)} {sig.unit}",
                               "set the next target, or retire this one", owner, evidence))
            continue
        usd = gap_usd(sig.category, sig.direction, current, st.value, cost)
        if st.overdue:
            out.append(Finding("target_behind", wc.name, t.signal, "critical", usd,
                               f"{name} target missed its deadline {t.deadline}: {format_number(current)} vs {format_number(st.value)} {sig.unit}",
                               "renegotiate the target or its deadline with its driver", owner, {**evidence, "overdue": True}))
            continue
        need = required_per_quarter(current, st.value, sig.direction, st.days_left)
        rate = team_rate(initiatives, t.signal, sig.direction, as_of)
        evidence |= {"required_per_quarter": need, "team_rate_per_quarter": rate,
                     "realistic_per_quarter": band.realistic_per_quarter, "aspirational_per_quarter": band.aspirational_per_quarter}
        if need is not None and need > band.aspirational_per_quarter:
            vs = f", the team verified {format_percent(rate)}/quarter" if rate is not None else ""
            out.append(Finding("target_unrealistic", wc.name, t.signal, "warning", usd,
                               f"{name} target needs {format_percent(need)}/quarter "
                               f"(aspirational above {format_percent(band.aspirational_per_quarter, sign=False)}{vs})",
                               "split it into quarterly steps of about 5 %, or move the deadline", owner, evidence))
        elif behind(st, spec.verification.min_effect_ratio):
            evidence |= {"shortfall": _shortfall(st), "noise": spec.verification.min_effect_ratio * abs(st.start)}
            out.append(Finding("target_behind", wc.name, t.signal, "warning", usd,
                               f"{name} target {progress_phrase(st, sig.unit)} with {format_percent(min(st.elapsed, 1), sign=False)} of the time gone",
                               "start an initiative on the opportunity's lever (obsctl initiative start)", owner, {**evidence, "overdue": False}))
    return out


# --- initiatives -----------------------------------------------------------------------------


def planned_end(spec: Spec, i: Initiative) -> dt.datetime:
    """When the initiative was planned to be decided (UTC): its ``due`` date at 00:00 (as a
    target's deadline) if it has one, else its start plus its planned window (default
    ``verification.window``)."""
    if i.due is not None:
        return dt.datetime.combine(i.due, dt.time(0, 0), tzinfo=dt.UTC)
    seconds = i.planned_window_seconds or parse_duration(spec.verification.window, "verification.window")
    return i.started_at + dt.timedelta(seconds=seconds)


def is_overdue(spec: Spec, i: Initiative, as_of: dt.datetime) -> bool:
    """True when ``i`` is open or verified, its last verdict (if any) is not decisive
    (:data:`DECISIVE`) and ``as_of`` is past its :func:`planned_end`."""
    last = i.verifications[-1].verdict if i.verifications else None
    return i.status in ("open", "verified") and last not in DECISIVE and as_of > planned_end(spec, i)


def _review_initiatives(spec: Spec, wc: WorkloadClass, initiatives: list[Initiative], period: float, as_of: dt.datetime) -> list[Finding]:
    out = []
    for i in initiatives:
        owner = i.owner or wc.owner
        last = i.verifications[-1] if i.verifications else None
        evidence = {"initiative": i.id, "status": i.status, "started_at": i.started_at.isoformat(), "lever": i.lever,
                    "planned_end": planned_end(spec, i).isoformat(), "last_verdict": last.verdict if last else None,
                    "expected_impact_ratio": i.expected_impact_ratio, "verified_change_ratio": last.change_ratio if last else None}
        if i.status == "verified" and last is not None and last.verdict in DECISIVE:
            act = (f"obsctl baseline promote --initiative {i.id} --lesson '<what it taught>'" if last.verdict == "IMPROVED"
                   else f"obsctl initiative close --initiative {i.id} --lesson '<what it taught>'")
            out.append(Finding("initiative_unpromoted", wc.name, i.primary_signal, "warning", None,
                               f"{i.id} verified {last.verdict} {format_percent(last.change_ratio)} on {last.verified_at.date()}, neither promoted nor closed",
                               act, owner, evidence))
        elif is_overdue(spec, i, as_of):
            out.append(Finding("initiative_overdue", wc.name, i.primary_signal, "warning", None,
                               f"{i.id} is past its planned end {planned_end(spec, i).date()} without a decisive verdict"
                               + (f" (last {last.verdict})" if last else " (never verified)"),
                               f"obsctl verify --initiative {i.id}, then extend it or close it", owner, evidence))
        verified = last is not None and last.verdict in DECISIVE
        if not i.lesson and (i.status == "promoted" or (i.status == "closed" and verified)):
            out.append(Finding("lesson_missing", wc.name, i.primary_signal, "info", None,
                               f"{i.id} was {i.status} without a lesson" + (f" (verified {last.verdict})" if verified else ""),
                               f"obsctl initiative lesson --initiative {i.id} --lesson '<what it taught>'", owner, evidence))
    accuracy = prediction_errors(initiatives)
    if accuracy is not None:
        out.append(Finding("prediction_accuracy", wc.name, None, "info", None,
                           f"{wc.name}: --expected-impact was off by {format_percent(accuracy['mean_absolute_error'], sign=False)} "
                           f"on average over {accuracy['count']} verified initiative(s) "
                           f"(expected minus verified: {format_percent(accuracy['mean_error'])} on average)",
                           "size the next --expected-impact from the verified effects (obsctl ledger), then plan it (obsctl plan --effect)",
                           wc.owner, accuracy))
    quiet = spec.review.episodic_periods * period
    latest = max((i.started_at for i in initiatives), default=None)
    if latest is None or (as_of - latest).total_seconds() > quiet:
        since = f"since {latest.date()}" if latest else "ever"
        out.append(Finding("episodic", wc.name, None, "info", None,
                           f"{wc.name} has had no initiative {since} ({spec.review.episodic_periods} cadence periods: {format_duration(quiet)})",
                           "pick the opportunity's lever and start one (obsctl initiative start)", wc.owner,
                           {"last_initiative_start": latest.isoformat() if latest else None, "quiet_seconds": quiet}))
    return out


def prediction_errors(initiatives: list[Initiative]) -> dict | None:
    """How well ``--expected-impact`` predicted the verified effect, over the initiatives with
    an expected impact whose last verdict is decisive (:data:`DECISIVE`) with a change.

    Returns:
        None without any such initiative, else ``{"count", "mean_absolute_error",
        "mean_error", "initiatives": [{"initiative", "signal", "expected_ratio",
        "verified_ratio", "error"}]}``: ratios of the primary signal (0.1 = +10 %); ``error``
        is expected - verified, so a positive ``mean_error`` is over-estimation of a rise
        (or under-estimation of a fall); ``mean_absolute_error`` is the mean of ``|error|``.
    """
    pairs = []
    for i in initiatives:
        last = i.verifications[-1] if i.verifications else None
        if i.expected_impact_ratio is None or last is None or last.verdict not in DECISIVE or last.change_ratio is None:
            continue
        pairs.append({"initiative": i.id, "signal": i.primary_signal, "expected_ratio": i.expected_impact_ratio,
                      "verified_ratio": last.change_ratio, "error": i.expected_impact_ratio - last.change_ratio})
    if not pairs:
        return None
    return {"count": len(pairs), "mean_absolute_error": sum(abs(p["error"]) for p in pairs) / len(pairs),
            "mean_error": sum(p["error"] for p in pairs) / len(pairs), "initiatives": pairs}


# --- money -----------------------------------------------------------------------------------


def _fleet_cost_per_token(client: PrometheusClient, spec: Spec, cadences: dict[str, str], as_of: dt.datetime) -> dict:
    """``{class: (accelerator model or None, USD per 1M tokens)}`` over each class's period
    (one query per distinct period for every class)."""
    from obsctl.spec import escape_label_value

    out = {}
    models = _class_accelerators(client, as_of)
    periods = {wc.name: CADENCE_SECONDS[cadences.get(wc.name) or class_cadence(spec, wc, None)] for wc in spec.workload_classes}
    per_token: dict[str, float] = {}
    for period in sorted(set(periods.values())):
        got = _by_class(client, f"avg by (workload_class) (avg_over_time({C.COST_PER_MILLION_TOKENS}{{{C.OWN_SERIES}}}"
                                f"[{_seconds_text(period)}]))", as_of)
        per_token |= {c: got[c] for c, p in periods.items() if p == period and c in got}
    for wc in spec.workload_classes:
        cpt = per_token.get(wc.name)
        if cpt is not None and cpt > 0:
            found = models.get(escape_label_value(wc.name)) or models.get(wc.name)
            out[wc.name] = (found[0] if found and len(found) == 1 else None, cpt)
    return out


def _class_accelerators(client: PrometheusClient, as_of: dt.datetime) -> dict[str, list[str]]:
    answer = client.query("count by (workload_class, model) (obsctl_gpu_attribution_info"
                          " * on(uuid) group_left(model) max by (uuid, model) (obsctl_gpu_info))", as_of)
    out: dict[str, list[str]] = {}
    for s in answer:
        if s.metric.get("workload_class") and s.metric.get("model"):
            out.setdefault(s.metric["workload_class"], []).append(s.metric["model"])
    return out


def _opportunity(spec: Spec, wc: WorkloadClass, cadence: str, cost: float | None, fleet: dict, idle: float | None,
                 shares: dict[str, float]) -> Finding | None:
    """The class's best-paying lever (module doc), None when nothing points at one: from
    its idle cost (USD/month), the fleet's cost per token and its saturation shares over its period."""
    candidates: list[tuple[float | None, str, str, dict]] = []
    if idle is not None and idle > 0:
        candidates.append((idle, "right-sizing", f"idle attributed GPUs cost {format_number(idle)} USD/month",
                           {"idle_usd_per_hour": idle / HOURS_PER_MONTH, "idle_utilization_ratio": spec.pricing.idle_utilization_ratio}))
    if wc.name in fleet:
        model, cpt = fleet[wc.name]
        peers = [(c, v) for c, (m, v) in fleet.items() if c != wc.name and m is not None and m == model]
        best = min(peers, key=lambda p: p[1], default=None)
        if best is not None and best[1] < cpt:
            usd = (cpt - best[1]) / cpt * cost if cost is not None else None
            lever = "batch-size" if wc.kind == "inference" else "scheduling"
            candidates.append((usd, lever, f"cost per 1M tokens {format_number(cpt)} USD vs {format_number(best[1])} on {best[0]} (same {model})",
                               {"cost_per_million_tokens": cpt, "best_class": best[0], "best_cost_per_million_tokens": best[1],
                                "accelerator_model": model}))
    if shares:
        state, share = max(shares.items(), key=lambda kv: kv[1])
        if state in ("constrained", "saturated") and share >= 0.5:
            lever = {"constrained": "batch-size" if wc.kind == "inference" else "scheduling", "saturated": "right-sizing"}[state]
            what = ("busy with a building queue: configuration limits it" if state == "constrained"
                    else "saturated: it needs capacity")
            candidates.append((None, lever, f"{format_percent(share, sign=False)} of the period {what}", {"saturation_shares": shares}))
    if not candidates:
        return None
    usd, lever, why, evidence = max(candidates, key=lambda c: c[0] if c[0] is not None else -1.0)
    low, high = LEVER_IMPACT.get(lever, (None, None))
    typical = f" (typical impact {format_percent(low, sign=False)}-{format_percent(high, sign=False)}, illustrative)" if low else ""
    return Finding("opportunity", wc.name, None, "info", usd, f"{wc.name}: {why}",
                   f"lever {lever}{typical}: obsctl initiative start --class {wc.name} --lever {lever} ...", wc.owner,
                   {**evidence, "lever": lever, "typical_impact": [low, high] if low else None, "cadence": cadence,
                    "class_cost_usd_per_month": cost})


def _saturation_shares(client: PrometheusClient, periods: dict[str, float], as_of: dt.datetime) -> dict[str, dict[str, float]]:
    """``{class: {state: share of its period}}`` (``{class: period seconds}``), one query per distinct period."""
    out: dict[str, dict[str, float]] = {}
    for period in sorted(set(periods.values())):
        answer = client.query(f'avg by (workload_class, state) (avg_over_time({C.SATURATION_STATE}{{workload_class!=""}}'
                              f"[{_seconds_text(period)}]))", as_of)
        for s in answer:
            c, state = s.metric.get("workload_class"), s.metric.get("state")
            if c in periods and periods[c] == period and state and math.isfinite(s.value):
                out.setdefault(c, {})[state] = s.value
    return out


def _unattributed(client: PrometheusClient, spec: Spec, as_of: dt.datetime) -> list[Finding]:
    period = CADENCE_SECONDS[spec.cadence]
    usd = monthly(client, C.UNATTRIBUTED_WASTE_USD_PER_HOUR, period, as_of)
    if usd is None or usd <= 0:
        return []
    low, high = LEVER_IMPACT["right-sizing"]
    return [Finding("opportunity", None, None, "info", usd, f"GPUs no class claims cost {format_number(usd)} USD/month",
                    "lever right-sizing: release them or attribute them to a class (obsctl_gpu_attribution_info)", None,
                    {"unattributed_usd_per_hour": usd / HOURS_PER_MONTH, "lever": "right-sizing", "typical_impact": [low, high]})]

