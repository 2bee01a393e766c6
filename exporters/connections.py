"""Connection limits of the exporter's HTTP server: a cap with eviction, head deadlines, framing.

The limits follow what Go's net/http lets node_exporter / exporter-toolkit set, with a cap Go
does not have (Go's goroutines are cheap; a Python thread per connection is not):

================================ ====================== ======================================
limit                            here                   Go net/http
================================ ====================== ======================================
connections at once              :data:`MAX_CONNECTIONS` none (ulimit; ``accept`` backs off)
  (128, at most the fd limit     at the cap the longest
  less :data:`FD_RESERVE`)       waiting head is closed
whole request head               :data:`HEAD_TIMEOUT`   ``ReadHeaderTimeout``
  (line + headers)               10 s
request head size                :data:`MAX_HEAD_BYTES` ``MaxHeaderBytes`` 1 MiB
                                 64 KiB
idle keep-alive connection       :data:`IDLE_TIMEOUT`   ``IdleTimeout``
                                 300 s (Prometheus'
                                 own idle timeout)
requests per connection          :data:`MAX_REQUESTS`   none
                                 1,000
``accept`` at the fd limit       sleeps 5 ms, doubling  the same (``Server.Serve``)
                                 to 1 s
================================ ====================== ======================================

The head cap is 64 KiB, not Go's 1 MiB: a scrape's head is a few hundred bytes, and with
the cap on connections it bounds what heads can hold to 8 MiB. A connection counts as
*waiting* from its accept (TLS handshake included) until its head is complete, and again
between kept-alive requests, and *checking* while its basic-auth password is checked (a
failed check is padded to a fixed time, see :mod:`obsctl.exporters.basicauth`). Only waiting
and checking connections are ever closed to make room (the longest-waiting first, then the
longest-checking), so a scrape being answered is never cut, and a flood of idle, trickling or
wrong-password connections cannot keep a new scrape out.

http.server and socketserver have none of these limits and no hook between reading a
head's bytes and parsing them, so heads are read here (:class:`HeadReader`) and handed to
http.server's own parser.
"""

from __future__ import annotations

import errno
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from email.message import Message

log = logging.getLogger("obsctl.exporter")

MAX_CONNECTIONS = 128
FD_RESERVE = 64  # descriptors left for everything else: listener, logs, dcgm, /proc reads
HEAD_TIMEOUT = 10.0
MAX_HEAD_BYTES = 64 * 1024
IDLE_TIMEOUT = 300.0
MAX_REQUESTS = 1000
#: accept() errors that mean "out of descriptors or memory for now": back off, do not spin.
ACCEPT_BACKOFF_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BACKOFF_FIRST, _BACKOFF_MAX = 0.005, 1.0
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_RECV = 4096


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted`` connections, lowered to the soft ``RLIMIT_NOFILE`` less :data:`FD_RESERVE`
    (at least 4), so the cap is reached before the descriptor limit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(4, min(wanted, soft - FD_RESERVE))


