"""HTTP front of obsctl-exporter: ``/metrics`` (configurable), a landing page at ``/``, ``/health``.

With a :class:`obsctl.exporters.collection.CollectionLoop` (the default, ``--collector.interval``)
a scrape serves the loop's last snapshot, pre-rendered, and ``/health`` answers 503 while that
snapshot is stale (see that module). Without one (``--collector.interval=0s``) every scrape runs the
collectors itself, as follows, and ``/health`` always answers 200.

The per-scrape budget is ``--scrape.timeout``, shortened to Prometheus'
``X-Prometheus-Scrape-Timeout-Seconds`` header minus 0.5 s when that is smaller, so the
exporter always answers before Prometheus gives up. Content negotiation (text format or
OpenMetrics) follows prometheus_client's ``choose_encoder``; the default text format is rendered by
:mod:`obsctl.exporters.exposition` (same bytes, cached label strings), the rest by prometheus_client.

With ``--web.config.file`` (:mod:`obsctl.exporters.webconfig`) connections are TLS (handshake on the
connection's own thread, with the certificate in force when it was accepted), every path asks for
basic auth when users are configured, and the configured headers go on every response.

Connections are capped and request heads bounded in time and size before anything else
(authentication included) looks at them: :mod:`obsctl.exporters.connections` has the limits
and how they compare with Go's net/http. Only complete requests are served: a request whose
line or headers end before the blank line (the client went away mid-request) is dropped
without running a scrape, and a request that frames a body (the endpoints take none) is
answered 400 and its connection closed, so body bytes are never read as a next request. A
client that goes away (``BrokenPipeError``, ``ConnectionResetError``, a failed TLS handshake)
is one logfmt line at debug level, never a traceback. The ``Server`` header is
``obsctl-exporter``, without the Python version.
"""

from __future__ import annotations

import gzip
import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from prometheus_client.core import Metric

from obsctl.errors import UsageError
from obsctl.escape import html_text
from obsctl.exporters import connections as conn
from obsctl.exporters.exposition import TextRenderer, encoder_for

if TYPE_CHECKING:  # the web config (bcrypt, pydantic models) is imported only when --web.config.file is given
    from obsctl.exporters.collection import CollectionLoop
    from obsctl.exporters.webconfig import ActiveWebConfig, WebConfigWatch

log = logging.getLogger("obsctl.exporter")

_HEADER_MARGIN_SECONDS = 0.5
# gzip level 1, not gzip.compress's default 9: measured on the 8-GPU body (45 KB), level 9 took 1.5 ms
# and gave 3.8 KB, level 1 took 0.2 ms and gave 4.3 KB. The decompressed body is the same.
_GZIP_LEVEL = 1
_MAX_LINE = 65536  # bytes of the request line (http.server's own limit)
_WRITE_TIMEOUT = 30.0  # seconds one send may block on a client that does not read its answer
#: What a client going away looks like; logged at debug level, one line.
CLIENT_GONE = (ConnectionError, TimeoutError, ssl.SSLError)


