"""Checks, on the window after a change, that the baseline's memory model still describes it.

The interval of :mod:`.comparison` gives the window's mean the variance of the
baseline's memory model (:mod:`.memory`, :mod:`.lrv`): it assumes the change moved the
mean (and perhaps the spread) but not the memory. A change can change the memory too
(a new batching policy, a cache, a retry loop): a window whose autocorrelation time has
grown fivefold gets an interval about 2.2 times too narrow, and no amount of data fixes
that. Two checks on the window's **innovations**, the window prewhitened with the
baseline's AR model ``a_1..a_p`` (:attr:`.memory.MemoryModel.coefficients`),
``e_t = (y_t - ybar) - sum_j a_j (y_{t-j} - ybar)``, which under the model are white
noise with the model's innovation variance ``sigma_e^2 = sigma^2 (1 - sum_j a_j rho_j)``
(Yule-Walker; Brockwell & Davis, *Time Series: Theory and Methods*, 1991, sec. 8.1):

1. **Memory unchanged** (:func:`yule_walker_score`, named "Yule-Walker score" in reasons
   and notes; scale-free: taken at the window's own variance). The model's coefficients solve the
   Yule-Walker equations of the history's autocorrelations at lags ``0..p``; on the
   window, ``g_k = (1/n) sum_t e_t (y_{t-k} - ybar)``, ``k = 1..p``, has mean 0 when the
   window's autocorrelations at those lags are the model's, and
   ``S = n g' Gamma_p^{-1} g / sigma_e^2`` is chi-square with ``p`` dof: a portmanteau of
   the prewhitened innovations' correlations with the window's own past, the
   Lagrange-multiplier form of "the window's AR(p) coefficients are the baseline's"
   (Hosking, JRSS B 42(2), 1980; Brockwell & Davis 1991 sec. 8.10). A white model
   (``p = 0``) is checked with the Ljung-Box statistic
   ``Q = n (n + 2) sum_{k=1..h} r_k^2 / (n - k)`` of the innovations (Ljung & Box,
   Biometrika 65(2), 1978; :func:`portmanteau`, ``h = min(MAX_LAGS, n // 10)``, ``h`` dof:
   the model is not fitted to the window, so none are subtracted; with holes ``n - k``
   is the number of present pairs). Why not Ljung-Box for every model: it tests that
   the innovations are white, i.e. that the AR(p) describes the window *exactly*, and
   an AR(12) never whitens a ``rate(x[1m])`` at a 15 s step (a sum of four counts: a
   moving average with unit roots): on the calibration's Cox counter it rejected 25 of 30
   unchanged 2 h windows at 0.001, the lack of fit that history and window share, not a
   change. The score form checks only the autocorrelations the model was fitted to
   (1 of the same 30) and still sees phi 0.90 -> 0.98.
2. **Scale unchanged** (:func:`variance_ratio`): ``F = s_e^2 / sigma_e^2``, the window's
   innovation variance over the model's, two-sided. The window's innovations are (nearly)
   independent, so ``s_e^2`` has about ``n`` degrees of freedom, not ``n_eff``: the check
   sees a 20 % change of the variance in a few hours of 15 s samples, where the marginal F
   test of :func:`.lrv.scale_consistent` (``n_eff`` dof) sees only a doubling. The
   numerator's dof are ``2 (n - 1) / (kappa - 1)``, ``kappa = max(3, sample kurtosis)``
   (the variance of a sample variance is ``sigma^4 (kappa - 1) / n``; Box, Biometrika 40,
   1953, showed the normal-theory F test is not robust to kurtosis), the denominator's
   the model's scale dof (:attr:`.memory.MemoryModel.dof`).

What a failed check does (:func:`check_window`), each check at :data:`LEVEL`:

- innovations noisier than the model's (``F > 1``), memory check passed: the window's
  variance of the mean is the model's times ``F``, with ``2 (n - 1) / (kappa - 1)`` dof
  (never narrower than before); noted;
- innovations quieter than the model's (``F < 1``): a quieter series (a change of
  variance) or a more predictable one (at the same spread a smaller one-step error means
  longer memory, as when phi goes from 0.90 to 0.98)? :func:`predictability` compares the
  window's unpredictable share of its own variance with the model's (scale-free, at
  :data:`PREDICTABILITY_LEVEL`): not lower and the memory check passed, a change of
  variance: judged under the baseline's memory at the scale the side already has (never
  narrower), noted; lower, a change of memory (next point);
- memory check failed (the score, Ljung-Box or the predictability ratio), or quieter
  innovations whose predictability cannot be computed, and the window holds at least
  :data:`MIN_REFIT_SAMPLES` samples spanning at least :data:`.memory.MIN_MEMORIES` of
  the memory fitted on it: the window's own memory (``source: windows``) and the window's
  variance of the mean is the larger of the two models' (a window's own fit underestimates
  memory longer than a fraction of itself, so the baseline's model is kept when it gives
  the wider interval); the note names the check and its p-value;
- the same in a window spanning fewer than ``MIN_MEMORIES`` of its own memory (that memory
  is then a lower bound, as for a baseline without history) but at least
  :data:`.batch_means.MIN_SPAN_MEMORIES`: the window's variance of the mean from
  :data:`.batch_means.BATCHES` batch means (:mod:`.batch_means`; no memory model needed,
  ``B - 1`` dof), or the baseline model's when that is wider; noted;
- the same in a shorter window (fewer samples, fewer than ``MIN_SPAN_MEMORIES`` of its own
  memory), or one with fewer than ``N_EFF_MIN`` effective samples under its own memory:
  INCONCLUSIVE, "assumption failed: ..." naming the check, its p-value and the window needed.

A false alarm only widens the interval (or, in windows under :data:`MIN_REFIT_SAMPLES`
samples, makes the verdict INCONCLUSIVE); how often each fires on the calibration's
nulls is in docs/verification.md (Calibration).

Not checked: fewer than :data:`MIN_INNOVATIONS` innovations, a window whose step is not
an integer fraction of the model's (the coefficients belong to the model's grid; an
integer multiple is checked on one phase of the model's grid), the scale of a model
without finite scale dof (a model pooled from the two sides), a window already too
short under the model (the too-short rule answers).

Assumptions: Gaussian-like innovations (the kurtosis correction widens the scale check
for heavier tails; the portmanteau's chi-square holds for any finite-variance white noise,
Ljung & Box 1978), the baseline's AR coefficients known (fitted on days of history their
error is negligible against one window's; fitted on the baseline alone, ``source:
windows``, the check errs on the side of alarms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from obsctl.baselining.statistics import batch_means
from obsctl.baselining.statistics import distributions as special
from obsctl.baselining.statistics.lrv import Side, side_estimate
from obsctl.baselining.statistics.memory import MIN_MEMORIES, MemoryModel, fit_memory, grid_index, quadratic_forms, scale_dof
from obsctl.baselining.statistics.power import N_EFF_MIN
from obsctl.durations import format_duration

#: Level of each check (two-sided for the scale).
LEVEL = 0.001

#: Most lags of the portmanteau; fewer for short windows (``n // 10``).
MAX_LAGS = 20

#: Fewest innovations a check needs.
MIN_INNOVATIONS = 50

#: Level of the one-sided predictability check (:func:`predictability`) that tells quieter
#: innovations from a change of memory. A trade: at 0.1 % a 40-minute window whose phi went
#: from 0.90 to 0.98 passed as a variance change and was judged under the old memory (the
#: too-narrow interval family (e) measures); at 1 % some windows whose variance alone
#: halved are refused (the window's marginal variance has few degrees of freedom in a
#: window a few memories long; docs/verification.md gives the rate).
PREDICTABILITY_LEVEL = 0.01

#: Fewest window samples to fit the window's own memory when the memory check fails.
MIN_REFIT_SAMPLES = 200


#: What each check is, by its field name (``Check.test``): the names reasons and notes use.
TEST_NAMES = {
    "yule-walker-score": "Yule-Walker score test (the window's lag-1..p autocorrelations against the model's, at the window's own scale)",
    "ljung-box": "Ljung-Box test of the prewhitened innovations",
    "variance-ratio": "innovation variance ratio (window / model)",
    "predictability": "one-step predictability ratio (the window's innovation over marginal variance, against the model's)",
}


@dataclass(frozen=True)
class Check:
    """One check's outcome.

    Attributes:
        name: ``memory`` (the autocorrelations: Yule-Walker score, Ljung-Box or the
            predictability ratio) or ``scale`` (variance ratio).
        statistic: the score ``S``, ``Q`` or ``F``.
        dof: chi-square dof (``p`` or ``h``) or the numerator's dof of ``F``.
        p_value: the check's p-value (two-sided for ``scale``, one-sided for ``predictability``).
        n: innovations used.
        passed: ``p_value >= level``.
        test: which test it is: a key of :data:`TEST_NAMES`.
    """

    name: str
    statistic: float
    dof: float
    p_value: float
    n: int
    passed: bool
    test: str = ""

    def text(self) -> str:
        """One phrase for reasons and notes, naming the test."""
        if self.test == "yule-walker-score":
            return (f"Yule-Walker score S = {self.statistic:.1f} on {self.dof:.0f} lag(s) of {self.n} prewhitened innovations "
                    f"(scale-free), p = {self.p_value:.2g}")
        if self.test == "ljung-box" or (self.name == "memory" and not self.test):
            return f"Ljung-Box Q = {self.statistic:.1f} on {self.dof:.0f} lags of {self.n} prewhitened innovations, p = {self.p_value:.2g}"
        if self.test == "predictability":
            return (f"one-step predictability ratio {self.statistic:.3g} (the window's innovation / marginal variance over the model's, "
                    f"{self.dof:.0f} dof), p = {self.p_value:.2g}")
        return f"innovation variance ratio {self.statistic:.3g} (window / model, {self.dof:.0f} dof), p = {self.p_value:.2g}"


@dataclass(frozen=True)
class Finding:
    """One note of a check, as data: its kind, the full diagnostic, and the one figure the
    plain words quote (:mod:`obsctl.baselining.text.notes` words it).

    Attributes:
        kind: ``variance-noisier`` (the window's innovations are noisier: the interval is
            widened), ``variance-quieter`` (quieter but as predictable: judged at the
            baseline's memory, never narrower), ``memory-own`` (the memory differs: judged
            under the window's own), ``memory-kept`` (it may differ: the baseline's model
            gave the wider interval and was kept), ``scale-own`` (the window's spread differs
            from the history's: its own scale was used).
        detail: the diagnostic: the test, its statistic, p-value and level.
        value: ``variance-noisier``: the variance ratio; ``memory-own``: the window's memory
            (integrated autocorrelation time, s); else None.
    """

    kind: str
    detail: str
    value: float | None = None


@dataclass(frozen=True)
class WindowCheck:
    """What :func:`check_window` found and what the comparison should use.

    Attributes:
        side: the window's side to judge with (the one given when nothing failed).
        memory: the model the window's side was computed under (the baseline's, or the
            window's own fit; the comparison keeps the baseline's for everything else).
        checks: the checks made (empty: not checked).
        findings: the judgement's notes as data (:class:`Finding`); ``notes``: their diagnostics.
        reason: non-empty: the verdict is INCONCLUSIVE for this reason.
        failure: the reason as data: ``assumption-short`` (value: the window it needs to fit
            its own memory, s), ``assumption-memory-long`` (value: the window it needs, s) or
            ``assumption-few`` (too few independent samples under its own memory); its
            ``detail`` is ``reason``.
    """

    side: Side
    memory: MemoryModel
    checks: tuple[Check, ...] = ()
    findings: tuple[Finding, ...] = ()
    reason: str = ""
    failure: Finding | None = None

    @property
    def notes(self) -> tuple[str, ...]:
        """The findings' full diagnostics, in order."""
        return tuple(f.detail for f in self.findings)

    def failed(self, name: str) -> bool:
        """True when the check ``name`` was made and failed."""
        return any(c.name == name and not c.passed for c in self.checks)


