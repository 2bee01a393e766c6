"""The GPU fleet dashboard over the canonical obsctl GPU metrics (NVML or DCGM filled)."""

from __future__ import annotations

from obsctl.dashboards import grafana as g
from obsctl.rules.gpu_health import EXPORTER_JOB, HW_SLOWDOWN_REASONS, THERMAL_REASONS
from obsctl.spec import promql_matchers

UID = "obsctl-gpu-fleet"
_I = 'instance=~"$instance"'
_WHOLE = f'gpu_instance="",{_I}'
_UP = f"up{{{promql_matchers({'job': EXPORTER_JOB})},{_I}}}"
#: Clock-event reasons worth a line: power capping (normal under load) and the ones that alert.
_REASONS = "|".join(("sw_power_cap", *THERMAL_REASONS, *HW_SLOWDOWN_REASONS))
_LEGEND = "{{instance}} gpu {{gpu}}"


def _health() -> list[tuple[object, int, int]]:
    """The GPU health row: the series behind the GPU health alerts (rules/gpu_health.py)."""
    def count(expr: str) -> str:
        return f"count({expr}) or vector(0)"

    return [
        (g.stat("Exporters up", [g.query(count(f"{_UP} == 1"), "up", instant=True)]), 6, 4),
        (g.stat("Exporters down", [g.query(count(f"{_UP} == 0"), "down", instant=True)], description=(
            f"Scrape targets of job {EXPORTER_JOB} that Prometheus cannot scrape (ObsctlExporterDown).")), 6, 4),
        (g.stat("GPUs with a row remap pending", [g.query(count(f"obsctl_gpu_remapped_rows_pending{{{_I}}} == 1"), "pending", instant=True)],
                description="The remap takes effect at the next GPU reset (ObsctlGpuRowRemapPending)."), 6, 4),
        (g.stat("GPUs with a failed row remap", [g.query(count(f"obsctl_gpu_remapped_rows_failed{{{_I}}} == 1"), "failed", instant=True)],
                description="No spare row was left: RMA the GPU (ObsctlGpuRowRemapFailure)."), 6, 4),
        (g.timeseries("XID errors", [g.query(f"obsctl_gpu_xid_errors_total{{{_I}}}", f"{_LEGEND} xid {{{{xid}}}}")], "none",
                      "XID errors per code counted since the exporter started; a series appears with its first error "
                      "(ObsctlGpuXidError, ObsctlGpuXidFatalError)."), 12, 8),
        (g.timeseries("ECC errors", [g.query(
            f"sum by (instance, gpu, error_type) (increase(obsctl_gpu_ecc_errors_total{{{_I}}}[$__rate_interval]))",
            f"{_LEGEND} {{{{error_type}}}}")], "none",
            "New ECC errors per interval from the aggregate counters: corrected (single-bit) and uncorrected "
            "(double-bit, ObsctlGpuEccDoubleBitErrors)."), 12, 8),
        (g.timeseries("Remapped rows", [g.query(f"obsctl_gpu_remapped_rows{{{_I}}}", f"{_LEGEND} {{{{cause}}}}")], "none",
                      "Memory rows replaced by spares, by the kind of errors that caused it."), 12, 8),
        (g.timeseries("GPUs throttled, by reason", [g.query(
            f'sum by (reason) (obsctl_gpu_clock_event_reason_active{{reason=~"{_REASONS}",{_I}}})', "{{reason}}")], "none",
            "GPUs with each clock-event (throttle) reason active; sw_power_cap is normal under load "
            "(ObsctlGpuThermalThrottling, ObsctlGpuHwSlowdown)."), 12, 8),
        (g.timeseries("NVLink links down", [g.query(
            f"sum by (instance, gpu) (1 - obsctl_gpu_nvlink_link_up{{{_I}}})", _LEGEND)], "none",
            "Inactive NVLink links per GPU (ObsctlGpuNvlinkDown)."), 12, 8),
        (g.timeseries("PCIe replays", [g.query(
            f"sum by (instance, gpu) (rate(obsctl_gpu_pcie_replays_total{{{_I}}}[$__rate_interval])) * 60", _LEGEND)], "cpm",
            "PCIe retransmissions per minute (ObsctlGpuPcieReplays above DCGM's limit of 8 a minute)."), 12, 8),
    ]


def build() -> dict:
    """The GPU fleet dashboard as Grafana JSON (``$instance`` variable, multi-select)."""
    summary = [
        (g.stat("GPUs up", [g.query(f"sum(obsctl_gpu_up{{{_WHOLE}}})", "up", instant=True)]), 6, 4),
        (g.stat("GPUs down", [g.query(f"count(obsctl_gpu_up{{{_WHOLE}}} == 0) or vector(0)", "down", instant=True)]), 6, 4),
        (g.stat("Fleet GPU utilization", [g.query(
            f"sum(obsctl_gpu_utilization_ratio{{{_WHOLE}}}) / count(obsctl_gpu_utilization_ratio{{{_WHOLE}}})", "mean", instant=True)],
            "percentunit"), 6, 4),
        (g.stat("Fleet power", [g.query(f"sum(obsctl_gpu_power_watts{{{_WHOLE}}})", "power", instant=True)], "watt"), 6, 4),
    ]
    per_gpu = [
        (g.timeseries("GPU utilization", [g.query(f"obsctl_gpu_utilization_ratio{{{_I}}}", "{{instance}} gpu {{gpu}}")],
                      "percentunit"), 12, 8),
        (g.timeseries("GPU memory used", [g.query(
            f"obsctl_gpu_memory_used_bytes{{{_I}}} / obsctl_gpu_memory_total_bytes{{{_I}}}", "{{instance}} gpu {{gpu}}")],
            "percentunit"), 12, 8),
        (g.timeseries("Power", [g.query(f"obsctl_gpu_power_watts{{{_I}}}", "{{instance}} gpu {{gpu}}")], "watt"), 12, 8),
        (g.timeseries("Energy rate", [g.query(
            f"sum by (instance) (rate(obsctl_gpu_energy_joules_total{{{_WHOLE}}}[$__rate_interval]))", "{{instance}}")],
            "watt", "Average power from the energy counter."), 12, 8),
        (g.timeseries("Temperature", [g.query(f"obsctl_gpu_temperature_celsius{{{_I}}}", "{{instance}} gpu {{gpu}}")],
                      "celsius"), 12, 8),
        (g.bargauge("Utilization by workload class", [g.query(
            "workload_class:obsctl_gpu_utilization_ratio:avg", "{{workload_class}}", instant=True)], "percentunit"), 12, 8),
    ]
    inventory = [
        (g.table("GPU inventory", [g.query(f"obsctl_gpu_info{{{_I}}}", instant=True, table=True)]), 12, 8),
        (g.table("GPU attribution", [g.query(f"obsctl_gpu_attribution_info{{{_I}}}", instant=True, table=True)]), 12, 8),
        (g.table("Failing exporter collectors", [g.query(
            "obsctl_exporter_scrape_collector_success == 0", instant=True, table=True)]), 24, 5),
    ]
    variables = [g.query_variable("instance", "Instance", "label_values(obsctl_gpu_info, instance)")]
    return g.dashboard(g.Header("obsctl / GPU fleet", UID, "GPU utilization, memory, power, health and attribution across the fleet (generated by obsctl).",
                                ["obsctl", "gpu", "generated"]),
                       [(None, summary), ("Per GPU", per_gpu), ("GPU health", _health()), ("Inventory", inventory)], variables)