def parse_listen_address(address: str) -> tuple[str, int]:
    """``host:port`` / ``:port`` / ``[v6]:port`` -> ``(host, port)``; ``""`` host = all IPv4 interfaces.

    Raises:
        UsageError: not ``[host]:port`` with a port 0-65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--web.listen-address {address!r}: expected [host]:port such as :9847 or 127.0.0.1:9847")
    host = host.strip("[]")
    return (host or "0.0.0.0"), int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never blocks shutdown
    allow_reuse_address = True
    request_queue_size = socket.SOMAXCONN  # socketserver's 5 would drop a new scrape's SYN during a flood
    web: WebConfigWatch | None = None
    table: conn.ConnectionTable
    backoff: conn.AcceptBackoff
    slots: dict[socket.socket, conn.Slot]

    def get_request(self) -> tuple[socket.socket, object]:
        try:
            sock, addr = self.socket.accept()
        except OSError as exc:
            if exc.errno in conn.ACCEPT_BACKOFF_ERRNOS:  # out of descriptors: free one, wait, never spin
                self.table.evict_oldest()
                self.backoff.failed(exc)
            raise  # socketserver skips this round
        self.backoff.ok()
        context = self.web.current().ssl_context if self.web is not None else None
        if context is not None:  # the handshake runs on the connection's thread (Handler.handle)
            sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def verify_request(self, request: socket.socket, client_address: object) -> bool:
        slot = self.table.admit(request, _peer(client_address))
        if slot is None:
            log.debug("connection limit %d reached and every connection is answering a request: %s refused",
                      self.table.limit, _peer(client_address))
            return False  # socketserver closes it
        self.slots[request] = slot
        return True

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        where = _peer(client_address)
        if isinstance(exc, CLIENT_GONE):
            log.debug("client %s went away: %s", where, _one_line(exc))
        else:  # a bug: one logfmt line (the formatter folds the traceback into it)
            log.error("request from %s failed: %s", where, _one_line(exc), exc_info=exc)


def _peer(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _one_line(exc: BaseException | None) -> str:
    text = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ExporterServer:
    """Serves an exporter over HTTP on a background thread.

    Args:
        scrape: ``(budget_seconds) -> families`` (``Exporter.scrape``).
        listen_address: ``[host]:port`` (port 0 picks a free port; see ``port``).
        telemetry_path: path of the metrics endpoint (``/metrics``).
        scrape_timeout: default per-scrape budget, seconds.
        landing_page: HTML for ``/``.
        web_config: ``--web.config.file`` watch (TLS, basic auth, headers); None: plain HTTP.
        max_connections: connection cap (None: 128; lowered to fit the descriptor limit, see
            :func:`obsctl.exporters.connections.connection_cap`).
        snapshots: the background collection loop whose snapshots scrapes serve (None: each
            scrape calls ``scrape``).

    Raises:
        UsageError: bad address. OSError from ``start()``: the address cannot be bound.
    """

    def __init__(self, scrape: Callable[[float], list[Metric]], listen_address: str, telemetry_path: str = "/metrics",
                 scrape_timeout: float = 8.0, landing_page: str = "", web_config: WebConfigWatch | None = None,
                 max_connections: int | None = None, snapshots: CollectionLoop | None = None) -> None:
        self.host, self.port = parse_listen_address(listen_address)
        if not telemetry_path.startswith("/"):
            raise UsageError(f"--web.telemetry-path {telemetry_path!r}: must start with '/'")
        self.telemetry_path = telemetry_path
        self.scrape_timeout = scrape_timeout
        self.landing_page = landing_page
        self.web_config = web_config
        self.connections = conn.ConnectionTable(conn.connection_cap(max_connections or conn.MAX_CONNECTIONS))
        self._scrape = scrape
        self.snapshots = snapshots
        self._renderer = TextRenderer()  # caches rendered label sets between scrapes
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ExporterServer:
        """Bind and start serving on a background thread."""
        handler = _make_handler(self)
        server_cls = _Server
        if ":" in self.host:  # IPv6 literal
            server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self._httpd = server_cls((self.host, self.port), handler)
        self._httpd.web = self.web_config
        self._httpd.table = self.connections
        self._httpd.backoff = conn.AcceptBackoff()
        self._httpd.slots = {}
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close the socket and join the serving thread (idempotent)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def budget(self, header: str | None) -> float:
        """Scrape budget in seconds from the flag and Prometheus' timeout header."""
        budget = self.scrape_timeout
        if header:
            try:
                budget = min(budget, float(header) - _HEADER_MARGIN_SECONDS)
            except ValueError:
                pass
        return max(budget, 0.1)

    @property
    def scheme(self) -> str:
        """``https`` when the web config in force serves TLS, else ``http``."""
        web = self.web_config.current() if self.web_config is not None else None
        return "https" if web is not None and web.ssl_context is not None else "http"


