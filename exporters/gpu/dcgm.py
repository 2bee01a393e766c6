"""GPU metrics from a running NVIDIA dcgm-exporter, mapped onto the canonical catalogue.

:class:`DcgmSource` reads dcgm-exporter's ``/metrics`` with requests (bounded by a timeout
below Prometheus' scrape timeout and a body-size cap, read as a stream), parses it with
``prometheus_client.parser.text_string_to_metric_families`` and maps the ``DCGM_FI_*`` fields
through :mod:`obsctl.exporters.gpu.dcgm_fields`.

Parser notes (measured against ../shared/fixtures/dcgm/datadog-t4.txt and fault bodies):

* It renames every sample of a counter family to ``<name>_total`` (DCGM counters such as
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` have no suffix), and strips a lowercase
  ``_total`` from counter family names. We therefore key on the *family* name, upper-cased,
  and retry ``<name>_TOTAL`` for counters (:func:`dcgm_fields.lookup`).
* ``# HELP`` lines without text, ``# NOTE`` comments, a missing final newline and a family
  repeated in two blocks are all accepted; repeated families are merged here.
* One malformed line makes the generator raise part-way (``ValueError``, no line number).
  A partly parsed dump is not trustworthy, so the whole response counts as bad
  (``dcgm_bad_response``) and nothing from it is served.
* Series without a ``UUID``/``uuid`` label (the fixture's 14 unlabelled dummy series) cannot
  be tied to a GPU and are skipped.

Every scrape either returns values read from dcgm-exporter in that scrape or raises
:class:`GpuSourceError`; nothing from an earlier response is ever served as current.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import requests
import urllib3
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from obsctl.exporters.gpu import dcgm_fields as F
from obsctl.exporters.gpu.catalogue import CLOCK_EVENT_REASONS, FamilySet
from obsctl.exporters.gpu.errors import (
    REASON_DCGM_BAD_RESPONSE,
    REASON_DCGM_TIMEOUT,
    REASON_DCGM_UNREACHABLE,
    REASON_DEADLINE_EXCEEDED,
    GpuSourceError,
)
from obsctl.exporters.gpu.inventory import GpuRef, PodBinding
from obsctl.httpconfig import redact_url

log = logging.getLogger(__name__)

DEFAULT_URL = "http://127.0.0.1:9400/metrics"  # dcgm-exporter's default listen address
DEFAULT_TIMEOUT_SECONDS = 5.0  # below Prometheus' default 10 s scrape timeout
DEFAULT_MAX_BYTES = 16 * 2**20  # a 8-GPU dump with profiling fields is ~100-300 KiB
_CHUNK = 64 * 1024


# --- fetching ---------------------------------------------------------------------------


def fetch_exposition(url: str, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES,
                     session: requests.Session | None = None, buffer: bytearray | None = None) -> str:
    """GET ``url`` and return the body as text, within ``timeout`` seconds and ``max_bytes``.

    The body is streamed (at most 64 KiB per read) into ``buffer`` (a reusable bytearray that
    grows up to ``max_bytes``; a new one when None); the read stops as soon as it passes
    ``max_bytes`` (decoded size, so a gzip bomb is cut off too) or the time budget, which
    bounds the header wait, every read, and the total (see ``_read_body``). The response is
    closed on every path; what was read stays only in ``buffer`` (:class:`DcgmSource` drops a
    buffer that grew large).

    Redirects are not followed (a 3xx is ``dcgm_bad_response`` naming the status): the
    session's secret headers and the data published as GPU series must not come from
    whatever host a redirect names. Messages pass through the session's ``scrub`` (a
    :class:`obsctl.httpconfig.ConfiguredSession` knows the secrets it sent) before they are
    cut to one line, so no part of a secret is shown.

    Raises:
        GpuSourceError: ``dcgm_unreachable`` (connection refused, DNS, bad URL),
            ``dcgm_timeout`` (no answer or body within ``timeout``), ``dcgm_bad_response``
            (HTTP status not 200, a redirect, HTML, body over the cap, not UTF-8).
    """
    sess = session or requests
    scrub = getattr(sess, "scrub", str)
    t_end = time.monotonic() + timeout
    shown = redact_url(url)  # messages name the URL without userinfo or query
    try:
        resp = sess.get(url, timeout=(min(timeout, 3.0), timeout), stream=True, allow_redirects=False,
                        headers={"Accept": "text/plain;version=0.0.4"})
    except requests.Timeout as exc:
        raise GpuSourceError(REASON_DCGM_TIMEOUT, f"{shown}: no answer within {timeout:g}s") from exc
    except requests.RequestException as exc:
        raise GpuSourceError(REASON_DCGM_UNREACHABLE, f"{shown}: {_short(exc, scrub)}") from exc
    with resp:
        if 300 <= resp.status_code < 400:
            raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: HTTP {resp.status_code} redirect, not followed: "
                                 "set --dcgm.url (or dcgm.url) to dcgm-exporter's own address")
        if resp.status_code != 200:
            refused = " (credentials refused: check dcgm.basic_auth / dcgm.authorization in --config.file)" \
                if resp.status_code in (401, 403) else ""
            raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: HTTP {resp.status_code}{refused}")
        ctype = resp.headers.get("Content-Type", "")
        if "html" in ctype.lower():
            raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: Content-Type {scrub(ctype)[:80]!r}, expected Prometheus text format")
        length = resp.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: body of {int(length)} bytes exceeds the {max_bytes}-byte cap")
        buf = bytearray() if buffer is None else buffer
        try:
            size = _read_body(resp, shown, timeout, t_end, max_bytes, buf)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            timed_out = isinstance(exc, (TimeoutError, urllib3.exceptions.TimeoutError)) or "timed out" in str(exc).lower()
            reason = REASON_DCGM_TIMEOUT if timed_out else REASON_DCGM_UNREACHABLE
            raise GpuSourceError(reason, f"{shown}: {_short(exc, scrub)}") from exc
    try:
        with memoryview(buf) as view, view[:size] as body:
            return str(body, "utf-8")
    except UnicodeDecodeError as exc:
        raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: body is not UTF-8 text (byte offset {exc.start})") from None


def _read_body(resp: requests.Response, shown: str, timeout: float, t_end: float, max_bytes: int,
               buf: bytearray) -> int:
    """Read the body into ``buf`` within ``t_end`` and ``max_bytes``; returns its size in bytes.

    ``iter_content`` would block until a whole chunk arrives, so a server trickling one byte
    at a time could hold it far past the deadline (measured: 40 s for 200 bytes at 5 B/s).
    Instead each ``read1`` returns whatever has arrived, and the socket timeout is set to
    the time left before every read, so the deadline holds to within one read.
    """
    raw = resp.raw
    sock = getattr(getattr(raw, "_connection", None), "sock", None)  # urllib3 2.x; best effort
    total = 0
    while True:
        remaining = t_end - time.monotonic()
        if remaining <= 0:
            raise GpuSourceError(REASON_DCGM_TIMEOUT, f"{shown}: body not complete within {timeout:g}s")
        if sock is not None:
            sock.settimeout(remaining)
        chunk = raw.read1(_CHUNK, decode_content=True) if hasattr(raw, "read1") else raw.read(_CHUNK, decode_content=True)
        if not chunk:
            return total
        end = total + len(chunk)
        if end > max_bytes:
            raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"{shown}: body exceeds the {max_bytes}-byte cap")
        if end > len(buf):  # grow geometrically, never past the cap
            buf.extend(bytes(min(max(end, 2 * len(buf), _CHUNK), max_bytes) - len(buf)))
        buf[total:end] = chunk
        total = end


_KEEP_BYTES = 2 * 2**20  # a buffer grown past this by one fetch is dropped after it (normal bodies: < 1 MiB)
try:
    _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim  # glibc
except (OSError, AttributeError):  # musl, macOS: no malloc_trim
    _malloc_trim = None


def release_heap() -> None:
    """Give freed heap pages back to the OS (glibc ``malloc_trim(0)``; a no-op elsewhere).

    Why: a body read up to the cap passes through urllib3 as many differently sized chunks; glibc
    keeps the freed pages, fragmented, so without this RSS crept up ~1 MiB per 1,000 over-cap
    fetches although Python's own allocations stayed flat (tracemalloc). Called only after a
    fetch that grew the buffer past ``_KEEP_BYTES``; it takes well under a millisecond.
    """
    if _malloc_trim is not None:
        _malloc_trim(0)


def _short(exc: BaseException, scrub: Callable[[str], str] = str) -> str:
    """The first line of ``exc``'s message, secrets scrubbed, cut to 200 characters."""
    text = scrub(str(exc)).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


