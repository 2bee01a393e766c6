"""HTTP front of obsctl-exporter: ``/metrics`` (configurable), a landing page at ``/``.

The per-scrape budget is ``--scrape.timeout``, shortened to Prometheus'
``X-Prometheus-Scrape-Timeout-Seconds`` header minus 0.5 s when that is smaller, so the
exporter always answers before Prometheus gives up. Content negotiation (text format or
OpenMetrics) follows prometheus_client's ``choose_encoder``; the default text format is rendered by
:mod:`obsctl.exporters.exposition` (same bytes, cached label strings), the rest by prometheus_client.

With ``--web.config.file`` (:mod:`obsctl.exporters.webconfig`) connections are TLS (handshake on the
connection's own thread, with the certificate in force when it was accepted), every path asks for
basic auth when users are configured, and the configured headers go on every response.

Only complete requests are served: a request whose line or headers end before the blank line
(the client went away mid-request) is dropped without running a scrape. A client that goes away
(``BrokenPipeError``, ``ConnectionResetError``, a failed TLS handshake) is one logfmt line at
debug level, never a traceback.
"""

from __future__ import annotations

import gzip
import html
import io
import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client.core import Metric

from obsctl.errors import UsageError
from obsctl.exporters.exposition import TextRenderer, encoder_for

if TYPE_CHECKING:  # the web config (bcrypt, pydantic models) is imported only when --web.config.file is given
    from obsctl.exporters.webconfig import ActiveWebConfig, WebConfigWatch

log = logging.getLogger("obsctl.exporter")

