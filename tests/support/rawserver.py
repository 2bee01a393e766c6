"""A raw-socket HTTP peer on 127.0.0.1, for answers no real server gives: headers trickled byte by
byte, a gzip bomb, a first line that is not HTTP, JSON nested too deeply, silence.

Each connection is read up to the end of its request head (however the client's writes were
split: a request byte left unread when the socket closes makes the kernel answer with a reset,
which can reach the client before it has read the answer), answered by
``reply(conn, head, stop)`` on its own thread, then shut down for writing (the end of the answer,
sent in order before the close) and closed. One answer per connection, so every complete answer
built by :func:`answer` says ``Connection: close``: a client told nothing keeps the connection for
its next request and may send it just as the close arrives (a reset, not the server's answer).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

Reply = Callable[[socket.socket, bytes, threading.Event], None]


def answer(body: bytes, *, status: bytes = b"200 OK", content_type: str = "application/json",
           headers: bytes = b"") -> bytes:
    """A complete ``HTTP/1.1 <status>`` answer with ``Content-Length`` and ``Connection: close``.

    ``headers``: more header lines, each ending in ``\\r\\n`` (e.g. ``b"Content-Encoding: gzip\\r\\n"``).
    """
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n"
            % (status, content_type.encode(), len(body), headers) + body)


class RawServer:
    """Serves ``reply`` on an ephemeral port of 127.0.0.1 until :meth:`close`.

    Attributes:
        url: ``http://127.0.0.1:<port>`` (no trailing slash).
        stop: set by :meth:`close`; replies that wait should wait on it.
    """

    def __init__(self, reply: Reply) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self._reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            self._reply(conn, head, self.stop)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client went away (a deadline, a cap): its side is what the tests check
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[[Reply], RawServer]]:
    """``start(reply) -> RawServer``; every server started is closed after the test."""
    made: list[RawServer] = []

    def start(reply: Reply) -> RawServer:
        made.append(RawServer(reply))
        return made[-1]

    yield start
    for srv in made:
        srv.close()
