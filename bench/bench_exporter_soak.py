"""Soak benchmark: the exporter's RSS while its dcgm-exporter source fails, scrape after scrape.

For each mode one real ``obsctl-exporter`` process (``--gpu.source=dcgm --dcgm.timeout=0.5s``,
all collectors on) reads a fault-injecting dcgm-exporter stand-in (tests/support/dcgm_standin.py, its own
process) and is scraped back to back over one kept-alive HTTP connection, as Prometheus does
(``Accept-Encoding: gzip``, ``X-Prometheus-Scrape-Timeout-Seconds``). The exporter's VmRSS
(``/proc/<pid>/status``) is read after a warm-up of 1,000 scrapes and every 5,000 after.

Modes: ``healthy`` (the public T4 dump), ``down`` (connection refused), ``html`` (200 login
page), ``garbage`` (200 non-UTF-8 bytes), ``http500``, ``over-cap`` (a 20 MiB body without
Content-Length, cut off at the 16 MiB cap while streaming), ``slow`` (no answer within the 0.5 s
dcgm timeout). Goal: RSS growth after the warm-up < 5 MiB in every mode.

    python bench/bench_exporter_soak.py                       # 50,000 scrapes per fast mode, 2,000 slow
    python bench/bench_exporter_soak.py --scrapes 3000 --slow-scrapes 300 --modes down,over-cap
    python bench/bench_exporter_soak.py --jobs 2 --json soak.json   # two modes at a time

Prints one line per checkpoint and a table; ``--json`` writes the figures too.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.dcgm_standin import refused_url  # noqa: E402
from support.servers import free_port  # noqa: E402

FIXTURE = ROOT.parent / "shared" / "fixtures" / "dcgm" / "datadog-t4.txt"
STANDIN_MODE = {"healthy": "ok", "html": "html", "garbage": "garbage", "http500": "error",
                "over-cap": "huge_chunked", "slow": "slow"}
MODES = ("healthy", "down", "html", "garbage", "http500", "over-cap", "slow")
WARMUP = 1000
EVERY = 5000
DCGM_TIMEOUT = "0.5s"
OVER_CAP_BYTES = 20 * 2**20
GOAL_MIB = 5.0
_print_lock = threading.Lock()


def say(text: str) -> None:
    with _print_lock:
        print(text, flush=True)


def vm_rss_mib(pid: int) -> float:
    """VmRSS of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _start_standin(mode: str) -> tuple[subprocess.Popen | None, str]:
    if mode == "down":
        return None, refused_url()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "dcgm_standin.py"), str(FIXTURE),
                             "--mode", STANDIN_MODE[mode], "--over-cap-bytes", str(OVER_CAP_BYTES),
                             "--slow-seconds", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def _start_exporter(dcgm_url: str, port: int, log_path: Path) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("obsctl-exporter")
    cmd = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "obsctl.exporters.main"]),
           f"--web.listen-address=127.0.0.1:{port}", "--gpu.source=dcgm", f"--dcgm.url={dcgm_url}",
           f"--dcgm.timeout={DCGM_TIMEOUT}", "--scrape.timeout=2s"]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/-/healthy")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"exporter did not start; see {log_path}")


def soak(mode: str, scrapes: int, log_dir: Path, warmup: int = WARMUP, every: int = EVERY) -> dict:
    """Run one mode; returns ``{mode, scrapes, checkpoints: [(scrape, rss_mib)], growth_mib, ...}``."""
    standin, url = _start_standin(mode)
    port = free_port()
    exporter = _start_exporter(url, port, log_dir / f"exporter-{mode}.log")
    headers = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip",
               "X-Prometheus-Scrape-Timeout-Seconds": "10"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    checkpoints: list[tuple[int, float]] = [(0, vm_rss_mib(exporter.pid))]
    gpu_ok = 0
    t0 = time.monotonic()
    try:
        for i in range(1, scrapes + 1):
            conn.request("GET", "/metrics", headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{mode}: scrape {i} answered HTTP {resp.status}")
            if i == 1 or i % 100 == 0:  # spot-check the served outcome (gzip: look in the decompressed text)
                import gzip
                text = gzip.decompress(body) if resp.getheader("Content-Encoding") == "gzip" else body
                gpu_ok += b'obsctl_exporter_scrape_collector_success{collector="gpu"} 1.0' in text
            if i == warmup or (i > warmup and (i - warmup) % every == 0) or i == scrapes:
                rss = vm_rss_mib(exporter.pid)
                checkpoints.append((i, rss))
                say(f"{mode:9s} scrape {i:6d}  rss {rss:7.1f} MiB  {(time.monotonic() - t0) / i * 1000:6.1f} ms/scrape")
    finally:
        conn.close()
        exporter.terminate()
        exporter.wait(timeout=10)
        if standin is not None:
            standin.stdin.close()
            standin.wait(timeout=10)
    warm = next((r for n, r in checkpoints if n == warmup), checkpoints[1][1] if len(checkpoints) > 1 else float("nan"))
    after = [r for n, r in checkpoints if n >= warmup]
    return {"mode": mode, "scrapes": scrapes, "warmup": warmup, "checkpoints": checkpoints,
            "rss_start_mib": checkpoints[0][1], "rss_warm_mib": warm, "rss_end_mib": checkpoints[-1][1],
            "growth_mib": max(after) - warm if after else float("nan"),
            "ms_per_scrape": (time.monotonic() - t0) / scrapes * 1000, "gpu_success_spot_checks": gpu_ok,
            "exit_code": exporter.returncode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--scrapes", type=int, default=50_000, help="scrapes per fast mode (default 50000)")
    p.add_argument("--slow-scrapes", type=int, default=2_000, help="scrapes of the slow mode (default 2000)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    p.add_argument("--warmup", type=int, default=WARMUP, help=f"scrapes before the reference RSS (default {WARMUP})")
    p.add_argument("--every", type=int, default=EVERY, help=f"scrapes between RSS readings (default {EVERY})")
    p.add_argument("--jobs", type=int, default=1, help="modes run at the same time (default 1)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    p.add_argument("--log-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")),
                   help="where the exporters' logs go")
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        p.error(f"unknown modes {sorted(unknown)}; choose from {','.join(MODES)}")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    commit = _commit()  # the code the exporters run is the tree at start
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(soak, m, args.slow_scrapes if m == "slow" else args.scrapes, args.log_dir,
                               args.warmup, args.every) for m in modes]
        results = [f.result() for f in futures]
    print(f"\n| mode | scrapes | RSS start | RSS after {args.warmup} | RSS end | growth after warm-up | ms/scrape |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {r['scrapes']} | {r['rss_start_mib']:.1f} MiB | {r['rss_warm_mib']:.1f} MiB | "
              f"{r['rss_end_mib']:.1f} MiB | {r['growth_mib']:+.2f} MiB | {r['ms_per_scrape']:.1f} |")
    worst = max(r["growth_mib"] for r in results)
    verdict = "meets" if worst < GOAL_MIB else "MISSES"
    print(f"\nworst growth {worst:+.2f} MiB: {verdict} the < {GOAL_MIB:g} MiB goal")
    if args.json:
        args.json.write_text(json.dumps({"started": started, "commit": commit, "results": results}, indent=1))


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    main()