_HEADER_MARGIN_SECONDS = 0.5
# gzip level 1, not gzip.compress's default 9: measured on the 8-GPU body (45 KB), level 9 took 1.5 ms
# and gave 3.8 KB, level 1 took 0.2 ms and gave 4.3 KB. The decompressed body is the same.
_GZIP_LEVEL = 1
_HANDSHAKE_TIMEOUT = 10.0  # seconds a new TLS connection may take to handshake
_MAX_LINE = 65536  # bytes of one request or header line (http.server's own limit)
_MAX_HEADERS = 100  # header lines (http.client's limit)
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
    web: WebConfigWatch | None = None

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = self.socket.accept()
        context = self.web.current().ssl_context if self.web is not None else None
        if context is not None:  # the handshake runs on the connection's thread (Handler.handle)
            sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

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

    Raises:
        UsageError: bad address. OSError from ``start()``: the address cannot be bound.
    """

    def __init__(self, scrape: Callable[[float], list[Metric]], listen_address: str, telemetry_path: str = "/metrics",
                 scrape_timeout: float = 8.0, landing_page: str = "", web_config: WebConfigWatch | None = None) -> None:
        self.host, self.port = parse_listen_address(listen_address)
        if not telemetry_path.startswith("/"):
            raise UsageError(f"--web.telemetry-path {telemetry_path!r}: must start with '/'")
        self.telemetry_path = telemetry_path
        self.scrape_timeout = scrape_timeout
        self.landing_page = landing_page
        self.web_config = web_config
        self._scrape = scrape
        self._renderer = TextRenderer()  # caches rendered label sets between scrapes
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ExporterServer":
        """Bind and start serving on a background thread."""
        handler = _make_handler(self)
        server_cls = _Server
        if ":" in self.host:  # IPv6 literal
            server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self._httpd = server_cls((self.host, self.port), handler)
        self._httpd.web = self.web_config
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
    class Handler(BaseHTTPRequestHandler):
        server_version = "obsctl-exporter"
        # Keep-alive (every response has a Content-Length): Prometheus reuses its connection, and a new
        # TCP connection plus a new thread per scrape cost ~2 ms of the 8-GPU scrape here (measured).
        protocol_version = "HTTP/1.1"
        timeout = 300  # seconds an idle kept-alive connection (and its thread) may wait for a request
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms Nagle/delayed-ACK stall

        def handle(self) -> None:
            if isinstance(self.connection, ssl.SSLSocket):
                try:
                    self.connection.settimeout(_HANDSHAKE_TIMEOUT)
                    self.connection.do_handshake()
                    self.connection.settimeout(self.timeout)
                except (OSError, ValueError) as exc:  # no / wrong client certificate, plain HTTP, hang-up
                    log.debug("tls handshake with %s failed: %s", _peer(self.client_address), _one_line(exc))
                    return
            super().handle()

        def handle_one_request(self) -> None:
            """http.server's, except that the request line and headers must be complete."""
            head = self._read_head()
            if head is None:
                self.close_connection = True
                return
            rfile, self.rfile = self.rfile, io.BytesIO(head)
            try:
                self.raw_requestline = self.rfile.readline(_MAX_LINE + 1)
                if not self.parse_request():
                    return
            finally:
                self.rfile = rfile
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            method()
            self.wfile.flush()

        def _read_head(self) -> bytes | None:
            """The request line and headers up to the blank line; None when the client went away
            (or idled out) before sending all of it, or sent too much."""
            lines: list[bytes] = []
            while True:
                try:
                    line = self.rfile.readline(_MAX_LINE + 1)
                except TimeoutError:
                    log.debug("client %s idle for %gs: connection closed", _peer(self.client_address), self.timeout)
                    return None
                if len(line) > _MAX_LINE or len(lines) > _MAX_HEADERS:
                    self.requestline, self.request_version, self.command = "", "", ""  # as http.server does
                    self.send_error(431 if lines else 414)
                    return None
                if not line.endswith(b"\n"):  # end of stream: complete lines only
                    if lines or line:
                        log.debug("client %s went away mid-request (%d bytes): not served",
                                  _peer(self.client_address), sum(map(len, lines)) + len(line))
                    return None
                if not lines and line in (b"\r\n", b"\n"):
                    continue  # RFC 9112 2.2: ignore empty lines before the request line
                lines.append(line)
                if line in (b"\r\n", b"\n"):
                    return b"".join(lines)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            web = server.web_config.current() if server.web_config is not None else None
            self._web = web
            if web is not None and web.auth_required and not web.check_basic_auth(self.headers.get("Authorization")):
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
            else:
                self._send(404, "text/plain; charset=utf-8", f"not found; metrics are at {server.telemetry_path}\n".encode())

        def _metrics(self) -> None:
            budget = server.budget(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
            try:
                families = server._scrape(budget)
                encoder, content_type = encoder_for(self.headers.get("Accept", ""), server._renderer)
                body = encoder(families)
            except Exception as exc:  # noqa: BLE001 - a scrape must answer, not drop the connection
                log.error("scrape failed: %s", exc, exc_info=exc)
                self._send(500, "text/plain; charset=utf-8", f"scrape failed: {exc}\n".encode())
                return
            gzip_ok = "gzip" in self.headers.get("Accept-Encoding", "")
            self._send(200, content_type, gzip.compress(body, _GZIP_LEVEL) if gzip_ok else body, gzip_ok)

        def _send(self, code: int, content_type: str, body: bytes, gzipped: bool = False,
                  extra: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
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
        f"<tr><td><code>{html.escape(n)}</code></td><td>{'enabled' if on else 'disabled'}</td><td>{html.escape(d)}</td></tr>"
        for n, on, d in collectors
    )
    path = html.escape(telemetry_path, quote=True)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>obsctl-exporter</title></head>
<body>
<h1>obsctl-exporter</h1>
<p>Version {html.escape(version)}. GPU source: <code>{html.escape(gpu_mode)}</code>.</p>
<p><a href="{path}">Metrics</a> at <code>{path}</code></p>
<h2>Collectors</h2>
<table border="1" cellpadding="4">
<tr><th>collector</th><th>state</th><th>publishes</th></tr>
{rows}
</table>
<p>Each scrape reports <code>obsctl_exporter_scrape_collector_success{{collector}}</code> and
<code>obsctl_exporter_scrape_collector_duration_seconds{{collector}}</code>; a failing collector adds
<code>obsctl_exporter_scrape_collector_error_info{{collector,reason}}</code>.</p>
</body></html>
"""
