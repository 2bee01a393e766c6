"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``query_range``, ``series``).

Built on requests (:mod:`obsctl.httpconfig` for authentication, TLS, headers and proxy;
:func:`obsctl.httpfetch.bounded_get` for the transport). Each attempt has a wall-clock
deadline (``timeout_seconds``: connect + headers + whole body) and a body cap
(``body_size_limit``); connection errors, timeouts, 429 and 5xx answers are retried with
exponential backoff (tenacity) while the call's overall deadline (``deadline_seconds``)
allows, then reported as :class:`PrometheusUnavailable` (exit 3). So is every answer that
is not the documented JSON envelope (HTML, truncated, deeply nested or non-JSON bodies,
wrong types: "not a Prometheus API answer"), refused credentials (401/403) and a TLS
failure. A query Prometheus rejects (HTTP 400/422 with its error envelope: bad PromQL,
execution error) is the user's to fix: :class:`UsageError` with Prometheus' message.
Messages name the URL without userinfo and never hold a secret the session sent.

API reference: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import math
import re
import ssl
import time
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter, lt
from typing import Any, Literal

import msgspec
import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, stop_before_delay, wait_exponential

from obsctl.errors import ObsctlError, PrometheusUnavailable, UsageError, linked_errors
from obsctl.httpconfig import HTTPClientConfig, SecretFileError, auth_kind, check_files, redact_url, session_for
from obsctl.httpfetch import DEFAULT_MAX_BODY_BYTES, Answer, BodyTooLarge, DeadlineExceeded, bounded_get
from obsctl.promwarnings import PROMQL_ANNOTATION_PREFIXES, is_partial_warning  # noqa: F401  (re-exported: the client reads warnings with them)

#: Prometheus refuses a range query with more than 11,000 points per series
#: (``(end - start) / step > 11000``, web/api/v1/api.go); we stay at 11,000 points.
MAX_POINTS_PER_SERIES = 11_000

#: What the client sends to each backend (``spec.prometheus.backend``), from each one's documented API:
#: ``max_points`` per series of one range request (Prometheus and Mimir refuse more than 11,000;
#: VictoriaMetrics' ``-search.maxPointsPerTimeseries`` default is 30,000) and query parameters added to
#: every request (VictoriaMetrics ``nocache=1``: its range-query cache may return results computed
#: before late samples arrived through remote write; Thanos ``partial_response=false``: a store that
#: did not answer is an error, never a silently partial answer). Mimir's tenant goes in the
#: ``X-Scope-OrgID`` header (``spec.prometheus.tenant``).
BACKENDS: dict[str, dict[str, Any]] = {
    "prometheus": {"max_points": MAX_POINTS_PER_SERIES, "params": {}},
    "victoriametrics": {"max_points": 30_000, "params": {"nocache": "1"}},
    "thanos": {"max_points": MAX_POINTS_PER_SERIES, "params": {"partial_response": "false"}},
    "mimir": {"max_points": MAX_POINTS_PER_SERIES, "params": {}},
}

#: Most evaluation points one :meth:`PrometheusClient.query_range` call may ask for
#: (91 requests of 11,000 points; about 173 days at a 15 s step). A longer window is
#: refused (UsageError) instead of silently coarsening the step, because the step
#: changes the batch means and so the comparison with a baseline taken at the spec's step.
MAX_RANGE_POINTS = 1_000_000


#: Most bytes one ``[time,"value"]`` point of a range answer takes: a time with
#: milliseconds (15 bytes), the value as Prometheus writes it (``strconv.FormatFloat(v,
#: 'f', -1, 64)``: up to 327 bytes, for 5e-324), quotes, brackets and commas.
POINT_BYTES = 352
#: Bytes allowed per series besides its points (its labels) and for the envelope
#: (status, warnings, infos).
SERIES_OVERHEAD_BYTES = 1024 * 1024
_METRIC_OBJECT = re.compile(rb'"metric"\s*:\s*(\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})')


class _SeriesCounter:
    """Fed a matrix answer's chunks in order: true once they hold more than
    ``2 * max_series + 2`` ``"metric":`` keys. A quote inside a JSON string is escaped and a
    label value is followed by ``,`` or ``}``, so a series shows that text once, or twice
    with a label itself named ``metric``: past the bound, the first ``max_series + 1``
    series are complete in what was read, whatever their labels (:func:`series_in` names
    them). A chunk is searched with the previous chunk's last bytes, so a key cut between
    chunks is found once. An answer spaced as ``"metric" :`` is not counted: the cap stops it."""

    KEY = b'"metric":'

    def __init__(self, max_series: int) -> None:
        self.bound = 2 * max_series + 2
        self.seen = 0
        self.tail = b""

    def __call__(self, chunk: bytes) -> bool:
        window = self.tail + chunk
        self.seen += window.count(self.KEY)
        self.tail = window[-(len(self.KEY) - 1):]
        return self.seen > self.bound


