"""Is the baseline's window itself stationary? A step and a trend inside it, tested under the
signal's memory.

A before-after verdict compares the window with the baseline's mean. If the signal moved
inside the baseline (a deploy, a load shift, a warm-up half-way through), that mean is a
mixture of two levels, and a window that simply continues the later level reads as a
change: a +8 % step at the middle of a 2 h AR(1) baseline (phi 0.95, 5 % sd) gave
14.8 % false IMPROVED. The window is checked for a changed memory at every look
(:mod:`.assumptions`); this module checks the baseline, once, at ``snapshot-baseline``.

Two statistics of the baseline's samples ``x_1..x_n`` (in time order, holes allowed),
``y_i = x_i - xbar``, each divided by the scale left once its own fit is removed,
``s_r = sqrt((sum y^2 - C^2) / n)`` (``C^2`` the sum of squares the step or the line
explains), so that only the *autocorrelation* of the memory model enters their null
distribution and a real step does not inflate the scale it is measured against:

- **step** (standardised CUSUM, the likelihood-ratio statistic of one unknown change in
  mean; Csorgo & Horvath, *Limit Theorems in Change-Point Analysis*, 1997, ch. 1; Andrews,
  Econometrica 61(4), 1993, for the trimmed supremum): ``C = max_k |S_k| / sqrt(k (n - k) / n)``
  with ``S_k = sum_{i<=k} y_i`` over ``k`` in ``[TRIM n, (1 - TRIM) n]``, ``T_step = C / s_r``; the split ``k``
  that attains it is where the level moved (the first sample after it: ``step_at``), and
  ``mean(x_{k+1..n}) / mean(x_{1..k}) - 1`` how much;
- **trend** (the least-squares slope on time): ``C = |sum_i (t_i - tbar) y_i| / sqrt(sum_i (t_i - tbar)^2)``, ``T_trend = C / s_r``;
  the fitted line's change over the window relative to the mean, ``trend_ratio``.

Their null distributions under dependence are not the textbook ones (the CUSUM's
Brownian-bridge limit needs ``n`` many times the memory, and a 1 h baseline of a signal
with a 10-minute memory holds about six independent samples). So each p-value is a
**parametric Monte-Carlo** p-value (Davison & Hinkley, *Bootstrap Methods and their
Application*, 1997, sec. 4.2): :data:`SIMULATIONS` Gaussian series with the memory
model's autocorrelation on the baseline's grid (circulant embedding, Davies & Harte,
Biometrika 74(1), 1987; the negative eigenvalues of a model that is not exactly
embeddable are set to 0), taken at the baseline's present positions, through the same
statistic; ``p = (1 + #{T_sim >= T}) / (SIMULATIONS + 1)``. Fixed seed: the same baseline
and model always give the same answer. The long-run variance therefore comes from the
memory model (its whole autocorrelation function, not an estimate from the baseline
alone). A grid longer than :data:`MAX_GRID` points is tested on block means of
``ceil(G / MAX_GRID)`` steps, with the block means' exact autocorrelation under the model.

The baseline **moved** when either p-value is below ``level / 2`` (Bonferroni over the
two, :data:`LEVEL` overall); when both are, the kind is the one whose fit (one step, or a
line) leaves the smaller residual sum of squares.

Assumptions: Gaussian-like fluctuations with the memory model's autocorrelation (the
statistics are scale-free, so the model's variance does not matter; heavy tails make the
step test somewhat liberal); the memory model was fitted on history before the baseline
(``source: history``). A model fitted on the baseline alone (``source: windows``) reads a
step inside it partly as memory, and the test loses power (it errs towards "stationary").
What the tests miss: a step in the first or last :data:`TRIM` of the window (too few
samples on one side to locate it), a cycle (the cycle detector's concern), a change of
variance alone; and a moved baseline whose halves happen to look alike (a suggestive
p-value is followed up at verify: :mod:`obsctl.baselining.decide.later_level`).
Calibration: bench/bench_stationarity.py, docs/verification.md
("Baselines that moved inside their window").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from obsctl.baselining.statistics.memory import MemoryModel, grid_index

#: Overall level of the two tests (each at half of it).
LEVEL = 0.05

#: Monte-Carlo series per test (p-values in steps of 1 / (SIMULATIONS + 1)).
SIMULATIONS = 999

#: The step's split is searched in [TRIM n, (1 - TRIM) n].
TRIM = 0.1

#: Fewest samples a baseline needs to be tested.
MIN_SAMPLES = 40

#: Longest grid simulated at the baseline's step; longer ones are tested on block means.
MAX_GRID = 4096

#: The Monte-Carlo generator's seed (a fixed one: the test is a function of its inputs).
SEED = 20_251_205

#: Series simulated at once (memory: ``CHUNK x grid`` floats a few times over).
CHUNK = 250

METHOD = "cusum-step+ols-trend, parametric Monte-Carlo under the memory model"


@dataclass(frozen=True)
class Stationarity:
    """What :func:`check_baseline` found.

    Attributes:
        step_p, trend_p: the Monte-Carlo p-values of the step and the trend statistic.
        moved: either p-value below ``level / 2``.
        kind: ``step`` | ``trend`` when moved (the better-fitting of the two), else ``""``.
        step_at: unix seconds of the first sample after the most likely split.
        step_ratio: mean after the split over the mean before it, minus 1.
        trend_ratio: the least-squares line's change from the first to the last sample,
            over the mean.
        level, simulations, samples: the test's level, Monte-Carlo series, samples tested.
        block_seconds: the step of the series tested (the baseline's, or its block means').
    """

    step_p: float
    trend_p: float
    moved: bool
    kind: str
    step_at: float
    step_ratio: float
    trend_ratio: float
    level: float
    simulations: int
    samples: int
    block_seconds: float

    def as_dict(self) -> dict:
        """JSON/YAML-ready fields (the stored form, :class:`obsctl.records.Stationarity`)."""
        return {"method": METHOD, "step_p_value": self.step_p, "trend_p_value": self.trend_p, "moved": self.moved, "kind": self.kind,
                "step_at": self.step_at, "step_ratio": self.step_ratio, "trend_ratio": self.trend_ratio, "level": self.level,
                "simulations": self.simulations, "samples": self.samples, "block_seconds": self.block_seconds}


def statistics(values: np.ndarray, positions: np.ndarray, trim: float = TRIM, variance: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step and trend statistics of each row of ``values`` (shape ``(m, n)``: ``m`` series
    at the same ``n`` grid ``positions``), each over ``sqrt(max(variance, s_r^2))``
    (``variance``: the model's marginal variance, 0: the rows' own residual scale alone).

    Returns:
        ``(T_step, T_trend, k)``, each shape ``(m,)``: ``k`` the split (samples before it)
        attaining ``T_step``.
    """
    x = np.atleast_2d(np.asarray(values, dtype=float))
    n = x.shape[1]
    y = x - x.mean(axis=1, keepdims=True)
    ss = np.sum(y * y, axis=1)
    k = np.arange(1, n)
    lo, hi = max(1, math.ceil(trim * n)), min(n - 1, math.floor((1 - trim) * n))
    k = k[lo - 1 : hi]
    explained = np.cumsum(y, axis=1)[:, k - 1] / np.sqrt(k * (n - k) / n)  # C_k: C_k^2 is the SS a step at k explains
    at = np.argmax(np.abs(explained), axis=1)
    c = np.abs(explained[np.arange(x.shape[0]), at])
    t_step = c / np.sqrt(np.maximum(np.maximum(ss - c * c, 1e-300) / n, variance))
    p = np.asarray(positions, dtype=float)
    pc = p - p.mean()
    lin = np.abs(y @ pc) / math.sqrt(float(pc @ pc))  # the SS a line explains, square-rooted
    t_trend = lin / np.sqrt(np.maximum(np.maximum(ss - lin * lin, 1e-300) / n, variance))
    return t_step, t_trend, k[at]


