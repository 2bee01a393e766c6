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
