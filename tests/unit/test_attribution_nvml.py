"""Attribution end to end: the stand-in NVML lists a real child process on GPU 0, the exporter's
GPU collector hands its source to the attribution collector, and the background refresher
resolves the child's OBSCTL_WORKLOAD_CLASS; the scrape itself only reads the snapshot."""

from __future__ import annotations

import subprocess

import pytest

from obsctl.exporters.app import Exporter
from obsctl.exporters.gpu.attribution import AttributionCollector
from obsctl.exporters.gpu.collector import GpuCollector
from support import stubnvml


@pytest.fixture()
def child(sleeper) -> subprocess.Popen:
    return sleeper(OBSCTL_WORKLOAD_CLASS="llm-serving", OBSCTL_WORKLOAD_OWNER="team-llm")


def _statuses(families, uuid: str) -> list[str]:
    return [s.labels["status"] for m in families for s in m.samples
            if s.name == "obsctl_gpu_attribution_status" and s.labels["uuid"] == uuid]


def test_nvml_process_attributed_through_the_exporter(nvml_env, child: subprocess.Popen) -> None:
    blocks = stubnvml.h100_8x().split("\ngpu\n")
    blocks[1] += f"\nprocs {child.pid} 0\n"  # GPU 0 runs the child (the last procs line wins)
    nvml_env.write("\ngpu\n".join(blocks))
    attribution = AttributionCollector(autostart=False)  # the test drives the refresher's rounds
    exporter = Exporter([GpuCollector(nvml_env.source(), "nvml"), attribution], process_metrics=False)
    uuid0, uuid5 = stubnvml.h100_uuid(0), stubnvml.h100_uuid(5)
    try:
        first = exporter.scrape(5.0)
        assert _statuses(first, uuid0) == ["pending"]  # the source just answered; nobody has looked
        assert attribution.refresher.refreshes == 0  # the scrape did not resolve anything itself
        attribution.refresher.refresh()
        fams = exporter.scrape(5.0)
        info = [s.labels for m in fams for s in m.samples if s.name == "obsctl_gpu_attribution_info"]
        assert info == [{"gpu": "0", "uuid": uuid0, "workload_class": "llm-serving", "owner": "team-llm",
                         "attribution_source": "process_env"}]
        assert _statuses(fams, uuid0) == ["attributed"]
        assert _statuses(fams, uuid5) == ["unattributed"]  # no processes: visible, not silent
        child.kill()
        child.wait()
        gone = exporter.scrape(5.0)  # no refresh in between: the liveness check drops it
        assert _statuses(gone, uuid0) == ["unattributed"]
    finally:
        exporter.close()
