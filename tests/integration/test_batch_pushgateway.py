"""Batch jobs through a real Pushgateway scraped by a real Prometheus (honor_labels): a
finished job's values stay after its process exited, the next run replaces them (its run
label too), push_time_seconds dates each push, and a failed run keeps the last good score."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from support.polling import wait_until
from support.prometheus import scraped
from support.servers import Prometheus, Pushgateway

SCRIPT = Path(__file__).resolve().parent / "batch_job_script.py"
GROUP = 'job="qa-eval",instance="ci-runner"'


@pytest.fixture()
def stack(tmp_path):
    gateway = Pushgateway(tmp_path / "pgw").start()
    prom = Prometheus(tmp_path / "prom", scrape_targets={"pushgateway": [gateway.address]},
                      scrape_options={"pushgateway": {"honor_labels": True}}, scrape_interval="1s")
    try:
        prom.start()
        yield gateway, prom
    finally:
        prom.stop()
        gateway.stop()


def query(prom, expr: str, at: float) -> dict[str, float]:
    """{value of label run (or ''): value} of an instant query at ``at``."""
    data = requests.get(f"{prom.url}/api/v1/query", params={"query": expr, "time": at}, timeout=10).json()
    assert data["status"] == "success", data
    return {r["metric"].get("run", ""): float(r["value"][1]) for r in data["data"]["result"]}


#: The unix time each run's clock reads (batch_job_script.py --clock).
CLOCK = {"r1": 1_796_100_000.0, "r2": 1_796_100_600.0, "r3": 1_796_101_200.0}


def run_job(gateway, run: str, *args: str) -> tuple[int, float]:
    """Run the job; its exit code and the test's clock once it exited: a lower bound for the
    scrape that holds its push (:func:`scraped`), whose instant every query then reads."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--gateway", gateway.address, "--run", run, "--clock", str(CLOCK[run]), *args],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, time.time()


def test_batch_job_values_stay_are_replaced_and_dated(stack):
    gateway, prom = stack
    score = f'obsctl_quality_score{{{GROUP},evaluation="accuracy",workload="qa-eval"}}'
    rc, exited = run_job(gateway, "r1", "--n", "40", "--every", "4")
    assert rc == 0
    at = scraped(prom.url, after=exited)
    assert query(prom, score, at) == {"r1": 10 / 40}
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r1": 40}
    assert query(prom, f"obsctl_tokens_total{{{GROUP}}}", at) == {"r1": 400}
    assert query(prom, f"obsctl_batch_job_success{{{GROUP}}}", at) == {"r1": 1}
    (pushed1,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert pushed1 < at  # the gateway dated the push before the scrape that carried it
    assert query(prom, f"obsctl_batch_job_last_success_timestamp_seconds{{{GROUP}}}", at) == {"r1": CLOCK["r1"]}

    later = scraped(prom.url, after=at + 2)  # several 1 s scrapes after the job's process is gone: the values stay
    assert query(prom, score, later) == {"r1": 0.25}
    age = query(prom, f"time() - push_time_seconds{{{GROUP}}}", later)[""]
    assert age == pytest.approx(later - pushed1, abs=1e-6)  # staleness is visible as the push's age

    rc, exited = run_job(gateway, "r2", "--n", "30", "--every", "3")
    assert rc == 0
    at = scraped(prom.url, after=exited)
    assert query(prom, score, at) == {"r2": 10 / 30}  # run r2 replaces r1 (no r1 left)
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r2": 30}
    (pushed2,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert pushed1 < pushed2 < at

    rc, exited = run_job(gateway, "r3", "--n", "5", "--every", "1", "--fail")
    assert rc != 0
    at = scraped(prom.url, after=exited)
    assert query(prom, f"obsctl_batch_job_success{{{GROUP}}}", at) == {"r3": 0}
    assert query(prom, score, at) == {"r2": 10 / 30}, "a failed run keeps the last good score"
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r2": 30}
    ok3 = query(prom, f"obsctl_batch_job_last_success_timestamp_seconds{{{GROUP}}}", at)
    assert ok3 == {"r2": CLOCK["r2"]}, "the success timestamp is the last good run's"
    (pushed3,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert pushed2 < pushed3 < at, "the failed run's push is dated too"


def test_refused_and_unreachable_pushes_are_one_readable_line(tmp_path, caplog):
    from obsctl.exporters.training.batch import BatchJob, PushError
    from support.servers import free_port

    gateway = Pushgateway(tmp_path / "pgw").start()
    try:
        # Another group already has obsctl_samples_total as a gauge: the real gateway refuses ours (400).
        body = "# TYPE obsctl_samples_total gauge\nobsctl_samples_total 1\n"
        requests.put(f"{gateway.url}/metrics/job/other", data=body, timeout=10).raise_for_status()
        job = BatchJob("qa-eval", gateway=f"http://bob:s3cret@{gateway.address}", instance="ci-runner")
        job.workload.count_samples(3)
        with pytest.raises(PushError) as refused:
            job.finish()
        message = str(refused.value)
        assert "400" in message and "qa-eval" in message and gateway.address in message
        assert "s3cret" not in message and "\n" not in message
    finally:
        gateway.stop()

    with pytest.raises(PushError, match=r"Pushgateway http://127\.0\.0\.1:\d+ failed"):
        BatchJob("qa-eval", gateway=f"127.0.0.1:{free_port()}", instance="x", timeout=2).finish()
    # A failing job whose push fails too: the job's own error propagates, the push failure is logged.
    with pytest.raises(ZeroDivisionError):
        with BatchJob("qa-eval", gateway=f"127.0.0.1:{free_port()}", instance="x", timeout=2):
            raise ZeroDivisionError("the job failed")
    assert any("failed" in r.getMessage() for r in caplog.records)


def test_url_credentials_reach_a_gateway_that_requires_basic_auth(tmp_path):
    """A real Pushgateway with basic_auth_users (web config, bcrypt): the URL's user:password
    is sent as basic auth; a wrong password is a 401 PushError without the password."""
    import bcrypt
    import yaml

    from obsctl.exporters.training.batch import BatchJob, PushError
    from support.servers import free_port, spawn

    port = free_port()
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {"bob": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()}}))
    proc = spawn("pushgateway", ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}",
                                 f"--web.config.file={web}", f"--persistence.file={tmp_path / 'pushgateway.data'}"],
                 tmp_path)
    try:
        def ready() -> bool:
            try:
                return requests.get(f"http://127.0.0.1:{port}/-/ready", auth=("bob", "s3cret"), timeout=1).ok
            except requests.RequestException:
                return False

        wait_until(ready, 30, what="the Pushgateway with basic auth to be ready")
        assert requests.get(f"http://127.0.0.1:{port}/-/ready", timeout=5).status_code == 401  # auth is on
        job = BatchJob("qa-eval", gateway=f"http://bob:s3cret@127.0.0.1:{port}", instance="ci-runner")
        job.workload.set_quality_score("accuracy", 0.75)
        job.finish()
        body = requests.get(f"http://127.0.0.1:{port}/metrics", auth=("bob", "s3cret"), timeout=5).text
        assert 'obsctl_quality_score{evaluation="accuracy",instance="ci-runner",job="qa-eval",workload="qa-eval"} 0.75' in body
        with pytest.raises(PushError, match="HTTP 401") as refused:
            BatchJob("qa-eval", gateway=f"http://bob:wrong-pw@127.0.0.1:{port}", instance="ci-runner").finish()
        assert "wrong-pw" not in str(refused.value) and "bob" not in str(refused.value)
    finally:
        proc.stop()
