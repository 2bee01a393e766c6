"""The exporter's own series: build info, per-collector scrape meta, the active GPU source.

Modelled on node_exporter's ``node_scrape_collector_success{collector}`` and
``node_scrape_collector_duration_seconds{collector}``; a failing collector additionally
gets ``obsctl_exporter_scrape_collector_error_info{collector,reason}`` so the *why* is a
label you can alert and group on (``reason`` values: see exporters/gpu/errors.py, plus
``deadline_exceeded``, ``busy`` and ``exception``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


@dataclass(frozen=True)
class CollectorOutcome:
    """How one collector did in one scrape.

    Attributes:
        name: collector name (``gpu``, ``pricing``, ``attribution``).
        success: True if it returned in time without error.
        duration_seconds: wall time the scrape spent on it, seconds.
        reason: short machine reason when it failed, ``""`` otherwise.
    """

    name: str
    success: bool
    duration_seconds: float
    reason: str = ""


def build_info(version: str) -> Metric:
    """``obsctl_exporter_build_info{version}`` = 1."""
    fam = GaugeMetricFamily("obsctl_exporter_build_info", "obsctl-exporter build information; always 1.", labels=["version"])
    fam.add_metric([version], 1)
    return fam


def collector_meta(outcomes: Iterable[CollectorOutcome]) -> list[Metric]:
    """Success, duration and (for failures) error-reason families for this scrape's collectors."""
    success = GaugeMetricFamily("obsctl_exporter_scrape_collector_success",
                                "1 if the collector succeeded in this scrape, else 0.", labels=["collector"])
    duration = GaugeMetricFamily("obsctl_exporter_scrape_collector_duration_seconds",
                                 "Seconds this scrape spent in the collector.", labels=["collector"])
    error = GaugeMetricFamily("obsctl_exporter_scrape_collector_error_info",
                              "Present (=1) while a collector fails; reason says why.", labels=["collector", "reason"])
    for o in outcomes:
        success.add_metric([o.name], 1 if o.success else 0)
        duration.add_metric([o.name], o.duration_seconds)
        if not o.success:
            error.add_metric([o.name, o.reason or "unknown"], 1)
    return [success, duration] + ([error] if error.samples else [])


def gpu_source_info(mode: str, active: str) -> Metric:
    """``obsctl_gpu_source_info{mode,source}`` = 1.

    Args:
        mode: the ``--gpu.source`` setting (auto | nvml | dcgm | none).
        active: the source used in this scrape (nvml | dcgm | none).
    """
    fam = GaugeMetricFamily("obsctl_gpu_source_info",
                            "GPU source in use (source) for the --gpu.source setting (mode); always 1.",
                            labels=["mode", "source"])
    fam.add_metric([mode, active], 1)
    return fam


def collection_meta(number: int, finished_unix: float | None, duration: float | None) -> list[Metric]:
    """The background collection's own series (exporters/collection.py).

    Args:
        number: collections finished so far (0 before the first).
        finished_unix: Unix time the served collection finished (None: none yet, series left out).
        duration: seconds it took (None: none yet).
    """
    total = CounterMetricFamily("obsctl_exporter_collections", "Collections finished since the exporter started "
                                "(scrapes are served from the last one).", value=number)
    out: list[Metric] = [total]
    if finished_unix is not None:
        out.append(GaugeMetricFamily("obsctl_exporter_collection_timestamp_seconds",
                                     "Unix time the collection whose values this response carries finished.",
                                     value=finished_unix))
    if duration is not None:
        out.append(GaugeMetricFamily("obsctl_exporter_collection_duration_seconds",
                                     "Seconds the collection whose values this response carries took.", value=duration))
    return out


def collection_age(seconds: float) -> Metric:
    """``obsctl_exporter_collection_age_seconds``: seconds since the served collection finished."""
    return GaugeMetricFamily("obsctl_exporter_collection_age_seconds",
                             "Seconds since the collection whose values this response carries finished.",
                             value=max(seconds, 0.0))
