"""Attribution: real /proc of child processes the test starts, Slurm cgroup parsing, static
and Kubernetes mappings, the status series, and the TTL cache (negative results included)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from obsctl.exporters.app import ScrapeContext
from obsctl.exporters.config import AttributionConfig
from obsctl.exporters.gpu.attribution import AttributionCollector
from obsctl.exporters.gpu.inventory import GpuInventory, GpuRef, PodBinding
from obsctl.exporters.gpu.procinfo import ProcessCache, ProcessInfo, read_process, slurm_job_from_cgroup

GPU0 = GpuRef("0", "GPU-0000")
GPU1 = GpuRef("1", "GPU-1111")
MIG1 = GpuRef("2", "GPU-2222", "1", "3g.40gb")


@pytest.fixture()
def child() -> Iterator[subprocess.Popen]:
    env = {**os.environ, "OBSCTL_WORKLOAD_CLASS": "embed-online", "OBSCTL_WORKLOAD_OWNER": "team-search"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture()
def plain_child() -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSCTL_")}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def scrape(coll: AttributionCollector, units: list[GpuRef], pods: dict | None = None) -> CollectorRegistry:
    ctx = ScrapeContext(deadline=0.0, inventory=GpuInventory(units=units, pods=pods or {}))
    metrics = coll.collect(ctx)

    class _R:
        def collect(self):
            return metrics

    reg = CollectorRegistry()
    reg.register(_R())
    return reg


def status(reg: CollectorRegistry, unit: GpuRef) -> str | None:
    found = [s.labels["status"] for m in reg.collect() for s in m.samples
             if s.name == "obsctl_gpu_attribution_status" and s.labels["uuid"] == unit.uuid
             and s.labels.get("gpu_instance", "") == unit.gpu_instance]
    assert len(found) <= 1
    return found[0] if found else None


def test_process_env_of_a_real_child(child: subprocess.Popen, plain_child: subprocess.Popen) -> None:
    procs = {GPU0.uuid: [child.pid], GPU1.uuid: [plain_child.pid]}
    coll = AttributionCollector(processes=lambda: procs)
    reg = scrape(coll, [GPU0, GPU1])
    assert reg.get_sample_value("obsctl_gpu_attribution_info", {
        "gpu": "0", "uuid": GPU0.uuid, "workload_class": "embed-online", "owner": "team-search",
        "attribution_source": "process_env"}) == 1
    assert status(reg, GPU0) == "attributed"
    assert status(reg, GPU1) == "unattributed"  # a process without the variable: visible, not silent


def test_process_that_exits_is_gone_next_scrape(child: subprocess.Popen) -> None:
    procs = {GPU0.uuid: [child.pid]}
    coll = AttributionCollector(processes=lambda: dict(procs))
    assert status(scrape(coll, [GPU0]), GPU0) == "attributed"
    child.kill()
    child.wait()
    procs[GPU0.uuid] = []  # NVML no longer lists it
    reg = scrape(coll, [GPU0])
    assert status(reg, GPU0) == "unattributed"
    assert not [s for m in reg.collect() for s in m.samples if s.name == "obsctl_gpu_attribution_info"]


def test_pid_listed_but_already_exited_is_skipped(child: subprocess.Popen) -> None:
    pid = child.pid
    child.kill()
    child.wait()
    coll = AttributionCollector(processes=lambda: {GPU0.uuid: [pid]})
    assert status(scrape(coll, [GPU0]), GPU0) == "unattributed"


def test_cache_reuses_answers_including_negative(child: subprocess.Popen, plain_child: subprocess.Popen) -> None:
    cache = ProcessCache(ttl_seconds=3600)
    coll = AttributionCollector(processes=lambda: {GPU0.uuid: [child.pid], GPU1.uuid: [plain_child.pid]}, cache=cache)
    for _ in range(5):
        scrape(coll, [GPU0, GPU1])
    assert cache.lookups == 2  # one environ read per process, the negative one included


def test_cache_expires(child: subprocess.Popen) -> None:
    now = [0.0]
    cache = ProcessCache(ttl_seconds=10, clock=lambda: now[0])
    assert cache.get(child.pid).workload_class == "embed-online"
    now[0] = 5
    cache.get(child.pid)
    assert cache.lookups == 1
    now[0] = 11
    cache.get(child.pid)
    assert cache.lookups == 2


def test_permission_denied_is_status_error() -> None:
    def reader(pid: int, root: Path) -> ProcessInfo:
        return ProcessInfo(pid, owner="user:other", error="permission_denied")

    cache = ProcessCache(reader=reader)
    coll = AttributionCollector(processes=lambda: {GPU0.uuid: [os.getpid()]}, cache=cache)
    assert status(scrape(coll, [GPU0]), GPU0) == "error"


def test_process_list_failure_is_status_error() -> None:
    def boom() -> dict:
        raise RuntimeError("nvml gone")

    coll = AttributionCollector(processes=boom)
    assert status(scrape(coll, [GPU0]), GPU0) == "error"


@pytest.mark.parametrize("text, expected", [
    ("12:pids:/slurm/uid_1000/job_4242/step_0/task_0\n4:memory:/slurm/uid_1000/job_4242/step_0\n", ("4242", "1000")),
    ("0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n", ("77", "")),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    ("0::/kubepods/burstable/pod1234/job_5\n", None),  # "job_" outside a Slurm hierarchy
    ("", None),
])
def test_slurm_job_from_cgroup(text: str, expected: tuple[str, str] | None) -> None:
    assert slurm_job_from_cgroup(text) == expected


def test_slurm_job_through_a_fake_proc_root(tmp_path: Path, plain_child: subprocess.Popen) -> None:
    # environ from a real process (no OBSCTL_ variables), cgroup from a fake Slurm file
    root = tmp_path / "proc"
    pid_dir = root / str(plain_child.pid)
    pid_dir.mkdir(parents=True)
    real = Path(f"/proc/{plain_child.pid}")
    (pid_dir / "environ").write_bytes((real / "environ").read_bytes())
    (pid_dir / "stat").write_text((real / "stat").read_text())
    (pid_dir / "cgroup").write_text("4:memory:/slurm/uid_1000/job_4242/step_0\n")
    info = read_process(plain_child.pid, root)
    assert (info.slurm_job, info.owner, info.workload_class) == ("4242", "slurm:job_4242", "")

    cfg = AttributionConfig.model_validate({"slurm": {"workload_class": "hpc-training"}})
    coll = AttributionCollector(cfg, processes=lambda: {GPU0.uuid: [plain_child.pid]},
                                cache=ProcessCache(proc_root=root))
    reg = scrape(coll, [GPU0])
    assert reg.get_sample_value("obsctl_gpu_attribution_info", {
        "gpu": "0", "uuid": GPU0.uuid, "workload_class": "hpc-training", "owner": "slurm:job_4242",
        "attribution_source": "slurm"}) == 1


def test_static_and_kubernetes_and_mig(child: subprocess.Popen) -> None:
    cfg = AttributionConfig.model_validate({
        "static": {"GPU-1111": {"workload_class": "batch", "owner": "team-a"}},
        "kubernetes": {"class_label": "label_obsctl_workload_class", "namespace_classes": {"research": "finetune"}},
    })
    pods = {
        GPU0: [PodBinding("research", "train-7", "trainer")],
        MIG1: [PodBinding("serving", "llm-0", "vllm", (("label_obsctl_workload_class", "llm-online"),))],
    }
    # static wins over processes on GPU1; pods win over processes on GPU0
    coll = AttributionCollector(cfg, processes=lambda: {GPU0.uuid: [child.pid], GPU1.uuid: [child.pid]})
    reg = scrape(coll, [GPU0, GPU1, MIG1], pods)
    v = reg.get_sample_value
    assert v("obsctl_gpu_attribution_info", {"gpu": "1", "uuid": "GPU-1111", "workload_class": "batch",
                                             "owner": "team-a", "attribution_source": "static"}) == 1
    assert v("obsctl_gpu_attribution_info", {"gpu": "0", "uuid": "GPU-0000", "workload_class": "finetune",
                                             "owner": "research/train-7", "attribution_source": "kubernetes"}) == 1
    assert v("obsctl_gpu_attribution_info", {"gpu": "2", "uuid": "GPU-2222", "gpu_instance": "1",
                                             "mig_profile": "3g.40gb", "workload_class": "llm-online",
                                             "owner": "serving/llm-0", "attribution_source": "kubernetes"}) == 1
    assert {status(reg, u) for u in (GPU0, GPU1, MIG1)} == {"attributed"}


def test_mig_instance_processes_by_instance_key(child: subprocess.Popen) -> None:
    # NvmlSource.processes() keys MIG instances as "uuid/gpu_instance"
    coll = AttributionCollector(processes=lambda: {MIG1.uuid: [child.pid], f"{MIG1.uuid}/1": [child.pid]})
    reg = scrape(coll, [MIG1])
    assert status(reg, MIG1) == "attributed"


def test_no_inventory_no_series() -> None:
    coll = AttributionCollector(processes=lambda: {})
    assert coll.collect(ScrapeContext(deadline=0.0)) == []
