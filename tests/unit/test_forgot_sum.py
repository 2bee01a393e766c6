"""A signal query that forgot its ``sum()`` against a Prometheus answering a 50 MB matrix of
per-pod series, from a real local socket server: the range answer is read only as far as
one series of the window's points can take, and no further than the first chunk that shows more series
than allowed; the error names the cause (the series the
query returns, and the ``sum()`` it needs), for ``snapshot-baseline`` and ``verify`` alike
(both read through :func:`obsctl.baselining.measure.window.read_answers`).

Memory is measured with tracemalloc (Python's allocations during the call, the server's
lazily made series included), and the read's bound by the bytes the server could send
before the client closed: neither depends on timing."""

from __future__ import annotations

import json
import socket
import threading
import tracemalloc

import pytest

from obsctl.baselining.measure.window import MeasureRequest, read_answers
from obsctl.errors import UsageError
from obsctl.httpconfig import HTTPClientConfig, session_for
from obsctl.promapi import POINT_BYTES, SERIES_OVERHEAD_BYTES, PrometheusClient, TooManySeries, _SeriesCounter, series_in
from support.matrix_flood import END, MATRIX_BYTES, POINTS, START, STEP, Matrix, complete_series

CHUNK = 64 * 1024  # the most bytes bounded_get reads at a time


def client(url: str) -> PrometheusClient:
    return PrometheusClient(url, timeout_seconds=60, attempts=1, session=session_for(HTTPClientConfig()))


@pytest.mark.parametrize("content_length", [False, True], ids=["chunked", "content-length"])
def test_a_query_without_sum_is_named_and_read_in_bounded_memory(raw_server, content_length) -> None:
    matrix = Matrix(content_length)
    srv = raw_server(matrix)
    query = 'rate(vllm_generation_tokens_total{job="vllm"}[5m])'
    tracemalloc.start()
    try:
        with pytest.raises(UsageError) as err:
            read_answers(client(srv.url), MeasureRequest(query, START, END, STEP, 10, what="chat/tokens_per_second"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert message.startswith("chat/tokens_per_second: the query returns at least "), message
    assert "{'pod': 'chat-00000', 'job': 'vllm'}, {'pod': 'chat-00001', 'job': 'vllm'}" in message
    assert message.endswith(f"a signal must return one series: aggregate with sum(...) or similar: {query}")
    assert "cannot reach" not in message and "\n" not in message
    cap = (POINTS + 2) * POINT_BYTES + SERIES_OVERHEAD_BYTES  # one series of the window's points
    at_least = int(message.split("at least ")[1].split()[0])
    # Every series in the bytes read is counted; the read stops at the first chunk (64 KiB at
    # most) that holds more than 2 * 1 + 2 series keys, long before the cap.
    assert 2 <= at_least <= complete_series(CHUNK) + 1  # the last one's labels complete, its values maybe not
    assert peak < 8 * cap, f"peak {peak:,} bytes for a read capped at {cap:,}"
    srv.close()
    assert matrix.sent < MATRIX_BYTES / 4  # the rest was never read (socket buffers hold a few MB at most)


def test_the_bound_is_what_one_series_of_the_chunk_can_take(raw_server) -> None:
    matrix = Matrix(False)
    srv = raw_server(matrix)
    with pytest.raises(TooManySeries) as err:
        client(srv.url).query_range("x", START.timestamp() + STEP, END.timestamp(), STEP, max_series=1)
    assert err.value.read <= CHUNK and err.value.at_least > 1
    assert err.value.label_sets[:2] == [{"pod": "chat-00000", "job": "vllm"}, {"pod": "chat-00001", "job": "vllm"}]


def test_one_series_at_its_largest_is_read_whole(raw_server) -> None:
    """The bound never refuses a real single series: every value at its longest text
    (5e-324 as Prometheus writes it, 'f' format) still fits."""
    tiny = format(5e-324, ".400f").rstrip("0")  # what strconv.FormatFloat(v, 'f', -1, 64) writes
    values = [[START.timestamp() + STEP * (k + 1), "-" + tiny] for k in range(POINTS)]
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"pod": "p" * 1000}, "values": values}]}}).encode()

    def reply(conn: socket.socket, _request: bytes, _stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(body), body))

    srv = raw_server(reply)
    (series,) = client(srv.url).query_range("x", START.timestamp() + STEP, END.timestamp(), STEP, max_series=1).series
    assert len(series.values) == POINTS and series.values[0][1] == -5e-324


def _keys_read(body: bytes, max_series: int, size: int) -> int | None:
    """Bytes read when the counter stops a body fed in ``size``-byte chunks (None: never)."""
    counter = _SeriesCounter(max_series)
    for at in range(0, len(body), size):
        if counter(body[at:at + size]):
            return min(len(body), at + size)
    return None


@pytest.mark.parametrize("size", [1, 3, 7, 4096])
def test_the_counter_stops_past_the_bound_whatever_the_chunk_cuts(size) -> None:
    """Series whose label values are the text ``metric`` and whose label set has a label named
    ``metric``: at most two keys a series, so the stop always has more than max_series complete."""
    series = [{"metric": {"metric": "metric", "pod": f"p{i}", "x": '"metric":'}, "values": [[1, "1"]]} for i in range(20)]
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}, separators=(",", ":")).encode()
    for max_series in (1, 3, 8):
        read = _keys_read(body, max_series, size)
        assert read is not None and series_in(body[:read])[0] > max_series
        assert series_in(body[:read - size])[0] <= max_series + 1  # it stopped at the first chunk past the bound
    assert _keys_read(body, 20, size) is None  # 20 series, 40 keys: never past 42
