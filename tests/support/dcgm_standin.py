"""A fault-injecting dcgm-exporter stand-in (no GPU here, so no real dcgm-exporter can run).

It serves what dcgm-exporter serves on ``GET /metrics`` (a real public dump, the Prometheus text
format 0.0.4 content type) and, by ``mode``, the faults a real one or whatever sits at its
address can produce:

=================  ==================================================================
``ok``             the body given (e.g. ../shared/fixtures/dcgm/datadog-t4.txt, or a
                   4.9/4.10 exposition from tests/fixtures/dcgm/)
``html``           HTTP 200 ``text/html`` login page (a proxy / SSO in front)
``html_as_text``   an HTML page labelled ``text/plain``
``garbage``        HTTP 200 ``text/plain`` with random bytes
``error``          HTTP 500 ``internal error``
``huge``           HTTP 200 with ``Content-Length`` over the cap (refused unread)
``huge_chunked``   HTTP 200 streaming ``over_cap_bytes`` of valid-looking lines, no length
``slow``           headers only after ``slow_seconds`` (or :meth:`close`)
``trickle``        headers at once, then one body byte every 0.2 s
=================  ==================================================================

"Down" is a refused connection: :func:`refused_url`. Optionally the stand-in serves HTTPS
(``tls=`` a server :class:`ssl.SSLContext`, which may require client certificates) and checks
an ``Authorization`` header (``authorization=``), answering 401 otherwise, as a dcgm-exporter
behind its own ``--web-config-file`` does. Used by tests/unit/test_dcgm_faults.py, the
exporter TLS tests, tests/unit/test_dcgm_generations.py and bench/bench_exporter_soak.py.
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support.servers import free_port

MODES = ("ok", "html", "html_as_text", "garbage", "error", "huge", "huge_chunked", "slow", "trickle")
_LINE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 1\n' * 1000  # 44 KB of valid-looking text


def refused_url() -> str:
    """A dcgm URL on a free 127.0.0.1 port nobody listens on ("dcgm-exporter down")."""
    return f"http://127.0.0.1:{free_port()}/metrics"


class DcgmStandIn:
    """dcgm-exporter stand-in on 127.0.0.1 (see the module docstring for the modes).

    Args:
        body: what ``ok`` serves.
        mode: the initial mode (change the attribute at any time).
        over_cap_bytes: body size of ``huge`` / ``huge_chunked`` (default 17 MiB: over the 16 MiB cap).
        slow_seconds: how long ``slow`` waits before answering.
        tls: serve HTTPS with this server context.
        authorization: required ``Authorization`` header value (401 otherwise); None: no check.

    Attributes:
        url: the ``/metrics`` URL. requests: number of requests answered.
        seen_authorization: the ``Authorization`` header of the last request.
    """

    def __init__(self, body: bytes | str, mode: str = "ok", over_cap_bytes: int = 17 * 2**20,
                 slow_seconds: float = 10.0, tls: ssl.SSLContext | None = None,
                 authorization: str | None = None) -> None:
        self.body = body.encode() if isinstance(body, str) else body
        self.mode = mode
        self.over_cap_bytes = over_cap_bytes
        self.slow_seconds = slow_seconds
        self.authorization = authorization
        self.seen_authorization: str | None = None
        self.requests = 0
        self.release = threading.Event()
        self._garbage = bytes(range(256)) * 8  # not UTF-8 (0x80-0xff alone)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                try:
                    outer._handle(self)
                except OSError:
                    pass  # the client hung up (at the cap, at its timeout), as it may

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        self.seen_authorization = h.headers.get("Authorization")
        if self.authorization is not None and self.seen_authorization != self.authorization:
            self._send(h, 401, "text/plain", b"Unauthorized\n")
            return
        mode = self.mode
        if mode == "slow":
            self.release.wait(self.slow_seconds)
            self._send(h, 200, "text/plain; version=0.0.4", self.body)
        elif mode == "trickle":
            h.send_response(200)
            h.send_header("Content-Type", "text/plain; version=0.0.4")
            h.end_headers()
            for byte in self.body[:200]:
                if self.release.wait(0.2):
                    return
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
        elif mode in ("huge", "huge_chunked"):
            h.send_response(200)
            h.send_header("Content-Type", "text/plain; version=0.0.4")
            if mode == "huge":
                h.send_header("Content-Length", str(self.over_cap_bytes))
            h.end_headers()
            sent = 0
            while sent < self.over_cap_bytes:  # HTTP/1.0: the body ends when the connection closes
                h.wfile.write(_LINE)
                sent += len(_LINE)
        else:
            code, ctype, body = {
                "ok": (200, "text/plain; version=0.0.4; charset=utf-8", self.body),
                "html": (200, "text/html; charset=utf-8",
                         b"<!DOCTYPE html><html><body><form>Login required</form></body></html>"),
                "html_as_text": (200, "text/plain", b"<!DOCTYPE html>\n<html></html>"),
                "garbage": (200, "text/plain", self._garbage),
                "error": (500, "text/plain", b"internal error\n"),
            }[mode]
            self._send(h, code, ctype, body)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, ctype: str, body: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        """Release waiting handlers, stop serving, close the socket."""
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def main() -> None:
    """``python tests/support/dcgm_standin.py BODY_FILE --mode M [--over-cap-bytes N] [--slow-seconds S]``:
    serve in this process (prints the URL on stdout) until stdin closes or SIGTERM; the soak
    benchmark runs the stand-in this way so it does not share the scraper's interpreter."""
    import argparse
    import signal
    import sys
    from pathlib import Path

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("body_file", type=Path)
    p.add_argument("--mode", choices=MODES, default="ok")
    p.add_argument("--over-cap-bytes", type=int, default=17 * 2**20)
    p.add_argument("--slow-seconds", type=float, default=10.0)
    args = p.parse_args()
    server = DcgmStandIn(args.body_file.read_bytes(), args.mode, args.over_cap_bytes, args.slow_seconds)
    signal.signal(signal.SIGTERM, lambda *_: sys.stdin.close())
    print(server.url, flush=True)
    try:
        sys.stdin.read()
    except (ValueError, OSError):
        pass
    server.close()


if __name__ == "__main__":
    main()