def _make_handler(server: ExporterServer) -> type[BaseHTTPRequestHandler]:
    table = server.connections

    class Handler(BaseHTTPRequestHandler):
        server_version = "obsctl-exporter"
        sys_version = ""
        # Keep-alive (every response has a Content-Length): Prometheus reuses its connection, and a new
        # TCP connection plus a new thread per scrape cost ~2 ms of the 8-GPU scrape here (measured).
        protocol_version = "HTTP/1.1"
        timeout = None  # every read and write sets its own (connections.HeadReader, _WRITE_TIMEOUT)
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms Nagle/delayed-ACK stall

        def version_string(self) -> str:
            return self.server_version  # http.server would add "Python/3.x"

        def setup(self) -> None:
            super().setup()
            self._slot = self.server.slots.pop(self.request)
            self._heads = conn.HeadReader(self.connection)
            self._served = 0

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                table.release(self._slot)

        def handle(self) -> None:
            if isinstance(self.connection, ssl.SSLSocket):
                try:  # the handshake counts against the first head's deadline
                    self.connection.settimeout(max(self._first_head_by() - time.monotonic(), 0.001))
                    self.connection.do_handshake()
                except (OSError, ValueError) as exc:  # no / wrong client certificate, plain HTTP, hang-up
                    if not self._slot.evicted:
                        log.debug("tls handshake with %s failed: %s", _peer(self.client_address), _one_line(exc))
                    return
            super().handle()

        def _first_head_by(self) -> float:
            return (self._slot.waiting_since or time.monotonic()) + conn.HEAD_TIMEOUT

        def handle_one_request(self) -> None:
            """http.server's, except that the head is read within its deadline and size cap first,
            must be complete, and must not frame a body."""
            self.close_connection = True
            if self._served == 0:
                by = self._first_head_by()
                head, why = self._heads.read(by, conn.HEAD_TIMEOUT, conn.MAX_HEAD_BYTES, complete_by=by)
            else:
                table.waiting(self._slot)
                head, why = self._heads.read(time.monotonic() + conn.IDLE_TIMEOUT)
            if head is None:
                self._no_head(why)
                return
            if not table.busy(self._slot):
                return  # closed to make room for a new connection while the head arrived
            self.connection.settimeout(_WRITE_TIMEOUT)
            rfile, self.rfile = self.rfile, io.BytesIO(head)
            try:
                self.raw_requestline = self.rfile.readline(_MAX_LINE + 1)
                if len(self.raw_requestline) > _MAX_LINE:
                    self.requestline, self.request_version, self.command = "", "", ""  # as http.server does
                    self.send_error(414)
                    return
                if not self.parse_request():
                    return
            finally:
                self.rfile = rfile
            problem = conn.framing_problem(self.headers)
            if problem:
                self.close_connection = True
                self.send_error(400, f"Bad Request: {problem}")
                return
            self._served += 1
            if self._served >= conn.MAX_REQUESTS:
                self.close_connection = True
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            method()
            self.wfile.flush()

        def handle_expect_100(self) -> bool:
            return True  # no "100 Continue": a body is refused (framing_problem), not invited

        def _no_head(self, why: str) -> None:
            where, got = _peer(self.client_address), self._heads.partial
            if self._slot.evicted:
                return  # logged by the eviction
            if why == "too_large":
                self.requestline, self.request_version, self.command = "", "", ""  # as http.server does
                self.connection.settimeout(_WRITE_TIMEOUT)
                self.send_error(431, f"Request Header Fields Too Large (over {conn.MAX_HEAD_BYTES} bytes)")
            elif why == "slow":
                log.debug("client %s sent no complete request head within %gs (%d bytes): connection closed",
                          where, conn.HEAD_TIMEOUT, got)
            elif why == "idle":
                log.debug("client %s idle for %gs: connection closed", where,
                          conn.IDLE_TIMEOUT if self._served else conn.HEAD_TIMEOUT)
            elif got:
                log.debug("client %s went away mid-request (%d bytes): not served", where, got)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            web = server.web_config.current() if server.web_config is not None else None
            self._web = web
            if web is not None and web.auth_required and not self._authenticated(web):
                if self._slot.evicted:
                    return  # closed to make room for a scrape while its credentials were checked
                self._send(401, "text/plain; charset=utf-8", b"Unauthorized\n",
                           extra={"WWW-Authenticate": 'Basic realm="obsctl-exporter"'})
                return
            path = urlsplit(self.path).path
            if path == server.telemetry_path:
                self._metrics()
            elif path == "/":
                self._send(200, "text/html; charset=utf-8", server.landing_page.encode())
            elif path in ("/-/healthy", "/-/ready"):
                self._send(200, "text/plain; charset=utf-8", b"OK\n")
            elif path == "/health":
                ok, message = server.snapshots.health() if server.snapshots is not None else (True, "OK\n")
                self._send(200 if ok else 503, "text/plain; charset=utf-8", message.encode())
            else:
                self._send(404, "text/plain; charset=utf-8", f"not found; metrics are at {server.telemetry_path}\n".encode())

        def _authenticated(self, web: ActiveWebConfig) -> bool:
            """The basic-auth check, with the connection evictable while it runs (and while a
            failure is padded); False also when it was evicted meanwhile."""
            table.checking(self._slot)
            ok = web.check_basic_auth(self.headers.get("Authorization"))
            return table.busy(self._slot) and ok

        def _metrics(self) -> None:
            budget = server.budget(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
            gzip_ok = "gzip" in self.headers.get("Accept-Encoding", "")
            if server.snapshots is not None:
                try:
                    content_type, body, gzipped = server.snapshots.respond(self.headers.get("Accept", ""), gzip_ok, budget)
                except Exception as exc:  # noqa: BLE001 - a scrape must answer, not drop the connection
                    log.error("scrape failed: %s", exc, exc_info=exc)
                    self._send(500, "text/plain; charset=utf-8", f"scrape failed: {exc}\n".encode())
                    return
                self._send(200, content_type, body, gzipped)
                return
            try:
                families = server._scrape(budget)
                encoder, content_type = encoder_for(self.headers.get("Accept", ""), server._renderer)
                body = encoder(families)
            except Exception as exc:  # noqa: BLE001 - a scrape must answer, not drop the connection
                log.error("scrape failed: %s", exc, exc_info=exc)
                self._send(500, "text/plain; charset=utf-8", f"scrape failed: {exc}\n".encode())
                return
            self._send(200, content_type, gzip.compress(body, _GZIP_LEVEL) if gzip_ok else body, gzip_ok)

        def _send(self, code: int, content_type: str, body: bytes, gzipped: bool = False,
                  extra: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
            if self.close_connection:
                self.send_header("Connection", "close")
            web: ActiveWebConfig | None = getattr(self, "_web", None)
            for name, value in {**(web.headers if web is not None else {}), **(extra or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server API
            log.debug("http: " + format, *args)

    return Handler


def landing_page(version: str, telemetry_path: str, collectors: list[tuple[str, bool, str]], gpu_mode: str) -> str:
    """The HTML page served at ``/``: version, collectors (name, enabled, what), metrics link."""
    rows = "\n".join(
        f"<tr><td><code>{html_text(n)}</code></td><td>{'enabled' if on else 'disabled'}</td><td>{html_text(d)}</td></tr>"
        for n, on, d in collectors
    )
    path = html_text(telemetry_path)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>obsctl-exporter</title></head>
<body>
<h1>obsctl-exporter</h1>
<p>Version {html_text(version)}. GPU source: <code>{html_text(gpu_mode)}</code>.</p>
<p><a href="{path}">Metrics</a> at <code>{path}</code></p>
<h2>Collectors</h2>
<table border="1" cellpadding="4">
<tr><th>collector</th><th>state</th><th>publishes</th></tr>
{rows}
</table>
<p><a href="/health">/health</a> answers 503 when no collection finished recently.
Each collection reports <code>obsctl_exporter_scrape_collector_success{{collector}}</code> and
<code>obsctl_exporter_scrape_collector_duration_seconds{{collector}}</code>; a failing collector adds
<code>obsctl_exporter_scrape_collector_error_info{{collector,reason}}</code>.</p>
</body></html>
"""
