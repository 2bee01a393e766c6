"""Background collection: scrapes serve the last snapshot (with its age), never run a collector,
share one render per format and snapshot, and stop serving values once collection stops.

The loop's clocks are injected where a test reads an age or crosses the staleness bound, so the
answers are exact; the HTTP tests use the real front (ExporterServer) and exporter core.
"""

from __future__ import annotations

import gc
import gzip
import threading
import tracemalloc

import requests
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as text_parse

from obsctl.exporters.app import Exporter
from obsctl.exporters.collection import CollectionLoop
from obsctl.exporters.server import ExporterServer

TEXT = "text/plain;version=0.0.4"
OM = "application/openmetrics-text;version=1.0.0"
TEXT_V1 = "text/plain;version=1.0.0;escaping=underscores"  # rendered on demand (not one of the eager two)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Counting:
    """A collector counting its calls; its value is the call number."""

    name = "gpu"
    description = "counting"
    isolate = True

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls = 0
        self.gate = gate
        self.lock = threading.Lock()

    def collect(self, ctx):
        if self.gate is not None:
            self.gate.wait(30)
        with self.lock:
            self.calls += 1
            family = GaugeMetricFamily("obsctl_test_value", "test")
            family.add_metric([], float(self.calls))
        return [family]

    def close(self) -> None:
        pass


class Failing:
    """A collector that always raises with a large local in its frame (what a failed fetch holds)."""

    name = "gpu"
    description = "failing"
    isolate = True

    def collect(self, ctx):
        body = bytearray(256 * 1024)  # noqa: F841 - kept alive by the traceback unless released
        raise RuntimeError("driver went away")

    def close(self) -> None:
        pass


def values(body: bytes, om: bool = False) -> dict[str, float]:
    """``{sample name + labels: value}`` of a body, parsed by prometheus_client's own parsers."""
    families = om_parse(body.decode()) if om else text_parse(body.decode())
    return {s.name + (str(sorted(s.labels.items())) if s.labels else ""): s.value for f in families for s in f.samples}


def loop_with(collector, clock: Clock, wall: float = 1_796_000_000.0, interval: float = 5.0, budget: float = 2.0):
    exporter = Exporter([collector], scrape_timeout=budget, process_metrics=False)
    loop = CollectionLoop(exporter.scrape, interval, budget, clock=clock, wall=lambda: wall)
    return exporter, loop


def test_scrape_serves_the_snapshot_with_its_age_in_both_formats() -> None:
    clock = Clock()
    coll = Counting()
    exporter, loop = loop_with(coll, clock)
    try:
        loop.collect_once()
        clock.now += 7.25  # 1.45 intervals later: the same values, 7.25 s old
        ctype, body, gzipped = loop.respond(TEXT, False, 0)
        got = values(body)
        assert ctype.startswith("text/plain; version=0.0.4") and not gzipped
        assert got["obsctl_test_value"] == 1
        assert got["obsctl_exporter_collections_total"] == 1
        assert got["obsctl_exporter_collection_timestamp_seconds"] == 1_796_000_000.0
        assert got["obsctl_exporter_collection_age_seconds"] == 7.25
        assert coll.calls == 1  # serving did not collect
        ctype, body, _ = loop.respond(OM, False, 0)
        assert ctype.startswith("application/openmetrics-text; version=1.0.0")
        assert body.endswith(b"obsctl_exporter_collection_age_seconds 7.25\n# EOF\n") and body.count(b"# EOF") == 1
        assert values(body, om=True)["obsctl_test_value"] == 1  # the OpenMetrics parser accepts the whole body
        for accept, om in ((TEXT, False), (OM, True)):  # gzip: cached member + tail member = the plain body
            plain = loop.respond(accept, False, 0)[1]
            _, zipped, gzipped = loop.respond(accept, True, 0)
            assert gzipped and gzip.decompress(zipped) == plain
        loop.collect_once()
        clock.now += 0.5
        got = values(loop.respond(TEXT, False, 0)[1])
        assert got["obsctl_test_value"] == 2 and got["obsctl_exporter_collection_age_seconds"] == 0.5
    finally:
        exporter.close()


def test_stale_collection_fails_health_and_drops_values() -> None:
    clock = Clock()
    exporter, loop = loop_with(Counting(), clock, interval=5.0, budget=2.0)
    try:
        assert loop.stale_after == 15.0  # three intervals (more than budget + interval = 7 s)
        assert loop.health()[0]  # before the first collection, within the bound: starting up
        loop.collect_once()
        clock.now += 15.0
        assert loop.health() == (True, "OK\n")
        assert values(loop.respond(TEXT, False, 0)[1])["obsctl_test_value"] == 1
        clock.now += 0.25
        ok, message = loop.health()
        assert not ok and "15.2s ago" in message and "3 intervals of 5s" in message
        for accept, om in ((TEXT, False), (OM, True)):
            got = values(loop.respond(accept, False, 0)[1], om=om)
            assert "obsctl_test_value" not in got  # no longer served
            assert not any(k.startswith("obsctl_exporter_scrape_collector") for k in got)
            assert got["obsctl_exporter_collection_age_seconds"] == 15.25
            assert got["obsctl_exporter_collections_total"] == 1
        loop.collect_once()  # collection resumes: healthy, values back
        assert loop.health()[0] and values(loop.respond(TEXT, False, 0)[1])["obsctl_test_value"] == 2
    finally:
        exporter.close()


