"""When a verdict is judged again against the baseline's later part (decide.later_level)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.baselining.decide import later_level
from obsctl.records import Stationarity

AT = dt.datetime(2026, 11, 2, 23, 30, tzinfo=dt.UTC)


def record(step_p: float, trend_p: float, moved: bool = False, step_ratio: float | None = 0.08) -> Stationarity:
    return Stationarity(step_p_value=step_p, trend_p_value=trend_p, moved=moved, kind="step" if moved else "", step_at=AT,
                        step_ratio=step_ratio, trend_ratio=0.05, level=0.05, simulations=999, samples=240, block_seconds=15.0)


@pytest.mark.parametrize("verdict, change, st, expected", [
    ("IMPROVED", 0.04, record(0.1, 0.3), True),             # suggestive, moved up, the window read up: judged again
    ("IMPROVED", 0.04, record(0.7, 0.2), True),             # the trend's p-value is the smaller one
    ("IMPROVED", 0.04, record(0.6, 0.7), False),            # not suggestive
    ("IMPROVED", 0.04, record(0.01, 0.3, moved=True), False),  # flagged: the whole verdict is capped instead
    ("IMPROVED", 0.04, None, False),                        # untested
    ("INCONCLUSIVE", 0.04, record(0.1, 0.3), False),        # nothing decided
    ("IMPROVED", 0.04, record(0.1, 0.3, step_ratio=-0.08), False),   # moved away from the window: already cautious
    ("REGRESSED", -0.04, record(0.1, 0.3, step_ratio=-0.08), True),  # moved down, the window read down
    ("NO_CHANGE", -0.001, record(0.1, 0.3, step_ratio=0.08), True),  # an equivalence is judged again either way
    ("IMPROVED", 0.04, record(0.1, 0.3, step_ratio=None), True),     # the size unknown: judged again
])
def test_applies(verdict, change, st, expected):
    assert later_level.applies(verdict, change, st) is expected


def test_the_later_part_starts_at_the_split():
    t = AT.timestamp() + np.arange(-10, 10) * 15.0
    v = np.arange(20.0)
    lt, lv = later_level.later_part(t, v, record(0.1, 0.3))
    assert lt[0] == AT.timestamp() and lv.tolist() == list(range(10, 20))


def test_the_cap_only_where_the_two_disagree():
    st = record(0.1, 0.3)
    assert later_level.later_level_cap("IMPROVED", "IMPROVED", 0.05, 0.01, 0.09, st, 120) == (None, "")
    assert later_level.later_level_cap("INCONCLUSIVE", "NO_CHANGE", 0.0, -0.01, 0.01, st, 120) == (None, "")
    cap, why = later_level.later_level_cap("IMPROVED", "NO_CHANGE", -0.001, -0.005, 0.002, st, 120, "re-snapshot")
    assert cap == "INCONCLUSIVE"
    assert "from 2026-11-02T23:30:00Z on (120 samples, +8.0 % from the part before) the window reads NO_CHANGE, -0.1 % (-0.5 % .. +0.2 %)" in why
    assert why.endswith("not IMPROVED: the change is not shown against the level the baseline ended at; to judge against that level, re-snapshot")
