"""baselining.workers.DaemonPool: results in order, errors where they are read, and leaving
the block (normally or by an exception) never waits for a call still running."""

from __future__ import annotations

import threading
import time

import pytest

from obsctl.baselining.workers import DaemonPool


def test_map_keeps_the_order_and_bounds_the_workers():
    running, peak, lock = [0], [0], threading.Lock()
    # The first three calls meet at a barrier: it breaks (and map raises) unless three
    # workers really run at once; a fourth concurrent worker would push the peak to 4.
    together = threading.Barrier(3, timeout=5)

    def work(x):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        if x < 3:
            together.wait()
        time.sleep(0.01 * (5 - x % 5))
        with lock:
            running[0] -= 1
        return x * x

    with DaemonPool(3) as pool:
        assert list(pool.map(work, range(12))) == [x * x for x in range(12)]
    assert peak[0] == 3


def test_an_error_is_raised_where_read_and_cancels_the_calls_not_started():
    gate = threading.Event()
    started = []

    def work(x):
        started.append(x)
        if x == 0:
            raise ValueError("first")
        gate.wait(5)
        return x

    with pytest.raises(ValueError, match="first"):
        with DaemonPool(2) as pool:
            list(pool.map(work, range(10)))
    gate.set()
    time.sleep(0.05)
    assert len(started) <= 3  # 0, the one in flight on the other worker, at most one more picked up before the cancel


def test_leaving_the_block_does_not_wait_and_the_workers_are_daemons():
    release = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        with DaemonPool(2, "t-pool") as pool:
            slow = pool.submit(release.wait, 30)
            raise KeyboardInterrupt
    assert not slow.done()  # the block was left while its job still waited
    workers = [t for t in threading.enumerate() if t.name.startswith("t-pool")]
    assert workers and all(t.daemon for t in workers)
    release.set()
    assert slow.result(5) is True
