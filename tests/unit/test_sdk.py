"""Workload SDK: counts land in the right series with the constant labels, the request
context manager records outcome and latency, and the exposition passes promtool."""

from __future__ import annotations

import subprocess

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
