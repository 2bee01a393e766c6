"""Basic auth takes as long for an unknown user as for a known one with a wrong password.

Timing is measured on an injected clock that only the injected hasher moves (a check at cost
c takes 2**(c-4) ms of it, as bcrypt doubles per cost step), so nothing here depends on how
busy the machine is; the real bcrypt path is checked for verdicts, not time.
"""

from __future__ import annotations

import base64

import bcrypt
import pytest

from obsctl.errors import UsageError
from obsctl.exporters.basicauth import BasicAuth, bcrypt_cost
from obsctl.exporters.webconfig import load_web_config


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Hasher:
    """bcrypt's three calls; hashes are real bcrypt strings, work is simulated on the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    @staticmethod
    def seconds(cost: int) -> float:
        return 2 ** (cost - 4) / 1000

    def gensalt(self, cost: int) -> bytes:
        return bcrypt.gensalt(4).replace(b"$04$", f"${cost:02d}$".encode())

    def hashpw(self, password: bytes, salt: bytes) -> bytes:
        self.clock.now += self.seconds(bcrypt_cost(salt.decode()))
        return bcrypt.hashpw(password, salt.replace(salt[4:6], b"04")).replace(b"$04$", salt[3:7])

    def checkpw(self, password: bytes, hashed: bytes) -> bool:
        cost = bcrypt_cost(hashed.decode())
        self.clock.now += self.seconds(cost)
        return bcrypt.checkpw(password, hashed.replace(f"${cost:02d}$".encode(), b"$04$"))


def real_cost4_hash(password: str, cost: int) -> str:
    """A hash the fake hasher accepts for ``password``, labelled with ``cost``."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode().replace("$04$", f"${cost:02d}$")


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture()
def timed():
    clock = Clock()
    users = {"fast": real_cost4_hash("pw-fast", 8), "slow": real_cost4_hash("pw-slow", 12)}
    auth = BasicAuth(users, hasher=Hasher(clock), clock=clock, sleep=clock.sleep)

    def took(user: str, password: str) -> tuple[bool, float]:
        start = clock.now
        ok = auth.check(header(user, password))
        return ok, round(clock.now - start, 9)  # to the nanosecond: float sums drift in the last bit

    return auth, took


def test_unknown_user_is_checked_at_the_highest_configured_cost(timed) -> None:
    auth, took = timed
    assert auth.max_cost == 12
    took("nobody", "x")  # first use makes the dummy hash
    ok, seconds = took("nobody-else", "x")
    assert not ok and seconds == Hasher.seconds(12)


def test_every_failure_takes_as_long_as_a_check_at_the_highest_cost(timed) -> None:
    _, took = timed
    took("nobody", "warm-up")  # dummy hash made and the highest cost's time measured
    failures = {user: took(user, "wrong")[1] for user in ("fast", "slow", "nobody", "other")}
    assert set(failures.values()) == {Hasher.seconds(12)}, failures  # identical, not just within 2x


def test_a_low_cost_users_failure_is_padded_before_any_high_cost_check(timed) -> None:
    _, took = timed
    ok, seconds = took("fast", "wrong")  # nothing measured at cost 12 yet
    assert not ok and seconds >= Hasher.seconds(12)
    ok, seconds = took("fast", "wrong again")
    assert not ok and seconds == Hasher.seconds(12)


def test_a_burst_of_slow_checks_never_raises_the_pad(timed) -> None:
    """Checks slowed down by contention (each 20x its cost here) are answered when they end
    and leave the pad of every later failure where it was: the delay cannot be ratcheted."""
    auth, took = timed
    took("nobody", "warm-up")
    reference = auth.reference
    assert reference == pytest.approx(Hasher.seconds(12), abs=1e-9)
    hasher = auth._hasher
    normal = hasher.seconds
    hasher.seconds = lambda cost: 20 * normal(cost)  # a loaded machine
    for i in range(40):
        assert took("slow", f"burst-{i}") == (False, 20 * Hasher.seconds(12))
    hasher.seconds = normal
    assert auth.reference == reference
    assert {took(user, "wrong after")[1] for user in ("fast", "slow", "nobody")} == {Hasher.seconds(12)}


def test_the_pad_is_the_fastest_calibration_check(timed) -> None:
    auth, took = timed
    hasher = auth._hasher
    normal = hasher.seconds
    slow_first = iter([5.0, 5.0])  # the first two calibration checks land in a burst
    hasher.seconds = lambda cost: next(slow_first, None) or normal(cost)
    took("fast", "wrong")
    assert auth.reference == pytest.approx(Hasher.seconds(12), abs=1e-9)


def test_success_is_not_padded_and_answers_are_cached(timed) -> None:
    auth, took = timed
    assert took("fast", "pw-fast") == (True, Hasher.seconds(8))
    assert took("fast", "pw-fast") == (True, 0.0)  # from the cache
    took("slow", "wrong")
    assert took("slow", "wrong") == (False, 0.0)
    assert took("slow", "pw-slow") == (True, Hasher.seconds(12))


def test_real_bcrypt_verdicts(tmp_path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    active = load_web_config(path)
    assert active.check_basic_auth(header("alice", "s3cret"))
    assert not active.check_basic_auth(header("alice", "wrong"))
    assert not active.check_basic_auth(header("bob", "s3cret"))
    assert not active.check_basic_auth("Basic !!!")


@pytest.mark.parametrize("value", ["default-src 'self' ☃", "max-age=1\u00e9"])
def test_header_value_that_is_not_ascii_is_a_config_error(tmp_path, value) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"http_server_config:\n  headers:\n    Content-Security-Policy: \"{value}\"\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"web.yml:2: http_server_config.headers: value of Content-Security-Policy must be ASCII"):
        load_web_config(path)
