"""A baseline's tails at snapshot: the heavy-tail test, and the memory the trimmed mean needs.

``snapshot-baseline`` runs :func:`obsctl.baselining.statistics.robust.tail_test` on the
samples it read (the history before the window and the window) and stores the result as
:class:`obsctl.records.Tails`. Where the signal is judged robustly (its spec sets ``spiky:
true``, or leaves it unset and the test finds heavy tails), it also fits the memory model
on the **winsorised** history and window (:func:`~obsctl.baselining.statistics.robust.winsorize`,
each at its own quantiles, as verify winsorises each side): spikes are short, so the raw
series' autocorrelation understates the memory of what the trimmed mean averages.
"""

from __future__ import annotations

import numpy as np

from obsctl.baselining.measure.history import fit_history
from obsctl.baselining.statistics import robust
from obsctl.records import Tails


def tails_line(tails: Tails | None) -> str:
    """What a snapshot says of a baseline's tails: the test, and the location verdicts will
    judge (the trimmed mean where the snapshot fitted its memory); "" without a test."""
    if tails is None:
        return ""
    test = robust.TailTest(tails.heavy, tails.outliers, tails.samples, tails.share, tails.robust_sd).text()
    if tails.memory is not None:
        return f"{test}; verdicts judge its {tails.trim * 100:g} % trimmed mean (spec spiky: false for the mean)"
    return test


def tails_of(history: list[tuple[float, float]], hist_step: float, step_seconds: float, samples: list[tuple[float, float]],
             columns: tuple[np.ndarray, np.ndarray] | None, spiky: bool | None, trim: float = robust.TRIM) -> Tails:
    """The :class:`~obsctl.records.Tails` of one baseline.

    Args:
        history, hist_step: the history before the window as ``(t, v)`` at ``hist_step`` (s).
        step_seconds, samples, columns: the window's step, ``(t, v)`` samples and their
            ``(times, values)`` float64 columns.
        spiky: the signal's spec ``spiky`` (True / False / None).
        trim: the share the trimmed mean cuts from each tail.
    """
    if columns is None:
        columns = (np.fromiter((t for t, _ in samples), float, len(samples)), np.fromiter((v for _, v in samples), float, len(samples)))
    past = np.fromiter((v for _, v in history), float, len(history))
    test = robust.tail_test(np.concatenate((past, columns[1])))
    memory = None
    if robust.choose(spiky, test, trim).robust:
        hist_w = robust.winsorize(past, trim) if past.size else past
        win_w = robust.winsorize(columns[1], trim)
        memory = fit_history([(t, float(v)) for (t, _), v in zip(history, hist_w, strict=True)], hist_step, step_seconds,
                             [(t, float(v)) for (t, _), v in zip(samples, win_w, strict=True)], (columns[0], win_w))
    return Tails(heavy=test.heavy, outliers=test.outliers, samples=test.n, share=test.share, robust_sd=test.robust_sd, trim=trim,
                 memory=memory)
