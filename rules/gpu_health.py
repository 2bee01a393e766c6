"""GPU health alerts over the error and throttle series obsctl-exporter publishes, and the
exporter's own scrape.

Names follow NVIDIA DCGM's health vocabulary (XID, double-bit ECC, row remapping, clock
events (throttle reasons), NVLink down, NVLink CRC/replay/recovery error rates, PCIe replay rate). Counters that only grow over the
GPU's life (the aggregate ECC counts, PCIe replays) alert on their increase in a window;
XIDs alert on their last-seen time, because an XID series is born with its first event and
``increase()`` does not count a series' first sample. The thresholds and windows are the
constants below (one block, as kubernetes-mixin keeps its config); docs/rules.md lists them.

Annotations insert only ``$labels`` values and ``$value`` as the other obsctl alerts do; text
of ours that could hold template braces goes through :func:`obsctl.escape.go_template_text`.
"""

from __future__ import annotations

from obsctl.escape import go_template_text as literal
from obsctl.rules.loop_series import runbook_url, selector

#: Prometheus job of obsctl-exporter: deploy/prometheus/prometheus.yml's job_name, and on
#: Kubernetes the Service name the ServiceMonitor's targets take as ``job``.
EXPORTER_JOB = "obsctl-exporter"
#: XID codes whose remedy in NVIDIA's Xid catalogue is a GPU reset, a node reboot or a
#: drain: 48 double-bit ECC, 61/62 internal micro-controller breakpoint/halt, 64 row
#: remapping failure, 74 NVLink error, 79 fallen off the bus, 95 uncontained ECC, 119/120
#: GSP RPC timeout/error, 140 unrecovered ECC, 154 recovery action changed (reset or reboot needed).
XID_FATAL = ("48", "61", "62", "64", "74", "79", "95", "119", "120", "140", "154")
#: XID codes not alerted on: 45, preemptive cleanup after a process was killed (bucket IGNORE).
XID_IGNORED = ("45",)
#: An XID keeps its alert firing this long after it was last seen (seconds).
XID_RECENT_SECONDS = 3600
#: New uncorrectable ECC errors are counted over this window.
ECC_WINDOW = "1h"
#: DCGM's health-check limit (DCGM_LIMIT_MAX_PCIREPLAY_RATE): 8 PCIe replays per minute,
#: averaged over PCIE_WINDOW.
PCIE_REPLAYS_PER_MINUTE = 8
PCIE_WINDOW = "10m"
#: A down NVLink alerts only if a link of its GPU was up within this window, so GPUs whose
#: links were never connected (a PCIe card without a bridge) stay quiet.
NVLINK_HISTORY = "1d"
#: NVLink error rates, from DCGM's hardware limits (dcgm_gpu_hardware_limits.h): CRC errors
#: matter from 100 a second (DCGM_LIMIT_MAX_LWLINK_CRC_ERROR), replay and recovery errors
#: from one (DCGM_LIMIT_MAX_LWLINK_ERROR, read here as one a minute); both averaged over
#: NVLINK_ERROR_WINDOW and written as errors a minute.
NVLINK_CRC_ERRORS_PER_MINUTE = 100 * 60
NVLINK_REPLAY_RECOVERY_PER_MINUTE = 1
NVLINK_ERROR_WINDOW = "10m"
#: Clock-event reasons (label ``reason`` of obsctl_gpu_clock_event_reason_active, NVML names).
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
HW_SLOWDOWN_REASONS = ("hw_slowdown", "hw_power_brake_slowdown")

_GPU = "GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }}"
_ON = "GPU {{ $labels.gpu }} on {{ $labels.instance }}"


def _alert(name: str, expr: str, for_: str | None, severity: str, summary: str, description: str) -> dict:
    rule: dict = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": runbook_url(name)}
    return rule


def _regex(values: tuple[str, ...]) -> str:
    return "|".join(values)