class TooManySeries(UsageError):
    """A range query whose answer holds more series than the caller allows, found in the
    answer's first bytes (the rest is never read).

    Attributes:
        at_least: series seen in the bytes read (the answer holds at least this many).
        label_sets: the first (up to 3) of their label sets.
        read: bytes read before the read was stopped.
    """

    def __init__(self, message: str, at_least: int = 0, label_sets: list[dict[str, str]] | None = None, read: int = 0) -> None:
        super().__init__(message)
        self.at_least, self.label_sets, self.read = at_least, label_sets or [], read


def series_in(head: bytes, keep: int = 3) -> tuple[int, list[dict[str, str]]]:
    """The series a (possibly cut) matrix answer's first bytes hold: how many ``"metric"``
    objects are complete in ``head``, and the first ``keep`` of them as label sets."""
    found = _METRIC_OBJECT.findall(head)
    labels = []
    for raw in found[:keep]:
        try:
            labels.append({str(k): str(v) for k, v in json.loads(raw).items()})
        except (ValueError, AttributeError):
            break
    return len(found), labels


class _Retryable(Exception):
    """A failure worth retrying (connection error, timeout, 5xx); message says why."""


@dataclass
class RangeSeries:
    """One series of a range query: its labels and ``(unix seconds, value)`` samples in time order."""

    metric: dict[str, str]
    values: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class InstantSample:
    """One sample of an instant query: labels, unix seconds, value."""

    metric: dict[str, str]
    timestamp: float
    value: float


#: Most characters of a query quoted in a message about the server's answer to it.
QUOTED_QUERY_CHARS = 200

#: Most distinct warnings (and infos) one :class:`QueryResult` keeps.
MAX_NOTES = 100


