"""A signal query that forgot its ``sum()`` against a Prometheus answering a 50 MB matrix of
per-pod series, from a real local socket server: the range answer is read only as far as
one series of the window's points can take, and the error names the cause (the series the
query returns, and the ``sum()`` it needs), for ``snapshot-baseline`` and ``verify`` alike
(both read through :func:`obsctl.baselining.measure.window.read_answers`).

Memory is measured with tracemalloc (Python's allocations during the call, the server's
lazily made series included), and the read's bound by the bytes the server could send
before the client closed: neither depends on timing."""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import tracemalloc

import pytest

from obsctl.baselining.measure.window import read_answers
from obsctl.errors import UsageError
from obsctl.httpconfig import HTTPClientConfig, session_for
from obsctl.promapi import POINT_BYTES, SERIES_OVERHEAD_BYTES, PrometheusClient, TooManySeries

MATRIX_BYTES = 50 * 1024 * 1024
STEP = 15
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
END = START + dt.timedelta(minutes=15)  # 60 evaluation points at 15 s
POINTS = 60


def pod_series(i: int) -> bytes:
    """Series ``i`` (every one the same length: values 1000-1999 with six decimals)."""
    values = ",".join(f'[{START.timestamp() + STEP * (k + 1):.3f},"{1000 + i % 900 + k / 7:.6f}"]' for k in range(POINTS))
    return f'{{"metric":{{"pod":"chat-{i:05d}","job":"vllm"}},"values":[{values}]}}'.encode()


HEAD, TAIL = b'{"status":"success","data":{"resultType":"matrix","result":[', b"]}}"
SERIES = len(pod_series(0)) + 1  # with its comma
COUNT = MATRIX_BYTES // SERIES


def complete_series(read: int) -> int:
    """Series wholly inside the answer's first ``read`` bytes."""
    return max(0, min(COUNT, (read - len(HEAD) + 1) // SERIES))


class Matrix:
    """A reply streaming ``COUNT`` per-pod series (about ``MATRIX_BYTES``), made one at a
    time; ``sent``: bytes the client accepted before it closed."""

    def __init__(self, content_length: bool) -> None:
        self.content_length = content_length
        self.sent = 0

    def body(self):
        yield HEAD
        for i in range(COUNT):
            yield (b"," if i else b"") + pod_series(i)
        yield TAIL

    def total(self) -> int:
        return len(HEAD) + COUNT * SERIES - 1 + len(TAIL)

    def __call__(self, conn: socket.socket, _request: bytes, stop: threading.Event) -> None:
        length = f"Content-Length: {self.total()}\r\n" if self.content_length else ""
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}Connection: close\r\n\r\n".encode())
        for part in self.body():
            if stop.is_set():
                return
            conn.sendall(part)  # raises once the client has closed: the test reads .sent
            self.sent += len(part)


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
            read_answers(client(srv.url), query, START, END, STEP, what="chat/tokens_per_second")
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
    # Every series in the bytes read is counted; the read stops at the cap, within one 64 KiB chunk.
    assert complete_series(cap - 64 * 1024) <= at_least <= complete_series(cap)
    assert peak < 8 * cap, f"peak {peak:,} bytes for a read capped at {cap:,}"
    srv.close()
    assert matrix.sent < MATRIX_BYTES / 4  # the rest was never read (socket buffers hold a few MB at most)


def test_the_bound_is_what_one_series_of_the_chunk_can_take(raw_server) -> None:
    matrix = Matrix(False)
    srv = raw_server(matrix)
    with pytest.raises(TooManySeries) as err:
        client(srv.url).query_range("x", START.timestamp() + STEP, END.timestamp(), STEP, max_series=1)
    cap = (POINTS + 2) * POINT_BYTES + SERIES_OVERHEAD_BYTES
    assert err.value.read <= cap and err.value.at_least > 1
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