def _xid_rules() -> list[dict]:
    recent = f"< {XID_RECENT_SECONDS}"
    fatal = f'time() - obsctl_gpu_xid_last_seen_timestamp_seconds{{xid=~"{_regex(XID_FATAL)}"}} {recent}'
    other = f'time() - obsctl_gpu_xid_last_seen_timestamp_seconds{{xid!~"{_regex(XID_FATAL + XID_IGNORED)}"}} {recent}'
    hour = f"{XID_RECENT_SECONDS // 60} minutes"
    return [
        _alert("ObsctlGpuXidFatalError", fatal, None, "critical",
               f"Fatal XID {{{{ $labels.xid }}}} on {_ON}",
               f"The NVIDIA driver reported XID {{{{ $labels.xid }}}} on {_GPU} {{{{ $value | humanizeDuration }}}} ago. "
               f"NVIDIA's remedy for this code is a GPU reset or a node reboot: drain the node. "
               f"The alert stays for {hour} after the last occurrence."),
        _alert("ObsctlGpuXidError", other, None, "warning",
               f"XID {{{{ $labels.xid }}}} on {_ON}",
               f"The NVIDIA driver reported XID {{{{ $labels.xid }}}} on {_GPU} {{{{ $value | humanizeDuration }}}} ago. "
               f"Most of these codes are application faults (13, 31, 43) or early memory warnings (63, 92, 94); "
               f"the runbook says which need action. The alert stays for {hour} after the last occurrence."),
    ]


def _memory_rules() -> list[dict]:
    dbe = f'increase(obsctl_gpu_ecc_errors_total{{error_type="uncorrected"}}[{ECC_WINDOW}]) > 0'
    return [
        _alert("ObsctlGpuEccDoubleBitErrors", dbe, None, "critical",
               f"Uncorrectable ECC errors on {_ON}",
               f"{_GPU} counted {{{{ $value | printf \"%.0f\" }}}} new uncorrectable (double-bit) ECC error(s) in the last "
               f"{ECC_WINDOW}: data in its memory was corrupted, and the job that used it may have crashed or computed wrong results."),
        _alert("ObsctlGpuRowRemapFailure", "obsctl_gpu_remapped_rows_failed == 1", "1m", "critical",
               f"Row remapping failed on {_ON}",
               f"{_GPU} reports a failed row remapping: a memory row with uncorrectable errors could not be replaced by a "
               f"spare row. The GPU cannot repair its memory; take it out of service and RMA it."),
        _alert("ObsctlGpuRowRemapPending", "obsctl_gpu_remapped_rows_pending == 1", "10m", "warning",
               f"Row remapping pending on {_ON}",
               f"{_GPU} has a row remapping pending for 10 minutes: it recorded a memory row to replace by a spare after "
               f"memory errors, and the replacement takes effect only at the next GPU reset. Drain the GPU and reset it."),
    ]


def _throttle_rules() -> list[dict]:
    reason = "obsctl_gpu_clock_event_reason_active{{reason=~\"{}\"}} == 1"
    return [
        _alert("ObsctlGpuThermalThrottling", reason.format(_regex(THERMAL_REASONS)), "10m", "warning",
               f"{_ON} is throttled by temperature ({{{{ $labels.reason }}}})",
               f"Clock-event reason {{{{ $labels.reason }}}} has been active on {_GPU} for 10 minutes: the GPU or its "
               f"memory is too hot, and the driver (sw) or the board (hw) lowers the clocks, so the GPU does less work."),
        _alert("ObsctlGpuHwSlowdown", reason.format(_regex(HW_SLOWDOWN_REASONS)), "5m", "warning",
               f"HW slowdown on {_ON} ({{{{ $labels.reason }}}})",
               f"Clock-event reason {{{{ $labels.reason }}}} has been active on {_GPU} for 5 minutes: the board cuts the "
               f"clocks by half or more, for overheating or because the power supply asserted power brake."),
    ]


