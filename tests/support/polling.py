"""One way to wait for something another process or thread makes true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, *, interval: float = 0.1,
               what: str | Callable[[], str] = "the condition") -> T:
    """Call ``predicate`` until it returns something truthy and return that.

    A readiness wait, not a timing assertion: ``timeout`` only bounds a hang. After it
    passes, raises AssertionError naming ``what`` (a callable is called then, so the
    message can show the last state).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g}s waiting for {text}")
        time.sleep(interval)
