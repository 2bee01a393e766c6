"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``query_range``, ``series``).

Built on requests; connection errors, timeouts and 5xx answers are retried a bounded
number of times with exponential backoff (tenacity), then reported as
:class:`PrometheusUnavailable`. A query Prometheus rejects (HTTP 400/422: bad PromQL,
execution error) is the user's to fix: :class:`UsageError` with Prometheus' message.

API reference: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from obsctl.errors import PrometheusUnavailable, UsageError

#: Prometheus refuses a range query with more than 11,000 points per series
#: (``(end - start) / step > 11000``, web/api/v1/api.go); we stay at 11,000 points.
MAX_POINTS_PER_SERIES = 11_000

#: Most evaluation points one :meth:`PrometheusClient.query_range` call may ask for
#: (91 requests of 11,000 points; about 173 days at a 15 s step). A longer window is
#: refused (UsageError) instead of silently coarsening the step, because the step
#: changes the batch means and so the comparison with a baseline taken at the spec's step.
MAX_RANGE_POINTS = 1_000_000


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


#: Prefixes of the annotations PromQL itself attaches to an answer (Prometheus >= 2.50
#: splits them into ``warnings`` and ``infos``; older versions put both in ``warnings``).
#: They describe the query, not missing data, so they never make an answer partial.
PROMQL_ANNOTATION_PREFIXES = ("PromQL info:", "PromQL warning:")


def is_partial_warning(text: str) -> bool:
    """True when a Prometheus API warning says the answer may lack data.

    Every warning that is not one of PromQL's own annotations
    (:data:`PROMQL_ANNOTATION_PREFIXES`) counts: a failed remote-read endpoint
    (Prometheus), a partial response from a store (Thanos, ``partial_response``), a
    failed ingester or store-gateway (Mimir, Cortex). Unknown wording errs on the side of
    "partial", because a silently incomplete answer is the worse mistake.
    """
    return not text.strip().startswith(PROMQL_ANNOTATION_PREFIXES)


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
        """Append an answer's ``warnings`` / ``infos`` (lists of strings; anything else is ignored)."""
        for target, notes in ((self.warnings, warnings), (self.infos, infos)):
            if isinstance(notes, list):
                for note in notes:
                    text = printable(str(note), 500)
                    if text and text not in target:
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
        raise UsageError(f"query window of {total:,} points at a {step:g}s step is longer than the maximum of {MAX_RANGE_POINTS:,} points; use a shorter window")
    chunks = []
    for first in range(0, total, max_points):
        last = min(first + max_points, total) - 1
        chunks.append((start + first * step, start + last * step))
    return chunks


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
    return _float(value[0], f"{what} time"), _float(value[1], f"{what} value")


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with control and other non-printable characters
    escaped (``\\x00``), so a server's bytes cannot garble the terminal."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return out.strip()


