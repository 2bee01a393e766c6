"""Anytime-valid looks: one boundary for every cumulative window of a change.

SREs run ``verify`` whenever they like, on the window cumulative from the change's start
to the moment they look. A fixed-level interval tested at every look finds a false
direction far more often than its level (five looks at 5 % give about 14 %, Armitage,
McPherson & Rowe, JRSS A 132(2), 1969), and a group-sequential plan holds only for the
looks it counts. Here the interval holds at every look at once, however many there are
and whenever they come: ``P(exists a look whose interval misses the change) <= alpha``
(a confidence sequence, Howard, Ramdas, McAuliffe & Sekhon, Ann. Statist. 49(2), 2021).

The process. The baseline's error ``e ~ N(0, V_x)`` is drawn once and shared by every
look; the window's mean error after ``n`` effective samples is ``W(n) / n``, ``W`` a
Brownian motion (a stationary series with the long-run variance of the memory model;
with a plug-in variance the guarantee is asymptotic, as in Waudby-Smith, Arbour, Sinha,
Kennedy & Ramdas, *Time-uniform central limit theory and asymptotic confidence
sequences*, Ann. Statist. 2024). The look's z statistic, the change's error over its
standard error, is then ``Z = B(t) / sqrt(t)`` for a standard Brownian motion ``B``
observed at the **information time** ``t = V_x / (V_x + V_w)`` (``V_w`` the window's
variance): ``Corr(Z_1, Z_2) = sqrt(t_1 / t_2)``, as for the group-sequential looks of
Jennison & Turnbull (*Group Sequential Methods*, 2000, ch. 11), but without a planned end:
as the window grows without bound ``t`` rises to 1 and ``Z`` to the baseline's own error.

The boundary. A look can decide once the window holds ``N_EFF_MIN`` effective samples,
at ``t >= t_min = V_x / (V_x + sd^2 / N_EFF_MIN)``, fixed by the baseline alone. The
constant boundary ``c`` solves ``P(sup_{t_min <= t <= 1} |B(t)| / sqrt(t) >= c) = alpha``:
the continuously monitored repeated significance test (Siegmund, *Sequential Analysis*,
1985, ch. 4). With ``s = log t`` the statistic is a stationary Ornstein-Uhlenbeck process
(``Cov = exp(-|s_1 - s_2| / 2)``) over ``L = log(1 / t_min)``; :func:`crossing` computes
its crossing probability by the Markov recursion on a grid (``K`` equal steps in ``s``:
one transition kernel applied ``K`` times to the density, which stays even) and corrects the
discrete monitoring to continuous with Siegmund's shift of the boundary by
``0.5826 sqrt(delta)`` (Siegmund 1985, sec. 10.2; Monte Carlo with 20,000-step paths
agrees within its error, tests/unit/test_statistics.py). Every cumulative window is a
point of that path, so any look schedule, any number of looks and any window length
are covered; a window that does not start at the change is not, and ``verify`` refuses it.

Its price against one fixed look: ``c`` grows with ``L``, i.e. with how much longer the
baseline is than the shortest deciding window (``c = 1.96`` at ``L = 0``, about 2.5 for a
baseline of 6 effective samples, 3.1 for one of 1,000); bench/bench_calibration.py
measures it in power against the group-sequential method the looks used before.

Assumptions: the window's series is stationary with the memory and scale used for
``V_w`` (:mod:`.comparison` checks the scale), the baseline's error is Gaussian and
independent of the window's, and the change is constant over the window.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from obsctl.baselining.statistics.distributions import ndtr, ndtri

#: Siegmund's constant for the overshoot of a Gaussian random walk: a boundary ``b``
#: monitored at steps of variance ``delta`` is crossed about as often as ``b + RHO sqrt(delta)``
#: monitored continuously.
RHO = 0.5826

#: Steps of the Markov recursion in ``s = log t`` and grid points on ``(-c, c)`` (odd: 0 is
#: one): the continuity-corrected probability moves by < 1e-4 from 64 to 1,024 steps.
STEPS = 64
GRID = 161


def min_fraction(var_mean_baseline: float, var_first_window: float) -> float:
    """``t_min = V_x / (V_x + V_first)``: the information time of the first deciding window.

    Args:
        var_mean_baseline: the baseline mean's variance ``V_x`` (any scale).
        var_first_window: the variance of the mean of the shortest window that can decide
            (``sd^2 / N_EFF_MIN``, same scale).

    Raises:
        ValueError: a variance that is not finite and positive.
    """
    for v in (var_mean_baseline, var_first_window):
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"variances must be finite and positive, got {v!r}")
    return var_mean_baseline / (var_mean_baseline + var_first_window)


def _survival(c: float, span: float, steps: int = STEPS, grid: int = GRID) -> float:
    # P(|U(s_k)| < c at all K+1 points s_k = k span / K), U stationary OU with Cov exp(-|ds|/2).
    # The density stays even (kernel and start are symmetric in x -> -x), so it is carried on
    # x >= 0 with the mirrored mass folded in, and the transition is applied K times to it:
    # the same sums as the full grid's matrix power, at a fraction of the work.
    a = math.exp(-span / steps / 2)
    sd = math.sqrt(1 - a * a)
    x = np.linspace(-c, c, grid)
    h = x[1] - x[0]
    w = np.full(grid, h)
    w[0] = w[-1] = h / 2  # trapezoid
    mid = grid // 2  # x[mid] == 0 (grid is odd)
    half, wh = x[mid:], w[mid:]
    density = lambda d: np.exp(-0.5 * (d / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    folded = (density(half[:, None] - a * half[None, :]) + density(half[:, None] + a * half[None, :])) * wh[None, :]
    folded[:, 0] /= 2  # 0 is its own mirror
    p = np.exp(-0.5 * half * half) / math.sqrt(2 * math.pi)
    for _ in range(steps):
        p = folded @ p
    return float(wh[0] * p[0] + 2 * (wh[1:] @ p[1:]))


def crossing(c: float, span: float) -> float:
    """``P(sup_{0 <= s <= span} |U(s)| >= c)`` for the stationary OU statistic of the module doc.

    Args:
        c: the boundary (z scale, > 0).
        span: ``L = log(1 / t_min)`` (>= 0).

    Returns:
        The continuously monitored two-sided crossing probability (0-1).
    """
    one_look = float(2 * ndtr(-c))
    if span <= 1e-12:
        return one_look
    # A step's spread (about sqrt(span / steps)) must cover a grid spacing or the kernel's
    # quadrature loses mass: short spans take fewer steps (at least one: two looks).
    spacing = 2 * c / (GRID - 1)
    steps = max(1, min(STEPS, int(span / spacing**2)))
    shifted = c - RHO * math.sqrt(span / steps)
    if shifted <= 0:
        return 1.0
    # Never below one look's probability: monitoring over a span can only add crossings.
    return min(1.0, max(one_look, 1 - _survival(shifted, span, steps)))


@functools.lru_cache(maxsize=1024)
def boundary(t_min: float, alpha: float) -> float:
    """The constant z boundary that every look on ``[t_min, 1]`` together crosses with probability ``alpha``.

    Args:
        t_min: the first deciding look's information time (:func:`min_fraction`), in (0, 1].
        alpha: the two-sided error over all looks, in (0, 1).

    Raises:
        ValueError: ``t_min`` or ``alpha`` out of range.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not 0 < t_min <= 1:
        raise ValueError(f"t_min must lie in (0, 1], got {t_min!r}")
    span = math.log(1 / t_min)
    fixed = float(ndtri(1 - alpha / 2))
    if span <= 1e-12:
        return fixed
    # Regula falsi (Illinois) on log P(c) - log alpha, decreasing in c, bracketed by the
    # one-look value (P >= alpha there) and a value whose crossing is below alpha.
    f = lambda c: math.log(max(crossing(c, span), 1e-300)) - math.log(alpha)
    lo, hi = fixed, fixed + 1.0
    f_lo, f_hi = f(lo), f(hi)
    if f_lo <= 0:  # the span adds no crossing probability the grid can see
        return fixed
    while f_hi > 0:
        lo, f_lo, hi = hi, f_hi, hi + 1.0
        f_hi = f(hi)
    side = 0
    for _ in range(100):
        if f_hi == f_lo:
            return (lo + hi) / 2
        c = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        fc = f(c)
        if abs(fc) < 1e-10 or hi - lo < 1e-10:
            return c
        if fc > 0:
            lo, f_lo = c, fc
            if side == 1:
                f_hi /= 2
            side = 1
        else:
            hi, f_hi = c, fc
            if side == -1:
                f_lo /= 2
            side = -1
    return c


def confidence_of(z: float) -> float:
    """The nominal two-sided level ``1 - 2 (1 - Phi(z))`` of a z boundary (1.0 for ``inf``)."""
    return 1.0 if not math.isfinite(z) else float(1 - 2 * ndtr(-z))
