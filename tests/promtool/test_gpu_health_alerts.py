"""The GPU health and exporter alerts (rules/gpu_health.py) through ``promtool test rules``.

A sick node n1 turns bad at minute 60 (an XID of each kind, a new double-bit ECC error, a
row remap pending and failed, thermal and power-brake throttling, NVLink links down, NVLink
CRC, replay and recovery error rates and PCIe replays above DCGM's limits, its exporter unscraped) beside a healthy node n2 and a PCIe node
n3 whose NVLink was never connected. Each alert must fire for exactly the sick series at a
fixed eval_time, not before its ``for``, and a healthy fleet alone fires nothing; the fleet
dashboard's GPU health row gives known answers over the same series. Expected labels,
values and annotations are computed here from the input series.
"""

from __future__ import annotations

import pytest
import yaml

from obsctl.dashboards import gpu_fleet
from obsctl.rules import gpu, promtool
from support.promtool import evaluate

STEP = 15  # seconds between samples and between rule evaluations
ONSET = 60 * 60  # the sick node turns bad at minute 60
POINTS = 820  # samples per series: 205 minutes
BEFORE, AFTER, LATER = "59m", "80m", "200m"
BEFORE_S, AFTER_S = 59 * 60, 80 * 60
JOB = "obsctl-exporter"
PCIE_PER_STEP = 3  # replays per sample on the sick GPU: 12 a minute, above DCGM's 8
CRC_PER_STEP = 2400  # NVLink CRC flit errors per sample on the sick GPU: 9600 a minute, above DCGM's 6000
HEALTHY_CRC_PER_STEP = 300  # 1200 a minute: under the limit
NVLINK_ERRORS_PER_STEP = 1  # replays (sick GPU) and recoveries (fallen GPU) per sample: 4 a minute, above 1
XID_SEEN = ONSET  # the sick GPU's XIDs were last seen at the onset
OLD_XID_SEEN = 10 * 60  # an older XID 48: recent at BEFORE, older than the alert's hour at AFTER
STAYS = "The alert stays for 60 minutes after the last occurrence."


def _until_onset(before: float, after: float | str) -> str:
    """``before`` up to the onset, then ``after`` (a value or an ``a+b`` counter step) to the end."""
    n = ONSET // STEP
    return f"{before}x{n - 1} {after}x{POINTS - n - 1}"


def _from_onset(value: float) -> str:
    """Absent up to the onset (the exporter publishes it from its first event), then ``value``."""
    n = ONSET // STEP
    return f"_x{n} {value}x{POINTS - n - 1}"


def _always(value: float | str) -> str:
    return f"{value}x{POINTS - 1}"


def _gpu(instance: str, index: str, uuid: str) -> dict[str, str]:
    return {"instance": instance, "job": JOB, "gpu": index, "uuid": uuid}


SICK, FELL = _gpu("n1", "0", "GPU-sick"), _gpu("n1", "1", "GPU-fell")
OK, PCIE = _gpu("n2", "0", "GPU-ok"), _gpu("n3", "0", "GPU-pcie")
REASONS = ("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown")


def _series(metric: str, labels: dict[str, str], values: str) -> dict:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{metric}{{{inner}}}", "values": values}


