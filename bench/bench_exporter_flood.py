"""Soak benchmark: a real scrape beside a connection flood, against an exporter at 256 descriptors.

One real ``obsctl-exporter`` process (``--gpu.source=none``, its other collectors on) runs
with ``RLIMIT_NOFILE`` 256. A flood of 300 idle and 20 trickling connections (one byte of a
never-ending head every 2 s; closed ones re-opened once a second, as slowloris tools do) is
kept up for ``--seconds`` while a scraper opens a new connection every 0.5 s and reads
``/metrics``. Shared code: ``tests/support/exporter_flood.py``; the 10-second version is
``tests/integration/test_exporter_flood.py``. Goal: every scrape within 1 s, RSS growth < 20 MiB.

    python bench/bench_exporter_flood.py                   # two minutes
    python bench/bench_exporter_flood.py --seconds 30 --json flood.json

Prints the figures as one table row (docs/benchmarks-soak.md) and exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.exporter_flood import run_flood, start_exporter
from support.servers import free_port

GOAL_SCRAPE_SECONDS = 1.0
GOAL_RSS_MIB = 20.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=120.0, help="flood duration (default 120)")
    p.add_argument("--nofile", type=int, default=256, help="the exporter's RLIMIT_NOFILE (default 256)")
    p.add_argument("--idle", type=int, default=300)
    p.add_argument("--trickle", type=int, default=20)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="obsctl-flood-") as tmp:
        log = Path(tmp) / "exporter.log"
        proc = start_exporter(port, log, args.nofile)
        try:
            fig = run_flood(proc, port, args.seconds, idle=args.idle, trickle=args.trickle)
            alive = proc.poll() is None
        finally:
            proc.terminate()
            code = proc.wait(timeout=15)
        errors = [ln for ln in log.read_text(errors="replace").splitlines() if "level=error" in ln or "Traceback" in ln]
    times = sorted(fig.scrape_seconds)
    p99 = times[max(0, int(len(times) * 0.99) - 1)] if times else float("nan")
    print("| seconds | scrapes | failed | median | p99 | slowest | RSS before | RSS max | growth | exporter CPU | "
          "flood connections opened | closed by the exporter |")
    print(f"| {args.seconds:g} | {len(times)} | {len(fig.failures)} | {statistics.median(times) * 1000:.1f} ms | "
          f"{p99 * 1000:.1f} ms | {fig.slowest * 1000:.1f} ms | {fig.rss_before_kib / 1024:.1f} MiB | "
          f"{fig.rss_max_kib / 1024:.1f} MiB | +{fig.rss_growth_mib:.2f} MiB | "
          f"{fig.cpu_seconds:.1f} s ({fig.cpu_seconds / args.seconds * 100:.0f} % of a core) | {fig.opened:,} | "
          f"{fig.closed_by_server:,} |")
    print(f"exporter alive during the flood: {alive}; exit code on SIGTERM: {code}; error lines: {len(errors)}")
    for failure in fig.failures[:5]:
        print("failure:", failure)
    if args.json:
        args.json.write_text(json.dumps({**asdict(fig), "exit_code": code, "error_lines": errors}, indent=1))
    ok = not fig.failures and fig.slowest < GOAL_SCRAPE_SECONDS and fig.rss_growth_mib < GOAL_RSS_MIB
    return 0 if ok and alive and code == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
