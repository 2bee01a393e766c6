"""BatchJob against gateways that are not a healthy Pushgateway: a login page answering
200, an HTML 502, a redirect, and a gateway that echoes the Authorization header back.
A real Pushgateway answers a push with 200 and an empty body (tests/integration covers
it); these answers come from proxies in front of one, so a small server stands in."""

from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from obsctl.exporters.training.batch import BatchJob, PushError

PASSWORD = "Pw-known-7f3a9"


class _Gateway(BaseHTTPRequestHandler):
    mode = "login200"

    def log_message(self, *args):
        pass

    def do_PUT(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def do_GET(self):  # where a followed redirect would land: a login page
        self._send(200, "text/html", b"<html><title>Sign in</title></html>")

    def _answer(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = type(self).mode
        if mode == "login200":
            self._send(200, "text/html; charset=utf-8", b"<html><head><title>Sign in</title></head><body>" + b"x" * 5000 + b"</body></html>")
        elif mode == "html502":
            self._send(502, "text/html", b"<html><head><title>502 Bad Gateway</title></head>\n<body>\n<hr>nginx</body></html>")
        elif mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/login")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif mode == "echo401":
            self._send(401, "text/plain", f"denied: {self.headers.get('Authorization')}".encode())
        elif mode == "ok":
            self._send(200, "", b"")
        elif mode == "ok_html_type":  # an empty answer a proxy labelled text/html
            self._send(200, "text/html", b"")

    def _send(self, status, kind, body):
        self.send_response(status)
        if kind:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("mode, succeeded, expected", [
    ("login200", True, "HTTP 200 but not a Pushgateway answer: an HTML page titled 'Sign in'"),
    ("html502", True, "HTTP 502 Bad Gateway: an HTML page titled '502 Bad Gateway'"),
    ("redirect", True, "HTTP 302"),
    ("redirect", False, "HTTP 302"),  # a failed run POSTs: urllib would follow it as a GET
    ("echo401", True, "HTTP 401 Unauthorized: denied: Basic <secret>"),
])
def test_a_push_that_was_not_stored_is_one_line_without_the_password(gateway, mode, succeeded, expected):
    _Gateway.mode = mode
    job = BatchJob("qa-eval", gateway=f"http://bob:{PASSWORD}@{gateway}", instance="ci", timeout=5)
    job.workload.count_samples(2)
    with pytest.raises(PushError) as info:
        job.finish(succeeded=succeeded)
    message = str(info.value)
    assert expected in message and "\n" not in message and len(message) < 300
    encoded = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert PASSWORD not in message and encoded not in message


@pytest.mark.parametrize("mode", ["ok", "ok_html_type"])
def test_an_empty_200_is_a_stored_push(gateway, mode):
    _Gateway.mode = mode
    BatchJob("qa-eval", gateway=gateway, instance="ci", timeout=5).finish()


@pytest.mark.parametrize("address", ["", "ftp://gw:9091", "http://gw:99999", "http://a b:9091", "http://[::1",
                                     f"http://bob:{PASSWORD}@[::1"])
def test_an_unusable_gateway_address_is_refused_at_construction(address):
    """Spaces and a broken IPv6 literal were an uncaught InvalidURL / ValueError at push time."""
    with pytest.raises(ValueError, match="Pushgateway address") as info:
        BatchJob("qa-eval", gateway=address, instance="ci")
    assert PASSWORD not in str(info.value)
