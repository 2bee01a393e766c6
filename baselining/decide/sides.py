"""A baseline's side of a comparison, as the stages share it (no I/O, no design).

``initiative start`` stores the baseline's side (:func:`stored_side`) so ``verify`` can
judge without reading the baseline's samples again (:func:`side_for`); the memory model a
snapshot fitted is read back with :func:`memory_of`; :func:`columns` turns ``(t, v)``
samples into the float64 columns the statistics take.
"""

from __future__ import annotations

import dataclasses
from operator import itemgetter

import numpy as np

from obsctl.baselining.statistics import comparison
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.durations import parse_duration
from obsctl.records import Baseline, BaselineSide, Initiative
from obsctl.spec import Spec


def columns(samples: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` float64 columns of ``(t, v)`` samples (fromiter: no Python loop per sample)."""
    return (np.fromiter(map(itemgetter(0), samples), float, len(samples)), np.fromiter(map(itemgetter(1), samples), float, len(samples)))


def memory_of(baseline: Baseline) -> MemoryModel | None:
    """The baseline's stored memory model (None when its snapshot found no history to fit one)."""
    return MemoryModel.from_dict(baseline.memory.model_dump()) if baseline.memory is not None else None


def stored_side(spec: Spec, baseline: Baseline) -> BaselineSide | None:
    """The baseline's side of every verdict at the spec's verification step, for
    ``initiative start`` to store (:class:`~obsctl.records.BaselineSide`); None
    without a memory model or with fewer than 2 samples (verify then reads the samples)."""
    memory = memory_of(baseline)
    if memory is None or len(baseline.samples) < 2:
        return None
    step = parse_duration(spec.verification.step, "verification.step")
    b = comparison.baseline_side(*columns(baseline.samples), step, memory)
    return BaselineSide(baseline_id=baseline.id, step_seconds=step, constant=b.constant, **dataclasses.asdict(b.side))


def side_for(initiative: Initiative, baseline_id: str) -> BaselineSide | None:
    """The side stored for ``baseline_id`` on the initiative, or None."""
    return next((s for s in initiative.baseline_sides if s.baseline_id == baseline_id), None)