def _healthy(g: dict[str, str]) -> list[dict]:
    """A healthy GPU: old errors that do not grow, power capping under load, links up, rare replays."""
    out = [_series("obsctl_gpu_ecc_errors_total", {**g, "error_type": "uncorrected"}, _always(2)),
           _series("obsctl_gpu_ecc_errors_total", {**g, "error_type": "corrected"}, _always(100)),
           _series("obsctl_gpu_remapped_rows_pending", g, _always(0)),
           _series("obsctl_gpu_remapped_rows_failed", g, _always(0)),
           _series("obsctl_gpu_remapped_rows", {**g, "cause": "correctable"}, _always(2)),
           _series("obsctl_gpu_remapped_rows", {**g, "cause": "uncorrectable"}, _always(0)),
           _series("obsctl_gpu_pcie_replays_total", g, _always("0+1"))]  # 4 a minute, under the limit
    out += [_series("obsctl_gpu_nvlink_errors_total", {**g, "error_type": "crc_flit"}, _always(f"0+{HEALTHY_CRC_PER_STEP}")),
            _series("obsctl_gpu_nvlink_errors_total", {**g, "error_type": "crc_data"}, _always(5)),
            _series("obsctl_gpu_nvlink_errors_total", {**g, "error_type": "replay"}, _always("0+0.05")),  # 0.2 a minute
            _series("obsctl_gpu_nvlink_errors_total", {**g, "error_type": "recovery"}, _always(1))]
    out += [_series("obsctl_gpu_clock_event_reason_active", {**g, "reason": r}, _always(1 if r == "sw_power_cap" else 0))
            for r in REASONS]
    out += [_series("obsctl_gpu_nvlink_link_up", {**g, "link": link}, _always(1)) for link in ("0", "1")]
    return out


def _sick() -> list[dict]:
    xid = "obsctl_gpu_xid_last_seen_timestamp_seconds"
    out = [_series(xid, {**SICK, "xid": "79"}, _from_onset(XID_SEEN)),  # fatal: fallen off the bus
           _series(xid, {**SICK, "xid": "13"}, _from_onset(XID_SEEN)),  # an application fault
           _series(xid, {**SICK, "xid": "45"}, _from_onset(XID_SEEN)),  # ignored: preemptive cleanup
           _series(xid, {**SICK, "xid": "48"}, f"_x{OLD_XID_SEEN // STEP} {OLD_XID_SEEN}x{POINTS - OLD_XID_SEEN // STEP - 1}"),
           _series("obsctl_gpu_xid_errors_total", {**SICK, "xid": "48"}, f"_x{OLD_XID_SEEN // STEP} 1x{POINTS - OLD_XID_SEEN // STEP - 1}"),
           _series("obsctl_gpu_ecc_errors_total", {**SICK, "error_type": "uncorrected"}, _until_onset(2, 3)),
           _series("obsctl_gpu_ecc_errors_total", {**SICK, "error_type": "corrected"}, _until_onset(100, "105+5")),
           _series("obsctl_gpu_remapped_rows_pending", SICK, _until_onset(0, 1)),
           _series("obsctl_gpu_remapped_rows_failed", SICK, _until_onset(0, 1)),
           _series("obsctl_gpu_remapped_rows", {**SICK, "cause": "uncorrectable"}, _until_onset(0, 1)),
           _series("obsctl_gpu_pcie_replays_total", SICK, _until_onset(7, f"{7 + PCIE_PER_STEP}+{PCIE_PER_STEP}"))]
    out += [_series("obsctl_gpu_xid_errors_total", {**SICK, "xid": code}, _from_onset(1)) for code in ("79", "13", "45")]
    out += [_series("obsctl_gpu_nvlink_errors_total", {**SICK, "error_type": "crc_flit"},
                    _until_onset(50, f"{50 + CRC_PER_STEP}+{CRC_PER_STEP}")),
            _series("obsctl_gpu_nvlink_errors_total", {**SICK, "error_type": "replay"},
                    _until_onset(3, f"{3 + NVLINK_ERRORS_PER_STEP}+{NVLINK_ERRORS_PER_STEP}")),
            _series("obsctl_gpu_nvlink_errors_total", {**FELL, "error_type": "recovery"},
                    _until_onset(1, f"{1 + NVLINK_ERRORS_PER_STEP}+{NVLINK_ERRORS_PER_STEP}"))]
    turns_on = {"hw_thermal_slowdown", "hw_power_brake_slowdown"}
    out += [_series("obsctl_gpu_clock_event_reason_active", {**SICK, "reason": r},
                    _always(1) if r == "sw_power_cap" else _until_onset(0, 1) if r in turns_on else _always(0)) for r in REASONS]
    out += [_series("obsctl_gpu_nvlink_link_up", {**SICK, "link": "0"}, _always(1)),
            _series("obsctl_gpu_nvlink_link_up", {**SICK, "link": "1"}, _until_onset(1, 0))]
    out += [_series("obsctl_gpu_nvlink_link_up", {**FELL, "link": link}, _until_onset(1, 0)) for link in ("0", "1")]
    out += [_series("obsctl_gpu_nvlink_link_up", {**PCIE, "link": link}, _always(0)) for link in ("0", "1")]  # no bridge
    out += [_series("up", {"job": JOB, "instance": "n1"}, _until_onset(1, 0)),
            _series("up", {"job": "other", "instance": "x"}, _always(0))]  # another job's target: not ours
    return out


