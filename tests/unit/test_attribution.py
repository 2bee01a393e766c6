"""Attribution: real /proc of child processes the test starts, Slurm cgroup parsing, static
and Kubernetes mappings, the status series, the TTL cache (negative results included) and the
background refresher that keeps /proc lookups off the scrape path."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from obsctl.exporters.app import Exporter, ScrapeContext
from obsctl.exporters.config import AttributionConfig
from obsctl.exporters.gpu.attribution import AttributionCollector
from obsctl.exporters.gpu.inventory import GpuInventory, GpuRef, PodBinding
from obsctl.exporters.gpu.procinfo import ProcessCache, ProcessInfo, read_process, slurm_job_from_cgroup
from support.polling import wait_until

GPU0 = GpuRef("0", "GPU-0000")
GPU1 = GpuRef("1", "GPU-1111")
MIG1 = GpuRef("2", "GPU-2222", "1", "3g.40gb")


@pytest.fixture()
def child(sleeper) -> subprocess.Popen:
    return sleeper(OBSCTL_WORKLOAD_CLASS="embed-online", OBSCTL_WORKLOAD_OWNER="team-search")


@pytest.fixture()
def plain_child(sleeper) -> subprocess.Popen:
    return sleeper()


def make(*args, **kwargs) -> AttributionCollector:
    """A collector whose snapshot the test refreshes explicitly (no background thread)."""
    return AttributionCollector(*args, autostart=False, **kwargs)


def scrape(coll: AttributionCollector, units: list[GpuRef], pods: dict | None = None,
           refresh: bool = True) -> CollectorRegistry:
    """One refresher round (unless ``refresh=False``), then one scrape of ``units``."""
    if refresh:
        coll.refresher.refresh()
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
    coll = make(processes=lambda: procs)
    reg = scrape(coll, [GPU0, GPU1])
    assert reg.get_sample_value("obsctl_gpu_attribution_info", {
        "gpu": "0", "uuid": GPU0.uuid, "workload_class": "embed-online", "owner": "team-search",
        "attribution_source": "process_env"}) == 1
    assert status(reg, GPU0) == "attributed"
    assert status(reg, GPU1) == "unattributed"  # a process without the variable: visible, not silent


def test_process_that_exits_is_gone_next_scrape(child: subprocess.Popen) -> None:
    procs = {GPU0.uuid: [child.pid]}
    coll = make(processes=lambda: dict(procs))
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
    coll = make(processes=lambda: {GPU0.uuid: [pid]})
    assert status(scrape(coll, [GPU0]), GPU0) == "unattributed"


def test_cache_reuses_answers_including_negative(child: subprocess.Popen, plain_child: subprocess.Popen) -> None:
    cache = ProcessCache(ttl_seconds=3600)
    coll = make(processes=lambda: {GPU0.uuid: [child.pid], GPU1.uuid: [plain_child.pid]}, cache=cache)
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
    coll = make(processes=lambda: {GPU0.uuid: [os.getpid()]}, cache=cache)
    assert status(scrape(coll, [GPU0]), GPU0) == "error"


def test_process_list_failure_is_status_error() -> None:
    def boom() -> dict:
        raise RuntimeError("nvml gone")

    coll = make(processes=boom)
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
    coll = make(cfg, processes=lambda: {GPU0.uuid: [plain_child.pid]},
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
    coll = make(cfg, processes=lambda: {GPU0.uuid: [child.pid], GPU1.uuid: [child.pid]})
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
    coll = make(processes=lambda: {MIG1.uuid: [child.pid], f"{MIG1.uuid}/1": [child.pid]})
    reg = scrape(coll, [MIG1])
    assert status(reg, MIG1) == "attributed"


def test_no_inventory_no_series() -> None:
    coll = make(processes=lambda: {})
    assert coll.collect(ScrapeContext(deadline=0.0)) == []


# -- the background refresher: /proc lookups off the scrape path ---------------------------------

def info_series(reg: CollectorRegistry) -> list[dict]:
    return [s.labels for m in reg.collect() for s in m.samples if s.name == "obsctl_gpu_attribution_info"]


def test_scrape_serves_last_snapshot_while_a_resolve_is_blocked(child: subprocess.Popen) -> None:
    main = threading.current_thread()
    calls: list[threading.Thread] = []  # the thread of every resolver and process-list call
    blocked, entered, gate = threading.Event(), threading.Event(), threading.Event()

    def reader(pid: int, root: Path) -> ProcessInfo | None:
        calls.append(threading.current_thread())
        if blocked.is_set():
            entered.set()
            gate.wait(30)  # a scrape that called the resolver would hang here, on the main thread
        return read_process(pid, root)

    def processes() -> dict:
        calls.append(threading.current_thread())
        return {GPU0.uuid: [child.pid]}

    cfg = AttributionConfig.model_validate({"refresh_interval_seconds": 3600})
    coll = AttributionCollector(cfg, processes=processes, cache=ProcessCache(ttl_seconds=1e-9, reader=reader))
    try:
        scrape(coll, [GPU0], refresh=False)  # starts the refresher; its first round runs at once
        wait_until(lambda: coll.refresher.refreshes >= 1, 30, interval=0.005, what="the first refresh")
        reg = scrape(coll, [GPU0], refresh=False)
        assert status(reg, GPU0) == "attributed"
        blocked.set()
        coll.refresher.wake()
        assert entered.wait(30), "the refresher never reached the resolver"
        for _ in range(3):  # the resolver is stuck: every scrape still answers, from the last snapshot
            reg = scrape(coll, [GPU0], refresh=False)
            assert status(reg, GPU0) == "attributed"
            assert [lbl["workload_class"] for lbl in info_series(reg)] == ["embed-online"]
        assert calls and main not in calls  # neither the resolver nor the process list ran on a scrape
        assert coll.refresher.refreshes == 1
    finally:
        gate.set()
        coll.close()
    assert not coll.refresher.alive


def test_exited_process_is_gone_before_the_refresher_notices(child: subprocess.Popen) -> None:
    coll = make(processes=lambda: {GPU0.uuid: [child.pid]})  # the stale list still names the pid
    assert status(scrape(coll, [GPU0]), GPU0) == "attributed"
    child.kill()
    child.wait()
    reg = scrape(coll, [GPU0], refresh=False)  # same snapshot; only the liveness check ran
    assert status(reg, GPU0) == "unattributed"
    assert info_series(reg) == []


def test_recycled_pid_does_not_inherit_the_class(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    (root / "4242").mkdir(parents=True)
    stat = root / "4242" / "stat"
    fields = ["S"] + ["0"] * 18 + ["1000"]  # field 22 (start time) = 1000
    stat.write_text("4242 (python) " + " ".join(fields) + "\n")

    def reader(pid: int, r: Path) -> ProcessInfo:
        return ProcessInfo(pid, workload_class="batch", owner="team-a")

    coll = make(processes=lambda: {GPU0.uuid: [4242]}, cache=ProcessCache(proc_root=root, reader=reader))
    assert status(scrape(coll, [GPU0]), GPU0) == "attributed"
    stat.write_text("4242 (bash) " + " ".join(fields[:-1] + ["2000"]) + "\n")  # a new process, same pid
    assert status(scrape(coll, [GPU0], refresh=False), GPU0) == "unattributed"


def test_negative_results_are_cached_across_refreshes(plain_child: subprocess.Popen) -> None:
    cache = ProcessCache(ttl_seconds=3600)
    coll = make(processes=lambda: {GPU0.uuid: [plain_child.pid]}, cache=cache)
    for _ in range(4):
        assert status(scrape(coll, [GPU0]), GPU0) == "unattributed"
    assert coll.refresher.refreshes == 4
    assert cache.lookups == 1  # the "no class" answer was reused, not re-read from /proc


class _Source:
    """A GPU source as the GPU collector hands it to attribution (``processes()`` like NVML)."""

    def __init__(self, procs: dict) -> None:
        self.procs = procs

    def processes(self) -> dict:
        return self.procs


def test_pending_until_the_first_resolution_after_the_source_answered(child: subprocess.Popen) -> None:
    coll = make()
    coll.refresher.refresh()  # a round before any GPU answer (as at startup): no process source yet
    ctx = ScrapeContext(deadline=0.0, inventory=GpuInventory(units=[GPU0], pods={}),
                        gpu_source=_Source({GPU0.uuid: [child.pid]}))
    statuses = [m.samples[0].labels["status"] for m in coll.collect(ctx) if m.name == "obsctl_gpu_attribution_status"]
    assert statuses == ["pending"]  # not "unattributed": nobody has looked yet
    coll.refresher.refresh()
    statuses = [m.samples[0].labels["status"] for m in coll.collect(ctx) if m.name == "obsctl_gpu_attribution_status"]
    assert statuses == ["attributed"]


def test_exporter_close_stops_the_refresher() -> None:
    coll = AttributionCollector(processes=lambda: {})
    exporter = Exporter([coll], process_metrics=False)
    coll.start()
    assert coll.refresher.alive
    exporter.close()
    assert not coll.refresher.alive
    coll.start()  # no restart after close
    assert not coll.refresher.alive


def test_dcgm_source_is_never_pending() -> None:
    # AutoSource on dcgm-exporter has processes() but lists none: "unattributed" at once, not "pending"
    source = _Source({})
    source.active = "dcgm"
    coll = make()
    ctx = ScrapeContext(deadline=0.0, inventory=GpuInventory(units=[GPU0], pods={}), gpu_source=source)
    statuses = [m.samples[0].labels["status"] for m in coll.collect(ctx) if m.name == "obsctl_gpu_attribution_status"]
    assert statuses == ["unattributed"]
