"""A Prometheus answer of a query that forgot its ``sum()``: a matrix of ``COUNT`` per-pod
series (about 50 MB), streamed one series at a time by :class:`Matrix` (a reply for
:class:`support.rawserver.RawServer`), so the server holds one series at a time."""

from __future__ import annotations

import datetime as dt
import socket
import threading

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