def _up_ok() -> list[dict]:
    return [_series("up", {"job": JOB, "instance": "n2"}, _always(1)), _series("up", {"job": JOB, "instance": "n3"}, _always(1))]


def humanize_duration(seconds: float) -> str:
    """Prometheus' ``humanizeDuration`` for durations of a minute or more (template/template.go)."""
    s = int(seconds)
    days, hours, minutes, secs = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if days:
        return f"{days}d {hours}h {minutes}m {secs}s"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s"


def _where(g: dict[str, str]) -> str:
    return f"GPU {g['gpu']} ({g['uuid']}) on {g['instance']}"


def _on(g: dict[str, str]) -> str:
    return f"GPU {g['gpu']} on {g['instance']}"


def _alert(name: str, severity: str, labels: dict[str, str], summary: str, description: str) -> dict:
    return {"exp_labels": {**labels, "severity": severity},
            "exp_annotations": {"summary": summary, "description": description, "runbook_url": f"docs/runbooks.md#{name.lower()}"}}


def _expected_after() -> dict[str, list[dict]]:
    """Every alert at AFTER: what fires for the sick node and nothing else."""
    age = humanize_duration(AFTER_S - XID_SEEN)
    ecc_new = 3 - 2
    replays_per_minute = PCIE_PER_STEP * 60 / STEP
    thermal = [_alert("ObsctlGpuThermalThrottling", "warning", {**SICK, "reason": "hw_thermal_slowdown"},
                      f"{_on(SICK)} is throttled by temperature (hw_thermal_slowdown)",
                      f"Clock-event reason hw_thermal_slowdown has been active on {_where(SICK)} for 10 minutes: the GPU or its "
                      f"memory is too hot, and the driver (sw) or the board (hw) lowers the clocks, so the GPU does less work.")]
    brake = [_alert("ObsctlGpuHwSlowdown", "warning", {**SICK, "reason": "hw_power_brake_slowdown"},
                    f"HW slowdown on {_on(SICK)} (hw_power_brake_slowdown)",
                    f"Clock-event reason hw_power_brake_slowdown has been active on {_where(SICK)} for 5 minutes: the board cuts "
                    f"the clocks by half or more, for overheating or because the power supply asserted power brake.")]
    links = [_alert("ObsctlGpuNvlinkDown", "warning", {**g, "link": link}, f"NVLink {link} of {_on(g)} is down",
                    f"NVLink link {link} of {_where(g)} has been inactive for 5 minutes although a link of this GPU was up "
                    f"within 1d: GPU-to-GPU traffic (NCCL collectives) runs on fewer links or over PCIe, or hangs.")
             for g, link in ((SICK, "1"), (FELL, "0"), (FELL, "1"))]
    per_minute = 60 / STEP
    nvlink_errors = [_alert("ObsctlGpuNvlinkErrors", "warning", {**g, "error_type": t}, f"NVLink {t} errors on {_on(g)}",
                            f"{_where(g)} counts {n * per_minute:.0f} NVLink {t} errors a minute (over 10m, summed over its "
                            f"links), above DCGM's limit (6000 a minute for CRC errors, 1 for replay and recovery errors): a "
                            f"link retransmits or retrains, and NCCL traffic over it slows down or stalls.")
                     for g, t, n in ((SICK, "crc_flit", CRC_PER_STEP), (SICK, "replay", NVLINK_ERRORS_PER_STEP),
                                     (FELL, "recovery", NVLINK_ERRORS_PER_STEP))]
    return {
        "ObsctlGpuXidFatalError": [_alert(
            "ObsctlGpuXidFatalError", "critical", {**SICK, "xid": "79"}, f"Fatal XID 79 on {_on(SICK)}",
            f"The NVIDIA driver reported XID 79 on {_where(SICK)} {age} ago. NVIDIA's remedy for this code is a GPU reset or a "
            f"node reboot: drain the node. {STAYS}")],
        "ObsctlGpuXidError": [_alert(
            "ObsctlGpuXidError", "warning", {**SICK, "xid": "13"}, f"XID 13 on {_on(SICK)}",
            f"The NVIDIA driver reported XID 13 on {_where(SICK)} {age} ago. Most of these codes are application faults "
            f"(13, 31, 43) or early memory warnings (63, 92, 94); the runbook says which need action. {STAYS}")],
        "ObsctlGpuEccDoubleBitErrors": [_alert(
            "ObsctlGpuEccDoubleBitErrors", "critical", {**SICK, "error_type": "uncorrected"}, f"Uncorrectable ECC errors on {_on(SICK)}",
            f"{_where(SICK)} counted {ecc_new} new uncorrectable (double-bit) ECC error(s) in the last 1h: data in its memory was "
            f"corrupted, and the job that used it may have crashed or computed wrong results.")],
        "ObsctlGpuRowRemapFailure": [_alert(
            "ObsctlGpuRowRemapFailure", "critical", SICK, f"Row remapping failed on {_on(SICK)}",
            f"{_where(SICK)} reports a failed row remapping: a memory row with uncorrectable errors could not be replaced by a "
            f"spare row. The GPU cannot repair its memory; take it out of service and RMA it.")],
        "ObsctlGpuRowRemapPending": [_alert(
            "ObsctlGpuRowRemapPending", "warning", SICK, f"Row remapping pending on {_on(SICK)}",
            f"{_where(SICK)} has a row remapping pending for 10 minutes: it recorded a memory row to replace by a spare after "
            f"memory errors, and the replacement takes effect only at the next GPU reset. Drain the GPU and reset it.")],
        "ObsctlGpuThermalThrottling": thermal,
        "ObsctlGpuHwSlowdown": brake,
        "ObsctlGpuNvlinkDown": links,
        "ObsctlGpuNvlinkErrors": nvlink_errors,
        "ObsctlGpuPcieReplays": [_alert(
            "ObsctlGpuPcieReplays", "warning", SICK, f"PCIe replays on {_on(SICK)}",
            f"{_where(SICK)} retransmits {replays_per_minute:.3g} PCIe packets a minute (over 10m), more than the 8 a minute "
            f"DCGM's health check allows: its PCIe link has signal errors (riser, slot, retimer, cable) and loses bandwidth.")],
        "ObsctlExporterDown": [_alert(
            "ObsctlExporterDown", "warning", {"job": JOB, "instance": "n1"}, f"{JOB} on n1 is down",
            f"Prometheus has failed to scrape {JOB} on n1 for 5 minutes: that node's GPU, cost and attribution series are "
            f"absent, so none of its GPU alerts can fire.")],
        "ObsctlExporterAbsent": [],
    }


