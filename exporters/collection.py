"""Collection off the scrape path: a background loop collects, every scrape serves its last snapshot.

The loop runs the exporter's collectors (``Exporter.scrape``: the same per-collector deadlines and
meta series) every ``interval`` seconds on its own thread and swaps in an immutable
:class:`Snapshot`. A scrape never calls a collector: it takes the current snapshot, and its body
is rendered once per snapshot and format (text 0.0.4 and Prometheus' default OpenMetrics 1.0.0
are rendered, and gzipped, by the loop right after the collection; other negotiated formats on the
first scrape that asks, under a lock, so concurrent scrapes of one format share one render). Only a
three-line tail is made per scrape: ``obsctl_exporter_collection_age_seconds``, the seconds since
the served collection finished (and OpenMetrics' ``# EOF``). A gzipped response is the cached
gzip member of the body followed by a gzip member of the tail; gzip readers (Go's, which Prometheus
uses, Python's, curl's) read concatenated members as one stream (RFC 1952, 2.2).

Staleness. :meth:`CollectionLoop.health` fails (``/health`` answers 503) when no collection has
finished within ``stale_after`` seconds (default: three intervals, at least one interval more than
the collection budget). Past that bound a scrape no longer serves the old values: it answers with
the exporter's own series only (build info, the collection counters and timestamp, the age), so a
stopped collection shows as absent series rather than values served forever.

Series (in every snapshot): ``obsctl_exporter_collections_total``, ``..._collection_timestamp_seconds``
(Unix time the collection finished), ``..._collection_duration_seconds``, and per scrape the age gauge.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from obsctl import __version__
from obsctl.exporters import meta
from obsctl.exporters.exposition import TextRenderer, encoder_for

log = logging.getLogger("obsctl.exporter")

#: A collection older than this many intervals is stale (``/health`` 503, values no longer served).
STALE_INTERVALS = 3
#: gzip level of the cached bodies (see exporters/server.py: level 1 is 7x faster than 9, 12 % larger).
GZIP_LEVEL = 1
#: The two formats rendered eagerly after each collection: text 0.0.4 and Prometheus' default Accept.
EAGER_ACCEPTS = ("text/plain;version=0.0.4",
                 "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                 "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
_AGE = "obsctl_exporter_collection_age_seconds"
_AGE_HEAD = (f"# HELP {_AGE} Seconds since the collection whose values this response carries finished.\n"
             f"# TYPE {_AGE} gauge\n")
_EOF = b"# EOF\n"


@dataclass
class _Body:
    """One format's rendering of a snapshot: the body without OpenMetrics' ``# EOF``, and its gzip member."""

    plain: bytes
    gzipped: bytes
    openmetrics: bool


@dataclass
class Snapshot:
    """The families of one finished collection and their renderings (bodies added, never changed).

    Attributes:
        families: every family of the collection, the loop's own series included.
        number: 1 for the first collection.
        finished: ``time.monotonic()`` when it finished; ``finished_unix``: the same as Unix time.
        duration: seconds the collection took.
    """

    families: tuple[Metric, ...]
    number: int
    finished: float
    finished_unix: float
    duration: float
    bodies: dict[str, _Body] = field(default_factory=dict)  # content type -> body


