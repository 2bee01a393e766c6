"""A robust location for spiky signals: the trimmed mean, its variance under the signal's memory.

A few spikes (GC pauses, x10 bursts, a replica restart) carry most of a spiky signal's
variance, so the plain mean's interval is wide and a real +/-10 % change is found
rarely. The **trimmed mean** cuts ``g = floor(trim * n)`` samples from each end of a
side's sorted values and averages the rest (:func:`trimmed_mean`, ``scipy.stats.trim_mean``).

Variance (Tukey and McLaughlin 1963; Yuen 1974, *Biometrika* 61(1), "The two-sample trimmed
t for unequal population variances"; Wilcox, *Introduction to Robust Estimation and
Hypothesis Testing*, 4th ed., sec. 3.6 and 5.3): the trimmed mean's influence function is
the **winsorised** value (each of the ``g`` lowest samples set to the lowest kept one,
each of the ``g`` highest to the highest kept one, :func:`winsorize`) centred and divided
by ``1 - 2 trim``. So the variance of the trimmed mean is the variance of the winsorised
series' mean divided by ``(1 - 2 trim)^2``: computed here by :func:`.lrv.side_estimate` on
the winsorised samples under the memory model (:func:`trimmed_side`), which carries
Yuen's iid formula ``s_w^2 / ((1 - 2 trim)^2 n)`` over to a series with memory. The
degrees of freedom shrink by the same factor (Yuen's ``h - 1`` with ``h = n - 2g``).

Assumptions: the memory model describes the winsorised series (``snapshot-baseline``
fits it on the winsorised history: :mod:`obsctl.baselining.measure.tails`); the change
scales the signal, spikes included, so the ratio of the two sides' trimmed means is the
change (each side is trimmed at its own quantiles: the trimmed mean is scale-equivariant);
a change that moves only the spikes (fewer GC pauses) is not what a trimmed mean measures,
it cuts them: judge such a signal by its mean (spec ``spiky: false``). Spikes in one tail
bias the trimmed mean of a skewed distribution away from its mean; the ratio of the two
sides is unbiased under the null and under a scaling change, which is what is judged.

Heavy tails (:func:`tail_test`, stated test): the share of samples farther than
:data:`OUTLIER_Z` robust standard deviations (``1.4826 * MAD``) from the median. A
Gaussian sample has such a point with probability 5.7e-7; a signal is heavy-tailed when
at least :data:`MIN_OUTLIERS` samples and :data:`OUTLIER_SHARE` of them are that far
(AR memory does not change the marginal law, so the test holds under memory too). A
median absolute deviation of 0 (a mostly constant signal) leaves the test undecided
(``heavy`` False, said in its text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from obsctl.baselining.statistics.lrv import Side

#: Share cut from each tail (10 %: Wilcox's and Yuen's common choice, 94 % of the mean's
#: efficiency on Gaussian data, robust to up to 10 % spikes on each side).
TRIM = 0.1
#: Robust z (distance from the median in units of 1.4826 MAD) beyond which a sample is an outlier.
OUTLIER_Z = 5.0
#: Share of outliers at or above which a signal is heavy-tailed.
OUTLIER_SHARE = 0.005
#: Outliers needed at least (a handful in a long history is not a tail).
MIN_OUTLIERS = 3
#: MAD to standard deviation of a Gaussian (1 / Phi^-1(3/4)).
MAD_TO_SD = 1.482602218505602


@dataclass(frozen=True)
class TailTest:
    """The heavy-tail test of :func:`tail_test`.

    Attributes:
        heavy: True when the signal is heavy-tailed.
        outliers: samples beyond :data:`OUTLIER_Z` robust sds; n: samples tested.
        share: ``outliers / n`` (0 when ``n`` is 0).
        robust_sd: ``1.4826 * MAD`` (signal unit; 0: the test is undecided).
    """

    heavy: bool
    outliers: int
    n: int
    share: float
    robust_sd: float

    def text(self) -> str:
        """``12 of 5,760 samples (0.21 %) lie beyond 5 robust sds of the median: heavy-tailed``."""
        if self.robust_sd <= 0:
            return f"median absolute deviation 0 over {self.n:,} samples: tails not tested"
        what = "heavy-tailed" if self.heavy else "not heavy-tailed"
        return (f"{self.outliers:,} of {self.n:,} samples ({self.share * 100:.2f} %) lie beyond {OUTLIER_Z:g} robust sds "
                f"(1.4826 MAD) of the median: {what} (at least {MIN_OUTLIERS} and {OUTLIER_SHARE * 100:g} % make it heavy)")


def tail_test(values) -> TailTest:
    """The heavy-tail test (module doc) of finite ``values``."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return TailTest(False, 0, 0, 0.0, 0.0)
    med = float(np.median(x))
    sd = MAD_TO_SD * float(np.median(np.abs(x - med)))
    if not sd > 0:
        return TailTest(False, 0, int(x.size), 0.0, 0.0)
    k = int(np.count_nonzero(np.abs(x - med) > OUTLIER_Z * sd))
    share = k / x.size
    return TailTest(k >= MIN_OUTLIERS and share >= OUTLIER_SHARE, k, int(x.size), share, sd)


