"""The reference the anytime-valid looks are measured against: group-sequential
boundaries with Lan-DeMets alpha spending (bench only; ``verify`` uses the confidence
sequence of obsctl.baselining.statistics.anytime).

Teams run ``verify`` every hour until it says IMPROVED. Testing each look at the fixed
level inflates the chance of a false direction (five looks at 5 % give about 14 %,
Armitage, McPherson & Rowe, JRSS A 132(2), 1969). Each saved look ``k`` therefore
spends only ``alpha(t_k) - alpha(t_{k-1})`` of the error, with the O'Brien-Fleming-type
spending function of Lan & DeMets (Biometrika 70(3), 1983), each side spending half::

    alpha(t) = 2 * (2 - 2 Phi(z_{1-alpha/4} / sqrt(t)))

(the two-sided symmetric form of DeMets & Lan 1994 and R's ``ldbounds``: five equal
looks at alpha = 0.05 give 4.877, 3.357, 2.680, 2.290, 2.031).

over the **information fraction** ``t = I_k / I_planned`` (inverse variances of the
change estimate). With the baseline fixed and per-sample variance constant,
``t = (1/n_x + 1/N) / (1/n_x + 1/n_k)`` from the baseline's, the planned and the
look's window lengths (``n`` in effective samples), so any look schedule is valid
(the spending function, not the schedule, is fixed in advance). The critical values
``c_k`` solve ``P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1})``
for a Brownian motion observed at ``t_1 < t_2 < ...`` (``Corr(Z_i, Z_j) =
sqrt(t_i / t_j)``), computed by recursive numerical integration on a grid (Armitage
et al. 1969; Jennison & Turnbull, *Group Sequential Methods*, 2000, sec. 19.2).

Each look reports the **repeated confidence interval** at level ``1 - p_k``,
``p_k = 2 (1 - Phi(c_k))`` (Jennison & Turnbull 1989, JRSS B 51(3)): all looks' intervals
cover the true change together with probability ``>= 1 - alpha``, so every decision made
from them (IMPROVED, REGRESSED, NO_CHANGE) holds its error over all looks. With an
estimated variance ``p_k`` is turned into a t quantile (the significance-level approach
of Jennison & Turnbull 2000, sec. 11.1). A look with no more information than the
previous one (a window capped at the planned length) reuses its boundary: the same data
cannot cross again.
"""

from __future__ import annotations

import math

import numpy as np

from obsctl.baselining.statistics.distributions import ndtr, ndtri

#: Grid points per look for the recursive integration (trapezoid): the 5-look values of the
#: module doc come out within 1e-4 (tests/unit/test_statistics.py).
GRID = 101


def _sf(x):
    return ndtr(-np.asarray(x, dtype=float)) if np.ndim(x) else float(ndtr(-x))


def _pdf(x):
    return np.exp(-0.5 * np.asarray(x) ** 2) / math.sqrt(2 * math.pi)


def spending(t: float, alpha: float) -> float:
    """O'Brien-Fleming-type two-sided alpha spent by information fraction ``t`` (clipped to [0, 1])."""
    t = min(max(t, 0.0), 1.0)
    if t <= 0:
        return 0.0
    return float(4 * _sf(ndtri(1 - alpha / 4) / math.sqrt(t)))


def _step(density: np.ndarray | None, grid: np.ndarray | None, weights: np.ndarray | None, dt: float, mean_shift: float, new_grid: np.ndarray):
    """Density of B(t_k) on ``new_grid`` (continuation region) from that of B(t_{k-1})."""
    sd = math.sqrt(dt)
    if density is None:
        return _pdf((new_grid - mean_shift) / sd) / sd
    kernel = _pdf((new_grid[:, None] - grid[None, :] - mean_shift) / sd) / sd
    return kernel @ (density * weights)


def _cross(density, grid, weights, dt: float, mean_shift: float, b: float) -> tuple[float, float]:
    """(upper, lower) probability of ending past +b / below -b at this look, still running before."""
    sd = math.sqrt(dt)
    if density is None:
        return float(_sf((b - mean_shift) / sd)), float(ndtr((-b - mean_shift) / sd))
    up = _sf((b - grid - mean_shift) / sd)
    lo = ndtr((-b - grid - mean_shift) / sd)
    w = density * weights
    return float(w @ up), float(w @ lo)


def _cross_slope(density, grid, weights, dt: float, t: float, c: float) -> float:
    """d/dc of the two-sided crossing probability at boundary ``c * sqrt(t)`` (negative)."""
    sd = math.sqrt(dt)
    b = c * math.sqrt(t)
    w = density * weights
    return float(-math.sqrt(t) / sd * (w @ (_pdf((b - grid) / sd) + _pdf((-b - grid) / sd))))