#: Alerts that fire at once (no ``for``) and resolve when their window has passed.
_EVENTS = ("ObsctlGpuXidFatalError", "ObsctlGpuXidError", "ObsctlGpuEccDoubleBitErrors")


def _suite(tmp_path, tests: list[dict]):
    rules = tmp_path / "gpu.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": gpu.gpu_groups()}, sort_keys=False))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": f"{STEP}s", "tests": tests}, sort_keys=False))
    return suite


def _fleet() -> list[dict]:
    """The sick node's series in place of its healthy ones, beside the healthy nodes."""
    series = _healthy(OK) + _healthy(SICK) + _healthy(FELL) + _healthy(PCIE) + _up_ok()
    replaced = {s["series"] for s in _sick()}
    return [s for s in series if s["series"] not in replaced] + _sick()


def _fleet_test(expected: dict[str, list[dict]]) -> dict:
    series = _fleet()
    cases = [{"alertname": name, "eval_time": AFTER, "exp_alerts": alerts} for name, alerts in expected.items()]
    # Before the onset only the old XID 48 is recent enough to alert.
    old = _alert("ObsctlGpuXidFatalError", "critical", {**SICK, "xid": "48"}, f"Fatal XID 48 on {_on(SICK)}",
                 f"The NVIDIA driver reported XID 48 on {_where(SICK)} {humanize_duration(BEFORE_S - OLD_XID_SEEN)} ago. NVIDIA's "
                 f"remedy for this code is a GPU reset or a node reboot: drain the node. {STAYS}")
    cases += [{"alertname": name, "eval_time": BEFORE, "exp_alerts": [old] if name == "ObsctlGpuXidFatalError" else []}
              for name in expected]
    # Past its window an event alert resolves; the state alerts hold while the state does.
    cases += [{"alertname": name, "eval_time": LATER, "exp_alerts": []} for name in _EVENTS]
    cases += [{"alertname": "ObsctlGpuRowRemapFailure", "eval_time": LATER, "exp_alerts": expected["ObsctlGpuRowRemapFailure"]}]
    # Two evaluations past the onset the new ECC error has fired; the state alerts are still pending.
    cases += [{"alertname": name, "eval_time": f"{ONSET + 2 * STEP}s", "exp_alerts": [] if name not in _EVENTS else expected[name]}
              for name in expected if name not in ("ObsctlGpuXidFatalError", "ObsctlGpuXidError")]
    return {"interval": f"{STEP}s", "input_series": series, "alert_rule_test": cases}