def _link_rules() -> list[dict]:
    nvlink = (f"(obsctl_gpu_nvlink_link_up == 0)\n"
              f"and ignoring(link) (max without(link) (max_over_time(obsctl_gpu_nvlink_link_up[{NVLINK_HISTORY}])) == 1)")
    replays = f"rate(obsctl_gpu_pcie_replays_total[{PCIE_WINDOW}]) * 60 > {PCIE_REPLAYS_PER_MINUTE}"
    nvlink_errors = "rate(obsctl_gpu_nvlink_errors_total{{error_type=~\"{}\"}}[{}]) * 60 > {}"
    nvlink_errors = (nvlink_errors.format("crc_flit|crc_data", NVLINK_ERROR_WINDOW, NVLINK_CRC_ERRORS_PER_MINUTE)
                     + "\nor\n"
                     + nvlink_errors.format("replay|recovery", NVLINK_ERROR_WINDOW, NVLINK_REPLAY_RECOVERY_PER_MINUTE))
    return [
        _alert("ObsctlGpuNvlinkDown", nvlink, "5m", "warning",
               f"NVLink {{{{ $labels.link }}}} of {_ON} is down",
               f"NVLink link {{{{ $labels.link }}}} of {_GPU} has been inactive for 5 minutes although a link of this GPU "
               f"was up within {NVLINK_HISTORY}: GPU-to-GPU traffic (NCCL collectives) runs on fewer links or over PCIe, or hangs."),
        _alert("ObsctlGpuNvlinkErrors", nvlink_errors, "5m", "warning",
               f"NVLink {{{{ $labels.error_type }}}} errors on {_ON}",
               f"{_GPU} counts {{{{ $value | printf \"%.0f\" }}}} NVLink {{{{ $labels.error_type }}}} errors a minute "
               f"(over {NVLINK_ERROR_WINDOW}, summed over its links), above DCGM's limit ({NVLINK_CRC_ERRORS_PER_MINUTE} "
               f"a minute for CRC errors, {NVLINK_REPLAY_RECOVERY_PER_MINUTE} for replay and recovery errors): a link "
               f"retransmits or retrains, and NCCL traffic over it slows down or stalls."),
        _alert("ObsctlGpuPcieReplays", replays, "5m", "warning",
               f"PCIe replays on {_ON}",
               f"{_GPU} retransmits {{{{ $value | printf \"%.3g\" }}}} PCIe packets a minute (over {PCIE_WINDOW}), more than "
               f"the {PCIE_REPLAYS_PER_MINUTE} a minute DCGM's health check allows: its PCIe link has signal errors "
               f"(riser, slot, retimer, cable) and loses bandwidth."),
    ]


def _exporter_rules() -> list[dict]:
    up = selector("up", job=EXPORTER_JOB)
    job = literal(EXPORTER_JOB)
    return [
        _alert("ObsctlExporterDown", f"{up} == 0", "5m", "warning",
               f"{job} on {{{{ $labels.instance }}}} is down",
               f"Prometheus has failed to scrape {job} on {{{{ $labels.instance }}}} for 5 minutes: that node's GPU, cost "
               f"and attribution series are absent, so none of its GPU alerts can fire."),
        _alert("ObsctlExporterAbsent", f"absent({up})", "15m", "warning",
               f"No {job} target is scraped",
               f"Prometheus has had no scrape target of job {job} for 15 minutes: the exporter is not deployed on any "
               f"node, or its ServiceMonitor (or scrape config) selects nothing. No GPU alert can fire."),
    ]


def gpu_health_rules() -> list[dict]:
    """The GPU health and exporter alerts of the ``obsctl.alerts.gpu`` group, in the order
    docs/runbooks.md describes them."""
    return _xid_rules() + _memory_rules() + _throttle_rules() + _link_rules() + _exporter_rules()
