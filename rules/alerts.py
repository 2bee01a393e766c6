"""Alerting rules of the loop: regression past the baseline (past its spread, tolerance and
floor; a demand-bound dip spared), missing baseline, absent signal, and a passed target deadline.

Alert names are PascalCase with the ``Obsctl`` prefix; every alert carries ``severity``
(info|warning|critical) and the annotations ``summary``, ``description``, ``runbook_url``.
Every alert of a class carries its ``owner`` label (when the spec names one): rules
written once for all classes join it from the class info series
(:func:`obsctl.rules.loop_series.with_owner`), per-class and per-target rules set it.
Only the (class, signal) pairs the class's source can fill get alerts
(:func:`obsctl.rules.signals.class_signals`).

Annotations and alert labels are Go templates that Prometheus expands at alert time: text
taken from the spec (a signal's unit, a target's driver, an owner) goes in through
:func:`obsctl.escape.go_template_text`, so it is shown as written and never run; every label
value :func:`_alert` is given is made literal that way. (Recording rules' labels are not
templates: Prometheus sets them as written.)
"""

from __future__ import annotations

import datetime as dt

from obsctl.baselining.designs.demand import follows_demand
from obsctl.escape import go_template_text as literal
from obsctl.rules.canonical import SATURATION_STATE
from obsctl.rules.loop_series import (
    BASELINE_VALUE,
    CLASS_SIGNAL_INFO,
    JOIN,
    REGRESSION_THRESHOLD,
    REVIEW_BASELINE_END,
    REVIEW_BASELINE_MAX_AGE,
    REVIEW_FINDINGS,
    REVIEW_INITIATIVE_DUE,
    TARGET_VALUE,
    class_regex,
    number,
    runbook_url,
    selector,
    with_owner,
)
from obsctl.rules.regression import alert_floor
from obsctl.rules.signals import class_signals
from obsctl.spec import Signal, Spec, Target

#: How long a (class, signal) may lack a baseline / data before the alert fires.
MISSING_FOR = "15m"
ABSENT_FOR = "10m"
DEADLINE_FOR = "1h"


def _alert(name: str, expr: str, for_: str, severity: str, labels: dict[str, str], summary: str, description: str) -> dict:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {**{k: literal(v) for k, v in labels.items()}, "severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook_url": runbook_url(name)},
    }


def regression_rule(sig: Signal, demand_bound_classes: list[str] = ()) -> dict:
    """``ObsctlSignalRegression`` for one signal, all classes at once.

    Fires when the current value is past the class's regression threshold
    (:data:`REGRESSION_THRESHOLD`: the farthest of the baseline's p5 (p95 for
    lower_is_better), ``mean x (1 -+ tolerance_ratio)`` and the signal's absolute floor,
    :mod:`obsctl.rules.regression`) for ``signal.alert_for``; no threshold series (no
    baseline): no alert. The alert's value is the current value.

    ``demand_bound_classes``: the inference classes to spare when ``sig`` follows demand
    (:func:`obsctl.baselining.designs.demand.follows_demand`): while such a class's
    saturation state is ``healthy`` or ``idle`` (it serves what arrives, no queue builds)
    the signal is its demand, and a dip is the demand's; the alert fires there only while
    the class is saturated or constrained, or its state is unknown (no series).
    """
    threshold = selector(REGRESSION_THRESHOLD, signal=sig.name)
    if sig.direction == "higher_is_better":
        expr, word = f"{sig.record_name}\n< {JOIN} {threshold}", "below"
    else:
        expr, word = f"{sig.record_name}\n> {JOIN} {threshold}", "above"
    spared = ""
    if demand_bound_classes and follows_demand(sig):
        serving = f'{SATURATION_STATE}{{state=~"healthy|idle",{class_regex(demand_bound_classes)}}} == 1'
        expr = f"({expr})\nunless on(workload_class) ({serving})"
        spared = (" It fires only while the class is saturated or constrained, or its saturation state is unknown: on a "
                  "class that serves what arrives this signal follows demand, and a dip there is the demand's.")
    pct = f"{sig.tolerance_ratio * 100:g}"
    floor = alert_floor(sig)
    floor_text = f" and more than {literal(f'{floor:g}')} {literal(sig.unit)}" if floor > 0 else ""
    return _alert(
        "ObsctlSignalRegression", with_owner(expr), sig.alert_for, "warning", {"signal": sig.name},
        f"{sig.name} of {{{{ $labels.workload_class }}}} regressed past its baseline",
        f"{sig.name} ({literal(sig.unit)}, {sig.direction}) of workload class {{{{ $labels.workload_class }}}} is "
        f"{{{{ $value | printf \"%.4g\" }}}}, {word} its baseline's spread (p5-p95), more than {pct} %{floor_text} "
        f"{word} its mean, for {sig.alert_for}.{spared}",
    )


