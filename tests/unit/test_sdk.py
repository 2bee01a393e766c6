"""Workload SDK: counts land in the right series with the constant labels, the request
and step context managers record outcome, latency, running requests and step time, and
the exposition passes promtool."""

from __future__ import annotations

import subprocess
import time

import pytest
from prometheus_client import generate_latest

from obsctl.exporters.sdk import LATENCY_BUCKETS, Workload

LABELS = {"workload": "embed", "model": "m1"}


@pytest.fixture()
def wl():
    return Workload("embed", labels={"model": "m1"})


def value(wl, name, **labels):
    return wl.registry.get_sample_value(name, {**LABELS, **labels})


def test_counters_accumulate(wl):
    wl.count_tokens(120)
    wl.count_tokens(30)
    wl.count_samples(4)
    wl.count_steps()
    assert value(wl, "obsctl_tokens_total") == 150
    assert value(wl, "obsctl_samples_total") == 4
    assert value(wl, "obsctl_steps_total") == 1


def test_every_outcome_exists_before_first_use(wl):
    for outcome in ("success", "error", "rejected"):
        assert value(wl, "obsctl_requests_total", outcome=outcome) == 0


def test_request_context_records_outcome_and_latency(wl):
    with wl.request():
        pass
    with pytest.raises(KeyError):
        with wl.request():
            raise KeyError("boom")
    with wl.request() as scope:
        scope.outcome = "rejected"
    assert value(wl, "obsctl_requests_total", outcome="success") == 1
    assert value(wl, "obsctl_requests_total", outcome="error") == 1
    assert value(wl, "obsctl_requests_total", outcome="rejected") == 1
    assert value(wl, "obsctl_request_duration_seconds_count") == 3


def test_bad_outcome_and_negative_count_are_refused(wl):
    with pytest.raises(ValueError, match="outcome must be one of"):
        wl.record_request("timeout")
    with pytest.raises(ValueError):
        wl.count_tokens(-1)


def test_queue_and_quality(wl):
    wl.set_queue_depth(7)
    wl.observe_queue_wait(0.3)
    wl.observe_queue_wait(0.003)
    wl.set_quality_score("sts", 0.82)
    assert value(wl, "obsctl_queue_depth_requests") == 7
    assert value(wl, "obsctl_queue_wait_seconds_sum") == pytest.approx(0.303)
    # 0.3 s falls in the (0.25, 0.5] bucket: cumulative count 1 at le=0.25 (the 3 ms one), 2 at 0.5.
    assert value(wl, "obsctl_queue_wait_seconds_bucket", le="0.25") == 1
    assert value(wl, "obsctl_queue_wait_seconds_bucket", le="0.5") == 2
    assert value(wl, "obsctl_quality_score", evaluation="sts") == 0.82
    assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)


def test_exposition_passes_promtool(wl, tmp_path):
    wl.count_tokens(5)
    with wl.request():
        pass
    result = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(wl.registry), capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_input_output_tokens_add_to_the_total(wl):
    wl.count_input_tokens(100)
    wl.count_output_tokens(40)
    wl.count_tokens(7)  # a source that only knows the total
    assert value(wl, "obsctl_input_tokens_total") == 100
    assert value(wl, "obsctl_output_tokens_total") == 40
    assert value(wl, "obsctl_tokens_total") == 147


