"""Attribution labels come from any GPU process's environment (and pod labels anyone
deploying there can set): only a spec class name is taken as a class, an owner only when
printable and bounded, and a unit lists a bounded number of classes. Real child processes,
read through the real /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from obsctl.exporters.app import ScrapeContext
from obsctl.exporters.config import AttributionConfig
from obsctl.exporters.gpu.attribution import AttributionCollector
from obsctl.exporters.gpu.inventory import GpuInventory, GpuRef, PodBinding
from obsctl.exporters.gpu.procinfo import read_process

GPU0 = GpuRef("0", "GPU-0000")


@pytest.fixture()
def spawn() -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(**env: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                                env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline() == "ready\n"  # exec'd: /proc/<pid>/environ is its own
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def series(coll: AttributionCollector, unit: GpuRef, pods: dict | None = None) -> list:
    coll.refresher.refresh()
    metrics = coll.collect(ScrapeContext(deadline=0.0, inventory=GpuInventory(units=[unit], pods=pods or {})))
    return [s for m in metrics for s in m.samples]


@pytest.mark.parametrize("value", ['x"} evil{a="', "Has Upper", "a" * 64, "-leading", "sp ace", "tab\tx", "ünï"])
def test_class_that_is_not_a_class_name_is_refused(spawn, value) -> None:
    info = read_process(spawn(OBSCTL_WORKLOAD_CLASS=value).pid)
    assert info.workload_class == "" and info.error == "invalid_workload_class"


def test_refused_class_makes_the_unit_status_error(spawn) -> None:
    proc = spawn(OBSCTL_WORKLOAD_CLASS="x\x1b[2J")
    coll = AttributionCollector(processes=lambda: {GPU0.uuid: [proc.pid]}, autostart=False)
    samples = series(coll, GPU0)
    assert [s.labels["status"] for s in samples if s.name == "obsctl_gpu_attribution_status"] == ["error"]
    assert not [s for s in samples if s.name == "obsctl_gpu_attribution_info"]


@pytest.mark.parametrize("owner", ["o" * 129, "team\x1b[31m", "line\nbreak"])
def test_owner_that_is_too_long_or_not_printable_falls_back_to_the_user(spawn, owner) -> None:
    info = read_process(spawn(OBSCTL_WORKLOAD_CLASS="train", OBSCTL_WORKLOAD_OWNER=owner).pid)
    assert info.workload_class == "train"
    assert info.owner.startswith(("user:", "uid:")), info.owner


def test_valid_values_are_kept(spawn) -> None:
    info = read_process(spawn(OBSCTL_WORKLOAD_CLASS="embed-online_2", OBSCTL_WORKLOAD_OWNER="team search/ä").pid)
    assert (info.workload_class, info.owner, info.error) == ("embed-online_2", "team search/ä", "")


def test_a_unit_lists_at_most_16_classes(spawn) -> None:
    procs = [spawn(OBSCTL_WORKLOAD_CLASS=f"class-{i:02d}") for i in range(20)]
    coll = AttributionCollector(processes=lambda: {GPU0.uuid: [p.pid for p in procs]}, autostart=False)
    classes = sorted(s.labels["workload_class"] for s in series(coll, GPU0) if s.name == "obsctl_gpu_attribution_info")
    assert classes == [f"class-{i:02d}" for i in range(16)]


def test_pod_label_that_is_not_a_class_name_is_ignored() -> None:
    cfg = AttributionConfig.model_validate({"kubernetes": {"class_label": "label_obsctl_workload_class",
                                                           "namespace_classes": {"serving": "llm-online"}}})
    pods = {GPU0: [PodBinding("serving", "p", "c", (("label_obsctl_workload_class", 'x"}{'),))]}
    coll = AttributionCollector(cfg, processes=lambda: {}, autostart=False)
    info = [s.labels for s in series(coll, GPU0, pods) if s.name == "obsctl_gpu_attribution_info"]
    assert [i["workload_class"] for i in info] == ["llm-online"]  # the namespace's class, not the bad label
