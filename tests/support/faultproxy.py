"""A fault-injecting reverse proxy for tests: in front of a real Prometheus, it passes
every request through (``mode = "pass"``) or answers the way a broken network, a login
gateway or a hostile server would (:data:`MODES`).

It can also serve TLS (server certificate, client certificates required and verified
against a CA) and check credentials and a tenant header before passing through, like
the authenticating gateways SREs put in front of Prometheus, Mimir or Thanos.

Usage::

    with FaultProxy(prometheus_url) as proxy:
        proxy.mode = "trickle"
        ... obsctl against proxy.url ...
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import struct
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HTML_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n"
            b"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
LOGIN_PAGE = (b"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in \xc2\xb7 Corp SSO</title>"
              b"</head><body><form method=\"post\" action=\"/login\"><input name=\"user\"><input name=\"password\" "
              b"type=\"password\"></form></body></html>")
DEEP_DEPTH = 100_000
HUGE_BYTES = 50 * 1000 * 1000  # the 50 MB non-JSON body of the bad-input review
OVER_CAP_BYTES = 3 * 1024 * 1024  # JSON padding, for a spec with body_size_limit below it

#: Modes and what the proxy answers (every request) in each.
MODES = {
    "pass": "pass through to Prometheus",
    "5xx": "HTTP 503 with a plain-text body",
    "html502": "HTTP 502 with nginx's HTML page",
    "login200": "HTTP 200 with an HTML login page",
    "bad_data400": "HTTP 400 with Prometheus' bad_data error envelope",
    "execution422": "HTTP 422 with Prometheus' execution error envelope",
    "trickle": "Prometheus' real answer, one byte every 0.5 s",
    "slow": "nothing for 30 s, then Prometheus' answer",
    "redirect_loop": "HTTP 302 to the same URL",
    "truncated": "the first half of Prometheus' real JSON answer (Content-Length of the half)",
    "deep": f"{DEEP_DEPTH:,}-deep nested JSON arrays",
    "huge": f"{HUGE_BYTES:,} bytes of non-JSON",
    "overcap": f"{OVER_CAP_BYTES:,} bytes of valid JSON",
    "nonjson": "a short text/plain body",
    "wrong_types": "a success envelope whose data.result is an object",
    "wrong_result_type": "a success envelope with a vector for a range query",
    "401": "HTTP 401 with WWW-Authenticate",
    "403": "HTTP 403 Forbidden",
    "echo_credentials500": "HTTP 500 whose error repeats the request's Authorization and headers",
    "reset_mid": "headers and half of Prometheus' real answer, then a TCP reset",
    "not_http": "an SSH banner instead of HTTP",
    "chunked_forever": "HTTP 200, chunked, one space per chunk every 50 ms, never ending",
    "status_error200": "HTTP 200 with an error envelope",
    "warnings_nonstring": "Prometheus' real answer with a warnings entry that is an object",
    "http10_nolength": "Prometheus' real answer as HTTP/1.0 without Content-Length, ended by closing",
    "echo_content_type": "HTTP 200 HTML whose Content-Type repeats the request's Authorization past 60 characters",
}


class FaultProxy:
    """Reverse proxy on 127.0.0.1 in front of ``upstream`` (a real Prometheus URL).

    Args:
        upstream: Prometheus base URL (http).
        tls: ``(server_cert, server_key, client_ca)`` PEM paths to serve HTTPS and
            require a client certificate signed by ``client_ca``; None: plain HTTP.
        required_headers: ``{header: exact value}`` each request must carry, else
            HTTP 401 (``Authorization``) or 403 (others), as gateways answer.

    Attributes:
        mode: one of :data:`MODES` (changeable between requests).
        only: None (the mode applies to every request) or a predicate on the request path
            with its query string: requests it refuses pass through unchanged.
        route: None, or the mode of each request from its path (None: pass through); it
            replaces ``mode`` and ``only``, per request, so concurrent requests never see
            each other's mode.
        seen: per request ``(path, headers dict, client certificate subject CN or None)``.
    """

    def __init__(self, upstream: str, tls: tuple[Path, Path, Path] | None = None, required_headers: dict[str, str] | None = None):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.mode = "pass"
        self.only = None
        self.route = None
        self.required_headers = dict(required_headers or {})
        self.seen: list[tuple[str, dict[str, str], str | None]] = []
        self.stopping = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                proxy._handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            cert, key, client_ca = tls
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert), str(key))
            ctx.load_verify_locations(str(client_ca))
            ctx.verify_mode = ssl.CERT_REQUIRED
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    # --- answers -------------------------------------------------------------------

    def _upstream(self, path: str) -> tuple[int, str, bytes]:
        if "://" in path:  # absolute form: we are used as a forward proxy (proxy_url)
            parts = urllib.parse.urlsplit(path)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.getheader("Content-Type", "application/json"), resp.read()
        finally:
            conn.close()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        cert = h.connection.getpeercert() if isinstance(h.connection, ssl.SSLSocket) else None
        cn = next((v for rdn in (cert or {}).get("subject", ()) for k, v in rdn if k == "commonName"), None)
        headers = {k: v for k, v in h.headers.items()}
        self.seen.append((h.path, headers, cn))
        for name, value in self.required_headers.items():
            if h.headers.get(name) != value:
                status = 401 if name.lower() == "authorization" else 403
                return self._send(h, status, "text/plain", f"{'Unauthorized' if status == 401 else 'Forbidden'}\n".encode(),
                                  {"WWW-Authenticate": 'Bearer realm="prometheus"'} if status == 401 else None)
        if self.route is not None:
            mode = self.route(h.path) or "pass"
        else:
            mode = self.mode if self.only is None or self.only(h.path) else "pass"
        if mode == "pass":
            return self._send(h, *self._upstream(h.path))
        if mode == "5xx":
            return self._send(h, 503, "text/plain", b"upstream connect error or disconnect/reset before headers\n")
        if mode == "html502":
            return self._send(h, 502, "text/html", HTML_502)
        if mode == "login200":
            return self._send(h, 200, "text/html; charset=utf-8", LOGIN_PAGE)
        if mode == "bad_data400":
            body = {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": 1:5: parse error: unexpected "}"'}
            return self._send(h, 400, "application/json", json.dumps(body).encode())
        if mode == "execution422":
            body = {"status": "error", "errorType": "execution", "error": "query processing would load too many samples into memory"}
            return self._send(h, 422, "application/json", json.dumps(body).encode())
        if mode == "trickle":
            status, kind, body = self._upstream(h.path)
            return self._trickle(h, status, kind, body)
        if mode == "slow":
            if self.stopping.wait(30):
                return None
            return self._send(h, *self._upstream(h.path))
        if mode == "redirect_loop":
            return self._send(h, 302, "text/plain", b"", {"Location": f"{self.url}{h.path}"})
        if mode == "truncated":
            status, kind, body = self._upstream(h.path)
            return self._send(h, status, kind, body[: len(body) // 2])
        if mode == "deep":
            return self._send(h, 200, "application/json", b"[" * DEEP_DEPTH + b"]" * DEEP_DEPTH)
        if mode == "huge":
            return self._send(h, 200, "text/plain", b"x" * HUGE_BYTES)
        if mode == "overcap":
            pad = b"0" * OVER_CAP_BYTES
            return self._send(h, 200, "application/json", b'{"status":"success","data":{"resultType":"matrix","result":[]},"pad":"' + pad + b'"}')
        if mode == "nonjson":
            return self._send(h, 200, "text/plain", b"OK\n")
        if mode == "wrong_types":
            return self._send(h, 200, "application/json", b'{"status":"success","data":{"resultType":"matrix","result":{"a":1}}}')
        if mode == "wrong_result_type":
            return self._send(h, 200, "application/json", b'{"status":"success","data":{"resultType":"vector","result":[]}}')
        if mode == "401":
            return self._send(h, 401, "text/plain", b"Unauthorized\n", {"WWW-Authenticate": 'Basic realm="prometheus"'})
        if mode == "403":
            return self._send(h, 403, "text/plain", b"Forbidden\n")
        if mode == "echo_credentials500":
            echoed = "; ".join(f"{k}: {v}" for k, v in headers.items())
            if "Authorization" in headers and headers["Authorization"].startswith("Basic "):
                echoed += "; decoded: " + base64.b64decode(headers["Authorization"][6:]).decode(errors="replace")
            body = {"status": "error", "errorType": "internal", "error": f"rejected request with {echoed}"}
            return self._send(h, 500, "application/json", json.dumps(body).encode())
        if mode == "echo_content_type":
            kind = f"text/html; charset=utf-8; echo=Authorization: {headers.get('Authorization', '')}"
            return self._send(h, 200, kind, LOGIN_PAGE)
        if mode == "reset_mid":
            status, kind, body = self._upstream(h.path)
            head = f"HTTP/1.1 {status} OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            return self._raw(h, head + body[: len(body) // 2], reset=True)
        if mode == "not_http":
            return self._raw(h, b"SSH-2.0-OpenSSH_9.6\r\n")
        if mode == "chunked_forever":
            try:
                h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                while not self.stopping.wait(0.05):
                    h.wfile.write(b"1\r\n \r\n")
                    h.wfile.flush()
            except OSError:
                pass
            return None
        if mode == "status_error200":
            body = {"status": "error", "errorType": "internal", "error": "store gateway unavailable"}
            return self._send(h, 200, "application/json", json.dumps(body).encode())
        if mode == "warnings_nonstring":
            status, kind, body = self._upstream(h.path)
            answer = json.loads(body)
            answer["warnings"] = [{"code": 7, "text": "partial"}]
            return self._send(h, status, kind, json.dumps(answer).encode())
        if mode == "http10_nolength":
            status, kind, body = self._upstream(h.path)
            return self._raw(h, f"HTTP/1.0 {status} OK\r\nContent-Type: {kind}\r\n\r\n".encode() + body)
        raise AssertionError(f"unknown mode {mode!r}")

    def _raw(self, h: BaseHTTPRequestHandler, data: bytes, reset: bool = False) -> None:
        """Write bytes as they are, then close (with a TCP reset when ``reset``)."""
        h.close_connection = True
        try:
            h.wfile.write(data)
            h.wfile.flush()
            if reset:  # SO_LINGER 0: close() sends RST instead of FIN
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.shutdown(socket.SHUT_WR) if not reset else h.connection.close()
        except OSError:
            pass

    def _send(self, h: BaseHTTPRequestHandler, status: int, kind: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", kind)
            h.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(body)
        except OSError:
            pass  # the client gave up: expected in the fault modes

    def _trickle(self, h: BaseHTTPRequestHandler, status: int, kind: str, body: bytes) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", kind)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.flush()
            for i in range(len(body)):
                h.wfile.write(body[i:i + 1])
                h.wfile.flush()
                if self.stopping.wait(0.5):
                    return
        except OSError:
            pass
