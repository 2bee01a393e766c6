"""The signal's memory: an autoregressive model fitted to a long stretch of history.

Why a model and not a window estimator. The variance of a mean of ``n`` dependent
samples is ``sigma^2 * tau / n`` for ``n >> tau``, with ``tau = 1 + 2 sum_k rho_k`` the
integrated autocorrelation time (in steps). Window estimators of ``tau`` (Sokal's
automatic window, Sokal 1997, "Monte Carlo methods in statistical mechanics", sec. 3;
Geyer's initial sequences, Statistical Science 7(4), 1992) sum many noisy sample
autocorrelations: for an AR(1) with phi = 0.95 and three days of 15 s samples, Sokal's
window gives a relative standard error of about 20 % on ``tau``. An AR(p) fit by
Yule-Walker with the order chosen by AIC uses the same autocovariances but imposes a
smooth, stationary shape; its spectral density at frequency 0 gives ``tau`` in closed
form, ``tau = (1 - sum_j a_j rho_j) / (1 - sum_j a_j)^2``, with a standard error of
about 5 % in the same case. This is the ``spectrum0.ar`` estimator of CODA's
``effectiveSize`` (Plummer, Best, Cowles & Vines, R News 6(1), 2006; Heidelberger &
Welch, CACM 24(4), 1981); Thompson (2010, arXiv:1011.0175) compares it favourably with
window estimators. The model also gives the whole autocorrelation function, which
``lrv`` needs for finite windows and windows with holes.

Assumptions: the signal is weakly stationary over the history plus the windows (a
diurnal cycle shows up as very long memory, so verdicts on short windows become
INCONCLUSIVE "window too short" rather than wrong), and its memory does not change with
the initiative (the window's own autocorrelation is not estimable from one hour).

Holes: autocovariances are computed over pairs of present samples only (the usual
estimator for gapped series, Parzen 1963, "On spectral analysis with missing
observations"), on the grid ``round((t - t0) / step)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Largest AR order tried (AIC chooses 0..MAX_ORDER). Scrape signals are rates over a
#: short range (a moving average) plus slow drift; a few lags capture both.
MAX_ORDER = 12

#: tau above this many steps is treated as "no usable memory estimate" (near unit root).
MAX_TAU_STEPS = 1e7

#: Fewest integrated autocorrelation times a fit must span to be taken at its word: with
#: fewer, the fitted memory is a lower bound (the slow part of the dependence is not seen)
#: and intervals built on it are too narrow (docs/verification.md, "No honest memory").
MIN_MEMORIES = 20.0


@dataclass(frozen=True)
class MemoryModel:
    """An AR(p) model of a signal's fluctuations on a step grid.

    Attributes:
        step_seconds: the grid step of the data it was fitted on (s).
        coefficients: AR coefficients ``a_1..a_p`` (p may be 0: white noise).
        rho: autocorrelations ``rho_0..rho_p`` of the fitted model (``rho_0 = 1``).
        variance: marginal variance of the fitted data (signal unit squared).
        mean: mean of the fitted data (signal unit).
        samples: finite samples used.
        span_seconds: time from the first to the last sample used (s).
        source: ``history`` (a stretch before the baseline) or ``windows`` (only the
            baseline and window themselves: then the memory is a lower bound).
        dof: degrees of freedom of ``variance`` (effective, under the model).
    """

    step_seconds: float
    coefficients: tuple[float, ...]
    rho: tuple[float, ...]
    variance: float
    mean: float
    samples: int
    span_seconds: float
    source: str = "history"
    dof: float = math.inf
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def tau_steps(self) -> float:
        """Integrated autocorrelation time ``1 + 2 sum_k rho_k`` in steps of ``step_seconds``."""
        a = np.asarray(self.coefficients, dtype=float)
        if a.size == 0:
            return 1.0
        r = np.asarray(self.rho[1:], dtype=float)
        den = (1.0 - a.sum()) ** 2
        if den <= 0:
            return MAX_TAU_STEPS
        return float(min(MAX_TAU_STEPS, max((1.0 - float(a @ r)) / den, 1e-6)))

    @property
    def tau_seconds(self) -> float:
        """Integrated autocorrelation time in seconds (``tau_steps * step_seconds``)."""
        return self.tau_steps * self.step_seconds

    def acf(self, lags: int) -> np.ndarray:
        """Model autocorrelations at lags ``0..lags-1`` in steps of ``step_seconds``, shape ``(lags,)``."""
        key = ("acf", lags)
        if key in self._cache:
            return self._cache[key]
        p = len(self.coefficients)
        out = np.zeros(lags)
        head = np.asarray(self.rho, dtype=float)[: min(lags, p + 1)]
        out[: head.size] = head
        if lags > p + 1 and p > 0:
            # rho_k = sum_j a_j rho_{k-j} for k > p: an all-pole filter started from rho_1..rho_p.
            out[p + 1 :] = ar_continue(self.coefficients, self.rho[1:][::-1], lags - p - 1)
        if len(self._cache) < 8:
            self._cache[key] = out
        return out

    def acf_at(self, lags: int, step_seconds: float) -> np.ndarray:
        """Autocorrelations at lags ``0..lags-1`` of a grid with step ``step_seconds``.

        The same step as the model: :meth:`acf`. A different step: the model's
        autocorrelation is interpolated linearly in time (``rho(0) = 1``), which keeps
        the integrated time in seconds when the memory is long against both steps.
        """
        if math.isclose(step_seconds, self.step_seconds, rel_tol=1e-9):
            return self.acf(lags)
        ratio = step_seconds / self.step_seconds
        coarse = self.acf(math.ceil((lags - 1) * ratio) + 2)
        return np.interp(np.arange(lags) * ratio, np.arange(coarse.size), coarse)

    def as_dict(self) -> dict:
        """JSON/YAML-ready fields (the stored form on a baseline)."""
        return {"method": "ar-yule-walker-aic", "step_seconds": self.step_seconds, "coefficients": list(self.coefficients),
                "rho": list(self.rho), "variance": self.variance, "mean": self.mean, "samples": self.samples,
                "span_seconds": self.span_seconds, "source": self.source, "dof": self.dof if math.isfinite(self.dof) else None,
                "tau_seconds": self.tau_seconds}

    @classmethod
    def from_dict(cls, data: dict) -> MemoryModel:
        """Inverse of :meth:`as_dict` (unknown keys ignored)."""
        dof = data.get("dof")
        return cls(float(data["step_seconds"]), tuple(float(a) for a in data["coefficients"]), tuple(float(r) for r in data["rho"]),
                   float(data["variance"]), float(data["mean"]), int(data["samples"]), float(data["span_seconds"]),
                   str(data.get("source", "history")), math.inf if dof is None else float(dof))


def grid_index(times: np.ndarray, step_seconds: float) -> np.ndarray:
    """Integer grid positions ``round((t - t0) / step)`` of sample times (s), shape like ``times``."""
    t = np.asarray(times, dtype=float)
    return np.rint((t - t[0]) / step_seconds).astype(np.int64) if t.size else np.zeros(0, dtype=np.int64)


def pair_counts(index: np.ndarray, lags: int) -> np.ndarray:
    """``c_k = #{(i, i+k) both present}`` for ``k = 0..lags-1`` on a grid with the given present positions (FFT)."""
    size = int(index[-1]) + 1 if index.size else 0
    mask = np.zeros(size)
    mask[index] = 1.0
    return _lagged_products(mask, mask, lags)