@dataclass
class QueryResult:
    """What one client call gave: the series (or instant samples, or label sets) and the
    ``warnings`` and ``infos`` that Prometheus attached to any of its answers.

    Attributes:
        series: :class:`RangeSeries` for ``query_range``, :class:`InstantSample` for
            ``query``, label dicts for ``series``.
        warnings: the answers' ``warnings`` in order of arrival, duplicates removed,
            each cut to a printable line (:func:`printable`).
        infos: the answers' ``infos`` (Prometheus >= 2.50), the same way.

    Iterating, ``len()`` and indexing go to ``series``, so code that only needs the
    data reads it like a list.
    """

    series: list[Any] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when a warning says the data may be incomplete (:func:`is_partial_warning`)."""
        return any(is_partial_warning(w) for w in self.warnings)

    @property
    def partial_warnings(self) -> list[str]:
        """The warnings that make the answer partial."""
        return [w for w in self.warnings if is_partial_warning(w)]

    def add_notes(self, warnings: Any, infos: Any) -> None:
        """Append an answer's ``warnings`` / ``infos`` (lists of strings; anything else is ignored).

        At most :data:`MAX_NOTES` distinct notes of each kind are kept (a store that fails
        per block can send hundreds of thousands, and they are printed and stored); past
        that, a warning is kept only when it is the first that makes the answer partial,
        so :attr:`partial` is the same as with all of them.
        """
        for target, notes in ((self.warnings, warnings), (self.infos, infos)):
            if isinstance(notes, list):
                seen = set(target)  # a set: comparing each note with the list was quadratic
                for note in notes:
                    text = printable(str(note), 500)
                    if not text or text in seen:
                        continue
                    if len(target) >= MAX_NOTES and not (target is self.warnings and is_partial_warning(text) and not self.partial):
                        continue
                    seen.add(text)
                    target.append(text)

    def __iter__(self):
        return iter(self.series)

    def __len__(self) -> int:
        return len(self.series)

    def __getitem__(self, index):
        return self.series[index]


def plan_chunks(start: float, end: float, step: float, max_points: int = MAX_POINTS_PER_SERIES) -> list[tuple[float, float]]:
    """Cut ``[start, end]`` at ``step`` into sub-ranges of at most ``max_points`` evaluation points.

    Evaluation instants are ``start + i*step`` (as Prometheus evaluates them); chunk ``j``
    starts at ``start + j*max_points*step``, so no instant is queried twice or skipped.

    Returns:
        ``[(chunk_start, chunk_end), ...]`` in unix seconds; empty when ``end < start``.
    """
    if not (math.isfinite(step) and step > 0):
        raise UsageError(f"query step must be positive, got {step}")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise UsageError(f"query window [{start}, {end}] is not finite")
    if end < start:
        return []
    total = int(math.floor((end - start) / step + 1e-9)) + 1
    if total > MAX_RANGE_POINTS:
        raise UsageError(f"query window of {total:,} points at a {step:g}s step is longer than the maximum of {MAX_RANGE_POINTS:,} points; "
                         "use a shorter window")
    chunks = []
    for first in range(0, total, max_points):
        last = min(first + max_points, total) - 1
        chunks.append((start + first * step, start + last * step))
    return chunks


def spec_located(spec: Any, exc: SecretFileError) -> SecretFileError:
    """``exc`` with ``<spec file>:<line>: `` in front, the line of the option it names
    (``exc.field``, e.g. ``prometheus.basic_auth.password_file``) in the spec."""
    path = getattr(spec, "path", None)
    if path is None:
        return exc
    keys: list[object] = []
    for part in exc.field.split("."):
        name, _, index = part.partition("[")
        keys.append(name)
        if index.rstrip("]").isdigit():
            keys.append(int(index.rstrip("]")))
    line = spec.line_of(*keys) if keys and hasattr(spec, "line_of") else None
    return SecretFileError(f"{path}:{line}: {exc}" if line else f"{path}: {exc}", exc.field)


def _seconds(value: float | dt.datetime) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value)


class _Malformed(Exception):
    """The answer is JSON with status success but not in the documented shape; message says what."""


def _float(text: Any, what: str) -> float:
    # Prometheus sends values as strings: "1.5", "NaN", "+Inf", "-Inf"; timestamps as numbers.
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise _Malformed(f"{what} is {type(text).__name__}, expected a number")
    try:
        return float(text)
    except ValueError:
        raise _Malformed(f"{what} {printable(str(text))!r} is not a number") from None


def _no_native_histogram(item: Any, key: str, promql: str) -> None:
    # A native histogram sample is a valid answer, just not a number: the query's to fix.
    if isinstance(item, dict) and key in item:
        raise UsageError(f"query {promql!r} returns native histogram samples, not numbers; ask for a number, "
                         "e.g. histogram_quantile(0.95, sum(rate(<metric>[5m]))) or histogram_count(rate(<metric>[5m]))")


def _as(kind: type, value: Any, what: str) -> Any:
    if value is None:
        raise _Malformed(f"{what} missing")
    if not isinstance(value, kind):
        raise _Malformed(f"{what} is {type(value).__name__}, expected {'an object' if kind is dict else 'a list'}")
    return value


def _labels(item: Any, what: str) -> dict[str, str]:
    metric = _as(dict, _as(dict, item, what).get("metric"), f"{what}.metric")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        raise _Malformed(f"{what}.metric has a non-string label")
    return metric


def _pair(value: Any, what: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise _Malformed(f"{what} is not a [time, value] pair")
    t = _float(value[0], f"{what} time")
    if not math.isfinite(t):  # values may be NaN/Inf, times never are
        raise _Malformed(f"{what} time is {t}, not a Unix time")
    return t, _float(value[1], f"{what} value")


class _Checked(list):
    """A range answer's ``values`` already decoded to ``(float, float)`` pairs by
    :func:`_fast_range_body` (same floats as :func:`_pair`, finite times checked)."""


def _pairs(values: list, what: str) -> list[tuple[float, float]]:
    if type(values) is _Checked:
        return values
    # Fast path for the documented shape ([number, "string"] pairs, finite times), in C-level
    # map/zip loops: about json.loads' own time for 43,200 pairs instead of ~10 us a pair. It
    # accepts a subset of what _pair accepts, with the same floats; anything else takes the
    # validating path, which names what is wrong.
    if not values:
        return []
    try:
        if set(map(type, values)) == {list} and set(map(len, values)) == {2}:
            times, texts = list(map(itemgetter(0), values)), list(map(itemgetter(1), values))
            if set(map(type, times)) <= {int, float} and set(map(type, texts)) == {str}:
                seconds = list(map(float, times))
                if math.isfinite(sum(seconds)):  # NaN/Inf in any time makes the sum non-finite
                    return list(zip(seconds, map(float, texts), strict=True))
    except ValueError:  # a value string that is not a number
        pass
    return [_pair(v, f"{what}[{i}]") for i, v in enumerate(values)]


def _in_time_order(pairs: list[tuple[float, float]], what: str) -> None:
    """Raise :class:`_Malformed` naming the first point not after the one before it
    (Prometheus answers each series' points in strictly increasing time)."""
    times = list(map(itemgetter(0), pairs))
    if all(map(lt, times, islice(times, 1, None))):
        return
    i = next(i for i in range(1, len(times)) if not times[i - 1] < times[i])
    how = "repeats the time of" if times[i] == times[i - 1] else "is before"
    raise _Malformed(f"{what}[{i}] at {times[i]!r} {how} {what}[{i - 1}] at {times[i - 1]!r}: points out of time order")


def _deduplicated(first: list[tuple[float, float]], again: list[tuple[float, float]], what: str) -> list[tuple[float, float]]:
    """The points of a series answered twice, each time once (in time order); two different
    values at one time raise :class:`_Malformed`."""
    points = dict(first)
    for t, v in again:
        if t in points and not (points[t] == v or (math.isnan(points[t]) and math.isnan(v))):
            raise _Malformed(f"{what} repeats the labels of an earlier series with another value at {t!r}")
        points[t] = v
    return sorted(points.items())


# --- the range answer's fast decoder ---------------------------------------------------
#
# A 30-day range answer is ~43,200 ``[time, "value"]`` pairs per series; json.loads builds
# a list and a string per pair and ``_pairs`` then converts them (~1.3 us a pair in all).
# msgspec (https://jcristharif.com/msgspec/) decodes the documented success shape straight
# into ``(float, float)`` tuples in C (~0.2 us a pair). ``strict=False`` lets it parse the
# value strings ("1.5", "NaN", "-Inf", "Inf") as floats; it accepts a subset of what the
# validating path accepts, with the same (correctly rounded) floats
# (tests/unit/test_snap_fast_paths.py compares them bit for bit). Anything it refuses or
# would read differently ("+Inf", "-0", a malformed or non-success answer, a native
# histogram, a non-finite time) is decoded again by
# json.loads and checked by the validating code, so every error message is the one that
# code gives.


class _FastSeries(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]] = []
    histograms: Any = msgspec.UNSET