def test_each_gpu_health_alert_fires_for_the_sick_node_only(tmp_path):
    result = promtool.test_rules([_suite(tmp_path, [_fleet_test(_expected_after())])])
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_healthy_fleet_fires_no_gpu_health_alert(tmp_path):
    series = _healthy(OK) + _healthy(PCIE)[:-2] + [_series("obsctl_gpu_nvlink_link_up", {**PCIE, "link": "0"}, _always(0))] + _up_ok()
    names = [r["alert"] for g in gpu.gpu_groups() for r in g["rules"] if "alert" in r]
    cases = [{"alertname": name, "eval_time": t, "exp_alerts": []} for name in names for t in (AFTER, LATER)]
    result = promtool.test_rules([_suite(tmp_path, [{"interval": f"{STEP}s", "input_series": series, "alert_rule_test": cases}])])
    assert result.returncode == 0, result.stdout + result.stderr


def test_exporter_absent_fires_when_no_target_is_scraped(tmp_path):
    expected = _alert("ObsctlExporterAbsent", "warning", {"job": JOB}, f"No {JOB} target is scraped",
                      f"Prometheus has had no scrape target of job {JOB} for 15 minutes: the exporter is not deployed on any node, "
                      f"or its ServiceMonitor (or scrape config) selects nothing. No GPU alert can fire.")
    series = [_series("up", {"job": "other", "instance": "x"}, _always(1))]
    cases = [{"alertname": "ObsctlExporterAbsent", "eval_time": "14m", "exp_alerts": []},
             {"alertname": "ObsctlExporterAbsent", "eval_time": "16m", "exp_alerts": [expected]},
             {"alertname": "ObsctlExporterDown", "eval_time": "16m", "exp_alerts": []}]
    result = promtool.test_rules([_suite(tmp_path, [{"interval": f"{STEP}s", "input_series": series, "alert_rule_test": cases}])])
    assert result.returncode == 0, result.stdout + result.stderr