def _solve_decreasing(f, slope, lo: float, hi: float, start: float, xtol: float = 1e-10) -> float:
    """Root of a decreasing ``f`` with ``f(lo) > 0 > f(hi)``: Newton steps kept inside the
    shrinking bracket, bisection where a step would leave it ("rtsafe", Press et al.,
    *Numerical Recipes*, 3rd ed., 2007, sec. 9.4). Replaces scipy.optimize.brentq, whose
    package import costs seconds of every verify's start-up; converges in a few steps."""
    c = min(max(start, lo), hi)
    for _ in range(200):
        value = f(c)
        if value == 0:
            return c
        if value > 0:
            lo = c
        else:
            hi = c
        d = slope(c)
        new = c - value / d if d < 0 else math.nan
        if not lo < new < hi:  # outside the bracket (or no usable slope): bisect
            new = 0.5 * (lo + hi)
        if abs(new - c) <= xtol or hi - lo <= xtol:
            return new
        c = new
    return c


def _grid(b: float, points: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    grid = np.linspace(-b, b, points)
    h = grid[1] - grid[0]
    weights = np.full(points, h)
    weights[0] = weights[-1] = h / 2  # trapezoid
    return grid, weights


def boundaries(fractions: list[float], alpha: float, grid: int = GRID) -> list[float]:
    """Two-sided critical values ``c_k`` (z scale) for looks at information fractions ``fractions``.

    Args:
        fractions: ``t_1, t_2, ...`` in (0, 1] (values above 1 are clipped; a value not
            above the previous one reuses the previous boundary).
        alpha: two-sided level over all looks, e.g. 0.05.
        grid: integration points per look.

    Returns:
        One critical value per look; ``inf`` where nothing is spent.
    """
    points = grid
    key = (float(alpha), points)
    # Resume from the longest cached prefix: a verify's looks extend the previous ones.
    start, state = 0, ([], None, None, None, 0.0, 0.0)
    for k in range(len(fractions), 0, -1):
        cached = _CACHE.get((key, tuple(fractions[:k])))
        if cached is not None:
            start, state = k, cached
            break
    out, density, grid, weights, t_prev, spent = list(state[0]), *state[1:]
    for i in range(start, len(fractions)):
        t = min(max(float(fractions[i]), 1e-9), 1.0)
        _remember((key, tuple(fractions[:i])), (tuple(out), density, grid, weights, t_prev, spent))
        if t <= t_prev + 1e-12:
            out.append(out[-1] if out else math.inf)
            continue
        target = spending(t, alpha) - spent
        dt = t - t_prev
        if target <= 1e-15:
            c = math.inf
        elif density is None:  # first look: closed form
            c = float(ndtri(1 - target / 2))
        else:
            def excess(c: float, density=density, grid=grid, weights=weights, dt=dt, t=t, target=target) -> float:
                up, lo = _cross(density, grid, weights, dt, 0.0, c * math.sqrt(t))
                return up + lo - target
            def slope(c: float, density=density, grid=grid, weights=weights, dt=dt, t=t) -> float:
                return _cross_slope(density, grid, weights, dt, t, c)
            hi = 40.0
            guess = float(ndtri(1 - target / 2))  # the boundary without earlier looks: close to the root, above it
            c = _solve_decreasing(excess, slope, 1e-6, hi, guess) if excess(1e-6) > 0 else 1e-6
        b = min(c, 12.0) * math.sqrt(t)
        new_grid, new_weights = _grid(b, points)
        density = _step(density, grid, weights, dt, 0.0, new_grid)
        grid, weights = new_grid, new_weights
        spent = spending(t, alpha)
        t_prev = t
        out.append(c)
    _remember((key, tuple(fractions)), (tuple(out), density, grid, weights, t_prev, spent))
    return out


_CACHE: dict = {}


def _remember(key, state) -> None:
    if len(_CACHE) > 512:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = state


def crossing(fractions: list[float], crit: list[float], drift: float, grid: int = GRID) -> tuple[list[float], list[float]]:
    """Per-look probabilities of a first crossing of the upper / lower boundary.

    ``Z_k = B(t_k) / sqrt(t_k)`` with ``B(t) = drift * t + W(t)`` (``drift`` = the
    final look's expected z value); used for power and for the planner.
    """
    ups, los = [], []
    points = grid
    density = grid = weights = None
    t_prev = 0.0
    for t, c in zip(fractions, crit, strict=True):
        t = min(max(float(t), 1e-9), 1.0)
        if t <= t_prev + 1e-12:
            ups.append(0.0)
            los.append(0.0)
            continue
        dt = t - t_prev
        shift = drift * dt
        b = min(c, 12.0) * math.sqrt(t)
        up, lo = _cross(density, grid, weights, dt, shift, b)
        ups.append(up)
        los.append(lo)
        new_grid, new_weights = _grid(b, points)
        density = _step(density, grid, weights, dt, shift, new_grid)
        grid, weights = new_grid, new_weights
        t_prev = t
    return ups, los


def information_fraction(n_baseline_eff: float, n_look_eff: float, n_planned_eff: float) -> float:
    """``t = (1/n_x + 1/N) / (1/n_x + 1/n_k)`` (see module doc), clipped to (0, 1]."""
    if n_look_eff <= 0:
        return 1e-9
    t = (1 / n_baseline_eff + 1 / n_planned_eff) / (1 / n_baseline_eff + 1 / n_look_eff)
    return float(min(max(t, 1e-9), 1.0))


def nominal_confidence(c: float) -> float:
    """The look's repeated-confidence level ``1 - 2 (1 - Phi(c))``."""
    return 1.0 if not math.isfinite(c) else float(1 - 2 * _sf(c))
