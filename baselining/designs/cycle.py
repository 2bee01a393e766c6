"""Cycle detection: does the baseline's own signal follow the hour of day (or of week)?

A before-after comparison against a baseline with a daily cycle judges the hour of day,
not the change. The test, on the baseline's samples alone:

1. Logs of the positive samples, on their step grid.
2. Least squares on an intercept, a linear trend (a demand drift is not a cycle) and
   :data:`HARMONICS` sine/cosine pairs of the period (1 day; 1 week when the baseline
   spans two weeks, with the daily harmonics as nuisance terms).
3. A Wald test that the harmonics are zero, with the coefficients' covariance under the
   residuals' own memory: the statistics package's AR model fitted to the residuals
   (:mod:`obsctl.baselining.statistics.memory`), ``Var(beta) = sigma^2 (X'X)^-1 X'RX
   (X'X)^-1`` with ``R`` the model's correlation on the grid (GLS-free OLS inference
   under a parametric error model: Brockwell & Davis, *Time Series: Theory and
   Methods*, 2nd ed., 1991, sec. 11.7). The chi-square reference at level :data:`ALPHA`
   was checked by simulation on AR(1) noise without a cycle
   (bench/bench_calibration_designs.py, docs/verification-designs.md). Assumption: the
   AR model describes the residuals at the harmonics' low frequencies. Under a slow
   component beneath faster ones (a sum of AR(1)s with a 7-hour memory) it reads the
   slow part short and the test alone is liberal (p < 0.01 in 27 % of 21-day histories
   without a cycle), so a weekly cycle must also pass a test on hourly means whose
   variance comes from the periodogram next to the harmonics (:func:`_spectral_p_value`:
   1.75 % there); the larger p-value counts. Both need whole-hour coverage of two weeks;
   with an hour missing the AR test stands alone.
4. The cycle counts when the test rejects **and** the fitted profile's half range
   (``amplitude``, as a ratio: 0.28 = +-28 %) is at least :data:`MIN_AMPLITUDE_SHARE`
   of the minimum effect: a smaller cycle cannot move a verdict past the margin.

A baseline shorter than one period cannot show the cycle; :func:`detect` then returns
``checked=False`` and the outputs say so.

Steps 1-3 depend on the baseline alone (:func:`fit`): ``initiative start`` stores them on
the initiative, and ``verify`` only applies step 4 (:func:`assess`) with the spec's
current minimum effect.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from obsctl.baselining.designs import align, estimator
from obsctl.baselining.statistics import distributions as special
from obsctl.durations import format_duration
from obsctl.records import CycleFit

HARMONICS = 2
#: Test level (a baseline without a cycle is called cyclic at most this often).
ALPHA = 0.01
#: A cycle counts when its half range is at least this share of ``min_effect_ratio``.
MIN_AMPLITUDE_SHARE = 0.5
DAY, WEEK = 86400, 7 * 86400
HOUR = 3600
#: Periodogram ordinates on each side of a weekly harmonic that estimate the noise's spectrum
#: there (:func:`_spectral_p_value`).
NEIGHBOURS = 6
#: Fewest hours (a whole hourly grid) the spectral check of a weekly cycle needs: two weeks.
MIN_SPECTRAL_HOURS = 2 * 7 * 24


@dataclass(frozen=True)
class CycleCheck:
    """Outcome of :func:`detect`.

    Attributes:
        checked: the baseline spans at least one period (else nothing could be tested).
        detected: a relevant, significant cycle.
        cycle: ``day`` or ``week`` (the one detected, else the longest one checked).
        amplitude: half range of the fitted profile, as a ratio (0.28 = +-28 %).
        p_value: the Wald F test's p-value.
        peak_hour: hour of the period where the fitted profile peaks (0-24 or 0-168).
        reason: one readable line.
        refusal: the typed cause when the check refuses a verdict whatever the design
            (``cycle-unknown``: the window holds phases of a cycle the history cannot rule
            out) or names the design that removes it (``cycle-known``); ``""`` otherwise.
    """

    checked: bool
    detected: bool
    cycle: str
    amplitude: float | None
    p_value: float | None
    peak_hour: float | None
    reason: str
    refusal: str = ""


def _design(t: np.ndarray, period: float, nuisance_periods: tuple[float, ...]) -> tuple[np.ndarray, list[int]]:
    span = max(float(t[-1] - t[0]), 1.0)
    cols = [np.ones_like(t), (t - t.mean()) / span]
    for p in nuisance_periods:
        for h in range(1, HARMONICS + 1):
            cols += [np.cos(2 * np.pi * h * t / p), np.sin(2 * np.pi * h * t / p)]
    tested = []
    for h in range(1, HARMONICS + 1):
        tested += [len(cols), len(cols) + 1]
        cols += [np.cos(2 * np.pi * h * t / period), np.sin(2 * np.pi * h * t / period)]
    return np.column_stack(cols), tested


def _fast_length(n: int) -> int:
    """The smallest ``2^a 3^b 5^c >= n``: a length numpy's FFT handles fast (86,400 for a
    30-day grid at 60 s, where the next power of two is 131,072)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def harmonic_test(t_seconds: np.ndarray, y: np.ndarray, period: float, nuisance_periods: tuple[float, ...] = (),
                  step: float | None = None) -> tuple[float, float, float]:
    """Wald test of the period's harmonics in ``y`` under the residuals' own memory (module doc).

    Args:
        t_seconds: sample times (unix s) on a step grid (holes allowed); ``y``: the log signal.
        step: the grid step (s); default: the smallest spacing.

    Returns:
        ``(p_value, amplitude as a ratio, peak position in hours of the period)``.
    """
    t = np.asarray(t_seconds, float)
    step = step or estimator.step_of(t)
    x, tested = _design(t, period, nuisance_periods)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    model = estimator.memory([(t, resid)], step, history=(t, resid))
    p = len(tested)
    if model is None or not model.variance > 0:
        p_value = 0.0 if np.ptp(x[:, tested] @ beta[tested]) > 0 else 1.0
    else:
        # Var(beta) = sigma^2 (X'X)^-1 X' R X (X'X)^-1, R the memory model's correlation
        # matrix on the grid; R X by FFT convolution with the autocorrelation function.
        idx = np.rint((t - t[0]) / step).astype(np.int64)
        size = int(idx[-1]) + 1
        acf = model.acf_at(size, step)
        nfft = _fast_length(2 * size - 1)
        kernel = np.fft.rfft(np.concatenate([acf, np.zeros(nfft - 2 * size + 1), acf[:0:-1]]), nfft)
        placed = np.zeros((nfft, x.shape[1]))
        placed[idx] = x
        spectrum = np.fft.rfft(placed, axis=0)
        # X'RX by Parseval on the half spectrum (weights 1, 2, ..., 2, 1 for the real
        # transform), instead of an inverse transform of R X and a product in time.
        weights = np.full(spectrum.shape[0], 2.0)
        weights[0] = 1.0
        if nfft % 2 == 0:
            weights[-1] = 1.0
        xrx = ((spectrum.conj() * weights[:, None]).T @ (spectrum * kernel[:, None])).real / nfft
        xtx_inv = np.linalg.pinv(x.T @ x)
        cov = model.variance * xtx_inv @ xrx @ xtx_inv
        b, v = beta[tested], cov[np.ix_(tested, tested)]
        try:
            wald = float(b @ np.linalg.solve(v, b))
        except np.linalg.LinAlgError:
            wald = float("inf")
        p_value = float(special.chdtrc(p, max(wald, 0.0)))  # chi2.sf is 1 below its support; chdtrc is NaN there
    if period >= WEEK:
        spectral = _spectral_p_value(t, y, period, nuisance_periods)
        if spectral is not None:
            p_value = max(p_value, spectral)
    grid = np.linspace(0, period, 289)[:-1]
    profile = sum(beta[tested[2 * h]] * np.cos(2 * np.pi * (h + 1) * grid / period)
                  + beta[tested[2 * h + 1]] * np.sin(2 * np.pi * (h + 1) * grid / period) for h in range(HARMONICS))
    # Half range as a ratio of the profile's midpoint: a +-30 % cycle reads 0.30.
    hi, lo = math.exp(profile.max()), math.exp(profile.min())
    amplitude = float((hi - lo) / (hi + lo))
    return p_value, amplitude, float(grid[int(np.argmax(profile))] / 3600)


