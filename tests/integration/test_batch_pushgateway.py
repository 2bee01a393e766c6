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

from obsctl.stack import Prometheus, Pushgateway
from support.polling import wait_until

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


def settled(prom, expr: str, expected: dict, timeout: float = 30.0) -> float:
    """The first instant (whole milliseconds, as Prometheus keeps it) at which ``expr``
    answers ``expected``: the scrape holding the pushed group is in; the test's other
    queries read that same instant, so every series comes from that scrape."""
    def now_if_settled() -> float | None:
        at = round(time.time(), 3)
        return at if query(prom, expr, at) == expected else None

    return wait_until(now_if_settled, timeout, interval=0.25,
                      what=lambda: f"{expr} == {expected} (now {query(prom, expr, time.time())})")


def scraped_past(prom, at: float, timeout: float = 30.0) -> None:
    """Wait until Prometheus has stored a scrape of the gateway later than ``at``."""
    wait_until(lambda: query(prom, 'timestamp(up{job="pushgateway"})', time.time()).get("", 0) > at, timeout,
               interval=0.25, what=f"a scrape after {at}")


def run_job(gateway, *args: str) -> tuple[float, float, int]:
    before = time.time()
    proc = subprocess.run([sys.executable, str(SCRIPT), "--gateway", gateway.address, *args],
                          capture_output=True, text=True, timeout=60)
    return before, time.time(), proc.returncode


def test_batch_job_values_stay_are_replaced_and_dated(stack):
    gateway, prom = stack
    score = f'obsctl_quality_score{{{GROUP},evaluation="accuracy",workload="qa-eval"}}'
    b1, a1, rc = run_job(gateway, "--run", "r1", "--n", "40", "--every", "4")
    assert rc == 0
    at = settled(prom, score, {"r1": 10 / 40})
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r1": 40}
    assert query(prom, f"obsctl_tokens_total{{{GROUP}}}", at) == {"r1": 400}
    assert query(prom, f"obsctl_batch_job_success{{{GROUP}}}", at) == {"r1": 1}
    (pushed1,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert b1 - 1 <= pushed1 <= a1 + 1
    (ok1,) = query(prom, f"obsctl_batch_job_last_success_timestamp_seconds{{{GROUP}}}", at).values()
    assert b1 - 1 <= ok1 <= a1 + 1

    later = at + 2.5  # several 1 s scrapes after the job's process is gone: the values stay
    scraped_past(prom, later)
    assert query(prom, score, later) == {"r1": 0.25}
    age = query(prom, f"time() - push_time_seconds{{{GROUP}}}", later)[""]
    assert age == pytest.approx(later - pushed1, abs=1e-3)  # staleness is visible as the push's age

    b2, a2, rc = run_job(gateway, "--run", "r2", "--n", "30", "--every", "3")
    assert rc == 0
    at = settled(prom, score, {"r2": 10 / 30})  # run r2 replaces r1 (no r1 left)
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r2": 30}
    (pushed2,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert b2 - 1 <= pushed2 <= a2 + 1 and pushed2 > pushed1

    b3, a3, rc = run_job(gateway, "--run", "r3", "--n", "5", "--every", "1", "--fail")
    assert rc != 0
    at = settled(prom, f"obsctl_batch_job_success{{{GROUP}}}", {"r3": 0})
    assert query(prom, score, at) == {"r2": 10 / 30}, "a failed run keeps the last good score"
    assert query(prom, f"obsctl_samples_total{{{GROUP}}}", at) == {"r2": 30}
    (ok3,) = query(prom, f"obsctl_batch_job_last_success_timestamp_seconds{{{GROUP}}}", at).values()
    assert b2 - 1 <= ok3 <= a2 + 1, "the success timestamp is the last good run's"
    (pushed3,) = query(prom, f"push_time_seconds{{{GROUP}}}", at).values()
    assert b3 - 1 <= pushed3 <= a3 + 1, "the failed run's push is dated too"


def test_refused_and_unreachable_pushes_are_one_readable_line(tmp_path, caplog):
    from obsctl.exporters.training.batch import BatchJob, PushError
    from obsctl.stack import free_port

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
    from obsctl.stack import free_port, spawn

    port = free_port()
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {"bob": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()}}))
    proc = spawn("pushgateway", ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}",
                                 f"--web.config.file={web}"], tmp_path)
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