class _FastMatrix(msgspec.Struct):
    resultType: Literal["matrix"]
    result: list[_FastSeries]


class _FastRange(msgspec.Struct):
    status: Literal["success"]
    data: _FastMatrix
    warnings: list[str] | None = None
    infos: list[str] | None = None


_RANGE_DECODER = msgspec.json.Decoder(_FastRange, strict=False)


def _fast_range_body(raw: bytes) -> dict | None:
    """The JSON object of a documented range answer (``values`` as :class:`_Checked`
    pairs), or None: then the caller decodes it with json.loads and validates it."""
    if b'"-0"' in raw:
        return None  # msgspec reads the string "-0" as 0.0, float() as -0.0
    try:
        answer = _RANGE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # nesting too deep: json.loads names it
        return None
    result = []
    for series in answer.data.result:
        if series.histograms is not msgspec.UNSET:
            return None  # the validating path names it (UsageError)
        # A time string "NaN" or "Inf" decodes (strict=False); the validating path refuses it.
        if series.values and not math.isfinite(sum(map(itemgetter(0), series.values))):
            return None
        result.append({"metric": series.metric, "values": _Checked(series.values)})
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    for key in ("warnings", "infos"):
        if getattr(answer, key) is not None:
            body[key] = getattr(answer, key)
    return body


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with control and other non-printable characters
    escaped (``\\x00``), so a server's bytes cannot garble the terminal."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return out.strip()