def _cut(n: int, trim: float) -> int:
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    return int(math.floor(trim * n))


def winsorize(values, trim: float = TRIM) -> np.ndarray:
    """``values`` (in their order) with the ``g = floor(trim n)`` lowest set to the lowest
    kept one and the ``g`` highest to the highest kept one (the trimmed mean's g)."""
    x = np.asarray(values, dtype=float)
    g = _cut(x.size, trim)
    if g == 0:
        return x.copy()
    s = np.sort(x)
    return np.clip(x, s[g], s[x.size - g - 1])


def trimmed_mean(values, trim: float = TRIM) -> float:
    """Mean of ``values`` without the ``floor(trim n)`` lowest and highest (``scipy.stats.trim_mean``)."""
    _cut(len(values), trim)
    from scipy import stats as sps  # lazy: scipy.stats loads scipy.special (~0.3 s) on every verify otherwise

    return float(sps.trim_mean(np.asarray(values, dtype=float), trim))


def trimmed_side(side: Side, values, trim: float = TRIM) -> Side:
    """The trimmed mean's side from ``side``, the :func:`.lrv.side_estimate` of the
    winsorised ``values`` (module doc): mean := the trimmed mean of the raw ``values``,
    variance of the mean and its dof scaled by ``1 / (1 - 2 trim)^2`` and ``1 - 2 trim``."""
    keep = 1 - 2 * trim
    return replace(side, mean=trimmed_mean(values, trim), var_mean=side.var_mean / keep**2, dof=side.dof * keep)


@dataclass(frozen=True)
class Location:
    """The location a verdict judges.

    Attributes:
        kind: ``mean`` or ``trimmed``.
        trim: the share cut from each tail (``trimmed``).
        why: the reason it was chosen (the spec's ``spiky``, or the baseline's tail test).
    """

    kind: str
    trim: float = TRIM
    why: str = ""

    @property
    def robust(self) -> bool:
        return self.kind == "trimmed"

    @staticmethod
    def text_of(location: Location | None) -> str | None:
        """``location.text()``, None for no location given."""
        return location.text() if location is not None else None

    def text(self) -> str:
        """The location in the verdict's words, with why it was chosen."""
        what = f"{self.trim * 100:g} % trimmed mean (cut from each tail)" if self.robust else "mean"
        return f"location: {what}" + (f", because {self.why}" if self.why else "")


def choose(spiky: bool | None, tails: TailTest | None, trim: float = TRIM) -> Location:
    """The location of a signal: the trimmed mean when the spec marks it spiky (``spiky:
    true``), the mean when it says ``spiky: false``; unset, the trimmed mean when the
    baseline's tail test found it heavy-tailed, else the mean."""
    if spiky is True:
        return Location("trimmed", trim, "the spec marks the signal spiky")
    if spiky is False:
        return Location("mean", trim, "the spec marks the signal not spiky" if tails is not None and tails.heavy else "")
    if tails is not None and tails.heavy:
        return Location("trimmed", trim, f"the baseline is heavy-tailed ({tails.text()})")
    return Location("mean", trim, "")


class Trimmed:
    """One comparison's location steps: for a trimmed mean, winsorise each side's samples
    at its own quantiles (:meth:`baseline`, :meth:`window`, keeping the raw ones), then give
    each side its trimmed mean (:meth:`sides`); for the mean (``trim`` None) every step
    returns its input."""

    def __init__(self, trim: float | None) -> None:
        self.trim = trim
        self._raw: dict[str, np.ndarray] = {}

    @classmethod
    def of(cls, location: Location | None, precomputed: bool) -> Trimmed:
        """The steps of ``location`` (None: the mean).

        Raises:
            ValueError: a trimmed location with a precomputed baseline side (its samples are needed).
        """
        if location is None or not location.robust:
            return cls(None)
        if precomputed:
            raise ValueError("a trimmed location needs the baseline's samples, not a precomputed side")
        return cls(location.trim)

    def _winsorize(self, key: str, values: np.ndarray) -> np.ndarray:
        if self.trim is None:
            return values
        self._raw[key] = values
        return winsorize(values, self.trim)

    def baseline(self, values: np.ndarray) -> np.ndarray:
        """The baseline's samples to estimate its side from."""
        return self._winsorize("baseline", values)

    def window(self, values: np.ndarray) -> np.ndarray:
        """The window's samples to estimate its side from."""
        return self._winsorize("window", values)

    def sides(self, sx: Side, sy: Side) -> tuple[Side, Side]:
        """:func:`trimmed_side` of the baseline's and the window's winsorised sides (unchanged for the mean)."""
        if self.trim is None:
            return sx, sy
        return trimmed_side(sx, self._raw["baseline"], self.trim), trimmed_side(sy, self._raw["window"], self.trim)