# --- parsing and mapping -------------------------------------------------------------------


@dataclass
class _Gpu:
    gpu: str
    model: str = ""
    driver_version: str = ""
    pci_bus_id: str = ""
    mig: bool = False


@dataclass
class DcgmSnapshot:
    """One dcgm-exporter response, mapped: canonical values keyed by series identity.

    Attributes:
        gpus: uuid -> identity (index, model, driver, PCI bus id, MIG seen).
        values: (canonical name, extra labels, uuid, gpu_instance, mig_profile) -> value in
            base units. Device-scope fields have gpu_instance ``""``.
        memory_parts: (uuid, gpu_instance, mig_profile) -> {DCGM field: bytes}.
        clock_events: uuid -> reasons bitmask.
        xid: uuid -> code of the last XID error (0 = none).
        pods: unit -> pod bindings seen on its series.
        blanks: number of samples skipped as DCGM blank / not-supported sentinels.
        unlabelled: number of mapped samples skipped for lack of a UUID label.
    """

    gpus: dict[str, _Gpu] = field(default_factory=dict)
    values: dict[tuple, float] = field(default_factory=dict)
    memory_parts: dict[tuple[str, str, str], dict[str, float]] = field(default_factory=dict)
    clock_events: dict[str, int] = field(default_factory=dict)
    xid: dict[str, int] = field(default_factory=dict)
    pods: dict[GpuRef, list[PodBinding]] = field(default_factory=dict)
    blanks: int = 0
    unlabelled: int = 0


