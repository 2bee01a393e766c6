"""Label values the SDK publishes are bounded where a caller could make them unbounded:
distinct evaluation names (``max_evaluations``, with a counter of what was dropped), and
Pushgateway grouping-key names (they go into the push URL unescaped)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from obsctl.exporters.sdk import Workload
from obsctl.exporters.training.batch import BatchJob


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"workload": "eval", **labels})


def test_evaluations_past_the_limit_are_dropped_and_counted(caplog) -> None:
    wl = Workload("eval", max_evaluations=3)
    with caplog.at_level(logging.WARNING, logger="obsctl.exporters.sdk"):
        for i in range(50):
            wl.set_quality_score(f"eval-{i}", 0.5)
        wl.set_quality_score("eval-1", 0.9)  # one already published: updated, not dropped
    scores = [s for m in wl.registry.collect() for s in m.samples if s.name == "obsctl_quality_score"]
    assert sorted(s.labels["evaluation"] for s in scores) == ["eval-0", "eval-1", "eval-2"]
    assert value(wl.registry, "obsctl_quality_score", evaluation="eval-1") == 0.9
    assert value(wl.registry, "obsctl_sdk_dropped_label_values_total", label="evaluation") == 47
    assert len([r for r in caplog.records if "distinct evaluation names" in r.getMessage()]) == 1


def test_no_limit_by_default() -> None:
    wl = Workload("eval")
    for i in range(200):
        wl.set_quality_score(f"e{i}", 1.0)
    assert value(wl.registry, "obsctl_quality_score", evaluation="e199") == 1.0
    assert value(wl.registry, "obsctl_sdk_dropped_label_values_total", label="evaluation") is None


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
def test_bad_limit_is_refused(limit) -> None:
    with pytest.raises(ValueError, match="max_evaluations"):
        Workload("eval", max_evaluations=limit)


@pytest.mark.parametrize("name", ["x/job/other", "job", "__name__", "1st", "a-b", "", "a b"])
def test_grouping_key_name_must_be_a_label_name(name) -> None:
    with pytest.raises(ValueError, match="grouping key name"):
        BatchJob("train", "127.0.0.1:9091", grouping_key={name: "v"})


def test_valid_grouping_key_names_are_accepted() -> None:
    job = BatchJob("train", "127.0.0.1:9091", instance="node-1", grouping_key={"cluster": "a/b", "_team": ""})
    assert job.grouping_key == {"instance": "node-1", "cluster": "a/b", "_team": ""}