def test_gpu_health_harness_can_fail(tmp_path):
    wrong = _expected_after()
    wrong["ObsctlGpuPcieReplays"][0]["exp_annotations"]["description"] = "12.5 replays"
    wrong["ObsctlGpuNvlinkDown"] = wrong["ObsctlGpuNvlinkDown"][:2]  # the third down link would be missed
    wrong["ObsctlGpuNvlinkErrors"] = wrong["ObsctlGpuNvlinkErrors"][1:]  # the CRC flit rate would be missed
    result = promtool.test_rules([_suite(tmp_path, [_fleet_test(wrong)])])
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "ObsctlGpuPcieReplays" in out and "ObsctlGpuNvlinkDown" in out and "ObsctlGpuNvlinkErrors" in out


def _health_row() -> dict[str, str]:
    """``{title: expr}`` of the fleet dashboard's GPU health row, ``$instance`` = All and a 1m rate interval."""
    panels = gpu_fleet.build()["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "GPU health")
    end = next(i for i, p in enumerate(panels) if i > start and p["type"] == "row")
    return {p["title"]: p["targets"][0]["expr"].replace("$instance", ".*").replace("$__rate_interval", "1m")
            for p in panels[start + 1:end]}


def test_health_row_panels_known_answers(tmp_path):
    """Each panel of the GPU health row at AFTER, from the fleet's series."""
    rules = tmp_path / "gpu.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": gpu.gpu_groups()}, sort_keys=False))
    exprs = _health_row()
    got = evaluate(tmp_path / "eval", [rules], [(s["series"], s["values"]) for s in _fleet()], exprs, AFTER)
    gpus = (SICK, FELL, OK, PCIE)

    def where(g: dict[str, str], **extra: str) -> dict[str, str]:
        return {"instance": g["instance"], "gpu": g["gpu"], **extra}

    ecc_per_minute = 5 * 60 / STEP  # the sick GPU's corrected errors: 5 a sample
    expected = {
        "Exporters up": [({}, 2.0)], "Exporters down": [({}, 1.0)],
        "GPUs with a row remap pending": [({}, 1.0)], "GPUs with a failed row remap": [({}, 1.0)],
        "XID errors": [({"__name__": "obsctl_gpu_xid_errors_total", **SICK, "xid": code}, 1.0) for code in ("13", "45", "48", "79")],
        "ECC errors": [(where(g, error_type=t), ecc_per_minute if (g, t) == (SICK, "corrected") else 0.0)
                       for g in gpus for t in ("corrected", "uncorrected")],
        "Remapped rows": [({"__name__": "obsctl_gpu_remapped_rows", **g, "cause": c}, {"correctable": 2.0, "uncorrectable": 1.0 if g == SICK else 0.0}[c])
                          for g in gpus for c in ("correctable", "uncorrectable")],
        "GPUs throttled, by reason": [({"reason": r}, {"sw_power_cap": 4.0, "hw_thermal_slowdown": 1.0,
                                                       "hw_power_brake_slowdown": 1.0}.get(r, 0.0)) for r in REASONS],
        "NVLink links down": [(where(SICK), 1.0), (where(FELL), 2.0), (where(OK), 0.0), (where(PCIE), 2.0)],
        "PCIe replays": [(where(g), PCIE_PER_STEP * 60 / STEP if g == SICK else 60 / STEP) for g in gpus],
    }
    assert sorted(expected) == sorted(exprs)

    def keyed(samples):
        return {tuple(sorted(labels.items())): value for labels, value in samples}

    for title, samples in expected.items():
        assert keyed(got[title]) == pytest.approx(keyed(samples)), title