def parse_dcgm(text: str, scrub: Callable[[str], str] = str) -> DcgmSnapshot:
    """Parse a dcgm-exporter body into a :class:`DcgmSnapshot`.

    Device-scope fields repeated on every MIG instance of a GPU are kept once per GPU (the
    first seen; DCGM reports the same device value on each). Instance-scope fields keep one
    value per GPU instance; a whole-GPU value of an instance-scope field is dropped when the
    same GPU also reports per-instance values, so a sum over instances counts nothing twice.

    Args:
        text: the body. scrub: applied to the parser's message (which quotes the body)
            before it is cut to one line.

    Raises:
        GpuSourceError: ``dcgm_bad_response`` if the text is not Prometheus text format,
            looks like HTML, or holds no ``DCGM_FI_*`` series at all.
    """
    if text.lstrip()[:1] == "<":
        raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, "body looks like HTML/XML, not Prometheus text format")
    rows: dict[str, list] = {}
    saw_dcgm = False
    try:
        for fam in text_string_to_metric_families(text):
            saw_dcgm = saw_dcgm or fam.name.upper().startswith("DCGM_")
            hit = F.lookup(fam.name, fam.type)
            if hit is not None:
                rows.setdefault(hit[0], []).extend(fam.samples)  # merges repeated families
    except Exception as exc:  # the parser raises bare ValueError/IndexError/KeyError
        raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, f"not Prometheus text format: {_short(exc, scrub) or type(exc).__name__}") from None
    if not saw_dcgm:
        raise GpuSourceError(REASON_DCGM_BAD_RESPONSE, "no DCGM_* series in the response (is --dcgm.url pointing at dcgm-exporter?)")

    snap = DcgmSnapshot()
    instance_uuids: dict[str, set[str]] = {}  # canonical -> uuids with per-instance values
    for field_name, fmap in F.FIELDS.items():  # table order: preferred spellings first
        for sample in rows.get(field_name, ()):
            labels = sample.labels
            uuid = F.label(labels, "uuid")
            if not uuid:
                snap.unlabelled += 1
                continue
            gi = F.label(labels, "gpu_instance")
            profile = F.label(labels, "mig_profile") if gi else ""
            gpu = snap.gpus.get(uuid)
            if gpu is None:
                gpu = snap.gpus[uuid] = _Gpu(F.label(labels, "gpu"))
            gpu.model = gpu.model or F.label(labels, "model")
            gpu.driver_version = gpu.driver_version or F.label(labels, "driver_version")
            gpu.pci_bus_id = gpu.pci_bus_id or F.label(labels, "pci_bus_id")
            gpu.mig = gpu.mig or bool(gi)
            _record_pod(snap, GpuRef(gpu.gpu, uuid, gi, profile), labels)

            value = float(sample.value)
            if F.is_blank(value, fmap.counter):
                snap.blanks += 1
                continue
            if fmap.special == "xid":
                snap.xid.setdefault(uuid, int(value))
            elif fmap.special == "clock_events":
                snap.clock_events.setdefault(uuid, int(value))
            elif fmap.special == "memory_part":
                snap.memory_parts.setdefault((uuid, gi, profile), {}).setdefault(field_name, fmap.convert(value))
            else:
                if fmap.scope == F.DEVICE:
                    key = (fmap.canonical, fmap.extra, uuid, "", "")
                else:
                    key = (fmap.canonical, fmap.extra, uuid, gi, profile)
                    if gi:
                        instance_uuids.setdefault(fmap.canonical, set()).add(uuid)
                snap.values.setdefault(key, fmap.convert(value))
    # drop whole-GPU values of instance-scope fields where the GPU reports per instance
    for key in [k for k in snap.values if not k[3] and k[2] in instance_uuids.get(k[0], ())]:
        del snap.values[key]
    mig_uuids = {k[0] for k in snap.memory_parts if k[1]}
    for key in [k for k in snap.memory_parts if not k[1] and k[0] in mig_uuids]:
        del snap.memory_parts[key]
    return snap