def innovation_variance(model: MemoryModel) -> float:
    """The model's innovation variance ``sigma^2 (1 - sum_j a_j rho_j)`` (signal unit squared)."""
    a = np.asarray(model.coefficients, dtype=float)
    r = np.asarray(model.rho[1 : a.size + 1], dtype=float)
    return float(model.variance * (1.0 - float(a @ r))) if a.size else float(model.variance)


def innovations(times, values, step_seconds: float, model: MemoryModel) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The window prewhitened with the model's AR coefficients about the window's own mean.

    Args:
        times: sample times (s) on the ``step_seconds`` grid, increasing; holes allowed.
        values: finite values, same shape.
        step_seconds: the window's grid step (s).
        model: the baseline's memory model.

    Returns:
        ``(grid positions, innovations, centred values)`` on the model's grid, one innovation
        per position whose ``p`` predecessors are all present (the centred values indexed by
        grid position, NaN where absent); None when the window's step is not an
        integer fraction of the model's (with an integer ratio ``m > 1`` the phase of the
        model's grid holding most samples is used).
    """
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    ratio = model.step_seconds / step_seconds
    m = round(ratio)
    if m < 1 or not math.isclose(ratio, m, rel_tol=1e-9):
        return None
    idx = grid_index(t, step_seconds)
    if m > 1:
        phase = int(np.argmax(np.bincount(idx % m, minlength=m)))
        keep = idx % m == phase
        idx, y = idx[keep] // m, y[keep]
    if y.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    idx = idx - idx[0]
    z = np.full(int(idx[-1]) + 1, np.nan)
    z[idx] = y - y.mean()
    a = np.asarray(model.coefficients, dtype=float)
    p = a.size
    e = z[p:].copy()
    for j in range(1, p + 1):
        e -= a[j - 1] * z[p - j : z.size - j]
    pos = np.arange(p, z.size)
    ok = np.isfinite(e)
    return pos[ok], e[ok], z


def ljung_box(positions: np.ndarray, residuals: np.ndarray, lags: int) -> float:
    """The Ljung-Box statistic ``n (n + 2) sum_{k=1..lags} r_k^2 / c_k`` of a series on a
    grid (``c_k`` present pairs at lag ``k``: ``n - k`` without holes; ``r_k`` the
    lag-``k`` sum of products of the centred series over its sum of squares)."""
    e = np.asarray(residuals, dtype=float)
    e = e - e.mean()
    pos = np.asarray(positions, dtype=np.int64) - int(positions[0])
    z = np.zeros(int(pos[-1]) + 1)
    z[pos] = e
    mask = np.zeros_like(z)
    mask[pos] = 1.0
    ss = float(e @ e)
    n = e.size
    q = 0.0
    for k in range(1, lags + 1):
        pairs = float(mask[k:] @ mask[:-k])
        if pairs < 1:
            continue
        r = float(z[k:] @ z[:-k]) / ss
        q += r * r / pairs
    return n * (n + 2) * q


def portmanteau(positions: np.ndarray, residuals: np.ndarray, level: float = LEVEL) -> Check:
    """The memory check: Ljung-Box on ``h = min(MAX_LAGS, n // 10)`` lags, chi-square with ``h`` dof."""
    n = int(np.asarray(residuals).size)
    lags = max(1, min(MAX_LAGS, n // 10))
    q = ljung_box(positions, residuals, lags)
    p = float(special.chdtrc(lags, q))
    return Check("memory", q, float(lags), p, n, p >= level, "ljung-box")


def variance_ratio(residuals: np.ndarray, model_variance: float, model_dof: float, level: float = LEVEL) -> Check:
    """The scale check: ``F = s_e^2 / sigma_e^2`` (``s_e^2`` about the innovations' own mean),
    two-sided, numerator dof ``2 n / (kappa - 1)``, denominator dof ``model_dof`` (inf: chi-square)."""
    e = np.asarray(residuals, dtype=float)
    n = e.size
    d = e - e.mean()
    s2 = float(d @ d) / max(n - 1, 1)
    kurt = float(np.mean(d**4) / np.mean(d**2) ** 2) if s2 > 0 else 3.0
    dof1 = 2.0 * (n - 1) / (max(kurt, 3.0) - 1.0)
    f = s2 / model_variance
    cdf = float(special.fdtr(dof1, model_dof, f)) if math.isfinite(model_dof) else float(special.chdtr(dof1, f * dof1))
    p = min(1.0, 2 * min(cdf, 1 - cdf))
    return Check("scale", f, dof1, p, n, p >= level, "variance-ratio")


def yule_walker_score(positions: np.ndarray, residuals: np.ndarray, values: np.ndarray, model: MemoryModel, level: float = LEVEL,
                      variance: float | None = None) -> Check:
    """The memory check for a model with ``p >= 1`` lags: the Yule-Walker equations of the
    model, evaluated on the window at the window's own scale. ``g_k = (1/n) sum_t e_t (y_{t-k} - ybar)``,
    ``k = 1..p``, is 0 in expectation when the window's autocorrelations at lags ``0..p``
    are the model's (the equations the coefficients solve), whatever the window's variance,
    and ``n g' Gamma_p^{-1} g / sigma_e^2`` is then chi-square with ``p`` dof (the
    Lagrange-multiplier test that the window's AR(p) coefficients are the baseline's;
    Hosking, JRSS B 42(2), 1980, and Brockwell & Davis 1991 sec. 8.10:
    ``Var(g) = sigma_e^2 Gamma_p / n``). ``Gamma_p = s_w^2 R_p`` and
    ``sigma_e^2 = s_w^2 (1 - sum_j a_j rho_j)`` are taken at the window's own marginal
    variance ``s_w^2`` with the model's autocorrelations ``R_p``: the statistic is
    scale-free, so a window whose variance alone changed (halved, doubled) is not read as a
    changed memory; the scale has its own check (:func:`variance_ratio`). ``s_w^2`` is
    ``variance`` when given (:func:`check_window` gives ``s_e^2 / (1 - sum_j a_j rho_j)``,
    the marginal variance the window's innovations imply under the model: about ``n``
    dof, where the window's own marginal variance has a few in a window a few memories
    long, which made the chi-square reference fire on 9-14 % of unchanged 6 h windows;
    and, unlike the plain mean square, not shrunk in a window shorter than the memory),
    else the mean square of the centred values.

    Args:
        positions: the innovations' grid positions (:func:`innovations`).
        residuals: the innovations.
        values: the window's centred values on the same grid, indexed by position (NaN: absent).
        model: the baseline's model.
    """
    a = np.asarray(model.coefficients, dtype=float)
    p = a.size
    e = np.asarray(residuals, dtype=float)
    n = e.size
    pos = np.asarray(positions, dtype=np.int64)
    g = np.array([float(e @ values[pos - k]) for k in range(1, p + 1)]) / n
    rho = model.acf(p + 1)
    own = float(variance) if variance is not None and math.isfinite(variance) and variance > 0 else float(np.nanmean(np.asarray(values, dtype=float) ** 2))
    corr = rho[np.abs(np.subtract.outer(np.arange(p), np.arange(p)))]
    innovation_share = 1.0 - float(a @ rho[1 : p + 1])
    if not (own > 0 and innovation_share > 0):
        return Check("memory", 0.0, float(p), 1.0, n, True, "yule-walker-score")
    stat = float(n * g @ np.linalg.solve(own * corr, g) / (own * innovation_share))
    pval = float(special.chdtrc(p, stat))
    return Check("memory", stat, float(p), pval, n, pval >= level, "yule-walker-score")


def predictability(scale: Check, times, step_seconds: float, memory: MemoryModel, side: Side, level: float = PREDICTABILITY_LEVEL) -> Check | None:
    """Whether innovations quieter than the model's come with a spread as much quieter: a
    change of variance (the window is as predictable as the model says) or of memory (a
    longer-memory series predicts its next value better at the same spread).

    ``R = F / M``: ``F`` the innovation variance ratio (``scale``), ``M = s_own^2 / sigma^2``
    the window's own marginal variance under the model (:attr:`.lrv.Side.own_sd`, unbiased
    under the model) over the model's. Scale-free: ``R = (s_e^2 / s_own^2) / (sigma_e^2 / sigma^2)``,
    the window's one-step unpredictable share over the model's. Under an unchanged memory
    ``R`` is about ``F(dof_F, dof_M)`` (``dof_M``: the Satterthwaite dof of the window's
    marginal variance under the model, :func:`.memory.scale_dof`; the two estimates are
    positively correlated, which makes the F reference conservative); one-sided, low ``R``
    rejects. At phi 0.90 -> 0.98 at an unchanged spread ``R`` is about 0.2.

    Returns:
        The check (``name`` ``memory``, ``test`` ``predictability``), or None when the
        window's own marginal variance is undefined.
    """
    own = side.own_sd**2
    if not (math.isfinite(own) and own > 0 and memory.variance > 0):
        return None
    t = np.asarray(times, dtype=float)
    idx = grid_index(t, step_seconds)
    q, q2 = quadratic_forms(idx, memory.acf_at(int(idx[-1]) + 1, step_seconds))
    dof_m = scale_dof(idx.size, q, q2)
    if not dof_m > 0.5:
        return None
    ratio = scale.statistic / (own / memory.variance)
    pval = float(special.fdtr(scale.dof, dof_m, ratio))
    return Check("memory", ratio, dof_m, pval, scale.n, pval >= level, "predictability")


def _failed(result: WindowCheck, kind: str, value: float | None, reason: str) -> WindowCheck:
    """``result`` refused for ``reason``, with the reason as data (:attr:`WindowCheck.failure`)."""
    return replace(result, reason=reason, failure=Finding(kind, reason, value))


def _batched(result: WindowCheck, t: np.ndarray, y: np.ndarray, step_seconds: float, own: MemoryModel, span: float,
             why: str) -> WindowCheck:
    """A window whose own memory is too long against it to be fitted: judged from its batch
    means (:mod:`.batch_means`) when it spans :data:`.batch_means.MIN_SPAN_MEMORIES` of that
    memory, the wider of that and the baseline model's; else refused with the window it needs."""
    need = batch_means.MIN_SPAN_MEMORIES * own.tau_seconds
    batched = batch_means.batch_side(t, y, step_seconds) if span >= need else None
    if batched is None:
        return _failed(result, "assumption-memory-long", need,
                       f"assumption failed: {why}: fitted on the window, its memory is at least "
                       f"{format_duration(own.tau_seconds)} (integrated autocorrelation time), a lower bound; the window's mean "
                       f"is judged from {batch_means.BATCHES} batch means once the window spans "
                       f"{batch_means.MIN_SPAN_MEMORIES:.0f} of it; use a window of at least {format_duration(need)}")
    text = (f"assumption check: {why}: fitted on the window, its memory is at least {format_duration(own.tau_seconds)} "
            f"(integrated autocorrelation time), fewer than {MIN_MEMORIES:.0f} of it in the window to fit it")
    if not batched.var_mean > result.side.var_mean:
        return replace(result, findings=(*result.findings, Finding("memory-kept", f"{text}: the baseline's model gives the "
                                                                                  f"wider interval and was kept")))
    return replace(result, side=batched, memory=own, findings=(*result.findings, Finding(
        "memory-batches", f"{text}: the window's mean was judged from {batch_means.BATCHES} batch means "
                          f"({batched.dof:.0f} dof, {batched.n_eff:.1f} effective samples)", float(batch_means.BATCHES))))


def check_window(times, values, step_seconds: float, memory: MemoryModel, side: Side, level: float = LEVEL) -> WindowCheck:
    """Check that the baseline's memory and scale describe the window, and what to judge it with.

    Args:
        times, values: the window's finite samples (s, signal unit) on the step grid.
        step_seconds: the grid step (s).
        memory: the baseline's memory model (the one ``side`` was computed under).
        side: the window's :func:`.lrv.side_estimate` under ``memory``.
        level: each check's level.

    Returns:
        A :class:`WindowCheck` (module doc: what a failed check does).
    """
    inn = innovations(times, values, step_seconds, memory)
    if inn is None or inn[1].size < MIN_INNOVATIONS:
        return WindowCheck(side, memory)
    pos, e, centred = inn
    # The window's marginal variance implied by its innovations under the model (about n dof,
    # unlike the marginal's few): scale-free, and not shrunk in a window shorter than the memory.
    share = 1.0 - float(np.asarray(memory.coefficients) @ np.asarray(memory.rho[1 : len(memory.coefficients) + 1]))
    own = float(np.var(e)) / share if memory.coefficients and share > 0 else None
    mem = yule_walker_score(pos, e, centred, memory, level, own) if memory.coefficients else portmanteau(pos, e, level)
    checks = [mem]
    sigma_e2 = innovation_variance(memory)
    scale = None
    if sigma_e2 > 0 and math.isfinite(sigma_e2) and memory.dof > 2:
        scale = variance_ratio(e, sigma_e2, memory.dof, level)
        checks.append(scale)
    result = WindowCheck(side, memory, tuple(checks))
    if not math.isfinite(side.var_mean):
        return result  # too short under the model already: the too-short rule says so
    if scale is not None and not scale.passed and scale.statistic > 1:
        # Noisier innovations at the same memory: the model's variance of the mean at the window's scale (about n dof).
        var = memory.variance * scale.statistic
        if var > side.sd**2:  # never narrower than the side's own scale (the marginal F test may have chosen it already)
            rescaled = replace(side, var_mean=side.var_mean * var / side.sd**2, dof=scale.dof, sd=math.sqrt(var), scale_source="own")
        else:
            rescaled = side
        result = replace(result, side=rescaled, findings=(Finding("variance-noisier", f"the window's innovations are noisier than the baseline "
                                                                  f"model's ({scale.text()}): the model's variance at the window's "
                                                                  f"scale was used", scale.statistic),))
    if scale is not None and not scale.passed and scale.statistic < 1:
        # Quieter innovations: a quieter series (variance changed) or a more predictable one (memory changed)?
        pred = predictability(scale, times, step_seconds, memory, side)
        if pred is not None:
            checks.append(pred)
            result = replace(result, checks=tuple(checks))
            if pred.passed and mem.passed:
                return replace(result, findings=(*result.findings, Finding(
                    "variance-quieter", f"the window is quieter than the baseline model ({scale.text()}) and as predictable "
                                        f"({pred.text()}): a change of variance, not of memory; judged under the baseline's memory, "
                                        f"never at a narrower scale than the window's own")))
    failed = [c for c in checks if not c.passed and c.name == "memory"]
    if not failed and not (scale is not None and not scale.passed and scale.statistic < 1 and len(checks) == 2):
        return result
    failed = failed or [scale]
    what = "; ".join(c.text() for c in failed)
    why = ("the window's memory differs from the baseline's" if failed[0].name == "memory" else
           "the window's innovations are quieter than the baseline model's at its spread (a sign of longer memory)")
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    own = fit_memory(t, y, step_seconds, source="windows") if y.size >= MIN_REFIT_SAMPLES else None
    if own is None:
        return _failed(result, "assumption-short", MIN_REFIT_SAMPLES * step_seconds,
                       f"assumption failed: {why} ({what}; level {level:g}): the interval would rest on a memory the change may "
                       f"have altered, and the {y.size}-sample window is too short to fit its own (needs {MIN_REFIT_SAMPLES}); use "
                       f"a longer window")
    span = float(t[-1] - t[0]) + step_seconds
    if span < MIN_MEMORIES * own.tau_seconds:
        return _batched(result, t, y, step_seconds, own, span, f"{why} ({what}; level {level:g})")
    own_side = side_estimate(t, y, step_seconds, own, history_scale=False)
    text = f"assumption check: {why} ({what}; level {level:g})"
    if not own_side.var_mean <= result.side.var_mean:  # NaN: too short under its own memory
        if not (own_side.n_eff >= N_EFF_MIN and math.isfinite(own_side.var_mean)):
            return _failed(result, "assumption-few", None,
                           f"assumption failed: {why} ({what}; level {level:g}): under the memory fitted on the window (integrated "
                           f"autocorrelation time at least {own.tau_seconds:.0f} s) the window holds about {own_side.n_eff:.1f} "
                           f"independent samples, fewer than {N_EFF_MIN:.0f}; use a longer window")
        return replace(result, side=own_side, memory=own,
                       findings=(*result.findings, Finding("memory-own", f"{text}: the window is judged under its own memory (fitted on "
                                                                         f"the window, integrated autocorrelation time at least "
                                                                         f"{own.tau_seconds:.0f} s)", own.tau_seconds)))
    return replace(result, findings=(*result.findings, Finding("memory-kept", f"{text}: the baseline's model gives the wider interval and was kept")))