def simulate(rho: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` stationary Gaussian series with unit variance and autocorrelation ``rho``
    (lags ``0..G-1``), shape ``(count, G)``: circulant embedding, negative eigenvalues set to 0."""
    g = rho.size
    row = np.concatenate((rho, rho[-2:0:-1]))
    m = row.size
    lam = np.clip(np.fft.fft(row).real, 0.0, None)
    half = (count + 1) // 2
    w = np.sqrt(lam / m) * (rng.standard_normal((half, m)) + 1j * rng.standard_normal((half, m)))
    z = np.fft.fft(w, axis=1)
    return np.concatenate((z.real[:, :g], z.imag[:, :g]))[:count]


def block_acf(rho_fine: np.ndarray, block: int, lags: int) -> np.ndarray:
    """Autocorrelations at lags ``0..lags-1`` of means of ``block`` consecutive steps of a
    series with autocorrelation ``rho_fine`` (at least ``lags * block + block`` lags):
    ``Cov(B_0, B_L) ~ sum_{|d|<block} (block - |d|) rho(|L block + d|)``, normalised."""
    d = np.arange(-(block - 1), block)
    weights = block - np.abs(d)
    lag = np.abs(np.arange(lags)[:, None] * block + d[None, :])
    cov = rho_fine[lag] @ weights
    return cov / cov[0]


def _block_variance(memory: MemoryModel, block: int, step_seconds: float) -> float:
    """The variance of a mean of ``block`` consecutive steps over the marginal variance."""
    rho = memory.acf_at(block, step_seconds)
    d = np.arange(1, block)
    return float(block + 2 * ((block - d) * rho[1:]).sum()) / block**2


def check_baseline(times, values, step_seconds: float, memory: MemoryModel, level: float = LEVEL, simulations: int = SIMULATIONS,
                seed: int = SEED) -> Stationarity | None:
    """Test a baseline's samples for a step and a trend under ``memory`` (module doc).

    Args:
        times: sample times (unix s) on the ``step_seconds`` grid, increasing; holes allowed.
        values: finite values (signal unit), same shape.
        step_seconds: the baseline's grid step (s).
        memory: the signal's memory model (its autocorrelation is used, at any step).
        level: the overall level; simulations, seed: the Monte-Carlo's size and seed.

    Returns:
        A :class:`Stationarity`, or None with fewer than :data:`MIN_SAMPLES` samples or a
        constant window (nothing to test).
    """
    t = np.asarray(times, dtype=float)
    x = np.asarray(values, dtype=float)
    if x.size < MIN_SAMPLES or not np.ptp(x) > 0:
        return None
    idx = grid_index(t, step_seconds)
    grid = int(idx[-1]) + 1
    block = max(1, math.ceil(grid / MAX_GRID))
    if block > 1:
        cells = idx // block
        sums = np.bincount(cells, weights=x)
        counts = np.bincount(cells)
        pos = np.flatnonzero(counts)
        series = sums[pos] / counts[pos]
        lags = int(pos[-1]) + 1
        rho = block_acf(memory.acf_at(lags * block + block, step_seconds), block, lags)
    else:
        pos, series = idx, x
        rho = memory.acf_at(grid, step_seconds)
    if series.size < MIN_SAMPLES:
        return None
    # The model's scale (from history: many dof) when it is known; the baseline's own
    # residual scale when larger (the simulations, at unit variance, do the same).
    known = memory.source == "history" and math.isfinite(memory.dof) and memory.variance > 0
    scale = memory.variance if known else 0.0
    if block > 1 and known:
        scale *= _block_variance(memory, block, step_seconds)  # the block means' variance
    t_step, t_trend, at = statistics(series, pos, variance=scale)
    rng = np.random.default_rng(seed)
    exceed_step = exceed_trend = 0
    done = 0
    while done < simulations:
        count = min(CHUNK, simulations - done)
        sims = simulate(rho, count, rng)[:, pos] if rho.size > 1 else rng.standard_normal((count, pos.size))
        s_step, s_trend, _ = statistics(sims, pos, variance=1.0 if known else 0.0)
        exceed_step += int(np.sum(s_step >= t_step[0]))
        exceed_trend += int(np.sum(s_trend >= t_trend[0]))
        done += count
    p_step = (1 + exceed_step) / (simulations + 1)
    p_trend = (1 + exceed_trend) / (simulations + 1)
    # Where and how much, on the samples themselves.
    k = int(at[0]) * 1  # samples of ``series`` before the split
    split = int(np.searchsorted(idx, pos[k] * block)) if block > 1 else k
    before, after = float(x[:split].mean()), float(x[split:].mean())
    mean = float(x.mean())
    tc = t - t.mean()
    slope = float(tc @ (x - mean)) / float(tc @ tc)
    step_ratio = after / before - 1 if before != 0 else math.nan
    trend_ratio = slope * float(t[-1] - t[0]) / mean if mean != 0 else math.nan
    step_hit, trend_hit = p_step < level / 2, p_trend < level / 2
    kind = ""
    if step_hit and trend_hit:
        ss_step = float(((x[:split] - before) ** 2).sum() + ((x[split:] - after) ** 2).sum())
        ss_line = float(((x - mean - slope * tc) ** 2).sum())
        kind = "step" if ss_step <= ss_line else "trend"
    elif step_hit or trend_hit:
        kind = "step" if step_hit else "trend"
    return Stationarity(p_step, p_trend, bool(kind), kind, float(t[split]), step_ratio, trend_ratio, level, simulations, int(x.size),
                        step_seconds * block)