def shut(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways so the thread blocked reading it returns at once (the
    thread then closes it). The plain-socket call, not ``SSLSocket.shutdown``, which would
    unwrap TLS under that thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class Slot:
    """One admitted connection; ``waiting_since`` is None while a request is being answered,
    ``checking_since`` is set while its credentials are checked."""

    __slots__ = ("checking_since", "evicted", "peer", "sock", "waiting_since")

    def __init__(self, sock: socket.socket, peer: str, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.waiting_since: float | None = now
        self.checking_since: float | None = None
        self.evicted = False


class ConnectionTable:
    """The connections being served, capped at ``limit``.

    Args:
        limit: most connections at once (see :func:`connection_cap`).
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.evictions = 0
        self.refused = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._slots: set[Slot] = set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def admit(self, sock: socket.socket, peer: str) -> Slot | None:
        """A slot for a new connection, closing the longest-waiting one when at the cap;
        None (the caller closes ``sock``) when every slot is answering a request."""
        with self._lock:
            if len(self._slots) >= self.limit and not self._evict_locked():
                self.refused += 1
                return None
            slot = Slot(sock, peer, self._clock())
            self._slots.add(slot)
            return slot

    def evict_oldest(self) -> bool:
        """Close the connection that has waited longest for its request head, else the one
        whose credentials have been checked longest; False if none waits or is checked."""
        with self._lock:
            return self._evict_locked()

    def _evict_locked(self) -> bool:
        waiting = [s for s in self._slots if s.waiting_since is not None]
        if waiting:
            victim = min(waiting, key=lambda s: s.waiting_since)
            since, doing = victim.waiting_since, "waited for a request"
        else:
            checking = [s for s in self._slots if s.checking_since is not None]
            if not checking:
                return False
            victim = min(checking, key=lambda s: s.checking_since)
            since, doing = victim.checking_since, "been checking its credentials"
        victim.evicted = True
        self._slots.discard(victim)
        self.evictions += 1
        shut(victim.sock)
        log.debug("connection limit %d reached: closed %s, which had %s for %.1fs",
                  self.limit, victim.peer, doing, self._clock() - since)
        return True

    def waiting(self, slot: Slot) -> None:
        """``slot`` waits for a request head from now on (evictable)."""
        with self._lock:
            slot.waiting_since = self._clock()
            slot.checking_since = None

    def checking(self, slot: Slot) -> None:
        """``slot``'s credentials are being checked from now on (evictable once no connection
        waits): an unauthenticated request never holds a slot a scrape needs."""
        with self._lock:
            slot.waiting_since = None
            slot.checking_since = self._clock()

    def busy(self, slot: Slot) -> bool:
        """``slot`` has a complete head (or passed its credentials check) and is being answered
        (not evictable); False when it was evicted in the meantime (the caller drops the request)."""
        with self._lock:
            if slot.evicted:
                return False
            slot.waiting_since = slot.checking_since = None
            return True

    def release(self, slot: Slot) -> None:
        """The connection is closed: its slot is free."""
        with self._lock:
            self._slots.discard(slot)


class AcceptBackoff:
    """Sleeps after an ``accept`` that failed for lack of descriptors (5 ms, doubling to 1 s,
    as Go's ``Server.Serve``), so the loop never spins; :meth:`ok` resets it."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep
        self._delay = 0.0
        self.failures = 0

    def failed(self, exc: OSError) -> None:
        """Log (once per run of failures) and sleep."""
        self._delay = _BACKOFF_FIRST if self._delay == 0 else min(self._delay * 2, _BACKOFF_MAX)
        if self.failures == 0:
            log.warning("accept failed: %s; retrying with back-off up to %gs", exc.strerror or exc, _BACKOFF_MAX)
        self.failures += 1
        self._sleep(self._delay)

    def ok(self) -> None:
        """A connection was accepted."""
        if self.failures:
            log.info("accept recovered after %d failed attempts", self.failures)
        self._delay, self.failures = 0.0, 0


class HeadReader:
    """Reads request heads from one connection, within a deadline and a size cap.

    Bytes after a head (a pipelined next request) stay buffered for the next :meth:`read`.

    Args:
        sock: the connection (plain or TLS).
        clock: monotonic seconds.
    """

    def __init__(self, sock: socket.socket, clock: Callable[[], float] = time.monotonic) -> None:
        self._sock = sock
        self._clock = clock
        self._buf = bytearray()
        self.partial = 0  # bytes of an unfinished head when the last read gave up

    def read(self, first_byte_by: float, head_timeout: float = HEAD_TIMEOUT, max_bytes: int = MAX_HEAD_BYTES,
             complete_by: float | None = None) -> tuple[bytes | None, str]:
        """The next head (request line, headers, blank line) as bytes, or None and why.

        Args:
            first_byte_by: monotonic time by which the head's first byte must arrive.
            head_timeout: seconds from the first byte to the blank line.
            max_bytes: largest head accepted.
            complete_by: monotonic time by which the whole head must have arrived, whenever
                its first byte came (a new connection: its accept time + ``head_timeout``).

        Returns:
            ``(head, "")``, or ``(None, why)`` with why ``"closed"`` (end of stream or a
            reset), ``"idle"`` (no byte by ``first_byte_by``), ``"slow"`` (head not complete
            in time) or ``"too_large"``.
        """
        buf = self._buf
        started: float | None = None
        searched = 0
        while True:
            if started is None:
                lead = len(buf) - len(buf.lstrip(b"\r\n"))  # RFC 9112 2.2: empty lines before a request
                if lead:
                    del buf[:lead]
                if buf:
                    started = self._clock()
            if started is not None:
                end = _HEAD_END.search(buf, max(0, searched - 3))
                if end is not None:
                    head = bytes(buf[:end.end()])
                    del buf[:end.end()]
                    self.partial = 0
                    return head, ""
                searched = len(buf)
                if len(buf) > max_bytes:
                    self.partial = len(buf)
                    return None, "too_large"
            if started is None:
                deadline = first_byte_by
            else:
                deadline = started + head_timeout if complete_by is None else min(complete_by, started + head_timeout)
            remaining = deadline - self._clock()
            if remaining <= 0:
                self.partial = len(buf)
                return None, "idle" if started is None else "slow"
            try:
                self._sock.settimeout(remaining)
                chunk = self._sock.recv(min(_RECV, max_bytes + 1 - len(buf)))
            except TimeoutError:
                continue
            except (OSError, ValueError):  # reset, shut down by an eviction, closed, TLS alert
                chunk = b""
            if not chunk:
                self.partial = len(buf)
                return None, "closed"
            buf += chunk


def framing_problem(headers: Message) -> str:
    """Why a GET's headers frame a body it must not have, or ``""``.

    As Go's net/http: several different ``Content-Length`` values, a non-numeric one, or
    ``Transfer-Encoding`` together with ``Content-Length`` are refused; and since the
    exporter's endpoints take no body, any body (``Content-Length`` above 0 or a
    ``Transfer-Encoding``) is refused too, so its bytes can never be read as a next request.
    """
    lengths = {v.strip() for v in headers.get_all("Content-Length", [])}
    encodings = headers.get_all("Transfer-Encoding", [])
    if len(lengths) > 1:
        return "several different Content-Length headers"
    if lengths and not next(iter(lengths)).isdigit():
        return "Content-Length is not a number"
    if encodings and lengths:
        return "both Transfer-Encoding and Content-Length"
    if encodings:
        return "a request body (Transfer-Encoding) on a request that takes none"
    if lengths and int(next(iter(lengths))) > 0:
        return "a request body (Content-Length above 0) on a request that takes none"
    return ""