class PrometheusClient:
    """Client of one Prometheus server.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:9090`` (a trailing ``/`` is ignored).
        timeout_seconds: deadline of one request attempt in seconds: connect, headers and
            the whole body (``spec.prometheus.timeout_seconds``).
        attempts: tries per request for connection errors, timeouts, 429 and 5xx (at least 1).
        session: a session from :func:`obsctl.httpconfig.session_for` (one without
            credentials is made otherwise).
        deadline_seconds: deadline of one call with all its attempts and backoff; default
            ``attempts * timeout_seconds``. An attempt never runs past it.
        max_body_bytes: largest answer body (``spec.prometheus.body_size_limit``).
        config: the :class:`~obsctl.httpconfig.HTTPClientConfig` the session was made
            from, so that refused credentials can name the option to check.
        backend: a key of :data:`BACKENDS`: its points per range request and extra parameters.
    """

    def __init__(self, url: str, timeout_seconds: float = 10.0, attempts: int = 3, session: requests.Session | None = None, *,
                 deadline_seconds: float | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 config: HTTPClientConfig | None = None, backend: str = "prometheus"):
        self.url = url.rstrip("/")
        self.shown_url = redact_url(self.url)
        self.timeout_seconds = timeout_seconds
        self.attempts = max(1, attempts)
        self.deadline_seconds = deadline_seconds if deadline_seconds is not None else self.attempts * timeout_seconds
        self.max_body_bytes = max_body_bytes
        self.config = config or HTTPClientConfig()
        self.session = session or session_for(self.config)
        self.backend = backend
        self.max_points = BACKENDS[backend]["max_points"]
        self.extra_params: dict[str, str] = dict(BACKENDS[backend]["params"])

    @classmethod
    def from_spec(cls, spec: Any) -> PrometheusClient:
        """Client for ``spec.prometheus``: URL, deadlines, body cap, credentials, TLS, headers.

        Raises:
            SecretFileError: a configured file (credentials, password, CA, certificate,
                key, header file) is missing or unreadable (exit 2).
        """
        cfg = spec.prometheus
        base_dir = spec.path.parent if getattr(spec, "path", None) else None
        try:
            check_files(cfg, base_dir, "prometheus")
        except SecretFileError as exc:
            raise spec_located(spec, exc) from None
        session = session_for(cfg, base_dir, "prometheus")
        backend = getattr(cfg, "backend", "prometheus")
        if getattr(cfg, "tenant", None):
            session.headers["X-Scope-OrgID"] = cfg.tenant
        return cls(cfg.url, cfg.timeout_seconds, session=session, deadline_seconds=cfg.overall_deadline_seconds,
                   max_body_bytes=cfg.body_size_limit, config=cfg, backend=backend)

    # --- endpoints ---------------------------------------------------------------

    def query(self, promql: str, time: float | dt.datetime | None = None) -> QueryResult:
        """Evaluate ``promql`` at one instant (default: now).

        Returns:
            A :class:`QueryResult` whose ``series`` holds one :class:`InstantSample` per
            series of a vector result (a scalar result is one sample with empty labels),
            with the answer's warnings.

        Raises:
            PrometheusUnavailable: unreachable, timing out or answering 5xx after retries,
                or an answer that is not an instant vector or scalar (exit 3; the query is
                quoted up to :data:`QUOTED_QUERY_CHARS` characters).
            UsageError: Prometheus rejected the query (its message included).
        """
        params: dict[str, Any] = {"query": promql}
        if time is not None:
            params["time"] = f"{_seconds(time):.3f}"
        path = "/api/v1/query"
        out = QueryResult()
        data = self._get(path, params, promql, out)
        try:
            data = _as(dict, data, "data")
            kind = data.get("resultType")
            if kind == "vector":
                for n, r in enumerate(_as(list, data.get("result"), "data.result")):
                    _no_native_histogram(r, "histogram", promql)
                    t, v = _pair(r.get("value") if isinstance(r, dict) else None, f"data.result[{n}].value")
                    out.series.append(InstantSample(_labels(r, f"data.result[{n}]"), t, v))
                return out
            if kind == "scalar":
                t, v = _pair(data.get("result"), "data.result")
                out.series.append(InstantSample({}, t, v))
                return out
            if kind not in ("matrix", "string"):
                raise _Malformed(f"data.resultType {printable(str(kind))!r} is not vector, scalar, matrix or string")
        except _Malformed as exc:
            raise self._unexpected(path, exc) from None
        # obsctl's instant queries are its own and always give a vector: a matrix or string
        # is the server's (or a gateway's) doing, not the spec's. The query is cut: some are long.
        shown = printable(promql, QUOTED_QUERY_CHARS) + ("..." if len(promql) > QUOTED_QUERY_CHARS else "")
        raise PrometheusUnavailable(self._scrub(
            f"cannot use Prometheus at {self.shown_url}: {path} answered a {kind} to the instant query '{shown}', expected a vector or scalar"))

    def query_range(self, promql: str, start: float | dt.datetime, end: float | dt.datetime, step_seconds: float,
                    max_series: int | None = None) -> QueryResult:
        """Evaluate ``promql`` at ``start, start+step, ... <= end`` (unix seconds or datetimes).

        Requests are chunked (:func:`plan_chunks`) so none exceeds Prometheus' 11,000
        points per series; the chunks' series are merged by label set. A series answered
        twice in one chunk keeps one copy of each point; points out of time order, two
        values at one time, or more points than the step grid holds (one more allowed for a
        backend that aligns the window to the step) are the server's fault.

        ``max_series``: the most series the query may return. Each chunk's answer is then
        read only up to what that many series of the chunk's points can take
        (:data:`POINT_BYTES` a point, :data:`SERIES_OVERHEAD_BYTES` a series; never above
        ``max_body_bytes``), so a query that forgot its ``sum()`` costs that much memory,
        not the whole matrix, and raises :class:`TooManySeries`.

        Returns:
            A :class:`QueryResult` whose ``series`` are :class:`RangeSeries`, each with
            samples in time order (NaN/Inf values are kept), and the warnings of every chunk.

        Raises:
            PrometheusUnavailable, UsageError: as :meth:`query`.
        """
        merged: dict[tuple[tuple[str, str], ...], RangeSeries] = {}
        out = QueryResult()
        path = "/api/v1/query_range"
        for chunk_start, chunk_end in plan_chunks(_seconds(start), _seconds(end), step_seconds, self.max_points):
            params = {"query": promql, "start": f"{chunk_start:.3f}", "end": f"{chunk_end:.3f}", "step": f"{step_seconds:g}"}
            cap = None
            if max_series is not None:
                points = int(math.floor((chunk_end - chunk_start) / step_seconds + 1e-9)) + 2
                cap = min(self.max_body_bytes, max_series * (points * POINT_BYTES + SERIES_OVERHEAD_BYTES))
            data = self._get(path, params, promql, out, fast=_fast_range_body, cap=cap, max_series=max_series)
            # Points the window holds at the step; one more where a backend aligns the window to
            # multiples of the step (VictoriaMetrics rounds start down and end up).
            grid = int(math.floor((chunk_end - chunk_start) / step_seconds + 1e-9)) + 2
            chunk: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
            try:
                data = _as(dict, data, "data")
                # A range query always answers a matrix (scalars too), so anything else is not Prometheus.
                if data.get("resultType") != "matrix":
                    raise _Malformed(f"data.resultType is {printable(str(data.get('resultType')))!r}, expected 'matrix'")
                for n, item in enumerate(_as(list, data.get("result"), "data.result")):
                    metric = _labels(item, f"data.result[{n}]")
                    _no_native_histogram(item, "histograms", promql)
                    values = _as(list, item.get("values", []), f"data.result[{n}].values")
                    pairs = _pairs(values, f"data.result[{n}].values")
                    _in_time_order(pairs, f"data.result[{n}].values")
                    key = tuple(sorted(metric.items()))
                    if key in chunk:  # the same series twice: one copy of each point
                        pairs = _deduplicated(chunk[key], pairs, f"data.result[{n}]")
                    if len(pairs) > grid:
                        raise _Malformed(f"data.result[{n}] has {len(pairs):,} points, more than the step grid holds "
                                         f"({grid - 1:,} from {params['start']} to {params['end']} every {params['step']}s)")
                    chunk[key] = pairs
                    merged.setdefault(key, RangeSeries(dict(metric)))
            except _Malformed as exc:
                raise self._unexpected(path, exc) from None
            for key, pairs in chunk.items():
                merged[key].values.extend(pairs)
        out.series = list(merged.values())
        return out

    def series(self, matchers: list[str], start: float | dt.datetime, end: float | dt.datetime) -> QueryResult:
        """Label sets of the series matching any of ``matchers`` (series selectors) in ``[start, end]``.

        Returns:
            A :class:`QueryResult` whose ``series`` are label dicts, with the answer's warnings.

        Raises:
            PrometheusUnavailable, UsageError: as :meth:`query`.
        """
        params = {"match[]": matchers, "start": f"{_seconds(start):.3f}", "end": f"{_seconds(end):.3f}"}
        path = "/api/v1/series"
        out = QueryResult()
        data = self._get(path, params, " or ".join(matchers), out)
        try:
            out.series = [_labels({"metric": labels}, f"data[{n}]") for n, labels in enumerate(_as(list, data, "data"))]
            return out
        except _Malformed as exc:
            raise self._unexpected(path, exc) from None

    def _unexpected(self, path: str, exc: Exception) -> PrometheusUnavailable:
        return PrometheusUnavailable(self._scrub(f"cannot use Prometheus at {self.shown_url}: not a Prometheus API answer from {path}: {exc}"))

    def _scrub(self, text: str) -> str:
        scrub = getattr(self.session, "scrub", None)
        return scrub(text) if scrub else text

    # --- transport ---------------------------------------------------------------

    def _get(self, path: str, params: dict[str, Any], promql: str, into: QueryResult, fast: Any = None,
             cap: int | None = None, max_series: int | None = None) -> Any:
        """The ``data`` of one successful answer; its warnings and infos go to ``into``.

        Attempts run while ``attempts`` and ``deadline_seconds`` allow; each attempt gets
        ``min(timeout_seconds, time left)``. ``fast``: a decoder tried before json.loads
        on HTTP 200 answers (:func:`_fast_range_body`; None: the answer is not its shape).
        ``cap``: the most body bytes read (default ``max_body_bytes``); ``max_series``: an
        answer cut at ``cap`` whose first bytes hold more series raises :class:`TooManySeries`.
        """
        params = {**params, **self.extra_params}  # the backend's own parameters (BACKENDS)
        started = time.monotonic()
        tries = 0

        def once() -> Any:
            nonlocal tries
            tries += 1
            left = self.deadline_seconds - (time.monotonic() - started)
            return self._get_once(path, params, promql, max(0.001, min(self.timeout_seconds, left)), fast, cap, max_series)

        caller = retry(
            stop=stop_after_attempt(self.attempts) | stop_before_delay(self.deadline_seconds),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )(once)
        try:
            body = caller()
        except _Retryable as exc:
            took = time.monotonic() - started
            raise PrometheusUnavailable(self._scrub(
                f"cannot reach Prometheus at {self.shown_url}: {exc} (after {tries} attempt{'s' if tries != 1 else ''} in {took:.1f}s"
                f"{'' if tries >= self.attempts else f'; deadline {self.deadline_seconds:g}s'})"
            )) from None
        except TooManySeries:
            raise  # scrubbed where it was made
        except ObsctlError as exc:
            raise type(exc)(self._scrub(str(exc))) from None
        for key in ("warnings", "infos"):
            # Prometheus, Thanos and Mimir send a list of strings; anything else is not their answer.
            notes = body.get(key)
            bad = notes is not None and (not isinstance(notes, list) or not all(isinstance(n, str) for n in notes))
            if bad:
                what = f"{key} is {type(notes).__name__}" if not isinstance(notes, list) else \
                    f"{key}[{next(i for i, n in enumerate(notes) if not isinstance(n, str))}] is not a string"
                raise self._unexpected(path, _Malformed(f"{what}, expected a list of strings"))
        into.add_notes(*(
            [self._scrub(str(n)) for n in notes] if isinstance(notes, list) else notes
            for notes in (body.get("warnings"), body.get("infos"))
        ))
        return body.get("data")

    def _get_once(self, path: str, params: dict[str, Any], promql: str, timeout: float, fast: Any = None,
                  cap: int | None = None, max_series: int | None = None) -> dict:
        """One attempt: the answer's JSON envelope (status success), or an error."""
        where = f"cannot use Prometheus at {self.shown_url}"
        limit = self.max_body_bytes if cap is None else cap
        try:
            # With max_series, the read stops as soon as its first bytes hold too many series.
            answer = bounded_get(self.session, self.url + path, params=params, timeout_seconds=timeout, max_body_bytes=limit,
                                 read_head=max_series is not None, enough=_SeriesCounter(max_series) if max_series is not None else None)
        except DeadlineExceeded:
            # An attempt cut short by the overall deadline counts as timed out as well.
            raise _Retryable(f"no complete answer within {self.timeout_seconds:g}s") from None
        except BodyTooLarge as exc:
            count, label_sets = series_in(exc.head) if max_series is not None else (0, [])
            if count > (max_series or 0):
                labels = ", ".join(printable(self._scrub(str(ls)), 100) for ls in label_sets)
                raise TooManySeries(
                    f"the query returns at least {count} series ({labels}, ...; counted in the first {_size(len(exc.head))} of "
                    f"its answer, where the read stopped), more than {max_series}", count, label_sets, len(exc.head)) from None
            if limit < self.max_body_bytes and not exc.head.lstrip()[:1] == b"{":
                kind = printable(self._scrub(exc.content_type) or "no Content-Type", 60)
                raise PrometheusUnavailable(
                    f"{where}: not a Prometheus API answer from {path}: not JSON ({kind}, over {len(exc.head):,} bytes: "
                    f"the read stopped there){_excerpt(exc.head, kind, self._scrub)}") from None
            if limit < self.max_body_bytes:
                raise PrometheusUnavailable(
                    f"{where}: the answer from {path} is larger than {max_series} series of its points can be "
                    f"({_size(limit)}: {POINT_BYTES} bytes a point)") from None
            raise PrometheusUnavailable(
                f"{where}: the answer from {path} is larger than the {_size(self.max_body_bytes)} limit "
                "(prometheus.body_size_limit; or ask for a shorter window or fewer series)"
            ) from None
        except requests.exceptions.SSLError as exc:
            reason = _tls_reason(exc)
            # A server that requires a client certificate either closes the handshake (EOF)
            # or, under TLS 1.3 when its alert arrives first, says "certificate required".
            refused = "eof" in reason.lower() or "certificate required" in reason.lower()
            if refused and self.config.tls_config.cert_file is None:
                reason = "the server closed the connection during the TLS handshake (does it require a client certificate? tls_config.cert_file and key_file)"
            raise PrometheusUnavailable(
                f"{where}: TLS failed: {reason} (check prometheus.tls_config: ca_file, server_name, cert_file/key_file)"
            ) from None
        except requests.exceptions.InvalidHeader:
            raise UsageError(f"{where}: a configured header or credential is not a valid HTTP header value") from None
        except requests.RequestException as exc:
            raise _Retryable(_short(exc)) from None
        status = answer.status
        body = fast(answer.body) if fast is not None and status == 200 else None
        problem = ""
        if body is None:
            body, problem = _envelope(answer, self._scrub)
        if status in (401, 403):
            raise PrometheusUnavailable(f"{where}: HTTP {status} from {path}: {self._refused(status)}")
        if status >= 500 or status == 429:
            raise _Retryable(f"HTTP {status} from {path}: {_error_text(body, self._scrub) or problem or 'no error message'}")
        if 300 <= status < 400:
            location = printable(self._scrub(redact_url(answer.headers.get("Location", ""))) or "(no Location header)")
            raise PrometheusUnavailable(
                f"{where}: HTTP {status} from {path} redirects to {location}; "
                "obsctl does not follow redirects: set prometheus.url to the Prometheus server itself"
            )
        if status in (400, 422) and _error_text(body, self._scrub):
            raise UsageError(f"Prometheus rejected the query {promql!r}: {_error_text(body, self._scrub)}")
        if status != 200:
            raise PrometheusUnavailable(f"{where}: HTTP {status} from {path}: {_error_text(body, self._scrub) or problem}")
        if body is None:
            raise PrometheusUnavailable(f"{where}: not a Prometheus API answer from {path}: {problem}")
        if body.get("status") != "success":
            detail = _error_text(body, self._scrub) or f"status is {printable(str(body.get('status')), 40)!r}, expected 'success'"
            raise PrometheusUnavailable(f"{where}: not a Prometheus API answer from {path}: HTTP 200 {detail}")
        return body

    def _refused(self, status: int) -> str:
        kind = auth_kind(self.config)
        if kind == "none":
            has_cert = self.config.tls_config.cert_file is not None
            return ("the server refused the client certificate (prometheus.tls_config)" if has_cert else
                    "the server asks for credentials and none are configured (set prometheus.authorization or prometheus.basic_auth)")
        verb = "refused" if status == 401 else "refused for this request (forbidden)"
        return f"the credentials were {verb}: check prometheus.{kind}"