def test_no_collection_yet_is_unhealthy_after_the_bound() -> None:
    clock = Clock()
    exporter, loop = loop_with(Counting(), clock, interval=1.0, budget=4.0)
    try:
        assert loop.stale_after == 5.0  # budget + interval: a first collection may take its whole budget
        clock.now += 5.5
        ok, message = loop.health()
        assert not ok and "no collection has finished" in message
        got = values(loop.respond(TEXT, False, 0)[1])
        assert got["obsctl_exporter_collections_total"] == 0 and "obsctl_test_value" not in got
    finally:
        exporter.close()


def test_first_scrape_waits_for_the_first_collection() -> None:
    gate = threading.Event()
    exporter = Exporter([Counting(gate)], scrape_timeout=30.0, process_metrics=False)
    loop = CollectionLoop(exporter.scrape, 3600.0, 30.0).start()
    got: list[bytes] = []
    scrape = threading.Thread(target=lambda: got.append(loop.respond(TEXT, False, 30.0)[1]))
    try:
        scrape.start()
        waiters = loop._first._cond._waiters  # the scrape thread blocks on the first-collection event
        for _ in range(30000):  # deadline follows progress: until the scrape is waiting
            if waiters:
                break
            threading.Event().wait(0.001)
        assert waiters, "the scrape never waited for the first collection"
        gate.set()  # the collection can finish only now: the scrape was waiting for it
        scrape.join(30)
        assert values(got[0])["obsctl_test_value"] == 1
    finally:
        loop.stop()
        exporter.close()


def test_concurrent_scrapes_share_one_collection_and_one_render_per_format() -> None:
    coll = Counting()
    exporter = Exporter([coll], scrape_timeout=5.0, process_metrics=False)
    loop = CollectionLoop(exporter.scrape, 3600.0, 5.0)  # one collection in this test's lifetime
    server = ExporterServer(exporter.scrape, "127.0.0.1:0", scrape_timeout=5.0, snapshots=loop).start()
    loop.start()
    url = f"http://127.0.0.1:{server.port}/metrics"
    scrapers = 12
    barrier = threading.Barrier(scrapers)
    bodies: list[str] = []
    lock = threading.Lock()

    def scrape(accept: str) -> None:
        with requests.Session() as session:
            barrier.wait(30)
            r = session.get(url, headers={"Accept": accept}, timeout=30)
            with lock:
                bodies.append(r.text if r.status_code == 200 else f"HTTP {r.status_code}")

    try:
        for accept in (TEXT, OM, TEXT_V1):
            threads = [threading.Thread(target=scrape, args=(accept,)) for _ in range(scrapers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        assert len(bodies) == 3 * scrapers
        assert all("obsctl_test_value 1.0" in b or "obsctl_test_value 1\n" in b for b in bodies), bodies[0][:300]
        assert coll.calls == 1 and loop.collections == 1  # 36 scrapes, one collection
        assert loop.renders == 3  # the two eager formats after the collection, text 1.0.0 once for 12 scrapes
        health = requests.get(f"http://127.0.0.1:{server.port}/health", timeout=10)
        assert health.status_code == 200
    finally:
        server.stop()
        loop.stop()
        exporter.close()


def test_health_goes_503_over_http_when_collection_stops() -> None:
    exporter = Exporter([Counting()], scrape_timeout=0.1, process_metrics=False)
    loop = CollectionLoop(exporter.scrape, 0.1, 0.1)
    server = ExporterServer(exporter.scrape, "127.0.0.1:0", scrape_timeout=0.1, snapshots=loop).start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        loop.start()
        assert "obsctl_test_value" in loop.respond(TEXT, False, 30.0)[1].decode()  # a collection finished
        loop.stop()
        for _ in range(3000):  # deadline follows progress: the bound is 0.3 s after the last collection
            health = requests.get(url + "/health", timeout=10)
            if health.status_code == 503:
                break
            threading.Event().wait(0.01)
        assert health.status_code == 503 and "stale after 0.3s" in health.text
        body = requests.get(url + "/metrics", timeout=10).text
        assert "obsctl_test_value" not in body and "obsctl_exporter_collection_age_seconds" in body
    finally:
        server.stop()
        exporter.close()


def test_memory_flat_while_a_collector_fails() -> None:
    clock = Clock()
    exporter, loop = loop_with(Failing(), clock)
    tracemalloc.start()
    try:
        def run(collections: int) -> int:
            for _ in range(collections):
                loop.collect_once()
                clock.now += 1.0
                for accept in (TEXT, OM, TEXT_V1):
                    loop.respond(accept, True, 0)
            gc.collect()
            return tracemalloc.get_traced_memory()[0]

        loop.collect_once()
        body = loop.respond(TEXT, False, 0)[1].decode()
        assert 'obsctl_exporter_scrape_collector_error_info{collector="gpu",reason="exception"} 1.0' in body
        warm = run(10)
        after = run(200)
    finally:
        tracemalloc.stop()
        exporter.close()
    # each failure held 256 KiB before its traceback was released: 200 of them would be 50 MiB
    assert after - warm < 512 * 1024, f"{after - warm} bytes more after 200 failed collections"
