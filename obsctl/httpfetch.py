"""One HTTP GET with a wall-clock deadline and a body size cap, on requests + urllib3.

requests' ``timeout`` bounds each socket operation, not the request: a server that
sends one byte every half second keeps a read alive for ever. :func:`bounded_get`
bounds the whole attempt (connect, TLS handshake, headers, body) by a timer that shuts
the connection's socket down when the deadline passes, which makes the blocked read
return at once in whatever phase it is; the caller then gets :class:`DeadlineExceeded`.

The timer needs to know the attempt's connection. :class:`TransportAdapter` (mounted by
:func:`obsctl.httpconfig.session_for`) gives urllib3 pools whose connections register
themselves with the attempt running in the current thread (connections are used by the
thread that asked, so a thread-local is exact). The adapter also carries TLS
``server_name`` (SNI and the name the certificate must match) as urllib3 pool options.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import InsecureRequestWarning

from obsctl.errors import linked_errors

#: Default cap on one answer's (decoded) body: 64 MiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024


class DeadlineExceeded(Exception):
    """The attempt did not complete (connect + headers + whole body) within its deadline."""


class BodyTooLarge(Exception):
    """The answer's body is larger than the cap (``args[0]``: the cap in bytes).

    ``head``: the body's bytes read before the cap (at most the cap; empty when a
    ``Content-Length`` above the cap refused it before reading), and ``content_type`` its
    ``Content-Type``, for a caller that names what the answer held."""

    def __init__(self, cap: int, head: bytes = b"", content_type: str = "") -> None:
        super().__init__(cap)
        self.head = head
        self.content_type = content_type


@dataclass
class Answer:
    """A complete HTTP answer.

    Attributes:
        status: HTTP status code.
        headers: response headers (case-insensitive mapping).
        body: the whole body, content-decoded (gzip), at most the cap.
        url: the URL asked (with query), for messages; may hold the query, not userinfo.
    """

    status: int
    headers: Any
    body: bytes
    url: str


# --- the deadline watch ------------------------------------------------------------


class _Attempt:
    """Sockets used by one attempt; :meth:`expire` shuts them down."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.expired = False

    def watch(self, sock: socket.socket) -> None:
        with self.lock:
            self.sockets.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        with self.lock:
            self.expired = True
            for sock in self.sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        # socket.socket.shutdown, not SSLSocket.shutdown: the latter unwraps TLS under
        # the reading thread's feet; a plain shutdown just makes its recv return. A
        # socket already closed has fd -1 and raises OSError: nothing to do.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


_current = threading.local()


def _register(sock: socket.socket | None) -> None:
    attempt = getattr(_current, "attempt", None)
    if attempt is not None and sock is not None:
        attempt.watch(sock)


# Sockets, not connections, are watched: http.client drops ``conn.sock`` as soon as the
# headers say the connection will close, while the response still reads from it.
class _WatchedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:  # the TCP socket, before any TLS handshake
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:  # a reused keep-alive connection
        _register(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection

    def _validate_conn(self, conn: Any) -> None:
        # insecure_skip_verify is the user's explicit choice; urllib3's per-request
        # multi-line warning would break the one-line-per-problem output.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRequestWarning)
            super()._validate_conn(conn)


def _watch_pools(manager: Any) -> Any:
    manager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}
    return manager


class TransportAdapter(HTTPAdapter):
    """requests adapter whose connections honour :func:`bounded_get`'s deadline.

    Args:
        server_name: TLS server name: sent as SNI and the name the server certificate
            must match, instead of the URL's host (Prometheus' ``tls_config.server_name``).
            ``None``: the URL's host.
        **kwargs: passed to ``requests.adapters.HTTPAdapter``.
    """

    def __init__(self, server_name: str | None = None, **kwargs: Any):
        self.server_name = server_name  # before super(): it calls init_poolmanager
        super().__init__(**kwargs)

    def _tls_kwargs(self) -> dict[str, Any]:
        # urllib3 drops these for plain http:// pools (poolmanager.SSL_KEYWORDS).
        return {"server_hostname": self.server_name, "assert_hostname": self.server_name} if self.server_name else {}

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs, **self._tls_kwargs())
        _watch_pools(self.poolmanager)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        fresh = proxy not in self.proxy_manager
        manager = super().proxy_manager_for(proxy, **proxy_kwargs, **self._tls_kwargs())
        return _watch_pools(manager) if fresh else manager


# --- the bounded request -----------------------------------------------------------