def absent_rule(sig: Signal) -> dict:
    """``ObsctlSignalAbsent``: a class x signal the class can have (:data:`CLASS_SIGNAL_INFO`)
    has a baseline series but no current value."""
    baseline = selector(BASELINE_VALUE, signal=sig.name)
    return _alert(
        "ObsctlSignalAbsent",
        with_owner(f"{baseline}\nand {JOIN} {selector(CLASS_SIGNAL_INFO, signal=sig.name)}\nunless {JOIN} {sig.record_name}"),
        ABSENT_FOR, "warning", {"signal": sig.name},
        f"{sig.name} of {{{{ $labels.workload_class }}}} has a baseline but no data",
        f"The recording rule {sig.record_name} returns nothing for workload class {{{{ $labels.workload_class }}}} "
        f"although a baseline exists: the workload stopped, its series were renamed, or a scrape fails. "
        f"Without data no regression can be detected.",
    )


def missing_rule() -> dict:
    """``ObsctlBaselineMissing`` (info), one rule for every class: per class, how many of
    the signals it can have (:data:`CLASS_SIGNAL_INFO`) have no baseline series; one alert
    per class, however many; the owner joined from the class info series."""
    expr = f"count by (workload_class) (\n  {CLASS_SIGNAL_INFO}\n  unless {JOIN} {BASELINE_VALUE}\n)"
    wc = "{{ $labels.workload_class }}"
    return _alert(
        "ObsctlBaselineMissing", with_owner(expr), MISSING_FOR, "info", {},
        f"{{{{ $value }}}} signal(s) of {wc} have no baseline",
        f"Workload class {wc} has {{{{ $value }}}} signal(s) without a {BASELINE_VALUE} series: regressions of "
        f"those signals cannot be detected. obsctl review --class {wc} names them; take baselines with "
        f"obsctl snapshot-baseline --class {wc}, then obsctl rules generate.",
    )


def deadline_rule(target: Target, sig: Signal, owner: str | None = None) -> dict:
    """``ObsctlTargetDeadlinePassed``: after the deadline day (UTC) the target is not met;
    labelled with ``owner`` (the target's, else its class's) when given."""
    identity = {"workload_class": target.workload_class, "signal": target.signal}
    after = dt.datetime.combine(target.deadline + dt.timedelta(days=1), dt.time(), dt.UTC).timestamp()
    op = "<" if sig.direction == "higher_is_better" else ">"
    expr = (
        f"({selector(sig.record_name, workload_class=target.workload_class)}\n"
        f"  {op} {JOIN} {selector(TARGET_VALUE, **identity)})\n"
        f"and on() (vector(time()) > {number(after)})"
    )
    return _alert(
        "ObsctlTargetDeadlinePassed", expr, DEADLINE_FOR, "warning", {**identity, **({"owner": owner} if owner else {})},
        f"Target for {target.signal} of {target.workload_class} missed its deadline {target.deadline.isoformat()}",
        f"The target ({literal(target.driver)}) was due on {target.deadline.isoformat()}; {target.signal} is "
        f"{{{{ $value | printf \"%.4g\" }}}} and does not meet it.",
    )


