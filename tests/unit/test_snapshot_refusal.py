"""Which measurements ``snapshot-baseline`` refuses to store (obsctl.baselining.snapshot.refusal)."""

from __future__ import annotations

import datetime as dt

import pytest

from obsctl.baselining.measure.window import Measurement
from obsctl.baselining.snapshot import refusal
from obsctl.baselining.statistics.summary import summarize
from obsctl.records import Population, Window

T0 = 1_798_761_600
STEP = 15.0


def _measurement(values: list[float]) -> Measurement:
    samples = [(T0 + STEP * (i + 1), v) for i, v in enumerate(values)]
    window = Window(start=dt.datetime.fromtimestamp(T0, dt.UTC), end=dt.datetime.fromtimestamp(samples[-1][0], dt.UTC), step_seconds=STEP)
    return Measurement("sum(x)", window, samples, Population(series_count=1), summarize(values))


@pytest.mark.parametrize("values", [
    [0.0] * 240,  # a signal that is 0 at rest (errors per second of a healthy class)
    [-0.0] * 240,
    [1.0, -1.0] * 120,  # mean 0 with spread: still no scale
])
def test_a_mean_of_zero_is_refused_with_what_to_do(values):
    status, reason = refusal(_measurement(values), 10, 0.9)
    assert status == "refused"
    assert reason.startswith("the mean over the window is 0: a change relative to it has no scale")
    assert "snapshot a window in which the signal is not 0" in reason and "\n" not in reason


def test_a_mean_of_zero_is_refused_even_with_allow_partial():
    assert refusal(_measurement([0.0] * 240), 10, 0.9, allow_partial=True)[0] == "refused"


@pytest.mark.parametrize("values", [[0.0] * 239 + [1e-9], [5.0] * 240, [-2.0] * 240])
def test_a_mean_other_than_zero_is_stored(values):
    assert refusal(_measurement(values), 10, 0.9) == ("", "")


def test_too_few_samples_stays_no_data_before_the_zero_check():
    status, reason = refusal(_measurement([0.0] * 5), 10, 0.9)
    assert status == "no_data" and "fewer than the 10 needed" in reason
