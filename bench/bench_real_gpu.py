"""The NVML source against a real driver and GPU: what it calls, what the driver answers, how fast.

Run on a machine with an NVIDIA GPU (not a test; nothing here runs in CI)::

    python bench/bench_real_gpu.py --out DIR [--scrapes 2000] [--http-scrapes 1000] [--busy-seconds 40]

Writes to DIR:

* ``calls-idle.json`` / ``calls-busy.json``: every pynvml function (and C symbol called directly)
  the source used in two collects with every reader on (PCIe throughput and the XID thread
  included), with call count, return codes (0 = success, else ``NVMLError`` values from
  ``nvml.h``), seconds spent and one value example; each field id's ``nvmlReturn`` from
  ``nvmlDeviceGetFieldValues``: what the stand-in NVML (``tests/support/nvml_stub.c``) must
  answer the same way.
* ``idle.prom``, ``idle.om``: one scrape as the exporter's text and OpenMetrics renderers give it;
  ``busy.prom``: one scrape while a bf16 matrix-product loop (PyTorch) keeps the GPU busy.
* ``figures.json``: in-process latency (collect + text render, idle and busy), time inside NVML,
  the own-time ratio, microseconds per scrape in each pynvml function, the slow calls against
  field-value reads of the same quantities, whether energy reads on one GPU overlap across
  threads, and the real exporter process scraped over HTTP (text and Prometheus' default
  ``Accept``) with its RSS; printed as tables too.

The stand-in NVML answers in nanoseconds; a real driver's calls enter the kernel, which is what the
own-time ratio ((collect - time inside pynvml) / time inside pynvml) is meant to be measured against.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import pynvml  # noqa: E402
from bench_gpu_exporter import PROMETHEUS_ACCEPT, TEXT_ACCEPT, rss_mib, scrape_exporter, timed_scrapes  # noqa: E402

from obsctl.exporters.exposition import TextRenderer  # noqa: E402
from obsctl.exporters.gpu.nvml import NvmlSource  # noqa: E402
from support.nvml_recorder import RecordingNvml, example  # noqa: E402

BUSY_LOOP = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
"""


def probe(out: Path, tag: str) -> None:
    """Two collects with every reader on through :class:`RecordingNvml`; writes calls-TAG.json, TAG.prom."""
    rec = RecordingNvml(pynvml)
    src = NvmlSource(rec, pcie_throughput=True, xid_events=True)
    renderer = TextRenderer()
    t0 = time.perf_counter()
    families = src.collect(time.monotonic() + 30.0)
    first_ms = (time.perf_counter() - t0) * 1e3
    time.sleep(1.0)  # the XID thread registers and waits at least once
    families = src.collect(time.monotonic() + 30.0)
    (out / f"{tag}.prom").write_bytes(renderer.render(families))
    if tag == "idle":
        (out / "idle.om").write_bytes(renderer.openmetrics.render(families))
    src.close()
    report = rec.report()
    report.update(rec.codes())  # the form kept in tests/fixtures/nvml-real/
    report["first_collect_ms"] = first_ms
    report["gpu_errors"] = src.last_gpu_errors
    (out / f"calls-{tag}.json").write_text(json.dumps(report, indent=1, default=str))


def per_call(collects: int) -> dict[str, float]:
    """Mean microseconds per collect spent in each pynvml function (XID thread off, PCIe off)."""
    rec = RecordingNvml(pynvml)
    src = NvmlSource(rec, xid_events=False)
    src.collect(time.monotonic() + 5.0)
    rec.calls.clear()
    for _ in range(collects):
        src.collect(time.monotonic() + 5.0)
    src.close()
    per = {k: v["seconds"] / collects * 1e6 for k, v in rec.calls.items() if k != "nvmlShutdown"}
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


#: Field ids (nvml.h) timed against the direct calls that read the same value.
ALTERNATIVE_FIELDS = {"memory_temp": (82,), "total_energy": (83,), "pcie_replay": (94,), "power_instant": (186,),
                      "energy_191": (191,), "memory_temp+total_energy+pcie_replay": (82, 83, 94)}
ALTERNATIVE_CALLS = ("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetMigMode",
                     "nvmlDeviceGetPowerUsage")


def alternatives(reps: int) -> dict[str, dict]:
    """Microseconds per call of the slow direct calls and of field-value reads of the same quantities."""
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    out: dict[str, dict] = {}
    for name in ALTERNATIVE_CALLS:
        fn = getattr(pynvml, name)
        try:
            value = fn(h)
        except pynvml.NVMLError as exc:
            out[name] = {"error": str(exc)}
            continue
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(h)
        out[name] = {"us": (time.perf_counter() - t0) / reps * 1e6, "value": example(value)}
    for name, ids in ALTERNATIVE_FIELDS.items():
        try:
            vals = pynvml.nvmlDeviceGetFieldValues(h, list(ids))
        except pynvml.NVMLError as exc:
            out["fields:" + name] = {"error": str(exc)}
            continue
        t0 = time.perf_counter()
        for _ in range(reps):
            pynvml.nvmlDeviceGetFieldValues(h, list(ids))
        out["fields:" + name] = {"us": (time.perf_counter() - t0) / reps * 1e6,
                                 "entries": [{"field": v.fieldId, "nvmlReturn": v.nvmlReturn, "valueType": v.valueType,
                                              "ull": v.value.ullVal, "ui": v.value.uiVal, "d": v.value.dVal}
                                             for v in vals]}
    pynvml.nvmlShutdown()
    return out