#: How long review state must say so before its alert fires.
REVIEW_FOR = "15m"


def review_rules() -> list[dict]:
    """The review-state alerts, over the series ``obsctl publish`` pushes (docs/practice.md#publishing).

    * ``ObsctlBaselineStale``: the current baseline is older than its class's cadence
      allows (``time() - created > max_age``, so it fires between publishes too); value: the age (s).
    * ``ObsctlTargetBehind``: the last review found a target behind its schedule; labelled
      with the finding's owner (the target's, else the class's); value: the findings.
    * ``ObsctlInitiativeOverdue``: an open or verified initiative is past its planned
      end; value: seconds past it.
    """
    stale = f"(time() - {REVIEW_BASELINE_END})\n> {JOIN} {REVIEW_BASELINE_MAX_AGE}"
    overdue = f"time() - {REVIEW_INITIATIVE_DUE} > 0"
    return [
        _alert("ObsctlBaselineStale", with_owner(stale), REVIEW_FOR, "warning", {},
               "Baseline of {{ $labels.signal }} of {{ $labels.workload_class }} is stale",
               "The current baseline of {{ $labels.signal }} of workload class {{ $labels.workload_class }} is "
               "{{ $value | humanizeDuration }} old, older than the class's cadence allows: verdicts and regression alerts "
               "compare against a state that may no longer exist. Re-baseline it (obsctl snapshot-baseline), then obsctl rules generate."),
        _alert("ObsctlTargetBehind", f'sum by (workload_class, signal, owner) ({selector(REVIEW_FINDINGS, kind="target_behind")}) > 0',
               REVIEW_FOR, "warning", {},
               "Target for {{ $labels.signal }} of {{ $labels.workload_class }} is behind",
               "The last obsctl review found the target for {{ $labels.signal }} of workload class {{ $labels.workload_class }} "
               "behind its schedule: progress so far is below the share of time elapsed to its deadline. "
               "obsctl review --class {{ $labels.workload_class }} shows the gap and the opportunity to close it."),
        _alert("ObsctlInitiativeOverdue", with_owner(overdue), REVIEW_FOR, "warning", {},
               "Initiative {{ $labels.initiative }} on {{ $labels.workload_class }} is overdue",
               "Initiative {{ $labels.initiative }} ({{ $labels.lever }}) on workload class {{ $labels.workload_class }} is "
               "{{ $value | humanizeDuration }} past its planned end without being promoted or closed. Run obsctl verify, "
               "then promote it, extend it or close it with what it taught."),
    ]


def alert_groups(spec: Spec) -> list[dict]:
    """Groups ``obsctl.alerts.signals`` (regression, absent), ``obsctl.alerts.baselines``
    (baseline missing, one rule for every class; target deadline, one per target), sorted by class and signal, and
    ``obsctl.alerts.review`` (:func:`review_rules`)."""
    signals = sorted(spec.signals, key=lambda s: s.name)
    classes = sorted(spec.workload_classes, key=lambda c: c.name)
    # A signal no class can have gets no per-signal alert either.
    fillable = {s.name for wc in classes for s in class_signals(spec, wc)}
    # Inference classes have arrivals; a training job pulls its work, so its throughput is never only demand.
    inference = [wc.name for wc in classes if wc.kind == "inference"]
    per_signal = [rule for sig in signals if sig.name in fillable for rule in (regression_rule(sig, inference), absent_rule(sig))]
    loop = [missing_rule()] if fillable else []
    loop += [deadline_rule(t, spec.signal(t.signal), t.owner or spec.workload_class(t.workload_class).owner)
             for t in sorted(spec.targets, key=lambda t: (t.workload_class, t.signal))]
    return [{"name": "obsctl.alerts.signals", "rules": per_signal}, {"name": "obsctl.alerts.baselines", "rules": loop},
            {"name": "obsctl.alerts.review", "rules": review_rules()}]