def _record_pod(snap: DcgmSnapshot, unit: GpuRef, labels: dict[str, str]) -> None:
    pod = F.label(labels, "pod")
    if not pod:
        return
    binding = PodBinding(F.label(labels, "namespace"), pod, F.label(labels, "container"), tuple(sorted(labels.items())))
    bound = snap.pods.setdefault(unit, [])
    if all((b.namespace, b.pod, b.container) != (binding.namespace, binding.pod, binding.container) for b in bound):
        bound.append(binding)


def memory_total(parts: dict[str, float], used: float | None) -> float | None:
    """Total framebuffer in bytes: the total when reported (FB_CAPACITY_BYTES, else FB_TOTAL),
    else used + free (+ reserved) (each part under its current name, else its legacy one).

    Args:
        parts: DCGM field name -> bytes for the framebuffer fields present
            (:data:`dcgm_fields.MEMORY_PARTS`).
        used: FB_USED(_BYTES) in bytes, or None.

    Returns:
        Bytes, or None when neither form is available (the series is then absent).
    """
    by_part: dict[str, float] = {}
    for name, part in F.MEMORY_PARTS.items():  # current name first
        if name in parts:
            by_part.setdefault(part, parts[name])
    if "total" in by_part:
        return by_part["total"]
    if "free" in by_part and used is not None:
        return used + by_part["free"] + by_part.get("reserved", 0.0)
    return None