class SteppedClock:
    """A clock that moves only when the test says (the SDK's ``clock`` argument)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_step_context_times_and_counts():
    clock = SteppedClock()
    wl = Workload("embed", labels={"model": "m1"}, clock=clock)
    took = (0.25, 0.125, 0.0625)  # binary fractions: their sums are exact in any order
    for samples, seconds in zip((8, 8, 5), took, strict=True):
        with wl.step(tokens=samples * 16) as scope:
            clock.advance(seconds)
            scope.samples = samples
    with pytest.raises(RuntimeError):
        with wl.step(samples=100):
            clock.advance(1.0)
            raise RuntimeError("diverged")  # a failed step counts nothing
    wl.observe_step(0.5, samples=2)
    assert value(wl, "obsctl_steps_total") == 4
    assert value(wl, "obsctl_samples_total") == 8 + 8 + 5 + 2
    assert value(wl, "obsctl_tokens_total") == 21 * 16
    assert value(wl, "obsctl_step_duration_seconds_count") == 4
    assert value(wl, "obsctl_step_duration_seconds_sum") == sum(took) + 0.5
    assert value(wl, "obsctl_step_duration_seconds_bucket", le="0.05") == 0
    assert value(wl, "obsctl_step_duration_seconds_bucket", le="0.1") == 1
    assert value(wl, "obsctl_step_duration_seconds_bucket", le="0.25") == 3
    assert value(wl, "obsctl_step_duration_seconds_bucket", le="0.5") == 4
    with pytest.raises(ValueError):
        wl.observe_step(-1.0)


def test_request_context_times_with_the_clock():
    clock = SteppedClock()
    wl = Workload("embed", labels={"model": "m1"}, clock=clock)
    with wl.request():
        clock.advance(0.75)
    with pytest.raises(KeyError):
        with wl.request():
            clock.advance(0.125)
            raise KeyError("lost")  # counted as an error, with its time
    assert value(wl, "obsctl_request_duration_seconds_sum") == 0.875
    assert value(wl, "obsctl_request_duration_seconds_bucket", le="0.1") == 0
    assert value(wl, "obsctl_request_duration_seconds_bucket", le="0.25") == 1
    assert value(wl, "obsctl_request_duration_seconds_bucket", le="1.0") == 2
    assert value(wl, "obsctl_requests_total", outcome="error") == 1


def test_requests_running_while_in_flight(wl):
    with wl.request():
        with wl.request():
            assert value(wl, "obsctl_requests_running") == 2
        assert value(wl, "obsctl_requests_running") == 1
    with pytest.raises(ValueError):
        with wl.request():
            raise ValueError
    assert value(wl, "obsctl_requests_running") == 0
    wl.set_requests_running(5)
    assert value(wl, "obsctl_requests_running") == 5


def test_serve_exposes_the_registry(wl):
    import requests

    from support.servers import free_port

    port = free_port()
    wl.count_samples(3)
    wl.serve(port)
    try:
        body = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    finally:
        wl.close()
    assert 'obsctl_samples_total{model="m1",workload="embed"} 3.0' in body


def test_process_cpu_seconds_carry_the_workload_labels(wl):
    """The saturation state's CPU busy figure: this process's CPU time under the class's labels."""
    import os

    before = value(wl, "process_cpu_seconds_total")
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:  # burn 0.2 s of CPU
        pass
    after = value(wl, "process_cpu_seconds_total")
    times = os.times()
    assert after - before >= 0.15
    assert after <= times.user + times.system + 1e-6


@pytest.mark.parametrize("call", [
    lambda wl: wl.count_tokens(float("nan")),
    lambda wl: wl.count_input_tokens(float("inf")),
    lambda wl: wl.count_output_tokens(float("nan")),
    lambda wl: wl.count_samples(float("nan")),
    lambda wl: wl.count_steps(float("inf")),
    lambda wl: wl.count_samples("4"),
    lambda wl: wl.observe_step(float("nan")),
    lambda wl: wl.observe_step(0.1, samples=float("nan")),
    lambda wl: wl.observe_step(0.1, tokens=float("inf")),
    lambda wl: wl.record_request("success", float("nan")),
    lambda wl: wl.record_request("success", -0.5),
    lambda wl: wl.observe_queue_wait(-1),
    lambda wl: wl.observe_queue_wait(float("nan")),
    lambda wl: wl.set_queue_depth(-3),
    lambda wl: wl.set_requests_running(float("nan")),
    lambda wl: wl.set_quality_score("sts", float("nan")),
    lambda wl: wl.set_quality_score("", 0.5),     # evaluation="" is no label at all
    lambda wl: wl.set_quality_score(None, 0.5),
])
def test_non_finite_or_negative_input_is_refused_and_changes_nothing(wl, call):
    # A NaN added to a counter (or a histogram's _sum) stays for the life of the process:
    # every rate of it is NaN from then on. Refused, and no series moved.
    from prometheus_client import generate_latest

    wl.count_tokens(5)
    before = generate_latest(wl.registry).decode()
    with pytest.raises(ValueError, match="must be a"):
        call(wl)
    after = generate_latest(wl.registry).decode()
    strip = lambda text: [row for row in text.splitlines() if not row.startswith("process_cpu")]
    assert strip(after) == strip(before)
    assert "NaN" not in after and "-1" not in after.replace("e-1", "")


def test_numpy_like_scalars_and_negative_quality_scores_are_accepted(wl):
    class Scalar:  # what numpy / torch scalars offer: __float__
        def __float__(self):
            return 3.0

    wl.count_tokens(Scalar())
    wl.set_quality_score("delta", -0.25)  # a score may be negative (e.g. a log-likelihood)
    assert value(wl, "obsctl_tokens_total") == 3.0
    assert value(wl, "obsctl_quality_score", evaluation="delta") == -0.25


@pytest.mark.parametrize("labels, match", [
    ({"workload": "other"}, "reserved"),
    ({"outcome": "x"}, "reserved"),
    ({"evaluation": "x"}, "reserved"),
    ({"le": "x"}, "reserved"),
    ({"a-b": "x"}, "not a Prometheus label name"),
    ({"__x": "x"}, "not a Prometheus label name"),
    ({"model": 5}, "value must be a string"),
])
def test_bad_constant_labels_are_refused(labels, match):
    with pytest.raises(ValueError, match=match):
        Workload("embed", labels=labels)
