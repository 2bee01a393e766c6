"""The loop overview dashboard: for each workload class a row; for each signal its
current value against its baseline, the regression threshold and its target, a stat of
the current value and the gap to target, then the class's baselines and firing alerts.

Queries read the series the generated rules publish (see obsctl.rules.loop_series).
"""

from __future__ import annotations

from obsctl.dashboards import grafana as g
from obsctl.rules.loop_series import (
    BASELINE_INFO,
    BASELINE_VALUE,
    INITIATIVE_EVENT,
    LEDGER_CHANGE,
    REVIEW_BASELINE_CREATED,
    REVIEW_FINDINGS,
    REVIEW_OPPORTUNITY,
    TARGET_GAP,
    TARGET_VALUE,
    number,
    selector,
)
from obsctl.rules.signals import class_signals
from obsctl.spec import Signal, Spec, WorkloadClass

UID = "obsctl-loop-overview"


def _signal_panels(spec: Spec, wc: WorkloadClass, sig: Signal) -> list[tuple[object, int, int]]:
    ident = {"workload_class": wc.name, "signal": sig.name}
    current = selector(sig.record_name, workload_class=wc.name)
    baseline = selector(BASELINE_VALUE, **ident)
    sign = "-" if sig.direction == "higher_is_better" else "+"
    has_target = any(t.workload_class == wc.name and t.signal == sig.name for t in spec.targets)
    series = [
        g.query(current, "current", "A"),
        g.query(baseline, "baseline", "B"),
        g.query(f"{baseline} * (1 {sign} {number(sig.tolerance_ratio)})", "regression threshold", "C"),
    ]
    if has_target:
        series.append(g.query(selector(TARGET_VALUE, **ident), "target", "D"))
    arrow = "higher is better" if sig.direction == "higher_is_better" else "lower is better"
    ts = g.timeseries(f"{sig.name} ({sig.unit})", series, g.unit(sig.unit),
                      f"{sig.category}; {arrow}; the regression alert fires past the threshold for {sig.alert_for}.")
    stats = [g.query(current, "current", "A", instant=True)]
    if has_target:
        stats.append(g.query(selector(TARGET_GAP, **ident), "gap to target", "B", instant=True))
    st = g.stat(f"{sig.name} now", stats, g.unit(sig.unit), "Current value" + (" and (current - target) / target" if has_target else ""),
                ref_units={"B": "percentunit"} if has_target else None)
    return [(ts, 18, 8), (st, 6, 8)]


def _review_panels() -> list[tuple[object, int, int]]:
    """The practice on a cadence: the last review's findings and opportunities, the ledger
    of verified initiatives and the baselines' age (series of ``obsctl publish``)."""
    return [
        (g.table("Review: findings", [g.query(f"sum by (workload_class, signal, kind, severity, owner) ({REVIEW_FINDINGS}) > 0",
                                             "", "A", instant=True, table=True)],
                 "The last obsctl review's findings (obsctl publish); obsctl review shows each with its action.", "findings"), 12, 8),
        (g.table("Review: opportunities (USD/month)", [g.query(f"sort_desc(max by (workload_class, lever) ({REVIEW_OPPORTUNITY}))",
                                                              "", "A", instant=True, table=True)],
                 "Per class the lever most likely to close its gap, priced (typical impacts are illustrative).", "USD/month"), 12, 8),
        (g.table("Ledger: verified initiatives (last look's change)", [g.query(
            f"max by (workload_class, initiative, lever, signal, verdict, status) ({LEDGER_CHANGE})", "", "A", instant=True, table=True)],
            "obsctl ledger has the intervals, costs and lessons; the staircase is in ledger.png.", "change (ratio)"), 16, 8),
        (g.timeseries("Baseline age (days)", [g.query(f"max by (workload_class, signal) (time() - {REVIEW_BASELINE_CREATED}) / 86400",
                                                      "{{workload_class}} {{signal}}")], "none",
                      "Stale past the class's cadence (ObsctlBaselineStale)."), 8, 8),
    ]


def build(spec: Spec) -> dict:
    """The loop overview as Grafana JSON for every class x signal of ``spec`` (sorted by name),
    after a review and ledger row."""
    sections = [("Review and ledger", _review_panels())]
    for wc in sorted(spec.workload_classes, key=lambda c: c.name):
        # Only the signals the class's source can fill (obsctl.rules.signals.class_signals).
        items = [p for sig in class_signals(spec, wc) for p in _signal_panels(spec, wc, sig)]
        items.append((g.table("Baselines", [g.query(selector(BASELINE_INFO, workload_class=wc.name), "", "A", instant=True, table=True)],
                              "Current baseline per signal: id, window, population, snapshot time."), 12, 6))
        items.append((g.table("Firing obsctl alerts", [g.query(
            f'ALERTS{{alertstate="firing",alertname=~"Obsctl.*",workload_class="{_esc(wc.name)}"}}', "", "A", instant=True, table=True)]), 12, 6))
        sections.append((f"{wc.name} ({wc.kind})", items))
    return g.dashboard("obsctl / optimization loop", UID,
                       "Each workload class's signals against baseline, regression threshold and target (generated by obsctl).",
                       ["obsctl", "generated"], sections, annotations=[_loop_annotation()])


def _loop_annotation() -> dict:
    return g.annotation("obsctl initiatives", f"max by (workload_class, initiative, lever, event, look, verdict) ({INITIATIVE_EVENT}) * 1000",
                        "{{event}} {{initiative}}", "{{lever}} on {{workload_class}} {{verdict}}",
                        ["workload_class", "lever", "event", "verdict"])


def _esc(value: str) -> str:
    from obsctl.spec import escape_label_value

    return escape_label_value(value)
