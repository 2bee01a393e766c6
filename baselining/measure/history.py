"""The signal's memory from history: one bounded extra range query at snapshot time.

One window underestimates long memory (the autocorrelation of a window of length ``T``
cannot show correlation beyond ``T``), so ``snapshot-baseline`` also reads the signal
over ``verification.memory_history`` (default 3 days) **before** the baseline window and
fits the memory model (:func:`obsctl.baselining.statistics.memory.fit_memory`) to that
history plus the baseline window. The query's step is the verification step when the
history fits in :data:`MAX_HISTORY_POINTS` points, else the smallest multiple of it that
does (an equal, coarser grid; the model's autocorrelation is then interpolated to the
verification step). When Prometheus holds less than asked (a young server, a series
that started since), the part it holds is read again at the finest step at which that
part fits (:func:`read_history_at`): the memory of a 2 s signal is not read at 14 s
because three days were asked of a server that holds one hour. Whatever Prometheus
still has counts ("as available"); with less than :data:`MIN_HISTORY_SAMPLES` samples
of history the model is fitted to the baseline window alone and marked ``source:
windows`` (a lower bound on the memory).
"""

from __future__ import annotations

import datetime as dt
import math
from operator import itemgetter

import numpy as np

from obsctl.baselining.statistics import placebo
from obsctl.baselining.statistics.memory import MemoryModel, fit_memory
from obsctl.promapi import PrometheusClient, TooManySeries
from obsctl.records import Memory, PlaceboCheck
from obsctl.timeutil import align_down

#: Most points the history query may return (two range requests of 11,000 at most).
MAX_HISTORY_POINTS = 20_000

#: Fewest history samples for a ``history`` memory model.
MIN_HISTORY_SAMPLES = 200


def history_step(history_seconds: float, step_seconds: float) -> float:
    """The history query's step: ``step * ceil(points / MAX_HISTORY_POINTS)`` (s)."""
    return step_seconds * max(1, math.ceil(history_seconds / step_seconds / MAX_HISTORY_POINTS))


def history_memory(client: PrometheusClient, query: str, window_start: dt.datetime, step_seconds: float, history_seconds: float,
                   baseline_samples: list[tuple[float, float]]) -> Memory | None:
    """Fit the memory model to the history before ``window_start`` and the baseline's samples.

    :func:`read_history_at` then :func:`fit_history` (``snapshot-baseline`` calls them apart,
    so that one pair's fit overlaps the next pair's requests).

    Args:
        query: the signal's PromQL (selector filled in), a single series.
        window_start: start of the baseline window (UTC).
        step_seconds: the verification step (s); history_seconds: how far back to read.
        baseline_samples: the baseline window's ``(t, value)`` samples.

    Returns:
        The stored form of the model, or None when even the baseline is too short.

    Raises:
        PrometheusUnavailable: as :meth:`PrometheusClient.query_range`.
    """
    history, hist_step = read_history_at(client, query, window_start, step_seconds, history_seconds)
    return fit_history(history, hist_step, step_seconds, baseline_samples)


def read_history(client: PrometheusClient, query: str, window_start: dt.datetime, step_seconds: float,
                 history_seconds: float) -> list[tuple[float, float]]:
    """:func:`read_history_at`'s samples alone (their step is their spacing)."""
    return read_history_at(client, query, window_start, step_seconds, history_seconds)[0]


def read_history_at(client: PrometheusClient, query: str, window_start: dt.datetime, step_seconds: float,
                    history_seconds: float) -> tuple[list[tuple[float, float]], float]:
    """The signal's finite ``(t, value)`` samples over ``history_seconds`` before
    ``window_start``, and the step they were read at (s).

    One range query at :func:`history_step`; when its first sample shows that Prometheus
    holds less than asked and that span fits :data:`MAX_HISTORY_POINTS` at a finer step, a
    second query reads that span at the finer step (module doc). ``([], step)`` when there
    is nothing to read or the query returns no single series.

    Raises:
        PrometheusUnavailable: as :meth:`PrometheusClient.query_range`.
    """
    hist_step = history_step(history_seconds, step_seconds)
    points = _read(client, query, window_start, hist_step, history_seconds)
    if points and hist_step > step_seconds:
        held = window_start.timestamp() - points[0][0] + hist_step  # the first sample may lie up to a step after the series' start
        finer = history_step(held, step_seconds)
        if finer < hist_step:
            again = _read(client, query, window_start, finer, held)
            if again:
                return again, finer
    return points, hist_step


def _read(client: PrometheusClient, query: str, window_start: dt.datetime, hist_step: float,
          history_seconds: float) -> list[tuple[float, float]]:
    end = align_down(window_start, hist_step).timestamp()
    start = max(0.0, end - history_seconds)
    if history_seconds > 0 and end - start >= hist_step:
        try:  # read only as far as one series can take (a query without its sum() is refused elsewhere)
            result = client.query_range(query, start + hist_step, end, hist_step, max_series=1)
        except TooManySeries:
            return []
        if len(result) == 1:
            return [(t, v) for t, v in result[0].values if math.isfinite(v) and t < window_start.timestamp()]
    return []


def fit_history(history: list[tuple[float, float]], hist_step: float, step_seconds: float,
                baseline_samples: list[tuple[float, float]], baseline_columns: tuple[np.ndarray, np.ndarray] | None = None) -> Memory | None:
    """The memory model of :func:`history_memory` from :func:`read_history`'s samples
    (taken at ``hist_step``) and the baseline window's samples (at ``step_seconds``;
    ``baseline_columns``: the same samples as ``(times, values)`` float64 arrays)."""
    model = None
    window = baseline_columns if baseline_columns is not None else _columns(baseline_samples)
    if len(history) >= MIN_HISTORY_SAMPLES:
        if math.isclose(hist_step, step_seconds):
            past = _columns(history)
            model = fit_memory(np.concatenate((past[0], window[0])), np.concatenate((past[1], window[1])), hist_step, source="history")
        else:
            model = fit_memory(*_columns(history), hist_step, source="history")
    if model is None and len(baseline_samples) >= 20:
        model = fit_memory(*window, step_seconds, source="windows")
    return Memory(**model.as_dict()) if model is not None else None


def placebo_checks(history: list[tuple[float, float]], hist_step: float, memory: Memory | None, baseline_seconds: float,
                   default_window_seconds: float) -> list[PlaceboCheck]:
    """The placebo checks (:func:`obsctl.baselining.statistics.placebo.placebo_check`) of the
    history for a baseline of ``baseline_seconds`` against windows of
    :func:`~obsctl.baselining.statistics.placebo.window_lengths`; ``[]`` without history or
    a memory fitted on it."""
    if memory is None or memory.source != "history" or len(history) < MIN_HISTORY_SAMPLES:
        return []
    model = MemoryModel.from_dict(memory.model_dump())
    times, values = _columns(history)
    checks = (placebo.placebo_check(times, values, hist_step, model, baseline_seconds, w) for w in placebo.window_lengths(default_window_seconds))
    return [PlaceboCheck(**c.as_dict()) for c in checks if c is not None]


def _columns(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    # The times and values as float64 arrays (fit_memory's np.asarray of the same floats).
    times = np.fromiter(map(itemgetter(0), points), dtype=np.float64, count=len(points))
    values = np.fromiter(map(itemgetter(1), points), dtype=np.float64, count=len(points))
    return times, values