def _spectral_p_value(t: np.ndarray, y: np.ndarray, period: float, nuisance_periods: tuple[float, ...]) -> float | None:
    """The period's harmonics tested on hourly means with the noise's spectrum read from the
    periodogram next to them; None when an hour of the span has no sample or the span holds
    fewer than :data:`MIN_SPECTRAL_HOURS` hours.

    Why: the AR model of :func:`harmonic_test` is fitted at the sample step, and a slow
    component under faster ones (a 7-hour memory under minutes) is read short, so the
    harmonics' variance is too: on 21-day histories of such noise without a cycle the AR test
    rejected at 0.01 in 27 %. At a harmonic of frequency ``w`` the least-squares coefficients
    of a stationary series have ``Var(b_cos) = Var(b_sin) ~ 2 S(w) / n``, ``S`` the expected
    periodogram (``|sum r_j e^(-iwj)|^2 / n``); ``S(w)`` is estimated by the mean periodogram
    of the residuals at the :data:`NEIGHBOURS` x 2 Fourier frequencies nearest ``w`` that
    lie more than 1.5 bins from every fitted frequency and above bin 2 (the intercept and
    trend empty the lowest bins). Each harmonic's ``n (b_cos^2 + b_sin^2) / (2 S)`` is then
    about ``F(2, 4 NEIGHBOURS)`` (a smoothed-periodogram, Daniell estimate of the spectrum:
    Brockwell & Davis, *Time Series: Theory and Methods*, 2nd ed., 1991, sec. 10.4); their
    sum over the ``HARMONICS`` harmonics is referred to ``F(2 HARMONICS, 4 NEIGHBOURS)``.
    Assumption: the spectrum is flat over those neighbours. Measured (bench/bench_drift.py's
    noise, 400 21-day histories without a cycle): rejections at 0.01 in 1.75 % (the slow
    multi-scale noise) and 2.0 % (AR(1)); :func:`harmonic_test` keeps the larger of this
    p-value and its own, so a cycle must pass both.
    """
    hours = np.floor(np.asarray(t, float) / HOUR)
    bins, where = np.unique(hours, return_inverse=True)
    n = int(bins[-1] - bins[0]) + 1 if bins.size else 0
    if n != bins.size or n < MIN_SPECTRAL_HOURS:
        return None
    yh = np.bincount(where, weights=np.asarray(y, float)) / np.bincount(where)
    x, tested = _design((bins + 0.5) * HOUR, period, nuisance_periods)
    beta, *_ = np.linalg.lstsq(x, yh, rcond=None)
    periodogram = np.abs(np.fft.rfft(yh - x @ beta)) ** 2 / n
    fitted = [h * n * HOUR / p for p in (*nuisance_periods, period) for h in range(1, HARMONICS + 1)]
    free = np.array([k for k in range(3, periodogram.size - 1) if all(abs(k - f) > 1.5 for f in fitted)])
    if free.size < 2 * NEIGHBOURS:
        return None
    wald = 0.0
    for h in range(HARMONICS):
        k0 = (h + 1) * n * HOUR / period
        near = free[np.argsort(np.abs(free - k0), kind="stable")[:2 * NEIGHBOURS]]
        level = float(periodogram[near].mean())
        if not level > 0:
            return None
        b_cos, b_sin = beta[tested[2 * h]], beta[tested[2 * h + 1]]
        wald += n * (b_cos ** 2 + b_sin ** 2) / (2 * level)
    dof = 2 * HARMONICS
    return float(1.0 - special.fdtr(dof, 4 * NEIGHBOURS, wald / dof))


