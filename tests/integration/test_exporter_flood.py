"""A real obsctl-exporter process limited to 256 file descriptors, flooded for 10 s by 300 idle
and 20 trickling connections (re-opened as it closes them), answers every concurrent real
scrape, with RSS growth under 20 MiB. Scrape latency is printed, not asserted (a wall-clock
figure); the two-minute version with its latency goal is bench/bench_exporter_flood.py
(figures in docs/benchmarks-soak.md)."""

from __future__ import annotations

from pathlib import Path

from support.exporter_flood import run_flood, start_exporter
from support.servers import free_port

NOFILE = 256
FLOOD_SECONDS = 10.0
RSS_GROWTH_MIB = 20.0


def test_flood_of_idle_and_trickling_connections_leaves_scrapes_answering(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    proc = start_exporter(port, log, NOFILE)
    try:
        figures = run_flood(proc, port, FLOOD_SECONDS, idle=300, trickle=20)
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
    finally:
        proc.terminate()
        code = proc.wait(timeout=15)
    out = log.read_text(errors="replace")
    summary = (f"scrapes {len(figures.scrape_seconds)}, slowest {figures.slowest:.3f}s, failures {figures.failures[:3]}, "
               f"rss +{figures.rss_growth_mib:.1f} MiB, flood opened {figures.opened}, closed by server "
               f"{figures.closed_by_server}, cpu {figures.cpu_seconds:.1f}s")
    print(summary)
    assert figures.peak_open >= 320 and figures.closed_by_server > 0, summary  # the cap was reached
    assert not figures.failures, summary
    assert figures.scrape_seconds, summary  # scrapes ran during the flood, each answered (within its 5 s client timeout)
    assert figures.rss_growth_mib < RSS_GROWTH_MIB, summary
    assert code == 0
    assert "Traceback" not in out and "level=error" not in out, out[-2000:]
