"""The SDK in multiprocess mode under a real multi-worker server: gunicorn with 2 sync
workers serving tests/integration/sdk_wsgi_app.py. Requests reach both workers; the
scrape (from a worker's mounted /metrics and from the master's own port) shows the
counters summed over the workers; a worker killed with SIGKILL keeps its counts in the
sums while its live gauge share leaves (gunicorn's child_exit -> mark_process_dead)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from support.polling import wait_until
from support.servers import ManagedProcess, free_port, wait_ready

HERE = Path(__file__).resolve().parent
LABELS = {"model": "tiny", "workload": "mp-web"}


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    body = requests.get(url, timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


def get(values, name, **labels):
    return values.get((name, tuple(sorted({**LABELS, **labels}.items()))))


@pytest.fixture()
def gunicorn(tmp_path):
    port, master_port = free_port(), free_port()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "mp"), "OBSCTL_TEST_MASTER_METRICS_PORT": str(master_port)}
    argv = [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}", "--chdir", str(HERE),
            "--config", str(HERE / "sdk_gunicorn_conf.py"), "--graceful-timeout", "5", "sdk_wsgi_app:app"]
    log = (tmp_path / "gunicorn.log").open("wb")
    proc = ManagedProcess("gunicorn", subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                       stdin=subprocess.DEVNULL), tmp_path / "gunicorn.log")
    log.close()
    try:
        wait_ready(f"http://127.0.0.1:{master_port}/metrics", 60, proc.process)
        wait_ready(f"http://127.0.0.1:{port}/metrics", 60, proc.process)
        yield f"http://127.0.0.1:{port}", f"http://127.0.0.1:{master_port}"
    finally:
        proc.stop()
        assert proc.process.returncode is not None


def test_workers_sum_and_dead_worker_gauges_leave(gunicorn):
    app, master = gunicorn
    sent = collections.Counter()  # worker pid -> requests
    tokens = 0
    with ThreadPoolExecutor(4) as pool:
        for round_ in range(20):  # concurrent slow requests make the second worker accept too
            ns = [round_ * 4 + i + 1 for i in range(4)]
            for n, resp in zip(ns, pool.map(lambda n: requests.get(f"{app}/work", params={"n": n, "sleep": 0.1}, timeout=10), ns), strict=True):
                assert resp.status_code == 200
                sent[int(resp.text)] += 1
                tokens += n
            if len(sent) == 2 and round_ >= 2:
                break
    assert len(sent) == 2, f"requests reached only {dict(sent)}"
    total = sum(sent.values())
    for url in (f"{app}/metrics", f"{master}/metrics"):
        values = scrape(url)
        assert get(values, "obsctl_requests_total", outcome="success") == total
        assert get(values, "obsctl_request_duration_seconds_count") == total
        assert get(values, "obsctl_input_tokens_total") == tokens
        assert get(values, "obsctl_output_tokens_total") == 2 * tokens
        assert get(values, "obsctl_tokens_total") == 3 * tokens
        assert get(values, "obsctl_requests_running") == 0
        assert get(values, "obsctl_queue_depth_requests") == 3 * 2  # livesum: 3 in each worker

    victim = min(sent)
    os.kill(victim, signal.SIGKILL)
    # once gunicorn reaps the worker (child_exit), its livesum share leaves the sum
    def without_the_victim() -> dict | None:
        got = scrape(f"{master}/metrics")
        return got if get(got, "obsctl_queue_depth_requests") == 3 else None

    values = wait_until(without_the_victim, 30, interval=0.2, what="the killed worker's gauge share to leave the sum")
    assert get(values, "obsctl_requests_total", outcome="success") == total, "a dead worker's counts stay in the sum"
    assert get(values, "obsctl_input_tokens_total") == tokens
