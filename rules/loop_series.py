"""Names of the series and alerts the generated rules publish (one place, shared with dashboards).

Naming follows Prometheus' ``level:metric:operations`` convention for recording rules.
A baseline or target is a constant series per (workload_class, signal): the value series
carry identity labels only and metadata goes on a separate ``_info`` series, so two
snapshots never collide in a join and every comparison joins ``on(workload_class, signal)``.
"""

from __future__ import annotations

#: Baseline value (the baseline's ``stats.mean``, in the signal's unit).
BASELINE_VALUE = "workload_class:obsctl_signal_baseline:value"
#: Where the regression alert fires, per (workload_class, signal), in the signal's unit: the
#: farthest of the baseline's p5 (p95 for lower_is_better), its tolerance and its floor
#: (:func:`obsctl.rules.regression.regression_threshold`).
REGRESSION_THRESHOLD = "workload_class:obsctl_signal_regression_threshold:value"
#: Baseline metadata: baseline_id, window_start, window_end, population_series, snapshot_time (=1).
BASELINE_INFO = "obsctl_baseline_info"
#: Target value (in the signal's unit).
TARGET_VALUE = "workload_class:obsctl_signal_target:value"
#: Target metadata: driver, deadline, type (=1).
TARGET_INFO = "obsctl_target_info"
#: (current - target) / target, a ratio; its sign means "above"/"below" the target.
TARGET_GAP = "workload_class:obsctl_signal_target_gap:ratio"

#: One series per workload class of the spec (=1): ``workload_class``, ``kind``, ``source``
#: and ``owner`` (only when the class has one). Alerts written once for every class take
#: their ``owner`` label from it (:func:`with_owner`).
CLASS_INFO = "obsctl_workload_class_info"
#: One series per (workload_class, signal) pair the class's source can fill (=1): the
#: pairs rules, alerts and panels are generated for (:func:`obsctl.rules.signals.class_signals`).
CLASS_SIGNAL_INFO = "obsctl_workload_class_signal_info"

#: Review state, published by ``obsctl publish`` (a Pushgateway group or a textfile, not
#: rules: it changes with every review; docs/practice.md#publishing). Gauges:
#: the end of the current baseline's window (unix s: a baseline's age is counted from it,
#: as the review counts it) and the age it may reach (s), per (workload_class, signal);
REVIEW_BASELINE_END = "obsctl_review_baseline_window_end_timestamp_seconds"
REVIEW_BASELINE_MAX_AGE = "obsctl_review_baseline_max_age_seconds"
#: a drifted baseline's change since it was taken (ratio, 0.1 = +10 %), per (workload_class, signal);
REVIEW_DRIFT = "obsctl_review_drift_ratio"
#: a target's progress from its anchor (0-1, can leave that range) and the share of its
#: time elapsed (0-1), per (workload_class, signal, owner);
REVIEW_TARGET_PROGRESS = "obsctl_review_target_progress_ratio"
REVIEW_TARGET_ELAPSED = "obsctl_review_target_elapsed_ratio"
#: an active initiative's planned end (unix s), per (workload_class, initiative, lever);
REVIEW_INITIATIVE_DUE = "obsctl_review_initiative_due_timestamp_seconds"
#: the class's best opportunity (USD/month), per (workload_class, lever);
REVIEW_OPPORTUNITY = "obsctl_review_opportunity_usd_per_month"
#: findings by (workload_class, signal, kind, severity, owner): their count;
REVIEW_FINDINGS = "obsctl_review_findings"
#: when the state was published (unix s).
REVIEW_PUBLISHED = "obsctl_review_published_timestamp_seconds"
#: The initiatives' events as annotations: value = when (unix s), labels workload_class,
#: initiative, lever, event (start | look | verdict | promote | close), look (1, 2, ...;
#: "" for other events), verdict ("" before the first look).
INITIATIVE_EVENT = "obsctl_initiative_event_timestamp_seconds"
#: The ledger: the last look's change of each verified initiative (ratio), labelled
#: workload_class, initiative, lever, signal, verdict, status.
LEDGER_CHANGE = "obsctl_ledger_change_ratio"
#: The last look's verdict of each verified initiative as a state set (one series per verdict
#: of ``obsctl.records.Verdict``: 1 for the last look's, 0 for the others), labelled
#: workload_class, initiative, lever, verdict; what a rollout gate reads (docs/rollouts.md).
INITIATIVE_VERDICT = "obsctl_initiative_verdict"

#: The identity labels every per-class series carries; joins use exactly these.
IDENTITY = ("workload_class", "signal")
JOIN = "on(workload_class, signal)"

#: Where each alert's runbook lives (repository-relative; an anchor per alert name).
RUNBOOK_BASE = "docs/runbooks.md"


def runbook_url(alertname: str) -> str:
    """The runbook link of an alert: ``docs/runbooks.md#<alertname lowercased>``."""
    return f"{RUNBOOK_BASE}#{alertname.lower()}"


def selector(metric: str, **labels: str) -> str:
    """``metric{k="v",...}`` with values escaped for PromQL (keys sorted)."""
    from obsctl.spec import promql_matchers

    return f"{metric}{{{promql_matchers(labels)}}}" if labels else metric


def number(value: float) -> str:
    """A float as a PromQL literal that round-trips exactly (``repr``: shortest exact form)."""
    return repr(float(value))


def with_owner(expr: str) -> str:
    """``expr`` (a vector labelled ``workload_class``) with the class's ``owner`` label
    copied from :data:`CLASS_INFO`; the value stays ``expr``'s (the info series is 1)."""
    return f"({expr})\n* on(workload_class) group_left(owner) {CLASS_INFO}"


def class_regex(names) -> str:
    """``workload_class=~"a|b"``: the matcher of a set of classes that share one rule.

    Class names hold only ``a-z 0-9 _ -`` (the spec validates them), none of them special
    in a regular expression; sorted, so the text is deterministic.
    """
    return f'workload_class=~"{"|".join(sorted(names))}"'


def shared_by(classes, key) -> list[tuple[object, list]]:
    """``classes`` split by ``key(class)``: ``[(key, [classes])]`` in the order of each key's
    first class. Rules whose PromQL depends on a class only through ``key`` (its node
    selector, its thresholds) are written once per key, for all of that key's classes,
    instead of once per class."""
    out: dict[object, list] = {}
    for wc in classes:
        out.setdefault(key(wc), []).append(wc)
    return list(out.items())
