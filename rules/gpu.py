"""Generic GPU recording and alerting rules over the canonical obsctl GPU metrics.

Whole-GPU series only (``gpu_instance=""``): MIG instances add a ``gpu_instance`` label
and would count a GPU's memory twice. Ratios are ratios of sums.
"""

from __future__ import annotations

from obsctl.rules.gpu_health import gpu_health_rules
from obsctl.rules.loop_series import runbook_url

_WHOLE = '{gpu_instance=""}'

#: (record, expr): per instance (node) and per workload class.
RECORDING = [
    ("instance:obsctl_gpu_utilization_ratio:avg",
     f"sum by (instance) (obsctl_gpu_utilization_ratio{_WHOLE})\n/ count by (instance) (obsctl_gpu_utilization_ratio{_WHOLE})"),
    ("instance:obsctl_gpu_memory_used_bytes:ratio",
     f"sum by (instance) (obsctl_gpu_memory_used_bytes{_WHOLE})\n/ sum by (instance) (obsctl_gpu_memory_total_bytes{_WHOLE})"),
    ("instance:obsctl_gpu_power_watts:sum", f"sum by (instance) (obsctl_gpu_power_watts{_WHOLE})"),
    ("instance:obsctl_gpu_energy_joules:rate5m", f"sum by (instance) (rate(obsctl_gpu_energy_joules_total{_WHOLE}[5m]))"),
    ("instance:obsctl_gpu_up:sum", f"sum by (instance) (obsctl_gpu_up{_WHOLE})"),
    ("workload_class:obsctl_gpu_utilization_ratio:avg",
     # The attribution is the "many" side: a shared GPU (or MIG instance) has one
     # attribution series per class, so joining the other way round is many-to-many.
     "sum by (workload_class) (obsctl_gpu_attribution_info * on(uuid, gpu_instance) group_left() obsctl_gpu_utilization_ratio)\n"
     "/ count by (workload_class) (obsctl_gpu_attribution_info)"),
]


def gpu_groups() -> list[dict]:
    """Groups ``obsctl.gpu`` (recording) and ``obsctl.alerts.gpu`` (ObsctlGpuDown, ObsctlExporterCollectorFailed,
    then the health and exporter alerts of :mod:`obsctl.rules.gpu_health`)."""
    alerts = [
        {
            "alert": "ObsctlGpuDown",
            "expr": "obsctl_gpu_up == 0",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "GPU {{ $labels.gpu }} on {{ $labels.instance }} is down",
                "description": "obsctl_gpu_up is 0 for GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} "
                "for 5 minutes: the driver cannot query it (fallen off the bus, XID error, or reset).",
                "runbook_url": runbook_url("ObsctlGpuDown"),
            },
        },
        {
            "alert": "ObsctlExporterCollectorFailed",
            "expr": "obsctl_exporter_scrape_collector_success == 0",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "obsctl-exporter collector {{ $labels.collector }} fails on {{ $labels.instance }}",
                "description": "The {{ $labels.collector }} collector of obsctl-exporter on {{ $labels.instance }} has failed "
                "every scrape for 10 minutes; its series are absent. The exporter log says why.",
                "runbook_url": runbook_url("ObsctlExporterCollectorFailed"),
            },
        },
    ]
    return [
        {"name": "obsctl.gpu", "rules": [{"record": r, "expr": e} for r, e in RECORDING]},
        {"name": "obsctl.alerts.gpu", "rules": alerts + gpu_health_rules()},
    ]
