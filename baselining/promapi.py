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


def plan_chunks(start: float, end: float, step: float, max_points: int = MAX_POINTS_PER_SERIES) -> list[tuple[float, float]]:
    """Cut ``[start, end]`` at ``step`` into sub-ranges of at most ``max_points`` evaluation points.

    Evaluation instants are ``start + i*step`` (as Prometheus evaluates them); chunk ``j``
    starts at ``start + j*max_points*step``, so no instant is queried twice or skipped.

    Returns:
        ``[(chunk_start, chunk_end), ...]`` in unix seconds; empty when ``end < start``.
    """
    if step <= 0:
        raise UsageError(f"query step must be positive, got {step}")
    if end < start:
        return []
    total = int(math.floor((end - start) / step + 1e-9)) + 1
    chunks = []
    for first in range(0, total, max_points):
        last = min(first + max_points, total) - 1
        chunks.append((start + first * step, start + last * step))
    return chunks


def _seconds(value: float | dt.datetime) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value)


def _float(text: str) -> float:
    # Prometheus sends values as strings: "1.5", "NaN", "+Inf", "-Inf".
    return float(text)


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

    def query(self, promql: str, time: float | dt.datetime | None = None) -> list[InstantSample]:
        """Evaluate ``promql`` at one instant (default: now).

        Returns:
            One :class:`InstantSample` per series of a vector result; a scalar result is
            returned as one sample with empty labels.

        Raises:
            PrometheusUnavailable: unreachable, timing out or answering 5xx after retries.
            UsageError: Prometheus rejected the query (its message included).
        """
        params: dict[str, Any] = {"query": promql}
        if time is not None:
            params["time"] = f"{_seconds(time):.3f}"
        data = self._get("/api/v1/query", params, promql)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "vector":
            return [InstantSample(r["metric"], float(r["value"][0]), _float(r["value"][1])) for r in result]
        if kind == "scalar":
            return [InstantSample({}, float(result[0]), _float(result[1]))]
        raise UsageError(f"query {promql!r} returned a {kind}, expected an instant vector")

    def query_range(self, promql: str, start: float | dt.datetime, end: float | dt.datetime, step_seconds: float) -> list[RangeSeries]:
        """Evaluate ``promql`` at ``start, start+step, ... <= end`` (unix seconds or datetimes).

        Requests are chunked (:func:`plan_chunks`) so none exceeds Prometheus' 11,000
        points per series; the chunks' series are merged by label set.

        Returns:
            The series, each with samples in time order (NaN/Inf values are kept).

        Raises:
            PrometheusUnavailable, UsageError: as :meth:`query`.
        """
        merged: dict[tuple[tuple[str, str], ...], RangeSeries] = {}
        for chunk_start, chunk_end in plan_chunks(_seconds(start), _seconds(end), step_seconds):
            params = {"query": promql, "start": f"{chunk_start:.3f}", "end": f"{chunk_end:.3f}", "step": f"{step_seconds:g}"}
            data = self._get("/api/v1/query_range", params, promql)
            if data.get("resultType") != "matrix":
                raise UsageError(f"range query {promql!r} returned a {data.get('resultType')}, expected a range vector")
            for item in data["result"]:
                key = tuple(sorted(item["metric"].items()))
                series = merged.setdefault(key, RangeSeries(dict(item["metric"])))
                series.values.extend((float(t), _float(v)) for t, v in item.get("values", []))
        return list(merged.values())

    def series(self, matchers: list[str], start: float | dt.datetime, end: float | dt.datetime) -> list[dict[str, str]]:
        """Label sets of the series matching any of ``matchers`` (series selectors) in ``[start, end]``.

        Raises:
            PrometheusUnavailable, UsageError: as :meth:`query`.
        """
        params = {"match[]": matchers, "start": f"{_seconds(start):.3f}", "end": f"{_seconds(end):.3f}"}
        return list(self._get("/api/v1/series", params, " or ".join(matchers)))

    # --- transport ---------------------------------------------------------------

    def _get(self, path: str, params: dict[str, Any], promql: str) -> Any:
        caller = retry(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )(self._get_once)
        try:
            return caller(path, params, promql)
        except _Retryable as exc:
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {exc} (after {self.attempts} attempts)") from None

    def _get_once(self, path: str, params: dict[str, Any], promql: str) -> Any:
        try:
            response = self.session.get(self.url + path, params=params, timeout=self.timeout_seconds)
        except requests.Timeout:
            raise _Retryable(f"no answer within {self.timeout_seconds:g}s") from None
        except requests.RequestException as exc:
            raise _Retryable(_short(exc)) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if response.status_code >= 500:
            raise _Retryable(f"HTTP {response.status_code} from {path}: {error or response.text[:200].strip()}")
        if response.status_code in (400, 422):
            raise UsageError(f"Prometheus rejected the query {promql!r}: {error or response.text[:200].strip()}")
        if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusUnavailable(
                f"cannot use Prometheus at {self.url}: HTTP {response.status_code} from {path}: "
                f"{error or response.text[:200].strip() or 'not a Prometheus API answer'}"
            )
        return body.get("data")


def _short(exc: requests.RequestException) -> str:
    # requests nests urllib3's reason; the innermost message is the readable part.
    reason = exc.args[0] if exc.args else exc
    inner = getattr(reason, "reason", None)
    text = str(inner or reason)
    if "Connection refused" in text:
        return "connection refused"
    return text.split(": ", 1)[-1][:200] if ": " in text else text[:200]