class XidTracker:
    """Turns DCGM's last-XID *code* field into a per-code change counter and last-seen time.

    ``DCGM_FI_DEV_XID_ERRORS`` holds the code of the most recent XID error (0 = none), not a
    count. Each time the code of a GPU changes to a non-zero value this counts one error of
    the new code and stamps the time. A non-zero code already present at the first
    observation counts once (stamped with that first scrape's time). The same code
    repeating back-to-back cannot be seen through this field, so the counter is a lower bound.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}
        self._counts: dict[tuple[str, int], int] = {}
        self._seen: dict[tuple[str, int], float] = {}

    def observe(self, uuid: str, code: int) -> None:
        """Record the current last-XID code of GPU ``uuid``."""
        with self._lock:
            previous = self._last.get(uuid)
            self._last[uuid] = code
            if code != 0 and code != previous:
                key = (uuid, code)
                self._counts[key] = self._counts.get(key, 0) + 1
                self._seen[key] = self._clock()

    def series(self, uuid: str) -> list[tuple[int, int, float]]:
        """``[(xid code, changes counted, last-seen Unix time)]`` of GPU ``uuid``, by code."""
        with self._lock:
            return sorted((code, n, self._seen[(u, code)]) for (u, code), n in self._counts.items() if u == uuid)


def snapshot_families(snap: DcgmSnapshot, xids: XidTracker) -> FamilySet:
    """Build the catalogue families of one snapshot (and feed its XID codes to ``xids``)."""
    out = FamilySet()
    for uuid, g in snap.gpus.items():
        base = {"gpu": g.gpu, "uuid": uuid}
        out.add("obsctl_gpu_info", {**base, "model": g.model, "driver_version": g.driver_version,
                                    "pci_bus_id": g.pci_bus_id, "mig_mode": "enabled" if g.mig else "disabled"}, 1)
        out.add("obsctl_gpu_up", base, 1)
    for (name, extra, uuid, gi, profile), value in snap.values.items():
        labels = {"gpu": snap.gpus[uuid].gpu, "uuid": uuid, **dict(extra)}
        if gi:
            labels.update(gpu_instance=gi, mig_profile=profile)
        out.add(name, labels, value)
    for (uuid, gi, profile), parts in snap.memory_parts.items():
        used = snap.values.get(("obsctl_gpu_memory_used_bytes", (), uuid, gi, profile))
        total = memory_total(parts, used)
        if total is not None:
            labels = {"gpu": snap.gpus[uuid].gpu, "uuid": uuid}
            if gi:
                labels.update(gpu_instance=gi, mig_profile=profile)
            out.add("obsctl_gpu_memory_total_bytes", labels, total)
    for uuid, mask in snap.clock_events.items():
        for bit, reason in enumerate(CLOCK_EVENT_REASONS):
            out.add("obsctl_gpu_clock_event_reason_active",
                    {"gpu": snap.gpus[uuid].gpu, "uuid": uuid, "reason": reason}, 1 if mask & (1 << bit) else 0)
    for uuid, code in snap.xid.items():
        xids.observe(uuid, code)
    for uuid in snap.gpus:
        for code, count, seen in xids.series(uuid):
            labels = {"gpu": snap.gpus[uuid].gpu, "uuid": uuid, "xid": str(code)}
            out.add("obsctl_gpu_xid_errors_total", labels, count)
            out.add("obsctl_gpu_xid_last_seen_timestamp_seconds", labels, seen)
    return out


# --- the source ------------------------------------------------------------------------------


class DcgmSource:
    """GPU source reading a dcgm-exporter ``/metrics`` endpoint (the exporter's ``dcgm`` source).

    Args:
        url: dcgm-exporter metrics URL, e.g. ``http://127.0.0.1:9400/metrics``.
        timeout: seconds allowed for one fetch (connect + body); capped by the scrape deadline.
        max_bytes: body-size cap in bytes (default 16 MiB).
        session: a requests.Session, e.g. :func:`obsctl.httpconfig.session_for` of the
            ``dcgm:`` block (TLS, auth, headers); default: a plain one (no environment proxies).
        clock: Unix-time clock for XID last-seen stamps.

    Attributes:
        name: ``"dcgm"``.
        pod_bindings: unit -> pods from the last successful collect (cleared on failure).
    """

    name = "dcgm"

    def __init__(self, url: str = DEFAULT_URL, timeout: float = DEFAULT_TIMEOUT_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, session: requests.Session | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.display_url = redact_url(url)  # for logs and errors: never userinfo
        self.timeout = timeout
        self.max_bytes = max_bytes
        if session is None:
            session = requests.Session()
            session.trust_env = False  # as Prometheus: no HTTP(S)_PROXY, ~/.netrc or REQUESTS_CA_BUNDLE
        self._session = session
        self._buffer = bytearray()  # the body of each fetch, reused while small (see collect)
        self._xids = XidTracker(clock)
        self.pod_bindings: dict[GpuRef, list[PodBinding]] = {}

    def collect(self, deadline: float) -> list[Metric]:
        """Fetch, parse and map one dcgm-exporter response.

        Args:
            deadline: ``time.monotonic()`` value by which to return.

        Returns:
            Catalogue families (absent series for fields DCGM does not report or blanks).

        Raises:
            GpuSourceError: ``deadline_exceeded``, ``dcgm_unreachable``, ``dcgm_timeout`` or
                ``dcgm_bad_response``; nothing from an earlier response is kept.
        """
        self.pod_bindings = {}
        budget = min(self.timeout, deadline - time.monotonic())
        if budget <= 0.05:
            raise GpuSourceError(REASON_DEADLINE_EXCEEDED, "no time left in the scrape for dcgm-exporter")
        try:
            text = fetch_exposition(self.url, budget, self.max_bytes, self._session, self._buffer)
        finally:
            if len(self._buffer) > _KEEP_BYTES:  # an over-cap or unusually large body: hold none of it
                self._buffer = bytearray()
                release_heap()
        snap = parse_dcgm(text, getattr(self._session, "scrub", str))  # a ConfiguredSession knows its secrets
        families = snapshot_families(snap, self._xids)
        self.pod_bindings = snap.pods
        if snap.blanks:
            log.debug("dcgm: skipped %d blank/not-supported values", snap.blanks)
        return families.metrics()

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()
