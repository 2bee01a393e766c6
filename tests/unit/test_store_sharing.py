"""A team and a CronJob sharing one store directory (docs/store.md#a-teams-store): real
processes on one directory, as on a shared ReadWriteMany volume.

- Two processes race ``initiative start`` on the same class: exactly one wins, the other
  gets the one-change-per-class refusal (the check and the write are under one lock).
- A process holding the store (a long promote in the CronJob) makes a writer wait; past
  the lock timeout the writer fails with one line and writes nothing.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import yaml

from obsctl.baselining.store import Store
from support.store_records import make_baseline

SPEC = {"store": "store",
        "workload_classes": [{"name": "embed-online", "kind": "inference", "selector": {"workload": "embed-online"}}],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"}]}


def _start(spec_path: str, name: str, go, results) -> None:
    from obsctl.baselining.initiative import Start, start_initiative
    from obsctl.errors import ObsctlError
    from obsctl.spec import load_spec

    spec = load_spec(spec_path)
    go.wait(30)
    try:
        i = start_initiative(spec, Store(spec.store_path()), Start(name, "batch-size", "embed-online", "tokens_per_second", 0.2))
        results.put(("ok", i.id))
    except ObsctlError as exc:
        results.put(("refused", str(exc)))


def _hold(path: str, seconds: float, held, trying=None, releasing=None) -> None:
    """Hold the store's lock ``seconds`` (with ``trying``: from when the writer is about to
    write), setting ``releasing`` just before letting go."""
    store = Store(Path(path))
    with store.locked():
        held.set()
        if trying is not None:
            trying.wait(60)
        time.sleep(seconds)
        if releasing is not None:
            releasing.set()


def _write(path: str, timeout: float, results, trying=None, releasing=None) -> None:
    """Write one baseline; ``("ok", whether the holder was releasing by then)`` or ``("refused", message)``."""
    from obsctl.baselining import store as store_module
    from obsctl.errors import StoreError

    store_module.LOCK_TIMEOUT_SECONDS = timeout
    if trying is not None:
        trying.set()
    try:
        Store(Path(path)).save_baseline(make_baseline(sig="queue_wait"))
        results.put(("ok", releasing is not None and releasing.is_set()))
    except StoreError as exc:
        results.put(("refused", str(exc)))


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    Store(tmp_path / "store").save_baseline(make_baseline())
    return path


def test_two_processes_starting_on_one_class_one_wins(tmp_path):
    spec_path = _spec(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_start, args=(str(spec_path), name, go, results)) for name in ("team change", "cronjob change")]
    for p in procs:
        p.start()
    time.sleep(1.0)  # both are importing; the event releases them together
    go.set()
    outcomes = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    assert [o[0] for o in outcomes] == ["ok", "refused"], outcomes
    assert "active initiative" in outcomes[1][1] or "already" in outcomes[1][1], outcomes[1][1]
    assert len(Store(tmp_path / "store").initiatives()) == 1


def test_a_writer_waits_for_the_holder_and_gives_up_with_one_line(tmp_path):
    store_path = str(_spec(tmp_path).parent / "store")
    ctx = multiprocessing.get_context("spawn")
    held, trying, releasing, results = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold, args=(store_path, 1.0, held, trying, releasing))
    holder.start()
    assert held.wait(30)
    waiter = ctx.Process(target=_write, args=(store_path, 10.0, results, trying, releasing))  # waits out the hold
    waiter.start()
    status, after_release = results.get(timeout=60)
    assert status == "ok" and after_release  # it really waited for the holder: its write came after the release
    holder.join(30), waiter.join(30)
    holder = ctx.Process(target=_hold, args=(store_path, 5.0, held))
    held.clear()
    holder.start()
    assert held.wait(30)
    quitter = ctx.Process(target=_write, args=(store_path, 0.5, results))
    quitter.start()
    status, message = results.get(timeout=60)
    holder.join(30), quitter.join(30)
    assert status == "refused" and "store is locked by another obsctl process" in message and "\n" not in message
    assert len(Store(store_path).history("embed-online", "queue_wait")) == 1  # the refused write left nothing