def residuals(t_seconds: np.ndarray, y: np.ndarray, period: float) -> np.ndarray:
    """``y`` minus its least-squares fit on an intercept, a trend and the period's harmonics."""
    x, _ = _design(t_seconds, period, ())
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return y - x @ beta


def detrended(t_seconds: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(seconds, log values minus their slow movement)`` of positive samples, for a memory model.

    Spanning a day or more: the daily harmonics and a trend are removed (:func:`residuals`);
    shorter: a quadratic in time (a few hours of a cycle or a drift). None with fewer than 20 samples.
    """
    t, v = np.asarray(t_seconds, float), np.asarray(values, float)
    ok = (v > 0) & np.isfinite(v)
    t, y = t[ok], np.log(v[ok])
    if t.size < 20:
        return None
    if t[-1] - t[0] >= DAY:
        return t, residuals(t, y, DAY)
    u = (t - t.mean()) / max(float(t[-1] - t[0]), 1.0)
    x = np.column_stack([np.ones_like(u), u, u * u])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return t, y - x @ beta


def _span(samples: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, float, float]:
    ms, v = align.as_arrays(samples)
    keep = v > 0
    t, y = ms[keep] / 1000.0, np.log(v[keep])
    step = estimator.step_of(t) if t.size > 1 else 1.0
    span = float(t[-1] - t[0] + step) if t.size else 0.0
    return t, y, step, span


def fit(samples: Iterable[tuple[float, float]]) -> list[CycleFit] | None:
    """The harmonic tests of a baseline's samples: the day, and the week when it spans two.

    Args:
        samples: the baseline's ``(unix seconds, value)`` samples (positive values are used).

    Returns:
        One :class:`~obsctl.records.CycleFit` per period tested, or None when
        the baseline spans less than a day (nothing can be tested). A pure function of the
        samples: ``initiative start`` stores it on the initiative, :func:`assess` judges it.
    """
    t, y, step, span = _span(samples)
    if span < DAY or t.size < 48:
        return None
    checks = [("day", DAY, ())]
    if span >= 2 * WEEK:
        checks.append(("week", WEEK, (DAY,)))
    fits = []
    for name, period, nuisance in checks:
        p_value, amplitude, peak = harmonic_test(t, y, period, nuisance, step)
        fits.append(CycleFit(cycle=name, p_value=p_value, amplitude=amplitude, peak_hour=peak))
    return fits


def assess(fits: list[CycleFit], min_effect_ratio: float) -> CycleCheck:
    """Judge stored :func:`fit` results against the spec's minimum effect (module doc, step 4).

    The first period whose test rejects at :data:`ALPHA` with a relevant amplitude is the
    cycle found; otherwise the last one tested is reported as not found."""
    relevant = MIN_AMPLITUDE_SHARE * min_effect_ratio
    last = None
    for f in fits:
        unit = "day" if f.cycle == "day" else "week"
        if f.p_value < ALPHA and f.amplitude >= relevant:
            return CycleCheck(True, True, f.cycle, f.amplitude, f.p_value, f.peak_hour,
                              f"the baseline varies +-{f.amplitude:.0%} over the {unit} (peak at hour {f.peak_hour:.0f}); "
                              f"use --design seasonal or a control class")  # the test's p-value: p_value (verify --verbose)
        last = CycleCheck(True, False, f.cycle, f.amplitude, f.p_value, f.peak_hour,
                          f"no {'daily' if unit == 'day' else 'weekly'} cycle past +-{relevant:.1%} in the baseline "
                          f"(fitted +-{f.amplitude:.1%})")
    return last


def detect(samples: Iterable[tuple[float, float]], min_effect_ratio: float, fits: list[CycleFit] | None = None,
           span_seconds: float | None = None) -> CycleCheck:
    """Detect a daily (and, on two weeks or more, weekly) cycle in a baseline's samples.

    Args:
        samples: the baseline's ``(unix seconds, value)`` samples (positive values are used).
        min_effect_ratio: the spec's minimum effect; sets the relevance threshold.
        fits: the baseline's stored :func:`fit` (``Initiative.baseline_cycle``), which
            saves refitting; ``[]``: stored as too short to test (the span then comes from
            the samples, or ``span_seconds`` when they were not read); None: fitted here.

    Returns:
        :class:`CycleCheck` (``checked=False`` when the baseline spans less than a day).
    """
    if fits:
        return assess(fits, min_effect_ratio)
    samples = samples if isinstance(samples, list) else list(samples)
    if fits is None:
        fits = fit(samples)
    if not fits:
        seconds = _span(samples)[3] if samples or span_seconds is None else span_seconds
        return CycleCheck(False, False, "day", None, None, None,
                          f"the baseline spans {format_duration(seconds)}, less than a day: a daily cycle cannot be checked")
    return assess(fits, min_effect_ratio)
