"""The words for a baseline's stationarity test (:class:`obsctl.records.Stationarity`):
the line ``snapshot-baseline`` prints, and the reason and remedy of the cap a baseline
that moved inside its window puts on a verdict (:func:`obsctl.baselining.decide.caps.stationarity_cap`)."""

from __future__ import annotations

from obsctl.durations import format_duration
from obsctl.formatting import format_percent
from obsctl.records import Baseline, Stationarity
from obsctl.timeutil import rfc3339


def tests_text(st: Stationarity) -> str:
    """``step test p = 0.001, trend test p = 0.04; level 0.01 under the signal's memory, 999 simulations``."""
    return (f"step test p = {st.step_p_value:.2g}, trend test p = {st.trend_p_value:.2g}; level {st.level:g} (each at half) under "
            f"the signal's memory, {st.simulations} simulations")


def moved_text(st: Stationarity) -> str:
    """What moved, when and how much: ``a step of +8.1 % at 2026-...Z`` or ``a trend of +6.0 % over the window``."""
    if st.kind == "trend":
        return f"a trend of {format_percent(st.trend_ratio)} over the window"
    return f"a step of {format_percent(st.step_ratio)} at {rfc3339(st.step_at)}"


def stationarity_line(st: Stationarity | None) -> str:
    """The snapshot's line: ``stationarity: moved inside the window: ...`` or ``stationarity: steady (...)``."""
    if st is None:
        return "stationarity: not tested (no memory model or fewer than 40 samples)"
    if st.moved:
        return f"stationarity: MOVED inside the window: {moved_text(st)} ({tests_text(st)}); verdicts against it are capped INCONCLUSIVE"
    return f"stationarity: steady, no step or trend ({tests_text(st)})"


def stationarity_plain(st: Stationarity | None) -> str:
    """The snapshot's line in plain words (no test, statistic or p-value: :func:`stationarity_line`
    has them): ``stationarity: steady ...`` or what moved and what it means for verdicts."""
    if st is None:
        return stationarity_line(st)
    if st.moved:
        return (f"stationarity: MOVED inside the window: {moved_text(st)}; every verdict against this baseline will be "
                f"INCONCLUSIVE: re-snapshot a steady period (the verdict's reason gives the command)")
    return "stationarity: steady, no step or trend inside the window"


def remedy(baseline: Baseline) -> str:
    """What makes a verdict decidable again: a baseline of the period after the step (or,
    after a trend, a shorter steady window ending at the start), then a rebase."""
    st = baseline.stationarity
    end = baseline.window.end
    step = baseline.window.step_seconds
    cmd = f"obsctl snapshot-baseline --class {baseline.workload_class} --signal {baseline.signal} --end {rfc3339(end)}"
    rebase = "; an initiative already started against it: obsctl initiative rebase --initiative ID after the new snapshot"
    if st is not None and st.kind == "step":
        after = (end - st.step_at).total_seconds() + step
        return f"re-snapshot the period after the step ({cmd} --window {format_duration(after)}){rebase}"
    return (f"re-snapshot a shorter window in which the signal is steady, ending where this one ends or at the start ({cmd} --window "
            f"<shorter>), or judge with a control design (initiative start --design control --control CLASS){rebase}")
