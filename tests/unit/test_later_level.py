"""When a verdict is judged again against the level the baseline ended at (decide.later_level):
its later part, or its least-squares line's end."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.baselining.decide import later_level
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.records import Stationarity

AT = dt.datetime(2026, 11, 2, 23, 30, tzinfo=dt.UTC)


def record(step_p: float, trend_p: float, moved: bool = False, step_ratio: float | None = 0.08,
           trend_ratio: float | None = 0.05) -> Stationarity:
    return Stationarity(step_p_value=step_p, trend_p_value=trend_p, moved=moved, kind="step" if moved else "", step_at=AT,
                        step_ratio=step_ratio, trend_ratio=trend_ratio, level=0.05, simulations=999, samples=240, block_seconds=15.0)


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
    # The trend the likelier move: its line's direction decides, not the split's.
    ("IMPROVED", 0.04, record(0.7, 0.2, step_ratio=0.08, trend_ratio=-0.05), False),
    ("IMPROVED", 0.04, record(0.7, 0.2, step_ratio=-0.08, trend_ratio=0.05), True),
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
    assert later_level.later_level_cap("IMPROVED", "IMPROVED", (0.05, 0.01, 0.09), st, 120) == (None, "")
    assert later_level.later_level_cap("INCONCLUSIVE", "NO_CHANGE", (0.0, -0.01, 0.01), st, 120) == (None, "")
    cap, why = later_level.later_level_cap("IMPROVED", "NO_CHANGE", (-0.001, -0.005, 0.002), st, 120, "re-snapshot")
    assert cap == "INCONCLUSIVE"
    assert "from 2026-11-02T23:30:00Z on (120 samples, +8.0 % from the part before) the window reads NO_CHANGE, -0.1 % (-0.5 % .. +0.2 %)" in why
    assert why.endswith("not IMPROVED: the change is not shown against the level the baseline ended at; to judge against that level, re-snapshot")


@pytest.mark.parametrize("step_p, trend_p, line, expected", [
    (0.1, 0.3, True, "part"),   # the step the likelier move: the part after the split
    (0.3, 0.1, True, "line"),   # the trend the likelier: the line's end
    (0.2, 0.2, True, "line"),   # a tie: the line (after a step its end lies beyond the later level: the cautious side)
    (0.3, 0.1, False, "part"),  # the line's end off (the bench's --no-line-end)
])
def test_reference(step_p, trend_p, line, expected):
    assert later_level.reference(record(step_p, trend_p), line) == expected


def ar1_model(phi: float, variance: float) -> MemoryModel:
    rho = (1.0, phi) if phi else (1.0,)
    return MemoryModel(15.0, (phi,) if phi else (), rho, variance, 0.0, 10_000, 3 * 86400.0, "history", 1e6)


def test_the_line_end_is_the_fitted_value_with_its_own_variance():
    # Known answer, computed independently: the end of numpy's least-squares line, and the
    # variance of that linear form under AR(1) errors from the dense covariance matrix
    # sigma^2 phi^|i - j| on the grid positions, with holes.
    rng = np.random.default_rng(7)
    t = AT.timestamp() + np.arange(480) * 15.0
    keep = rng.random(t.size) > 0.15
    keep[[0, -1]] = True
    t = t[keep]
    v = 100.0 + 0.002 * (t - t[0]) + rng.normal(0.0, 2.0, t.size)
    side = later_level.line_end(t, v, 15.0, ar1_model(0.95, 4.0))
    assert side.mean == pytest.approx(np.polyval(np.polyfit(t - t[0], v, 1), t[-1] - t[0]), rel=1e-12)
    tc = t - t.mean()
    w = 1 / t.size + (t[-1] - t.mean()) * tc / (tc @ tc)
    lag = np.abs(np.subtract.outer(t, t)) / 15.0
    assert side.sd == pytest.approx(2.0) and side.scale_source == "history"
    assert side.var_mean == pytest.approx(4.0 * w @ (0.95 ** lag) @ w, rel=1e-9)
    # The mean's variance under the same model is about a quarter of it (four times, and more with memory).
    mean_var = 4.0 * np.full(t.size, 1 / t.size) @ (0.95 ** lag) @ np.full(t.size, 1 / t.size)
    assert 3.0 < side.var_mean / mean_var < 6.0


def test_the_line_end_of_white_noise_on_a_full_grid():
    # Textbook: Var(a + b t_n) = sigma^2 (1/n + (t_n - tbar)^2 / S_tt) = sigma^2 (4n - 2) / (n (n + 1)).
    n = 240
    t = AT.timestamp() + np.arange(n) * 15.0
    v = np.random.default_rng(8).normal(50.0, 3.0, n)
    side = later_level.line_end(t, v, 15.0, ar1_model(0.0, 9.0))
    assert side.var_mean == pytest.approx(9.0 * (4 * n - 2) / (n * (n + 1)), rel=1e-9)
    assert side.n_eff == pytest.approx(n)  # the samples the line was fitted on (the too-short rule's question)


def test_the_line_cap_names_the_trend():
    st = record(0.4, 0.1, trend_ratio=0.081)
    cap, why = later_level.later_level_cap("IMPROVED", "NO_CHANGE", (0.002, -0.01, 0.015), st, 480, "re-snapshot", line=True)
    assert cap == "INCONCLUSIVE"
    assert ("against the level its straight-line trend reached at its end (+8.1 % over the window, fitted on 480 samples) "
            "the window reads NO_CHANGE, +0.2 % (-1.0 % .. +1.5 %), not IMPROVED") in why
    assert "p = " not in why  # the test behind it is the note's (later_detail)
    assert "least-squares line reaches at its end" in later_level.later_detail(st, line=True)
    assert "the part after the most likely split" in later_level.later_detail(st)
