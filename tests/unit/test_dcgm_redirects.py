"""The dcgm source never follows a redirect, and never shows a secret in its errors.

Real HTTP servers on 127.0.0.1 (http.server in threads): one answers like dcgm-exporter, one
redirects to it (as a hijacked or misconfigured address would), one echoes request headers
into a malformed body (as a proxy's error page may). The session is the real
``session_for`` of a ``dcgm:`` block with a secret header read from a file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from obsctl.exporters.gpu.dcgm import DcgmSource
from obsctl.exporters.gpu.errors import GpuSourceError
from obsctl.httpconfig import HTTPClientConfig, session_for

SECRET = "tenant-token-7f3a9c1e55d2"
BODY = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-elsewhere"} 99\n'


class Server:
    """A local HTTP server answering every GET with ``answer(handler)``; records request headers."""

    def __init__(self, answer) -> None:
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(dict(self.headers))
                status, headers, body = answer(self)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        server.close()


def session(tmp_path):
    (tmp_path / "tenant").write_text(SECRET + "\n")
    cfg = HTTPClientConfig.model_validate({"http_headers": {"X-Scope-OrgID": {"files": ["tenant"]}}})
    return session_for(cfg, tmp_path, label="dcgm")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_is_an_error_naming_the_status_and_not_followed(tmp_path, servers, status) -> None:
    elsewhere = Server(lambda h: (200, {"Content-Type": "text/plain"}, BODY))
    redirect = Server(lambda h: (status, {"Location": f"{elsewhere.url}?token={SECRET}"}, b""))
    servers += [elsewhere, redirect]
    src = DcgmSource(redirect.url, timeout=3.0, session=session(tmp_path))
    with pytest.raises(GpuSourceError) as err:
        src.collect(time.monotonic() + 5)
    src.close()
    assert err.value.reason == "dcgm_bad_response"
    assert f"HTTP {status} redirect, not followed" in err.value.detail
    assert SECRET not in str(err.value) and SECRET not in err.value.detail
    assert redirect.seen and redirect.seen[0]["X-Scope-OrgID"] == SECRET  # the secret header was sent here only
    assert elsewhere.seen == []  # neither the header nor a request went to the redirect's target


def test_parse_error_quoting_a_secret_is_scrubbed(tmp_path, servers) -> None:
    def echo(handler):
        # A malformed line that quotes the request's header: the parser's message quotes it back.
        return 200, {"Content-Type": "text/plain"}, f"DCGM_FI_DEV_GPU_UTIL {handler.headers['X-Scope-OrgID']}\n".encode()

    server = Server(echo)
    servers.append(server)
    src = DcgmSource(server.url, timeout=3.0, session=session(tmp_path))
    with pytest.raises(GpuSourceError) as err:
        src.collect(time.monotonic() + 5)
    src.close()
    assert err.value.reason == "dcgm_bad_response"
    assert "not Prometheus text format" in err.value.detail
    assert SECRET not in err.value.detail and "<secret>" in err.value.detail


def test_content_type_quoting_a_secret_is_scrubbed(tmp_path, servers) -> None:
    server = Server(lambda h: (200, {"Content-Type": f"text/html; echo={h.headers['X-Scope-OrgID']}"}, b"<html>"))
    servers.append(server)
    src = DcgmSource(server.url, timeout=3.0, session=session(tmp_path))
    with pytest.raises(GpuSourceError) as err:
        src.collect(time.monotonic() + 5)
    src.close()
    assert "Content-Type" in err.value.detail and SECRET not in err.value.detail
