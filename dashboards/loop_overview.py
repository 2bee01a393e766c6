"""The loop overview dashboard: one row that Grafana repeats for each selected workload
class (``$workload_class``); for each signal its current value against its baseline, the
regression threshold and its target, a stat of the current value and the gap to target,
then the class's baselines and firing alerts (``$signal`` selects their signals). Links
to the other obsctl dashboards carry the variables over.

Queries read the series the generated rules publish (see obsctl.rules.loop_series).
"""

from __future__ import annotations

from obsctl.dashboards import grafana as g
from obsctl.dashboards.per_class import class_variable
from obsctl.rules.loop_series import (
    BASELINE_INFO,
    BASELINE_VALUE,
    CLASS_SIGNAL_INFO,
    INITIATIVE_EVENT,
    LEDGER_CHANGE,
    REGRESSION_THRESHOLD,
    REVIEW_BASELINE_END,
    REVIEW_FINDINGS,
    REVIEW_OPPORTUNITY,
    TARGET_GAP,
    TARGET_VALUE,
)
from obsctl.rules.signals import class_signals
from obsctl.spec import Signal, Spec

UID = "obsctl-loop-overview"
#: The classes and signals the panels show: Grafana's variables, substituted at view time.
CLASS = 'workload_class=~"$workload_class"'
SIGNAL = 'signal=~"$signal"'
#: The repeated row: Grafana draws it once per selected class.
CLASS_ROW = "$workload_class"


def _signal_panels(spec: Spec, sig: Signal) -> list[tuple[object, int, int]]:
    """One signal's panels, for the class of the repeated row: current, baseline, regression
    threshold and (where the spec sets any target for the signal) target; a stat of the
    current value and the gap to target."""
    ident = f'{CLASS},signal="{_esc(sig.name)}"'
    current = f"{sig.record_name}{{{CLASS}}}"
    baseline = f"{BASELINE_VALUE}{{{ident}}}"
    has_target = any(t.signal == sig.name for t in spec.targets)
    series = [
        g.query(current, "current", "A"),
        g.query(baseline, "baseline", "B"),
        g.query(f"{REGRESSION_THRESHOLD}{{{ident}}}", "regression threshold", "C"),
    ]
    if has_target:
        series.append(g.query(f"{TARGET_VALUE}{{{ident}}}", "target", "D"))
    arrow = "higher is better" if sig.direction == "higher_is_better" else "lower is better"
    ts = g.timeseries(f"{sig.name} ({sig.unit})", series, g.unit(sig.unit),
                      f"{sig.category}; {arrow}; the regression alert fires past the threshold for {sig.alert_for}.")
    stats = [g.query(current, "current", "A", instant=True)]
    if has_target:
        stats.append(g.query(f"{TARGET_GAP}{{{ident}}}", "gap to target", "B", instant=True))
    st = g.stat(f"{sig.name} now", stats, g.unit(sig.unit), "Current value" + (" and (current - target) / target" if has_target else ""),
                ref_units={"B": "percentunit"} if has_target else None)
    return [(ts, 18, 8), (st, 6, 8)]


def _class_panels(spec: Spec) -> list[tuple[object, int, int]]:
    """The repeated row's panels: each signal some class can have, then the class's baselines
    and firing alerts (of the signals ``$signal`` selects)."""
    fillable = {s.name for wc in spec.workload_classes for s in class_signals(spec, wc)}
    items = [p for sig in sorted(spec.signals, key=lambda s: s.name) if sig.name in fillable for p in _signal_panels(spec, sig)]
    items.append((g.table("Baselines", [g.query(f"{BASELINE_INFO}{{{CLASS},{SIGNAL}}}", "", "A", instant=True, table=True)],
                          "Current baseline per signal: id, window, population, snapshot time."), 12, 6))
    items.append((g.table("Firing obsctl alerts", [g.query(
        f'ALERTS{{alertstate="firing",alertname=~"Obsctl.*",{CLASS},{SIGNAL}}}', "", "A", instant=True, table=True)]), 12, 6))
    return items


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
        (g.timeseries("Baseline age (days)", [g.query(f"max by (workload_class, signal) (time() - {REVIEW_BASELINE_END}) / 86400",
                                                      "{{workload_class}} {{signal}}")], "none",
                      "Stale past the class's cadence (ObsctlBaselineStale)."), 8, 8),
    ]


def build(spec: Spec) -> dict:
    """The loop overview as Grafana JSON: a review and ledger row, then one row that Grafana
    repeats for each class selected in ``$workload_class``, with the panels of every signal.

    The JSON holds one panel set per signal, whatever the number of classes (a row per
    class made a 40-class spec's dashboard larger than a ConfigMap can hold)."""
    variables = [class_variable(spec),
                 g.query_variable("signal", "Signal", f'label_values({CLASS_SIGNAL_INFO}{{{CLASS}}}, signal)')]
    sections = [("Review and ledger", _review_panels()), (CLASS_ROW, _class_panels(spec))]
    return g.dashboard(g.Header("obsctl / optimization loop", UID,
                                "Each workload class's signals against baseline, regression threshold and target (generated by obsctl).",
                                ["obsctl", "generated"]),
                       sections, variables, annotations=[_loop_annotation()],
                       repeats={CLASS_ROW: "workload_class"}, links=g.dashboard_links(["obsctl"]))


def _loop_annotation() -> dict:
    return g.annotation("obsctl initiatives", f"max by (workload_class, initiative, lever, event, look, verdict) ({INITIATIVE_EVENT}) * 1000",
                        "{{event}} {{initiative}}", "{{lever}} on {{workload_class}} {{verdict}}",
                        ["workload_class", "lever", "event", "verdict"])


def _esc(value: str) -> str:
    from obsctl.spec import escape_label_value

    return escape_label_value(value)