class PrometheusClient:
    """Client of one Prometheus server.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:9090`` (a trailing ``/`` is ignored).
        timeout_seconds: per-request timeout in seconds (``spec.prometheus.timeout_seconds``).
        attempts: tries per request for connection errors, timeouts and 5xx (at least 1).
        session: a ``requests.Session`` to reuse (one is created otherwise).
    """

    def __init__(self, url: str, timeout_seconds: float = 10.0, attempts: int = 3, session: requests.Session | None = None):
        self.url = url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.attempts = max(1, attempts)
        self.session = session or requests.Session()

    @classmethod
    def from_spec(cls, spec: Any) -> "PrometheusClient":
        """Client for ``spec.prometheus`` (URL and timeout)."""
        return cls(spec.prometheus.url, spec.prometheus.timeout_seconds)

    # --- endpoints ---------------------------------------------------------------

    def query(self, promql: str, time: float | dt.datetime | None = None) -> QueryResult:
        """Evaluate ``promql`` at one instant (default: now).

        Returns:
            A :class:`QueryResult` whose ``series`` holds one :class:`InstantSample` per
            series of a vector result (a scalar result is one sample with empty labels),
            with the answer's warnings.

        Raises:
            PrometheusUnavailable: unreachable, timing out or answering 5xx after retries.
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
        raise UsageError(f"query {promql!r} returned a {kind}, expected an instant vector")

    def query_range(self, promql: str, start: float | dt.datetime, end: float | dt.datetime, step_seconds: float) -> QueryResult:
        """Evaluate ``promql`` at ``start, start+step, ... <= end`` (unix seconds or datetimes).

        Requests are chunked (:func:`plan_chunks`) so none exceeds Prometheus' 11,000
        points per series; the chunks' series are merged by label set.

        Returns:
            A :class:`QueryResult` whose ``series`` are :class:`RangeSeries`, each with
            samples in time order (NaN/Inf values are kept), and the warnings of every chunk.

        Raises:
            PrometheusUnavailable, UsageError: as :meth:`query`.
        """
        merged: dict[tuple[tuple[str, str], ...], RangeSeries] = {}
        out = QueryResult()
        path = "/api/v1/query_range"
        for chunk_start, chunk_end in plan_chunks(_seconds(start), _seconds(end), step_seconds):
            params = {"query": promql, "start": f"{chunk_start:.3f}", "end": f"{chunk_end:.3f}", "step": f"{step_seconds:g}"}
            data = self._get(path, params, promql, out)
            try:
                data = _as(dict, data, "data")
                # A range query always answers a matrix (scalars too), so anything else is not Prometheus.
                if data.get("resultType") != "matrix":
                    raise _Malformed(f"data.resultType is {printable(str(data.get('resultType')))!r}, expected 'matrix'")
                for n, item in enumerate(_as(list, data.get("result"), "data.result")):
                    metric = _labels(item, f"data.result[{n}]")
                    values = _as(list, item.get("values", []), f"data.result[{n}].values")
                    series = merged.setdefault(tuple(sorted(metric.items())), RangeSeries(dict(metric)))
                    series.values.extend(_pair(v, f"data.result[{n}].values[{i}]") for i, v in enumerate(values))
            except _Malformed as exc:
                raise self._unexpected(path, exc) from None
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
        return PrometheusUnavailable(f"cannot use Prometheus at {self.url}: unexpected answer from {path}: {exc}")

    # --- transport ---------------------------------------------------------------

    def _get(self, path: str, params: dict[str, Any], promql: str, into: QueryResult) -> Any:
        """The ``data`` of one successful answer; its warnings and infos go to ``into``."""
        caller = retry(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )(self._get_once)
        try:
            body = caller(path, params, promql)
        except _Retryable as exc:
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {exc} (after {self.attempts} attempts)") from None
        into.add_notes(body.get("warnings"), body.get("infos"))
        return body.get("data")

    def _get_once(self, path: str, params: dict[str, Any], promql: str) -> Any:
        try:
            # Redirects are not followed: an error would then name the wrong server, and a
            # Prometheus API does not redirect (a login proxy does).
            response = self.session.get(self.url + path, params=params, timeout=self.timeout_seconds, allow_redirects=False)
        except requests.Timeout:
            raise _Retryable(f"no answer within {self.timeout_seconds:g}s") from None
        except requests.RequestException as exc:
            raise _Retryable(_short(exc)) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        error = printable(str(error)) if error else printable(response.content[:200].decode("utf-8", errors="backslashreplace"))
        if response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code} from {path}: {error}")
        if response.status_code in (400, 422):
            raise UsageError(f"Prometheus rejected the query {promql!r}: {error}")
        if 300 <= response.status_code < 400:
            location = printable(response.headers.get("Location", "") or "(no Location header)")
            raise PrometheusUnavailable(
                f"cannot use Prometheus at {self.url}: HTTP {response.status_code} from {path} redirects to {location}; "
                "obsctl does not follow redirects: set prometheus.url to the Prometheus server itself"
            )
        if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusUnavailable(
                f"cannot use Prometheus at {self.url}: HTTP {response.status_code} from {path}: "
                f"{error or 'not a Prometheus API answer'}"
            )
        return body


def _short(exc: requests.RequestException) -> str:
    # requests nests urllib3's reason; the innermost message is the readable part.
    reason = exc.args[0] if exc.args else exc
    inner = getattr(reason, "reason", None)
    text = str(inner or reason)
    if "Connection refused" in text:
        return "connection refused"
    return printable(text.split(": ", 1)[-1] if ": " in text else text)
