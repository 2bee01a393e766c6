"""The canonical GPU catalogue: Prometheus naming in base units, label rules, family builder, docs table."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from obsctl.exporters.gpu.catalogue import (
    BY_NAME,
    CATALOGUE,
    GPU_LABELS,
    MIG_LABELS,
    FamilySet,
    MetricDef,
    render_markdown_table,
)

# Non-base units and spellings that must never appear in a name (Prometheus naming guide).
FORBIDDEN = re.compile(
    r"(_percent|percentage|_pct|mib|_mb|_kb|_gb|_kib|_gib|mebibyte|megabyte|milli|_mj|_mw|_ms\b|_ms_"
    r"|_us\b|micro|nano|_mhz|_ghz|_khz|kelvin|fahrenheit|_temp(_|$)|_util(_|$)|_count$|_sum$|_bucket$"
    r"|joules$|_total_total)"
)
UNIT_SUFFIX = {"ratio": "_ratio", "bytes": "_bytes", "watts": "_watts", "joules": "_joules_total",
               "celsius": "_celsius", "hertz": "_hertz", "seconds": "_seconds",
               "bytes_per_second": "_bytes_per_second"}

GAUGE_ONLY_UNITS = {"ratio", "watts", "celsius", "hertz", "bytes_per_second"}


def naming_problems(d: MetricDef) -> list[str]:
    """Every naming rule ``d`` breaks (empty list = fine)."""
    problems = []
    if not re.fullmatch(r"obsctl_gpu_[a-z0-9_]+", d.name):
        problems.append("name must be obsctl_gpu_ + lower snake case")
    if FORBIDDEN.search(d.name):
        problems.append(f"non-base unit or reserved suffix in {d.name}")
    if d.type not in ("gauge", "counter"):
        problems.append("type must be gauge or counter")
    if (d.type == "counter") != d.name.endswith("_total"):
        problems.append("counters, and only counters, end in _total")
    if d.unit:
        want = UNIT_SUFFIX.get(d.unit)
        if want is None:
            problems.append(f"unit {d.unit!r} is not a base unit")
        elif not (d.name.endswith(want) or (d.type == "counter" and d.name.endswith(want + "_total"))):
            problems.append(f"unit {d.unit} needs suffix {want}")
    for unit, suffix in UNIT_SUFFIX.items():  # a unit suffix without the unit declared (celsius misuse)
        if d.unit != unit and (d.name.endswith(suffix) or d.name.endswith(suffix + "_total")) \
                and not (unit == "bytes" and d.unit == "bytes_per_second"):
            problems.append(f"name ends in {suffix} but unit is {d.unit!r}")
    if d.type == "counter" and d.unit in GAUGE_ONLY_UNITS:
        problems.append(f"{d.unit} is a rate or level, never a counter")
    if d.name.endswith("_info") and d.unit:
        problems.append("_info has no unit")
    if tuple(d.labels[:2]) != GPU_LABELS:
        problems.append("labels must start with gpu, uuid")
    if set(d.labels) & set(MIG_LABELS):
        problems.append("MIG labels are added per instance, not declared")
    if not d.sources or not set(d.sources) <= {"nvml", "dcgm"}:
        problems.append("sources must be nvml and/or dcgm")
    return problems


@pytest.mark.parametrize("d", CATALOGUE, ids=lambda d: d.name)
def test_catalogue_names_follow_conventions(d):
    assert naming_problems(d) == []


@pytest.mark.parametrize("bad,unit,typ", [
    ("obsctl_gpu_utilization_percent", "", "gauge"),
    ("obsctl_gpu_memory_used_mib", "", "gauge"),
    ("obsctl_gpu_fb_used_mb", "", "gauge"),
    ("obsctl_gpu_energy_millijoules_total", "", "counter"),
    ("obsctl_gpu_energy_mj_total", "", "counter"),
    ("obsctl_gpu_energy_joules", "joules", "gauge"),
    ("obsctl_gpu_sm_clock_mhz", "", "gauge"),
    ("obsctl_gpu_temp", "", "gauge"),
    ("obsctl_gpu_memory_temperature_celsius", "", "gauge"),       # celsius suffix, unit missing
    ("obsctl_gpu_temperature", "celsius", "gauge"),               # unit declared, suffix missing
    ("obsctl_gpu_power_milliwatts", "", "gauge"),
    ("obsctl_gpu_temperature_kelvin", "", "gauge"),
    ("obsctl_gpu_pcie_replays", "", "counter"),                    # counter without _total
    ("obsctl_gpu_power_watts_total", "watts", "counter"),
    ("obsctl_gpu_latency_ms", "", "gauge"),
])
def test_naming_check_rejects_non_base_units(bad, unit, typ):
    d = MetricDef(bad, typ, unit, "x", GPU_LABELS, ("nvml",))
    assert naming_problems(d), f"{bad} should be rejected"


def test_catalogue_covers_contract():
    want = {
        "obsctl_gpu_info", "obsctl_gpu_up", "obsctl_gpu_utilization_ratio", "obsctl_gpu_memory_utilization_ratio",
        "obsctl_gpu_memory_used_bytes", "obsctl_gpu_memory_total_bytes", "obsctl_gpu_power_watts",
        "obsctl_gpu_power_limit_watts", "obsctl_gpu_energy_joules_total", "obsctl_gpu_temperature_celsius",
        "obsctl_gpu_memory_temperature_celsius", "obsctl_gpu_sm_clock_hertz", "obsctl_gpu_memory_clock_hertz",
        "obsctl_gpu_clock_event_reason_active", "obsctl_gpu_ecc_errors_total", "obsctl_gpu_remapped_rows",
        "obsctl_gpu_remapped_rows_pending", "obsctl_gpu_remapped_rows_failed", "obsctl_gpu_pcie_replays_total",
        "obsctl_gpu_nvlink_link_up", "obsctl_gpu_xid_errors_total", "obsctl_gpu_xid_last_seen_timestamp_seconds",
        "obsctl_gpu_sm_active_ratio", "obsctl_gpu_sm_occupancy_ratio", "obsctl_gpu_tensor_pipe_active_ratio",
        "obsctl_gpu_dram_active_ratio", "obsctl_gpu_attribution_info", "obsctl_gpu_attribution_status",
    }
    assert want <= set(BY_NAME)
    assert len(BY_NAME) == len(CATALOGUE)


def test_family_set_validates_and_renders():
    fs = FamilySet()
    g = {"gpu": "0", "uuid": "GPU-x"}
    fs.add("obsctl_gpu_energy_joules_total", g, 1234.5)
    fs.add("obsctl_gpu_memory_used_bytes", {**g, "gpu_instance": "1", "mig_profile": "1g.10gb"}, 2.0)
    with pytest.raises(KeyError):
        fs.add("obsctl_gpu_utilization_percent", g, 1)
    with pytest.raises(ValueError):
        fs.add("obsctl_gpu_power_watts", {"gpu": "0"}, 1)
    with pytest.raises(ValueError):  # power is per GPU, never per MIG instance
        fs.add("obsctl_gpu_power_watts", {**g, "gpu_instance": "1", "mig_profile": "1g.10gb"}, 1)

    class C:
        def collect(self):
            return fs.metrics()

    reg = CollectorRegistry()
    reg.register(C())
    text = generate_latest(reg).decode()
    assert "# TYPE obsctl_gpu_energy_joules_total counter" in text
    assert 'obsctl_gpu_energy_joules_total{gpu="0",uuid="GPU-x"} 1234.5' in text
    assert "obsctl_gpu_power_watts" not in text  # never added: absent, not 0


def test_markdown_table_lists_every_metric():
    table = render_markdown_table()
    for d in CATALOGUE:
        assert f"`{d.name}`" in table
    assert table.count("\n") == len(CATALOGUE) + 2


def test_docs_table_in_sync():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-nvml.md").read_text()
    body = doc.split("<!-- catalogue:begin -->\n", 1)[1].split("<!-- catalogue:end -->", 1)[0]
    assert body == render_markdown_table(), "docs/gpu-nvml.md is stale: paste python -m obsctl.exporters.gpu.catalogue"