def energy_overlap(reads: int, threads: int = 4) -> dict[str, float]:
    """Whether energy reads overlap: ``reads`` reads on one thread, then the same count split over
    ``threads`` threads (ctypes releases the GIL in the C call). Wall ms of each; a ratio near 1
    means the driver serializes the reads of one GPU."""
    import threading

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    t0 = time.perf_counter()
    for _ in range(reads):
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    one = time.perf_counter() - t0

    def part() -> None:
        for _ in range(reads // threads):
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)

    workers = [threading.Thread(target=part) for _ in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    split = time.perf_counter() - t0
    pynvml.nvmlShutdown()
    return {"reads": reads, "threads": threads, "one_thread_ms": one * 1e3, "split_ms": split * 1e3,
            "split_over_one": split / one}


def latency(scrapes: int) -> dict[str, float]:
    """In-process collect + text render as the exporter serves it (XID thread off, PCIe off)."""
    src = NvmlSource(pynvml, xid_events=False)
    renderer = TextRenderer()
    res = timed_scrapes(src, lambda: renderer.render(src.collect(time.monotonic() + 5.0)), scrapes)
    src.close()
    return {**res, "rss_mib": rss_mib()}


def http(scrapes: int, accept: str) -> dict:
    """The exporter process on the real driver (every collector, XID thread on) scraped over HTTP."""
    # cwd "/": from the repository root, its obsctl/ folder would shadow the installed package.
    return scrape_exporter(dict(os.environ), scrapes, accept, cwd="/")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the JSON and scrapes")
    ap.add_argument("--scrapes", type=int, default=2000, help="in-process scrapes (idle)")
    ap.add_argument("--http-scrapes", type=int, default=1000, help="HTTP scrapes per format")
    ap.add_argument("--busy-seconds", type=float, default=40.0, help="length of the matrix-product load")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    try:
        nvml_version = pynvml.nvmlSystemGetNVMLVersion()
    except pynvml.NVMLError as exc:
        nvml_version = str(exc)
    info = {"driver": pynvml.nvmlSystemGetDriverVersion(), "nvml": nvml_version,
            "gpus": [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                     for i in range(pynvml.nvmlDeviceGetCount())],
            "python": sys.version.split()[0], "nvidia_ml_py": getattr(pynvml, "__version__", "?")}
    pynvml.nvmlShutdown()
    print("device:", json.dumps(info))
    figures: dict[str, Any] = {"info": info}
    probe(args.out, "idle")
    figures["in_process_idle"] = latency(args.scrapes)
    figures["us_per_collect_idle"] = per_call(200)
    figures["alternatives_idle"] = alternatives(300)
    figures["energy_overlap"] = energy_overlap(200)
    figures["http_text"] = http(args.http_scrapes, TEXT_ACCEPT)
    figures["http_openmetrics"] = http(args.http_scrapes, PROMETHEUS_ACCEPT)
    load = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(args.busy_seconds)])
    try:
        time.sleep(min(10.0, args.busy_seconds / 3))  # CUDA context up, clocks and power ramped
        probe(args.out, "busy")
        figures["in_process_busy"] = latency(max(args.scrapes // 4, 100))
        figures["us_per_collect_busy"] = per_call(100)
    finally:
        load.wait()
    figures["busy_loop_rc"] = load.returncode
    (args.out / "figures.json").write_text(json.dumps(figures, indent=1))
    print(f"{'run':<18} {'p50 ms':>8} {'p99 ms':>8} {'collect ms':>10} {'NVML ms':>8} {'own/NVML':>9} {'bytes':>7}")
    for key in ("in_process_idle", "in_process_busy"):
        r = figures[key]
        print(f"{key:<18} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['collect_ms']:>10.3f} {r['nvml_ms']:>8.3f} "
              f"{r['own_time_ratio']:>9.2f} {r['bytes']:>7}")
    print("microseconds per collect in each pynvml function (idle / busy):")
    for name, us in figures["us_per_collect_idle"].items():
        print(f"  {name:<46} {us:>9.1f} {figures['us_per_collect_busy'].get(name, float('nan')):>9.1f}")
    print("alternatives (idle), microseconds per call:")
    for name, r in figures["alternatives_idle"].items():
        print(f"  {name:<46} {r.get('us', float('nan')):>9.1f}  {r.get('error') or r.get('value') or r.get('entries')}")
    print("energy reads on one GPU, one thread against four:", json.dumps(figures["energy_overlap"]))
    for key in ("http_text", "http_openmetrics"):
        r = figures[key]
        if "error" in r:
            print(f"{key:<18} {r['error']}")
        else:
            print(f"{key:<18} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {'':>10} {'':>8} {'':>9} {r['bytes']:>7}  "
                  f"RSS {r['rss'][0][1]:.1f} -> {r['rss'][-1][1]:.1f} MiB")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