def _error_text(body: dict | None, scrub: Any = str) -> str:
    """Prometheus' ``error`` of an error envelope (``{"status":"error","errorType":...,"error":...}``),
    secrets scrubbed before it is cut to a line (a cut secret would not be recognised)."""
    if body is None or body.get("status") != "error" or not isinstance(body.get("error"), str):
        return ""
    return printable(scrub(body["error"]))


def _envelope(answer: Answer, scrub: Any = str) -> tuple[dict | None, str]:
    """``(the JSON object, "")`` or ``(None, why it is not a Prometheus API answer)``."""
    raw = answer.body
    # Scrubbed before the cut: a proxy may echo request headers anywhere, and a cut secret is not recognised.
    kind = printable(scrub(answer.headers.get("Content-Type", "")) or "no Content-Type", 60)
    size = f"{len(raw):,} bytes"
    if not raw:
        return None, f"empty body ({kind})"
    try:
        body = json.loads(raw)
    except RecursionError:
        return None, f"JSON nested too deeply ({kind}, {size})"
    except json.JSONDecodeError as exc:
        # A cut answer fails at its very end, or inside a string that never closes.
        at_end = exc.pos >= len(exc.doc.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        truncated = at_end and raw.lstrip()[:1] in (b"{", b"[")
        why = "truncated JSON" if truncated else "not JSON"
        return None, f"{why} ({kind}, {size}){_excerpt(raw, kind, scrub)}"
    except ValueError:  # not UTF-8
        return None, f"not JSON ({kind}, {size}){_excerpt(raw, kind, scrub)}"
    if not isinstance(body, dict):
        return None, f"JSON {type(body).__name__} instead of an object ({kind}, {size})"
    return body, ""


def _excerpt(raw: bytes, kind: str, scrub: Any = str) -> str:
    head = scrub(raw[:4096].decode("utf-8", errors="backslashreplace"))
    title = re.search(r"<title[^>]*>(.*?)</title", head, re.I | re.S) if "html" in kind.lower() or "<html" in head.lower() else None
    if title:
        return f": an HTML page titled '{printable(' '.join(title.group(1).split()), 80)}'"
    return f": starts '{printable(head.strip(), 60)}'"


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n:,} bytes"