def _lagged_products(a: np.ndarray, b: np.ndarray, lags: int) -> np.ndarray:
    n = a.size
    nfft = 1 << math.ceil(math.log2(max(2 * n, 2)))
    fa = np.fft.rfft(a, nfft)
    fb = fa if b is a else np.fft.rfft(b, nfft)
    out = np.fft.irfft(fa.conj() * fb, nfft)[:lags]
    res = np.zeros(lags)
    res[: out.size] = out
    return res


def autocovariance(times: np.ndarray, values: np.ndarray, step_seconds: float, lags: int,
                   zero_filled: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """Sample autocovariances at lags ``0..lags-1`` over present pairs.

    Args:
        zero_filled: ``sum / n`` with the holes' deviations taken as 0 instead of the pair
            means: the autocovariance of one finite sequence, positive semi-definite with
            holes too (the pair means need not be), biased towards 0 by the holes.

    Returns:
        ``(gamma, pairs, mean)``: ``gamma_k`` = mean of ``(x_i - m)(x_{i+k} - m)`` over
        present pairs times ``1 - k/n`` (without holes: ``sum / n``, the biased,
        positive-definite form of Brockwell & Davis 1991 sec. 7.2), the pair counts, the mean.
    """
    idx = grid_index(times, step_seconds)
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    size = int(idx[-1]) + 1
    lags = min(lags, size)
    dev = np.zeros(size)
    dev[idx] = x - mean
    mask = np.zeros(size)
    mask[idx] = 1.0
    sums = _lagged_products(dev, dev, lags)
    pairs = _lagged_products(mask, mask, lags)
    n = x.size
    # Parzen's pair means, tapered by (1 - k/n): the biased, positive-definite form when
    # there are no holes (sum / n), the same taper with holes.
    if zero_filled:
        return sums / n, pairs, mean
    taper = np.clip(1.0 - np.arange(lags) / n, 0.0, 1.0)
    gamma = np.where(pairs > 0.5, sums / np.maximum(pairs, 1.0), 0.0) * taper
    return gamma, pairs, mean


def ar_continue(coefficients, newest_first, count: int, block: int = 256) -> np.ndarray:
    """``count`` further values of ``x_k = sum_j a_j x_{k-j}`` after ``newest_first = (x_{k-1}, ..., x_{k-p})``.

    Blocks of ``B`` values at once: ``x_{k+j-1} = e_1' A^j s_k`` with ``A`` the companion
    matrix and ``s_k`` the state, so each block is one ``(B, p) @ (p,)`` product. The same
    recursion as scipy.signal.lfilter (an all-pole filter), which agrees to rounding
    (~1e-15); scipy.signal's import costs seconds of every verify's start-up.
    """
    a = np.asarray(coefficients, dtype=float)
    p = a.size
    companion = np.zeros((p, p))
    companion[0] = a
    companion[1:, :-1] = np.eye(p - 1)
    size = max(p, min(block, count))  # >= p: the next state is the block's last p values
    rows = np.empty((size, p))
    row = a.copy()
    for j in range(size):
        rows[j] = row
        row = row @ companion
    out = np.empty(count)
    state = np.asarray(newest_first, dtype=float)
    done = 0
    while done < count:
        chunk = rows @ state
        n = min(size, count - done)
        out[done : done + n] = chunk[:n]
        done += n
        state = chunk[size - p :][::-1]
    return out


def levinson_durbin(r: np.ndarray, order: int) -> list[tuple[np.ndarray, float]]:
    """AR fits of orders ``0..order`` from autocorrelations ``r_0..r_order`` (``r_0 = 1``).

    Returns:
        ``[(coefficients, innovation variance / marginal variance), ...]`` per order
        (Levinson 1947, Durbin 1960; Brockwell & Davis 1991 sec. 5.2).
    """
    fits = [(np.zeros(0), 1.0)]
    a = np.zeros(0)
    v = 1.0
    for p in range(1, order + 1):
        k = (r[p] - float(a @ r[1:p][::-1])) / v if p > 1 else r[1]
        if not math.isfinite(k) or abs(k) >= 1:
            break
        a = np.concatenate((a - k * a[::-1], [k]))
        v *= 1 - k * k
        fits.append((a.copy(), v))
    return fits


def fit_memory(times: np.ndarray, values: np.ndarray, step_seconds: float, source: str = "history", max_order: int = MAX_ORDER) -> MemoryModel | None:
    """Fit the memory model to ``(times, values)`` on a grid of ``step_seconds``.

    Args:
        times: sample times (unix s), increasing; holes allowed.
        values: finite values, same shape.
        step_seconds: the grid step (s).
        source: recorded on the model (``history`` or ``windows``).

    Returns:
        The AIC-best AR(p), ``p <= max_order``; None with fewer than 20 samples or a
        constant series.
    """
    t = np.asarray(times, dtype=float)
    x = np.asarray(values, dtype=float)
    keep = np.isfinite(x) & np.isfinite(t)
    t, x = t[keep], x[keep]
    if x.size < 20:
        return None
    max_order = min(max_order, x.size // 10)
    with np.errstate(all="ignore"):  # values near the float limit: no model, not a warning
        gamma, _pairs, mean = autocovariance(t, x, step_seconds, max_order + 1)
    if not (math.isfinite(mean) and np.all(np.isfinite(gamma)) and gamma[0] > 0):
        return None
    r = gamma / gamma[0]
    order = min(max_order, r.size - 1)
    fits = levinson_durbin(r, order)
    if len(fits) <= order:
        # The recursion stopped (a partial autocorrelation >= 1): with holes the pair means
        # are not always positive definite (a trend or a near-unit root next to one hole
        # gives r_1 > 1), and stopping there would read as no memory at all, the
        # anti-conservative error. The zero-filled estimate is positive semi-definite.
        with np.errstate(all="ignore"):
            gamma, _pairs, mean = autocovariance(t, x, step_seconds, max_order + 1, zero_filled=True)
        r = gamma / gamma[0]
        fits = levinson_durbin(r, order)
    n = x.size
    aic = [n * math.log(v) + 2 * len(a) for a, v in fits]
    a, _v = fits[int(np.argmin(aic))]
    p = a.size
    model = MemoryModel(step_seconds, tuple(float(c) for c in a), tuple(float(c) for c in r[: p + 1]), float(gamma[0]),
                        mean, int(n), float(t[-1] - t[0]), source)
    # The scale under the model: SS / (n - Q/n), unbiased for dependent data, and its dof.
    idx = grid_index(t, step_seconds)
    q, q2 = quadratic_forms(idx, model.acf_at(int(idx[-1]) + 1, step_seconds))
    denom = n - q / n
    if denom <= 1:
        return model  # memory as long as the history: no usable scale
    ss = float(((x - mean) ** 2).sum())
    return MemoryModel(model.step_seconds, model.coefficients, model.rho, ss / denom, mean, model.samples, model.span_seconds, source,
                       scale_dof(n, q, q2))


def pooled_memory(sides: list[tuple[np.ndarray, np.ndarray]], step_seconds: float) -> MemoryModel | None:
    """A memory model from several short stretches (each demeaned on its own), for
    baselines stored without history: autocovariances are pooled over the stretches.
    The result has ``source="windows"`` and is a lower bound on long memory."""
    for zero_filled in (False, True):  # zero-filled: as in fit_memory, when the pair means are not positive definite
        gammas, weights, n_total, span = [], [], 0, 0.0
        for times, values in sides:
            t, x = np.asarray(times, dtype=float), np.asarray(values, dtype=float)
            if x.size < 20:
                continue
            with np.errstate(all="ignore"):
                g, _p, _m = autocovariance(t, x, step_seconds, min(MAX_ORDER, x.size // 10) + 1, zero_filled=zero_filled)
            if not np.all(np.isfinite(g)):
                continue
            gammas.append(g[: MAX_ORDER + 1])
            weights.append(x.size)
            n_total += x.size
            span += float(t[-1] - t[0])
        if not gammas:
            return None
        length = min(g.size for g in gammas)
        gamma = sum(w * g[:length] for w, g in zip(weights, gammas, strict=True)) / n_total
        if not gamma[0] > 0:
            return None
        r = gamma / gamma[0]
        fits = levinson_durbin(r, length - 1)
        if len(fits) >= length:
            break
    aic = [n_total * math.log(v) + 2 * len(a) for a, v in fits]
    a, _v = fits[int(np.argmin(aic))]
    return MemoryModel(step_seconds, tuple(float(c) for c in a), tuple(float(c) for c in r[: a.size + 1]), float(gamma[0]), 0.0,
                       n_total, span, "windows")


def quadratic_forms(index: np.ndarray, rho: np.ndarray) -> tuple[float, float]:
    """``(Q, Q2) = (sum_ij rho_|i-j|, sum_ij rho_|i-j|^2)`` over the present grid positions.

    ``Var(mean) = sigma^2 Q / n^2`` for a stationary series with autocorrelation
    ``rho`` observed at ``index`` (holes included); ``Q2`` enters the degrees of freedom
    of the sample variance. Computed from the pair counts by FFT, O(G log G).
    """
    lags = int(index[-1]) + 1 if index.size else 0
    # Without holes the pair counts are n - k; otherwise count them by FFT.
    c = np.arange(lags, 0, -1, dtype=float) if index.size == lags else pair_counts(index, lags)
    r = rho[:lags]
    q = float(c[0] + 2.0 * (c[1:] @ r[1:]))
    q2 = float(c[0] + 2.0 * (c[1:] @ (r[1:] ** 2)))
    return q, q2


def scale_dof(n: int, q: float, q2: float) -> float:
    """Effective degrees of freedom of the corrected sample variance ``SS / (n - Q/n)``.

    For a Gaussian series ``SS = x' C x`` (C the centering matrix) has mean
    ``sigma^2 tr(CR) = sigma^2 (n - Q/n)`` and variance ``2 sigma^4 tr((CR)^2)`` with
    ``tr((CR)^2) <= Q2 - Q^2/n^2``; matching a scaled chi-square (Satterthwaite,
    Biometrics Bulletin 2(6), 1946) gives ``nu >= (n - Q/n)^2 / (Q2 - Q^2/n^2)``: the
    bound is used, so the dof err on the small (conservative) side. White noise:
    ``n - 1``.
    """
    num = (n - q / n) ** 2
    den = q2 - q * q / (n * n)
    if den <= 0 or num <= 0:
        return 0.0
    return float(num / den)