class CollectionLoop:
    """Collects every ``interval`` seconds on a daemon thread; serves scrapes from the last snapshot.

    Args:
        collect: ``(budget_seconds) -> families`` (``Exporter.scrape``); must return within about
            the budget (the exporter's per-collector deadlines see to that).
        interval: seconds from the start of one collection to the start of the next (a collection
            that overruns is followed at once by the next).
        budget: seconds one collection may take (``--scrape.timeout``).
        stale_after: seconds without a finished collection after which it is stale (None:
            ``max(STALE_INTERVALS * interval, budget + interval)``).
        clock, wall: monotonic and Unix clocks (tests inject them).

    Attributes:
        collections: number of finished collections; ``renders``: bodies rendered (per format and
            snapshot; for tests and the benchmark).
    """

    def __init__(self, collect: Callable[[float], list[Metric]], interval: float, budget: float,
                 stale_after: float | None = None, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        if interval <= 0 or budget <= 0:
            raise ValueError("interval and budget must be positive")
        self.interval = interval
        self.budget = budget
        self.stale_after = stale_after if stale_after is not None else max(STALE_INTERVALS * interval,
                                                                          budget + interval)
        self._collect = collect
        self._clock = clock
        self._wall = wall
        self._snapshot: Snapshot | None = None
        self._first = threading.Event()
        self._stop = threading.Event()
        self._render_lock = threading.Lock()
        self._renderer = TextRenderer()  # only used under _render_lock (its caches are not thread-safe)
        self._thread: threading.Thread | None = None
        self._started = clock()
        self.collections = 0
        self.renders = 0

    # -- the loop ---------------------------------------------------------------------------------
    def start(self) -> CollectionLoop:
        """Start the collecting thread (the first collection begins at once)."""
        self._started = self._clock()
        self._thread = threading.Thread(target=self._run, name="collection", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the current collection (waits for it up to one budget; idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.budget + 1.0)
            self._thread = None

    def _run(self) -> None:
        next_start = self._clock()
        while not self._stop.is_set():
            try:
                self.collect_once()
            except Exception as exc:  # noqa: BLE001 - the loop must survive; staleness shows it
                log.error("collection failed: %s", exc, exc_info=exc)
            next_start = max(next_start + self.interval, self._clock())
            self._stop.wait(max(next_start - self._clock(), 0.0))

    def collect_once(self) -> Snapshot:
        """Run one collection, render the eager formats and make it the served snapshot."""
        t0 = self._clock()
        families = list(self._collect(self.budget))
        finished, finished_unix = self._clock(), self._wall()
        number = self.collections + 1
        families += meta.collection_meta(number, finished_unix, finished - t0)
        snap = Snapshot(tuple(families), number, finished, finished_unix, finished - t0)
        with self._render_lock:
            for accept in EAGER_ACCEPTS:
                encoder, content_type = encoder_for(accept, self._renderer)
                self._render(snap, encoder, content_type)
        self._snapshot = snap  # one reference swap: a scrape sees the old or the new snapshot whole
        self.collections = number
        self._first.set()
        return snap

    # -- serving ----------------------------------------------------------------------------------
    def health(self) -> tuple[bool, str]:
        """``(ok, message)``: ok while a collection finished within ``stale_after`` seconds (or, before
        the first one, while the exporter has been up for less than that)."""
        snap = self._snapshot
        now = self._clock()
        if snap is None:
            waited = now - self._started
            if waited <= self.stale_after:
                return True, "OK (first collection running)\n"
            return False, f"no collection has finished in {waited:.1f}s (stale after {self.stale_after:g}s)\n"
        age = now - snap.finished
        if age > self.stale_after:
            return False, (f"last collection finished {age:.1f}s ago (stale after {self.stale_after:g}s: "
                           f"{STALE_INTERVALS} intervals of {self.interval:g}s)\n")
        return True, "OK\n"

    def respond(self, accept: str, gzip_ok: bool, wait: float) -> tuple[str, bytes, bool]:
        """``(content_type, body, gzipped)`` for one scrape.

        Args:
            accept: the request's Accept header (content negotiation as prometheus_client's).
            gzip_ok: the client accepts gzip.
            wait: seconds to wait for the first collection when none has finished yet.
        """
        snap = self._snapshot
        if snap is None and self._first.wait(max(wait, 0.0)):
            snap = self._snapshot
        now = self._clock()
        if snap is None or now - snap.finished > self.stale_after:
            return self._meta_only(snap, accept, gzip_ok, now)
        encoder, content_type = encoder_for(accept, self._renderer)  # (its renderer is only run under the lock)
        body = snap.bodies.get(content_type)
        if body is None:
            with self._render_lock:  # concurrent scrapes of a new format: one renders, the others reuse it
                body = snap.bodies.get(content_type) or self._render(snap, encoder, content_type)
        tail = (_AGE_HEAD + f"{_AGE} {floatToGoString(max(now - snap.finished, 0.0))}\n").encode()
        if body.openmetrics:
            tail += _EOF
        if gzip_ok:
            return content_type, body.gzipped + gzip.compress(tail, GZIP_LEVEL), True
        return content_type, body.plain + tail, False

    def _render(self, snap: Snapshot, encoder: Callable[[list[Metric]], bytes], content_type: str) -> _Body:
        """Render (under ``_render_lock``) and cache ``snap``'s body in ``content_type``."""
        plain = encoder(list(snap.families))
        om = content_type.startswith("application/openmetrics-text")
        if om and plain.endswith(_EOF):
            plain = plain[: -len(_EOF)]
        body = snap.bodies[content_type] = _Body(plain, gzip.compress(plain, GZIP_LEVEL), om)
        self.renders += 1
        return body

    def _meta_only(self, snap: Snapshot | None, accept: str, gzip_ok: bool, now: float) -> tuple[str, bytes, bool]:
        """The exporter's own series only: no collection yet, or the last one is stale."""
        families = [meta.build_info(__version__)]
        if snap is None:
            families += meta.collection_meta(0, None, None)
        else:
            families += [f for f in snap.families if f.name.startswith("obsctl_exporter_collection")]
            families.append(meta.collection_age(now - snap.finished))
        encoder, content_type = encoder_for(accept, TextRenderer())  # a renderer of its own: no lock needed
        body = encoder(families)
        if gzip_ok:
            return content_type, gzip.compress(body, GZIP_LEVEL), True
        return content_type, body, False