def _tls_reason(exc: BaseException) -> str:
    """The innermost ssl error's own words: ``certificate verify failed: <why>`` or its reason code."""
    for err in linked_errors(exc):
        if isinstance(err, ssl.SSLCertVerificationError):
            return printable(f"certificate verify failed: {err.verify_message}".rstrip("."))
        if isinstance(err, ssl.SSLError) and "PEM lib" in str(err):
            return "cannot load the client certificate and key (cert_file, key_file: not PEM, or not a pair)"
        if isinstance(err, ssl.SSLError) and getattr(err, "reason", None):
            reason = str(err.reason).replace("_", " ").lower()
            return "ca_file holds no PEM certificate" if reason == "no certificate or crl found" else printable(reason)
    return _short(exc) if isinstance(exc, requests.RequestException) else printable(str(exc))


def _transport_reason(exc: BaseException) -> str | None:
    """Words for the transport failures whose nested reprs read badly (a reset or cut
    answer, a peer that does not speak HTTP); None for the others."""
    for err in linked_errors(exc, breadth_first=True):
        if isinstance(err, ConnectionResetError):
            return "connection reset by the server" + (" in the middle of the answer" if isinstance(exc, requests.exceptions.ChunkedEncodingError) else "")
        if isinstance(err, http.client.IncompleteRead):
            return f"the answer was cut off after {len(err.partial):,} bytes of its body"
        if isinstance(err, http.client.BadStatusLine):
            line = err.line if isinstance(err.line, str) else repr(err.line)
            return f"not an HTTP answer (it began {printable(line.strip(), 40)!r})" if line.strip() else "the server closed the connection without answering"
        if isinstance(err, http.client.LineTooLong) or (type(err) is http.client.HTTPException and "headers" in str(err)):
            return f"malformed HTTP headers ({printable(str(err), 80)})"
    return None


def _short(exc: requests.RequestException) -> str:
    known = _transport_reason(exc)
    if known:
        return known
    # requests nests urllib3's reason; the innermost message is the readable part.
    reason = exc.args[0] if exc.args else exc
    inner = getattr(reason, "reason", None)
    text = str(inner or reason)
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text or "Temporary failure in name resolution" in text:
        return "host name not found"
    text = re.sub(r"^\w*(Error|Exception)\(", "", text)
    text = re.sub(r"^[^:]*Pool\(host=[^)]*\): ", "", text)
    return printable(text.split(": ", 1)[-1] if ": " in text else text)
