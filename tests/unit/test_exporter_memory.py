"""The exporter's memory stays flat while its dcgm source fails.

Before the fix every failed scrape kept all earlier ones alive (the scrape thread's frame in the
error's traceback named the previous job, whose error named the one before): 27 KiB per scrape
with dcgm-exporter down, the whole capped body per scrape with an over-cap answer. Here a few
hundred scrapes per fault mode run through the real exporter core and DcgmSource against the
fault-injecting stand-in; Python's own allocation count (tracemalloc, after a GC) must not grow
by more than a generous bound after a warm-up. The long soak (50,000 scrapes per mode, process
RSS) is bench/bench_exporter_soak.py.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from obsctl.exporters.app import Exporter
from obsctl.exporters.gpu.collector import GpuCollector
from obsctl.exporters.gpu.dcgm import DcgmSource
from obsctl.exporters.gpu.errors import GpuSourceError
from support.dcgm_standin import DcgmStandIn, refused_url

CAP = 1 * 2**20  # a small cap keeps the over-cap mode fast; the stand-in sends twice that
GROWTH_LIMIT = 512 * 1024  # bytes; the leak grew ~27 KiB per failed scrape (4 MiB over 150)


@pytest.fixture()
def standin(fixtures_dir: Path) -> Iterator[DcgmStandIn]:
    server = DcgmStandIn((fixtures_dir / "dcgm" / "datadog-t4.txt").read_bytes(), over_cap_bytes=2 * CAP)
    try:
        yield server
    finally:
        server.close()


def _traced_after(exporter: Exporter, scrapes: int, budget: float) -> int:
    for _ in range(scrapes):
        exporter.scrape(budget)
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize("mode, scrapes, reason", [
    ("down", 150, "dcgm_unreachable"),
    ("html", 150, "dcgm_bad_response"),
    ("garbage", 150, "dcgm_bad_response"),
    ("error", 150, "dcgm_bad_response"),
    ("huge_chunked", 50, "dcgm_bad_response"),
    ("ok", 30, None),  # parsing the dump under tracemalloc is slow; healthy never leaked
])
def test_memory_flat_while_dcgm_fails(standin: DcgmStandIn, mode: str, scrapes: int, reason: str | None) -> None:
    url = refused_url() if mode == "down" else standin.url
    standin.mode = mode
    exporter = Exporter([GpuCollector(DcgmSource(url, timeout=1.0, max_bytes=CAP), "dcgm")], process_metrics=False)
    tracemalloc.start()
    try:
        out = exporter.scrape(3.0)
        reasons = {s.labels["reason"] for m in out for s in m.samples if s.name.endswith("collector_error_info")}
        assert reasons == ({reason} if reason else set())
        warm = _traced_after(exporter, 10, 3.0)
        after = _traced_after(exporter, scrapes, 3.0)
        live_errors = sum(isinstance(o, GpuSourceError) for o in gc.get_objects())
    finally:
        tracemalloc.stop()
        exporter.close()
    assert after - warm < GROWTH_LIMIT, f"{mode}: {after - warm} bytes more after {scrapes} scrapes"
    assert live_errors <= 1, f"{mode}: {live_errors} GpuSourceError objects still alive"


def test_memory_flat_when_dcgm_is_slow(standin: DcgmStandIn) -> None:
    standin.mode = "slow"
    exporter = Exporter([GpuCollector(DcgmSource(standin.url, timeout=0.15), "dcgm")], process_metrics=False)
    tracemalloc.start()
    try:
        warm = _traced_after(exporter, 5, 0.3)
        after = _traced_after(exporter, 25, 0.3)
    finally:
        tracemalloc.stop()
        exporter.close()
    assert after - warm < GROWTH_LIMIT, f"slow: {after - warm} bytes more after 25 scrapes"
