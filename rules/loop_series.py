"""Names of the series and alerts the generated rules publish (one place, shared with dashboards).

Naming follows Prometheus' ``level:metric:operations`` convention for recording rules.
A baseline or target is a constant series per (workload_class, signal): the value series
carry identity labels only and metadata goes on a separate ``_info`` series, so two
snapshots never collide in a join and every comparison joins ``on(workload_class, signal)``.
"""

from __future__ import annotations

#: Baseline value (the baseline's ``stats.mean``, in the signal's unit).
BASELINE_VALUE = "workload_class:obsctl_signal_baseline:value"
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
