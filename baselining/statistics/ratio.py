"""The relative change of a window against a baseline: ``R - 1`` with ``R = ybar/xbar``.

Interval: Fieller's (Fieller, "Some problems in interval estimation", JRSS B 16(2),
1954) for the ratio of two independent means with variances ``v_x, v_y`` (from
:mod:`.lrv`): ``{rho : (ybar - rho xbar)^2 <= c^2 (v_y + rho^2 v_x)}``, which for
``g = c^2 v_x / xbar^2 < 1`` is ``[R -+ (c/|xbar|) sqrt((1-g) v_y + R^2 v_x)] / (1-g)``.
Unlike the delta method it stays valid when the baseline's mean is imprecise and says
so (unbounded when ``g >= 1``). The critical value ``c`` is Student's t with the
Welch-Satterthwaite degrees of freedom of ``v_y + R^2 v_x`` (Welch, Biometrika 34,
1947), each side's variance carrying the dof of :func:`.lrv.side_estimate`.

``estimate_log_ratio`` gives ``log(ybar/xbar)`` with its delta-method standard error,
a symmetric scale other designs (control/canary differences) can combine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from obsctl.baselining.statistics import distributions as special
from obsctl.baselining.statistics.lrv import Side


def satterthwaite(parts: list[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of variance estimates ``[(v_i, dof_i)]`` (inf dof allowed)."""
    total = sum(v for v, _ in parts)
    den = sum(v * v / d for v, d in parts if math.isfinite(d) and d > 0 and v > 0)
    if total <= 0:
        return math.inf
    return total * total / den if den > 0 else math.inf


def t_critical(confidence: float, dof: float) -> float:
    """Two-sided critical value: the ``(1+confidence)/2`` quantile of t(dof) (normal for inf dof)."""
    q = (1 + confidence) / 2
    return float(special.ndtri(q)) if not math.isfinite(dof) or dof > 1e7 else float(special.stdtrit(dof, q))


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its standard error and degrees of freedom (inf: normal)."""

    point: float
    se: float
    dof: float


@dataclass(frozen=True)
class RatioEstimate:
    """``R = ybar / xbar`` of a window (y) against a baseline (x).

    Attributes:
        baseline_mean, window_mean: ``xbar``, ``ybar`` (signal unit).
        v_x, v_y: variances of the two means.
        dof: Welch-Satterthwaite dof of ``v_y + R^2 v_x``.
    """

    baseline_mean: float
    window_mean: float
    v_x: float
    v_y: float
    dof: float

    @property
    def change(self) -> float | None:
        """``R - 1`` (0.1 = +10 %); None when ``xbar = 0``."""
        return None if self.baseline_mean == 0 else self.window_mean / self.baseline_mean - 1

    @property
    def se(self) -> float:
        """Delta-method standard error of ``R``."""
        if self.baseline_mean == 0:
            return math.inf
        r = self.window_mean / self.baseline_mean
        return math.sqrt(self.v_y + r * r * self.v_x) / abs(self.baseline_mean)

    def interval(self, confidence: float) -> tuple[float, float] | None:
        """Fieller interval of the change ``R - 1`` at two-sided ``confidence``; None if unbounded."""
        return fieller(self.baseline_mean, self.window_mean, self.v_x, self.v_y, t_critical(confidence, self.dof))


def fieller(xbar: float, ybar: float, vx: float, vy: float, crit: float) -> tuple[float, float] | None:
    """Fieller interval of ``ybar/xbar - 1`` for critical value ``crit``; None when unbounded (``g >= 1``) or ``xbar = 0``."""
    if xbar == 0 or not (math.isfinite(vx) and math.isfinite(vy) and math.isfinite(crit)):
        return None
    g = crit * crit * vx / (xbar * xbar)
    if g >= 1:
        return None
    r = ybar / xbar
    half = crit / abs(xbar) * math.sqrt(max((1 - g) * vy + r * r * vx, 0.0))
    return (r - half) / (1 - g) - 1, (r + half) / (1 - g) - 1


def estimate_ratio(baseline: Side, window: Side) -> RatioEstimate:
    """The change estimate of ``window`` against ``baseline`` (independent sides)."""
    r = window.mean / baseline.mean if baseline.mean != 0 else 0.0
    dof = satterthwaite([(window.var_mean, window.dof), (r * r * baseline.var_mean, baseline.dof)])
    return RatioEstimate(baseline.mean, window.mean, baseline.var_mean, window.var_mean, dof)


def estimate_log_ratio(a: Side, b: Side) -> Estimate:
    """``log(b.mean / a.mean)`` with delta-method se ``sqrt(v_b/b^2 + v_a/a^2)`` and Satterthwaite dof.

    Raises:
        ValueError: a mean is not positive.
    """
    if a.mean <= 0 or b.mean <= 0:
        raise ValueError("log ratio needs positive means")
    va, vb = a.var_mean / a.mean**2, b.var_mean / b.mean**2
    return Estimate(math.log(b.mean / a.mean), math.sqrt(va + vb), satterthwaite([(va, a.dof), (vb, b.dof)]))
