"""The SDK in prometheus_client's multiprocess mode, one process per data-parallel rank:
real child processes write to one PROMETHEUS_MULTIPROC_DIR and the aggregate sums their
counters and histograms, keeps only live processes in the ``livesum`` gauges once a dead
one is marked, and keeps the most recent quality score. (The same under a multi-worker
web server: tests/integration/test_sdk_gunicorn.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from obsctl.exporters.sdk import mark_process_dead, multiprocess_registry, prepare_multiprocess_dir

RANK = textwrap.dedent("""
    import sys
    from obsctl.exporters.sdk import Workload
    rank, samples, depth, score = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    wl = Workload("ddp-train", labels={"run": "r1"})
    for _ in range(samples):
        wl.observe_step(0.01 * (rank + 1), samples=1, tokens=128)
    wl.set_queue_depth(depth)
    wl.set_quality_score("val_loss", score)
""")


def samples_of(registry, name):
    return {tuple(sorted(s.labels.items())): s.value for m in registry.collect() for s in m.samples if s.name == name}


def test_ranks_sum_and_dead_rank_gauges_leave(tmp_path):
    directory = prepare_multiprocess_dir(tmp_path / "mp")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    procs = []
    # One after the other, so rank 1's score is the most recent one.
    for rank, n, depth, score in ((0, 5, 2, 0.9), (1, 7, 3, 0.7)):
        procs.append(subprocess.Popen([sys.executable, "-c", RANK, str(rank), str(n), str(depth), str(score)], env=env))
        assert procs[-1].wait(60) == 0
    reg = multiprocess_registry(directory)
    labels = (("run", "r1"), ("workload", "ddp-train"))
    assert samples_of(reg, "obsctl_samples_total") == {labels: 12}
    assert samples_of(reg, "obsctl_steps_total") == {labels: 12}
    assert samples_of(reg, "obsctl_tokens_total") == {labels: 12 * 128}
    assert samples_of(reg, "obsctl_step_duration_seconds_sum")[labels] == pytest.approx(5 * 0.01 + 7 * 0.02)
    assert samples_of(reg, "obsctl_step_duration_seconds_count")[labels] == 12
    # Both exited but nobody marked them dead yet: livesum still adds both.
    assert samples_of(reg, "obsctl_queue_depth_requests") == {labels: 5}
    assert samples_of(reg, "obsctl_quality_score") == {(("evaluation", "val_loss"), *labels): 0.7}

    mark_process_dead(procs[0].pid, directory)
    assert samples_of(reg, "obsctl_queue_depth_requests") == {labels: 3}
    assert samples_of(reg, "obsctl_samples_total") == {labels: 12}, "a dead rank's counts stay in the sum"
    assert samples_of(reg, "obsctl_quality_score") == {(("evaluation", "val_loss"), *labels): 0.7}

    prepare_multiprocess_dir(directory)
    assert samples_of(multiprocess_registry(directory), "obsctl_samples_total") == {}


def test_a_value_file_not_yet_sized_is_skipped_not_a_failed_scrape(tmp_path):
    # A worker that has created its file but not yet sized it (or was killed in between)
    # leaves 0 bytes; the aggregate of the others is still served, unchanged.
    directory = prepare_multiprocess_dir(tmp_path / "mp")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    assert subprocess.run([sys.executable, "-c", RANK, "0", "5", "2", "0.9"], env=env, timeout=60).returncode == 0
    for kind in ("counter", "histogram", "gauge_livesum"):
        (directory / f"{kind}_999999.db").touch()
    reg = multiprocess_registry(directory)
    labels = (("run", "r1"), ("workload", "ddp-train"))
    assert samples_of(reg, "obsctl_samples_total") == {labels: 5}
    assert samples_of(reg, "obsctl_step_duration_seconds_count") == {labels: 5}
    assert samples_of(reg, "obsctl_queue_depth_requests") == {labels: 2}


def test_variable_set_after_import_is_refused(tmp_path):
    code = textwrap.dedent(f"""
        import os, prometheus_client
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = {str(tmp_path)!r}
        from obsctl.exporters.sdk import Workload
        try:
            Workload("late")
        except RuntimeError as exc:
            print(exc)
    """)
    env = {k: v for k, v in os.environ.items() if k.upper() != "PROMETHEUS_MULTIPROC_DIR"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "set it in the environment before the process starts" in out.stdout, out.stderr


@pytest.mark.parametrize("make, why", [(lambda p: None, "does not exist"), (lambda p: p.write_text("x"), "is not a directory")])
def test_a_missing_or_non_directory_multiproc_dir_is_named_at_start(tmp_path, make, why):
    """Was a bare FileNotFoundError / NotADirectoryError on prometheus_client's .db file."""
    target = tmp_path / "metrics"
    make(target)
    code = textwrap.dedent("""
        from obsctl.exporters.sdk import Workload
        try:
            Workload("w").count_tokens(1)
        except RuntimeError as exc:
            print(exc)
    """)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(target)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert f"PROMETHEUS_MULTIPROC_DIR={target} {why}: create it" in out.stdout, out.stdout + out.stderr


def test_no_directory_is_a_readable_error(monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with pytest.raises(ValueError, match="PROMETHEUS_MULTIPROC_DIR"):
        multiprocess_registry()


def test_wsgi_and_asgi_apps_answer_the_aggregate(tmp_path):
    import asyncio
    from wsgiref.util import setup_testing_defaults

    from obsctl.exporters.sdk import make_asgi_app, make_wsgi_app

    directory = prepare_multiprocess_dir(tmp_path / "mp")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    for rank, n in ((0, 4), (1, 6)):
        assert subprocess.run([sys.executable, "-c", RANK, str(rank), str(n), "1", "0.5"], env=env, timeout=60).returncode == 0
    line = 'obsctl_samples_total{run="r1",workload="ddp-train"} 10.0'

    environ: dict = {}
    setup_testing_defaults(environ)
    status = []
    body = b"".join(make_wsgi_app(directory)(environ, lambda s, h: status.append(s)))
    assert status == ["200 OK"] and line in body.decode()

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "headers": []}
    asyncio.run(make_asgi_app(directory)(scope, receive, send))
    assert sent[0]["status"] == 200 and line in sent[1]["body"].decode()


def test_serve_in_multiprocess_mode_serves_the_aggregate(tmp_path):
    import requests

    from support.servers import free_port

    directory = prepare_multiprocess_dir(tmp_path / "mp")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    assert subprocess.run([sys.executable, "-c", RANK, "1", "6", "1", "0.5"], env=env, timeout=60).returncode == 0
    port = free_port()
    rank0 = textwrap.dedent(f"""
        import sys
        from obsctl.exporters.sdk import Workload
        wl = Workload("ddp-train", labels={{"run": "r1"}})
        wl.count_samples(4)
        wl.serve({port})
        print("up", flush=True)
        sys.stdin.readline()
        wl.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", rank0], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        body = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        proc.communicate("\n", timeout=30)
    assert 'obsctl_samples_total{run="r1",workload="ddp-train"} 10.0' in body  # rank 1's 6 + rank 0's own 4
