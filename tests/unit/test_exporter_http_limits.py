"""The exporter's HTTP limits, over real sockets against a real ExporterServer: the connection
cap and its eviction, the head deadline and size cap, keep-alive limits, request framing, the
Server header, and accept's back-off at the descriptor limit."""

from __future__ import annotations

import errno
import socket
import time

import pytest

from obsctl.exporters import connections as conn
from obsctl.exporters.server import ExporterServer

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


class Counting:
    """A scrape function counting its calls (what a served request costs)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, budget: float) -> list:
        self.calls += 1
        return []


@pytest.fixture()
def served():
    scrape = Counting()
    servers: list[ExporterServer] = []

    def start(**kwargs) -> tuple[ExporterServer, Counting]:
        server = ExporterServer(scrape, "127.0.0.1:0", **kwargs).start()
        servers.append(server)
        return server, scrape

    yield start
    for server in servers:
        server.stop()


def connect(server: ExporterServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (or 5 s of silence)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return out
        if not chunk:
            return out
        out += chunk


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def statuses(data: bytes) -> list[int]:
    return [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.")]


def test_server_header_names_no_python_version(served) -> None:
    server, _ = served()
    with connect(server) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = read_all(sock)
    assert b"\r\nServer: obsctl-exporter\r\n" in data
    assert b"Python" not in data


@pytest.mark.parametrize("framing, why", [
    (b"Content-Length: 35\r\n\r\n" + REQUEST, b"Content-Length above 0"),
    (b"Content-Length: 0\r\nContent-Length: 35\r\n\r\n" + REQUEST, b"several different Content-Length"),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 35\r\n\r\n" + REQUEST, b"both Transfer-Encoding and Content-Length"),
    (b"Transfer-Encoding: chunked\r\n\r\n23\r\n" + REQUEST + b"\r\n0\r\n\r\n", b"Transfer-Encoding"),
    (b"Content-Length: -1\r\n\r\n", b"not a number"),
])
def test_a_request_framing_a_body_is_refused_and_the_body_never_served(served, framing, why) -> None:
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + framing)
        data = read_all(sock)
    assert statuses(data) == [400], data
    assert why in data
    assert scrape.calls == 0


def test_same_content_length_twice_and_zero_are_accepted(served) -> None:
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        assert statuses(read_all(sock)) == [200]
    assert scrape.calls == 1


def test_head_over_the_cap_is_refused_before_it_ends(served) -> None:
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
        try:
            for _ in range(conn.MAX_HEAD_BYTES // len(line) + 2):  # never the blank line
                sock.sendall(line)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = read_all(sock)
    assert statuses(data) == [431], data
    assert scrape.calls == 0


def test_trickled_head_is_cut_at_the_head_deadline(served, monkeypatch) -> None:
    monkeypatch.setattr(conn, "HEAD_TIMEOUT", 0.5)
    server, scrape = served()
    with connect(server) as sock:
        cut = False
        for byte in REQUEST:  # 1 byte per 0.1 s: 3.4 s for the whole head
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.1)
        assert cut or closed_by_server(sock)
    assert scrape.calls == 0


def test_idle_keep_alive_connection_is_closed(served, monkeypatch) -> None:
    monkeypatch.setattr(conn, "IDLE_TIMEOUT", 0.3)
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(REQUEST)
        first = sock.recv(65536)
        assert statuses(first) == [200]
        assert closed_by_server(sock)  # within the 5 s socket timeout, though idle allows 0.3 s
    assert scrape.calls == 1


def test_keep_alive_ends_after_max_requests(served, monkeypatch) -> None:
    monkeypatch.setattr(conn, "MAX_REQUESTS", 3)
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(REQUEST * 5)  # pipelined: only three are answered
        data = read_all(sock)
    assert statuses(data) == [200, 200, 200]
    assert data.count(b"Connection: close") == 1
    assert scrape.calls == 3


def test_pipelined_requests_and_leading_blank_lines_are_served(served) -> None:
    server, scrape = served()
    with connect(server) as sock:
        sock.sendall(b"\r\n" + REQUEST + b"GET /metrics HTTP/1.1\nHost: x\nConnection: close\n\n")
        assert statuses(read_all(sock)) == [200, 200]
    assert scrape.calls == 2


def test_at_the_cap_the_longest_waiting_connection_makes_room(served) -> None:
    server, scrape = served(max_connections=4)
    assert server.connections.limit == 4
    idle = [connect(server) for _ in range(3)]
    trickle = connect(server)
    trickle.sendall(b"GET /met")  # an unfinished head: waiting too
    time.sleep(0.2)  # all four accepted
    try:
        with connect(server) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert statuses(read_all(sock)) == [200]
        assert closed_by_server(idle[0])  # the oldest went
        for sock in (*idle[1:], trickle):
            sock.settimeout(0.2)
            assert not closed_by_server(sock)
        assert server.connections.evictions == 1
    finally:
        for sock in (*idle, trickle):
            sock.close()
    assert scrape.calls == 1


def test_connection_answering_a_request_is_never_evicted() -> None:
    now = [0.0]
    table = conn.ConnectionTable(2, clock=lambda: now[0])
    a, b, c = (socket.socket() for _ in range(3))
    try:
        first = table.admit(a, "a")
        now[0] = 1.0
        second = table.admit(b, "b")
        assert table.busy(first) and table.busy(second)
        assert table.admit(c, "c") is None and table.refused == 1
        table.waiting(second)
        assert table.admit(c, "c") is not None and second.evicted and not first.evicted
        assert not table.busy(second)  # its head arrived after it was closed: dropped
    finally:
        for sock in (a, b, c):
            sock.close()


def test_cap_fits_the_descriptor_limit(monkeypatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 4096))
    assert conn.connection_cap(128) == 128
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100, 4096))
    assert conn.connection_cap(128) == 100 - conn.FD_RESERVE


def test_accept_at_the_descriptor_limit_backs_off_and_frees_a_slot(served) -> None:
    server, _ = served()
    httpd = server._httpd
    slept: list[float] = []
    httpd.backoff = conn.AcceptBackoff(sleep=slept.append)
    evicted = []
    httpd.table.evict_oldest = lambda: evicted.append(1) or True

    class Exhausted:
        def accept(self):
            raise OSError(errno.EMFILE, "Too many open files")

    real, httpd.socket = httpd.socket, Exhausted()
    try:
        for _ in range(10):
            with pytest.raises(OSError):
                httpd.get_request()
    finally:
        httpd.socket = real
    assert slept == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
    assert len(evicted) == 10
    httpd.backoff.ok()
    assert httpd.backoff.failures == 0


def test_head_reader_keeps_pipelined_bytes_and_reports_why() -> None:
    left, right = socket.socketpair()
    try:
        reader = conn.HeadReader(right)
        left.sendall(b"\r\nGET / HTTP/1.1\r\n\r\nGET /b HTTP/1.1\n\nGET /c")
        soon = time.monotonic() + 5
        assert reader.read(soon) == (b"GET / HTTP/1.1\r\n\r\n", "")
        assert reader.read(soon) == (b"GET /b HTTP/1.1\n\n", "")
        left.shutdown(socket.SHUT_WR)
        assert reader.read(soon) == (None, "closed") and reader.partial == len(b"GET /c")
    finally:
        left.close()
        right.close()
    left, right = socket.socketpair()
    try:
        reader = conn.HeadReader(right)
        assert reader.read(time.monotonic() + 0.05) == (None, "idle")
        left.sendall(b"GET")
        assert reader.read(time.monotonic() + 5, head_timeout=0.05) == (None, "slow")
        left.sendall(b"x" * 200)
        assert reader.read(time.monotonic() + 5, max_bytes=100) == (None, "too_large")
    finally:
        left.close()
        right.close()


def test_max_connections_flag() -> None:
    from obsctl.errors import UsageError
    from obsctl.exporters.main import build, build_parser

    exporter, server, _ = build(build_parser().parse_args(["--web.max-connections=7", "--gpu.source=none"]))
    exporter.close()
    assert server.connections.limit == 7
    with pytest.raises(UsageError, match="at least 1"):
        build(build_parser().parse_args(["--web.max-connections=0", "--gpu.source=none"]))


class _Fixed:
    """A web config that never changes (the part of WebConfigWatch the server calls)."""

    def __init__(self, active) -> None:
        self.active = active

    def current(self):
        return self.active


def test_wrong_password_connections_make_room_for_a_scrape(served, tmp_path) -> None:
    """Every slot held by a wrong-password request whose failure is being padded: a scrape
    with the right password still gets in (the longest-checking one is closed), and the
    padded ones are answered nothing."""
    import base64
    import threading

    import bcrypt

    from obsctl.exporters.webconfig import load_web_config

    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n")
    padding, release = threading.Semaphore(0), threading.Event()

    def pad(seconds: float) -> None:  # each failure holds its connection until released
        padding.release()
        release.wait(30)

    server, scrape = served(max_connections=4, web_config=_Fixed(load_web_config(path, sleep=pad, clock=lambda: 0.0, reference=1.0)))

    def request(password: str) -> bytes:
        token = base64.b64encode(f"prom:{password}".encode()).decode()
        return f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\nConnection: close\r\n\r\n".encode()

    wrong = [connect(server) for _ in range(4)]
    try:
        for i, sock in enumerate(wrong):
            sock.sendall(request(f"wrong-{i}"))
        for _ in wrong:
            assert padding.acquire(timeout=30)  # all four are being padded: every slot is held
        with connect(server) as sock:
            sock.sendall(request("right"))
            assert statuses(read_all(sock)) == [200]
        assert server.connections.evictions == 1 and server.connections.refused == 0
    finally:
        release.set()
        for sock in wrong:
            sock.close()
    assert scrape.calls == 1


def test_a_connection_checking_credentials_goes_after_waiting_ones() -> None:
    now = [0.0]
    table = conn.ConnectionTable(2, clock=lambda: now[0])
    a, b, c, d = (socket.socket() for _ in range(4))
    try:
        checking = table.admit(a, "a")
        table.checking(checking)
        now[0] = 1.0
        waiting = table.admit(b, "b")
        answering = table.admit(c, "c")
        assert answering is not None and waiting.evicted and not checking.evicted
        assert table.busy(answering)
        assert table.admit(d, "d") is not None and checking.evicted
        assert not table.busy(checking)  # its check ended after it was closed: not answered
    finally:
        for sock in (a, b, c, d):
            sock.close()
