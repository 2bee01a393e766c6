"""The baseline window's stationarity test at snapshot time, in its stored form.

:func:`obsctl.baselining.statistics.stationarity.check_baseline` on the baseline's samples
under the memory model ``snapshot-baseline`` just fitted (from history before the window,
or the window alone), turned into the record stored on the baseline
(:class:`obsctl.records.Stationarity`). No I/O: the samples and the model are in hand.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np

from obsctl.baselining.statistics import stationarity
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.records import Memory, Stationarity


def baseline_stationarity(columns, step_seconds: float, memory: Memory | None) -> Stationarity | None:
    """The stored stationarity test of a baseline's samples on its ``step_seconds`` grid
    under ``memory``; None without a model or with too few samples
    (:data:`obsctl.baselining.statistics.stationarity.MIN_SAMPLES`).

    Args:
        columns: ``(times s, values)`` float arrays, or the ``[(t, v), ...]`` samples.
    """
    if memory is None:
        return None
    if not isinstance(columns, tuple):
        pairs = np.asarray(columns, dtype=float).reshape(-1, 2)
        columns = (pairs[:, 0], pairs[:, 1])
    result = stationarity.check_baseline(columns[0], columns[1], step_seconds, MemoryModel.from_dict(memory.model_dump()))
    if result is None:
        return None
    fields = result.as_dict()
    fields["step_at"] = dt.datetime.fromtimestamp(result.step_at, tz=dt.UTC)
    for key in ("step_ratio", "trend_ratio"):
        if not math.isfinite(fields[key]):
            fields[key] = None
    return Stationarity(**fields)
