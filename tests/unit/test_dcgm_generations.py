"""dcgm-exporter's two generations of field names yield the same canonical series.

The three expositions in tests/fixtures/dcgm/ (README there: built from NVIDIA's reference)
describe one node at one instant: legacy names and units (up to 4.8), the DCGM 4.7 names of
4.9.0 and the 4.10.0 PCIe renames. Expected values are written from the legacy text by hand
(MHz * 10**6, mJ / 1000, % / 100, MiB * 2**20), so a field converted twice, or not at all,
fails here."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from obsctl.exporters.gpu import dcgm_fields as F
from obsctl.exporters.gpu.dcgm import DcgmSource, XidTracker, parse_dcgm, snapshot_families
from support.dcgm_standin import DcgmStandIn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
GEN = ("4.8", "4.9", "4.10")
G0 = {"gpu": "0", "uuid": "GPU-5f6d2c1e-9a4b-4c3d-8e2f-1a2b3c4d5e6f"}
G1 = {"gpu": "1", "uuid": "GPU-7a8b9c0d-1e2f-4a3b-9c4d-5e6f7a8b9c0d"}


def text(gen: str) -> str:
    return (FIXTURES / f"dcgm-exporter-{gen}.txt").read_text()


def canonical(body: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, labels) -> value of every canonical sample one body yields."""
    families = snapshot_families(parse_dcgm(body), XidTracker(clock=lambda: 1_700_000_000.0)).metrics()
    out: dict[tuple[str, frozenset], float] = {}
    for fam in families:
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def value(series: dict, name: str, **labels: str) -> float | None:
    return series.get((name, frozenset(labels.items())))


@pytest.mark.parametrize("gen", GEN)
def test_known_answers_in_base_units(gen: str) -> None:
    c = canonical(text(gen))
    assert value(c, "obsctl_gpu_sm_clock_hertz", **G0) == 1980 * 10**6
    assert value(c, "obsctl_gpu_memory_clock_hertz", **G1) == 2619 * 10**6  # > 2**31: not a blank
    assert value(c, "obsctl_gpu_energy_joules_total", **G0) == 987654321 / 1000
    assert value(c, "obsctl_gpu_energy_joules_total", **G1) == 123456.789
    assert value(c, "obsctl_gpu_utilization_ratio", **G0) == 0.57
    assert value(c, "obsctl_gpu_utilization_ratio", **G1) == 1.0
    assert value(c, "obsctl_gpu_memory_total_bytes", **G1) == 81559 * 2**20
    assert value(c, "obsctl_gpu_memory_total_bytes", **G0) == (40000 + 41000 + 559) * 2**20
    assert value(c, "obsctl_gpu_memory_used_bytes", **G0) == 41000 * 2**20  # > 2**31 bytes
    assert value(c, "obsctl_gpu_memory_utilization_ratio", **G1) == 0.61
    assert value(c, "obsctl_gpu_power_watts", **G0) == 312.457
    assert value(c, "obsctl_gpu_power_limit_watts", **G1) == 700.0
    assert value(c, "obsctl_gpu_temperature_celsius", **G1) == 44
    assert value(c, "obsctl_gpu_memory_temperature_celsius", **G0) == 49
    assert value(c, "obsctl_gpu_pcie_replays_total", **G1) == 3
    assert value(c, "obsctl_gpu_pcie_throughput_bytes_per_second", **G0, direction="rx") == 2345678901
    assert value(c, "obsctl_gpu_pcie_throughput_bytes_per_second", **G1, direction="tx") == 3456789012
    assert value(c, "obsctl_gpu_remapped_rows", **G0, cause="correctable") == 2
    assert value(c, "obsctl_gpu_remapped_rows", **G1, cause="uncorrectable") == 1
    assert value(c, "obsctl_gpu_remapped_rows_failed", **G0) == 0
    assert value(c, "obsctl_gpu_nvlink_errors_total", **G1, error_type="crc_flit") == 12
    assert value(c, "obsctl_gpu_sm_active_ratio", **G0) == 0.734
    assert value(c, "obsctl_gpu_sm_occupancy_ratio", **G1) == 0.48
    assert value(c, "obsctl_gpu_tensor_pipe_active_ratio", **G0) == 0.318
    assert value(c, "obsctl_gpu_dram_active_ratio", **G1) == 0.7
    assert value(c, "obsctl_gpu_xid_errors_total", **G1, xid="79") == 1
    info = {"model": "NVIDIA H100 80GB HBM3", "driver_version": "580.95.05",
            "pci_bus_id": "00000000:18:00.0", "mig_mode": "disabled"}
    assert value(c, "obsctl_gpu_info", **G0, **info) == 1  # driver from either label spelling


