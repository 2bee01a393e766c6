"""HTTP basic auth against bcrypt hashes, with no timing difference between user names.

A check costs what its hash's bcrypt cost says (each +1 doubles it: ~6 ms at 8, ~80 ms at 12
on the benchmark machine), so a server that checks an unknown user against a fixed-cost dummy
hash tells an attacker which names exist whenever a real user's hash has another cost.
Here an unknown user is checked against a dummy hash at the *highest* configured cost, and
every failed check is padded (slept) to the time a check at that cost takes, measured on
this machine, so a wrong password for any user, known or not, answers in the same time.
A correct password is not padded (the caller already knows it).

That time is measured once, at the first failed check, as the fastest of
:data:`CALIBRATION_CHECKS` checks of the dummy hash, and is a constant from then on: a
check slowed down by a loaded machine or by a burst of concurrent checks is answered when it
ends (no pad) and never raises the pad of later ones, so a burst of wrong passwords cannot
ratchet the delay every later failure waits.

Outcomes are cached by SHA-256 of (user, hash, password) as exporter-toolkit does (at most
1,024 entries): a repeated request is answered from the cache, equally fast for every user.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import bcrypt

_CACHE_MAX = 1024
_DUMMY_PASSWORD = b"obsctl-exporter dummy password"
#: dummy checks timed (the fastest counts) to fix the cost every failed check is padded to.
CALIBRATION_CHECKS = 3


def bcrypt_cost(hashed: str) -> int:
    """The cost of a ``$2b$NN$...`` hash (validated by the web config: 4-31)."""
    return int(hashed.split("$")[2])


class BasicAuth:
    """Checks ``Authorization: Basic ...`` values against ``users``.

    Args:
        users: user name -> bcrypt hash (validated).
        hasher: what ``checkpw``, ``hashpw`` and ``gensalt`` come from (the ``bcrypt``
            module; tests inject a fake that advances their clock).
        clock: monotonic seconds. sleep: waits that many seconds (``time.sleep``).
        reference: seconds every failed check is padded to; None (the default): measured at
            the first failure (:meth:`_calibrate`).
    """

    def __init__(self, users: dict[str, str], hasher: Any = bcrypt, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, reference: float | None = None) -> None:
        self.users = dict(users)
        self.max_cost = max((bcrypt_cost(h) for h in users.values()), default=10)
        self._hasher, self._clock, self._sleep = hasher, clock, sleep
        self._dummy: str | None = None  # made on first use (one hash at the highest cost), not at load
        self._reference = reference  # seconds one check at max_cost takes here: fixed once measured
        self._cache: dict[bytes, bool] = {}
        self._lock = threading.Lock()

    def check(self, header: str | None) -> bool:
        """Whether ``header`` names a user with the right password; never raises."""
        if not self.users:
            return True
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), (hashed or "").encode(), password.encode()))).digest()
        with self._lock:
            known = self._cache.get(key)
        if known is not None:
            return known
        against = hashed or self._dummy_hash()
        started = self._clock()
        ok = self._hasher.checkpw(password.encode(), against.encode()) and hashed is not None
        if not ok:
            self._pad(started)
        with self._lock:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = ok
        return ok

    def _dummy_hash(self) -> str:
        if self._dummy is None:
            self._dummy = self._hasher.hashpw(_DUMMY_PASSWORD, self._hasher.gensalt(self.max_cost)).decode()
        return self._dummy

    @property
    def reference(self) -> float | None:
        """Seconds every failed check is padded to (None until the first failure measured it)."""
        return self._reference

    def _calibrate(self) -> float:
        """The fastest of :data:`CALIBRATION_CHECKS` checks at the highest cost (the fastest, not
        the mean: what a check costs on this machine, not what contention added to it)."""
        dummy = self._dummy_hash().encode()
        timings = []
        for _ in range(CALIBRATION_CHECKS):
            t0 = self._clock()
            self._hasher.checkpw(_DUMMY_PASSWORD, dummy)
            timings.append(self._clock() - t0)
        return min(timings)

    def _pad(self, started: float) -> None:
        """Sleep until the failed check begun at ``started`` has lasted :attr:`reference`
        seconds; a check that already took longer is not padded."""
        if self._reference is None:
            reference = self._calibrate()
            with self._lock:
                if self._reference is None:
                    self._reference = reference
        left = started + self._reference - self._clock()
        if left > 0:
            self._sleep(left)