def _bad_status_line(exc: BaseException) -> str | None:
    """The line of a ``BadStatusLine`` (a peer that does not speak HTTP) anywhere in
    ``exc``'s chain or arguments, as text; None when there is none."""
    for err in linked_errors(exc):
        if isinstance(err, http.client.BadStatusLine):
            return err.line if isinstance(err.line, str) else repr(err.line)
    return None


def bounded_get(
    session: requests.Session,
    url: str,
    *,
    params: Any = None,
    timeout_seconds: float,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    headers: dict[str, str] | None = None,
    read_head: bool = False,
    enough: Callable[[bytes], bool] | None = None,
) -> Answer:
    """GET ``url`` and read the whole body within ``timeout_seconds`` of wall-clock time.

    Redirects are not followed (the caller sees the 3xx answer). A peer whose answer does
    not begin with an HTTP status line gives ``requests.ConnectionError(BadStatusLine(line))``
    with ``line`` scrubbed by the session's ``scrub`` (a ConfiguredSession's secrets).

    Args:
        session: a session whose adapter for ``url`` is a :class:`TransportAdapter`
            (:func:`obsctl.httpconfig.session_for` makes one).
        timeout_seconds: deadline of the whole attempt: connect, TLS, headers, body.
        max_body_bytes: largest body accepted (after content decoding, so a gzip bomb is
            stopped too); a larger ``Content-Length`` is refused before reading, unless
            ``read_head``: then the body is read up to the cap for
            :attr:`BodyTooLarge.head`.
        enough: called with each chunk of the body in order; True stops the read as the
            cap would (:class:`BodyTooLarge` with the head read so far, this chunk included):
            a caller that can tell from the first bytes that the answer is too large.

    Returns:
        The complete :class:`Answer`.

    Raises:
        DeadlineExceeded: not complete within ``timeout_seconds`` (also a body without
            ``Content-Length`` still arriving at the deadline, which the shutdown ends).
        BodyTooLarge: the body is larger than ``max_body_bytes``.
        requests.RequestException: connection refused, TLS failure, reset, ...
        ValueError: ``session`` has no :class:`TransportAdapter` for ``url``.
    """
    if not isinstance(session.get_adapter(url), TransportAdapter):
        raise ValueError("bounded_get needs a session from obsctl.httpconfig.session_for (its TransportAdapter enforces the deadline)")
    attempt = _Attempt()
    timer = threading.Timer(timeout_seconds, attempt.expire)
    timer.daemon = True
    previous = getattr(_current, "attempt", None)
    _current.attempt = attempt
    started = time.monotonic()
    response = None
    failure: BaseException | None = None
    timer.start()
    try:
        response = session.get(url, params=params, headers=headers, stream=True, allow_redirects=False,
                               timeout=(timeout_seconds, timeout_seconds))
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > max_body_bytes and not read_head:
            failure = BodyTooLarge(max_body_bytes)
        else:
            chunks, size = [], 0
            for chunk in response.iter_content(_CHUNK):
                size += len(chunk)
                if size > max_body_bytes:
                    failure = BodyTooLarge(max_body_bytes, b"".join(chunks), response.headers.get("Content-Type", ""))
                    break
                chunks.append(chunk)
                if enough is not None and enough(chunk):
                    failure = BodyTooLarge(max_body_bytes, b"".join(chunks), response.headers.get("Content-Type", ""))
                    break
            else:
                if attempt.expired:  # a body without Content-Length ends at the shutdown: cut, not complete
                    failure = DeadlineExceeded(f"no complete answer within {timeout_seconds:g}s")
                else:
                    return Answer(response.status_code, response.headers, b"".join(chunks), response.url or url)
    except Exception as exc:  # noqa: BLE001 - after a shutdown any layer may raise anything
        if attempt.expired or time.monotonic() - started >= timeout_seconds:
            failure = DeadlineExceeded(f"no complete answer within {timeout_seconds:g}s")
        elif (line := _bad_status_line(exc)) is not None:
            # The peer's first line may echo the request (its Authorization header): scrubbed here,
            # before any reader cuts it short (a cut secret is no longer recognised).
            failure = requests.ConnectionError(http.client.BadStatusLine(getattr(session, "scrub", str)(line)))
        elif isinstance(exc, (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError)) and not isinstance(exc, requests.RequestException):
            failure = requests.ConnectionError(str(exc))  # a transport failure requests did not wrap
        else:
            raise  # requests' own errors, and the caller's (an auth hook's unreadable secret file)
    finally:
        timer.cancel()
        _current.attempt = previous
        if response is not None:
            response.close()
    # Raised here, outside the except block, so the new error carries no __context__:
    # a caller that keeps the last error (a long-running exporter) keeps no frames or body.
    raise failure