@pytest.mark.parametrize("gen", ["4.9", "4.10"])
def test_current_names_yield_the_legacy_series(gen: str) -> None:
    old, new = canonical(text("4.8")), canonical(text(gen))
    assert len(old) == 50  # 25 series per GPU
    assert new == old


def test_memory_total_from_the_parts_when_no_total_is_served() -> None:
    # Without FB_CAPACITY_BYTES the total is used + free + reserved, in bytes, under the current names.
    body = "".join(line + "\n" for line in text("4.10").splitlines()
                   if "FB_CAPACITY_BYTES" not in line)
    c = canonical(body)
    assert value(c, "obsctl_gpu_memory_total_bytes", **G1) == (79976 + 1024 + 559) * 2**20


def test_each_value_is_converted_once() -> None:
    # The current names carry base units: read through the legacy conversion they would be
    # 100x, 1000x or 10**6x off. Every renamed legacy field converts, every current one does not.
    for new, old in F.RENAMED.items():
        assert F.FIELDS[new].canonical == F.FIELDS[old].canonical, new
        assert F.FIELDS[new].extra == F.FIELDS[old].extra, new
        assert F.FIELDS[new].convert(1.0) == 1.0, f"{new} is already in the base unit"
    assert F.FIELDS["DCGM_FI_DEV_GPU_UTIL"].convert(57) == 0.57
    assert F.FIELDS["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].convert(1500) == 1.5
    assert F.FIELDS["DCGM_FI_DEV_SM_CLOCK"].convert(1410) == 1.41e9


def test_current_name_is_preferred_when_a_scrape_carries_both() -> None:
    # The table puts each current name before its legacy name (the order parse_dcgm reads in).
    order = list(F.FIELDS)
    for new, old in F.RENAMED.items():
        assert order.index(new) < order.index(old), new


def _only_gpu(body: str, gpu: str) -> str:
    """The body's HELP/TYPE lines and the samples of one GPU."""
    return "".join(line for line in body.splitlines(keepends=True)
                   if line.startswith("#") or re.search(rf'\bgpu="{gpu}"', line))


def test_mixed_exposition_per_series() -> None:
    # A node mid-upgrade: GPU 0 still served under the legacy names, GPU 1 under 4.10's.
    mixed = canonical(_only_gpu(text("4.8"), "0") + _only_gpu(text("4.10"), "1"))
    assert mixed == canonical(text("4.8"))


def test_both_spellings_in_one_scrape_count_once() -> None:
    # A collector CSV listing the legacy and the current name of the same fields.
    assert canonical(text("4.8") + text("4.10")) == canonical(text("4.8"))


def test_label_spellings_of_both_generations() -> None:
    legacy = parse_dcgm(text("4.8")).gpus[G0["uuid"]]
    current = parse_dcgm(text("4.10")).gpus[G0["uuid"]]
    assert legacy.driver_version == current.driver_version == "580.95.05"
    assert F.label({"hostname": "n1", "Hostname": "n0"}, "hostname") == "n1"
    assert F.label({"Hostname": "n0"}, "hostname") == "n0"
    assert F.label({"DCGM_FI_DEV_GPU_NAME": "H100"}, "model") == "H100"
    assert F.label({"DCGM_FI_DEV_PCI_BUS_ID": "00000000:18:00.0"}, "pci_bus_id") == "00000000:18:00.0"


def test_over_http_a_4_10_body_equals_a_legacy_one() -> None:
    # The same bodies served by the dcgm-exporter stand-in and read by DcgmSource.
    got = {}
    for gen in ("4.8", "4.10"):
        server = DcgmStandIn(text(gen))
        src = DcgmSource(server.url, timeout=3.0, clock=lambda: 1_700_000_000.0)
        try:
            got[gen] = {(s.name, frozenset(s.labels.items())): s.value
                        for m in src.collect(time.monotonic() + 5.0) for s in m.samples}
        finally:
            src.close()
            server.close()
    assert got["4.8"] == got["4.10"]


def _families(body: str) -> dict[str, str]:
    """Family name -> its HELP/TYPE/sample block."""
    blocks = ["# HELP " + b for b in body.split("# HELP ")[1:]]
    return {b.split()[2]: b for b in blocks}


def test_mixed_exposition_per_family_of_one_gpu() -> None:
    # Every other renamed field served under its current name, the rest under the legacy one,
    # for the same GPUs in one scrape.
    old, new = _families(text("4.8")), _families(text("4.10"))
    pairs = [(n, o) for n, o in F.RENAMED.items() if n in new and o in old]
    assert len(pairs) >= 20
    body = "".join(new[n] if i % 2 else old[o] for i, (n, o) in enumerate(pairs))
    served = {n for n, _ in pairs} | {o for _, o in pairs}
    body += "".join(b for name, b in new.items() if name not in served)  # FB_CAPACITY_BYTES
    assert canonical(body) == canonical(text("4.8"))
