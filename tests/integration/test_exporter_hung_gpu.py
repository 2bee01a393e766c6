"""The real exporter process on eight stand-in GPUs, one of whose driver calls hangs: scrapes are
served from the background collection, the hung GPU is reported stuck with its values left out,
the seven others are served with the stand-in's values, and Prometheus' default Accept and the
text format carry the same values. The stand-in's energy call takes 40 ms on every GPU (a real
driver's 3.8-4.7 ms, ten times over)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import requests
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse

from support import stubnvml
from support.servers import free_port, wait_ready

HUNG = 3
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                     "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def scenario() -> str:
    text = re.sub(r"\nenergy (\d+)", r"\nenergy \1 delay_ms=40", stubnvml.h100_8x())
    hung_power = f"power {612345 + HUNG * 1000}"
    assert text.count(hung_power + "\n") == 1
    return text.replace(hung_power + "\n", hung_power + " delay_ms=600000\n")  # never returns in the test


def samples(body: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in om_parse(body) for s in f.samples}


def gpu(i: int, **extra: str) -> tuple:
    return tuple(sorted({"gpu": str(i), "uuid": stubnvml.h100_uuid(i), **extra}.items()))


def test_hung_gpu_call_never_blocks_a_scrape_and_is_reported(stub_so: Path, tmp_path: Path) -> None:
    scen = stubnvml.write_scenario(tmp_path / "scenario.txt", scenario())
    port = free_port()
    env = {**os.environ, "LD_LIBRARY_PATH": str(stub_so.parent), stubnvml.ENV: str(scen)}
    log = (tmp_path / "exporter.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "obsctl.exporters.main", f"--web.listen-address=127.0.0.1:{port}",
                             "--gpu.source=nvml", "--collector.interval=500ms", "--scrape.timeout=2s",
                             "--dcgm.timeout=1s"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/", timeout=30, process=proc)
        got: dict = {}
        for _ in range(600):  # deadline follows progress: until a collection has read the seven others
            r = requests.get(url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT}, timeout=10)
            assert r.status_code == 200
            got = samples(r.text)
            if all(got.get(("obsctl_gpu_up", gpu(i))) == 1 for i in range(8) if i != HUNG):
                break
            time.sleep(0.05)
        # the hung GPU: stuck, down, identity kept, no values
        assert got[("obsctl_gpu_collection_stuck", gpu(HUNG))] == 1
        assert got[("obsctl_gpu_up", gpu(HUNG))] == 0
        # its identity, read at init, is kept (mig_mode as last read: none yet, the read never finished)
        assert ("obsctl_gpu_info", gpu(HUNG, model="NVIDIA H100 80GB HBM3", driver_version="550.54.15",
                                       pci_bus_id="00000000:5D:00.0", mig_mode="unsupported")) in got
        assert not [k for k in got if k[1] == gpu(HUNG) and k[0] not in (
            "obsctl_gpu_collection_stuck", "obsctl_gpu_up", "obsctl_gpu_attribution_status")]
        # the others: the stand-in's values in base units (mW/1000, mJ/1000)
        for i in (0, 1, 2, 4, 5, 6, 7):
            assert ("obsctl_gpu_collection_stuck", gpu(i)) not in got
            assert got[("obsctl_gpu_power_watts", gpu(i))] == (612345 + i * 1000) / 1000
            assert got[("obsctl_gpu_energy_joules_total", gpu(i))] == (123456789 + i * 1000) / 1000
        assert got[("obsctl_exporter_scrape_collector_success", (("collector", "gpu"),))] == 1
        assert got[("obsctl_exporter_collections_total", ())] >= 1
        assert got[("obsctl_exporter_collection_age_seconds", ())] >= 0
        # the text format carries the same snapshot's values
        text = requests.get(url + "/metrics", timeout=10).text
        assert f'obsctl_gpu_collection_stuck{{gpu="{HUNG}",uuid="{stubnvml.h100_uuid(HUNG)}"}} 1.0' in text
        assert f'obsctl_gpu_power_watts{{gpu="0",uuid="{stubnvml.h100_uuid(0)}"}} 612.345' in text
        # collection goes on while the call hangs: later collections finish and are served
        first = got[("obsctl_exporter_collections_total", ())]
        for _ in range(600):
            later = samples(requests.get(url + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT}, timeout=10).text)
            if later[("obsctl_exporter_collections_total", ())] > first:
                break
            time.sleep(0.05)
        assert later[("obsctl_exporter_collections_total", ())] > first
        assert later[("obsctl_gpu_collection_stuck", gpu(HUNG))] == 1
        assert requests.get(url + "/health", timeout=10).status_code == 200
        proc.terminate()  # SIGTERM with a call still inside the driver: a clean exit
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(15)
        log.close()
    assert "Traceback" not in (tmp_path / "exporter.log").read_text(errors="replace")
