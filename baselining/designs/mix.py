"""Mix shift: how much of a change the mix of the work explains (rate/mix decomposition).

A class's aggregate signal is modelled as a weighted mean over the segments of a mix
dimension (a label such as ``model``): ``M = sum_s w_s r_s`` with ``w_s`` the segment's
share of the class's demand (requests) and ``r_s`` the signal measured on the segment
alone. Exact for per-unit-of-work signals (cost per request, latency, tokens per
request) and for efficiency ratios whose denominator is proportional to the demand; an
approximation otherwise, stated in the outputs.

Decomposition of the log change (Laspeyres mix at the baseline's rates, then the rate
change at the window's mix; the two parts add up exactly):

    log(M_a / M_b) = log(sum w_a r_b / sum w_b r_b)   [mix]
                   + log(sum w_a r_a / sum w_a r_b)   [rate]

The **rate** part is the change with the mix held fixed; its interval comes from the
same before-after method applied to the mix-standardized series ``S_t = sum_s w_a,s
r_s,t`` of each period. The **mix share** is ``|mix| / (|mix| + |rate|)``; above
:data:`MAX_MIX_SHARE` (and when the mix part reaches half the minimum effect) the verdict
is INCONCLUSIVE with the decomposition in the reason.
Source: Kitagawa, "Components of a difference between two rates", JASA 50(272), 1955.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Mix share of the change above which the verdict is INCONCLUSIVE.
MAX_MIX_SHARE = 0.5


@dataclass(frozen=True)
class MixDecomposition:
    """The rate/mix decomposition of one change (module doc).

    Attributes:
        dimension: the mix label, e.g. ``model``.
        segments: segment values in a fixed order.
        share_before, share_after: each segment's demand share per period (sum 1).
        total_change, mix_change, rate_change: ratios (0.13 = +13 %); ``(1+mix)(1+rate) = 1+total``.
        mix_share: ``|log(1+mix)| / (|log(1+mix)| + |log(1+rate)|)`` (0 when there is no change).
    """

    dimension: str
    segments: tuple[str, ...]
    share_before: tuple[float, ...]
    share_after: tuple[float, ...]
    total_change: float
    mix_change: float
    rate_change: float
    mix_share: float

    def line(self) -> str:
        """``mix by model: a 50 % -> 70 %, b 50 % -> 30 %; change +13.3 % = mix +13.3 % x rate +0.0 % (mix explains 100 %)``."""
        moves = ", ".join(f"{s} {b:.0%} -> {a:.0%}" for s, b, a in zip(self.segments, self.share_before, self.share_after, strict=True))
        return (f"mix by {self.dimension}: {moves}; change {self.total_change * 100:+.1f} % = mix {self.mix_change * 100:+.1f} % "
                f"x rate {self.rate_change * 100:+.1f} % (mix explains {self.mix_share:.0%})")

    def dominates(self, min_effect_ratio: float) -> bool:
        """True when the mix explains more than :data:`MAX_MIX_SHARE` and is itself at least half the minimum effect."""
        return self.mix_share > MAX_MIX_SHARE and abs(self.mix_change) >= 0.5 * min_effect_ratio


def shares(weights: np.ndarray) -> np.ndarray:
    """Normalize non-negative weights over the last axis to shares (sum 1)."""
    w = np.clip(np.asarray(weights, float), 0, None)
    return w / w.sum(axis=-1, keepdims=True)


def decompose(dimension: str, segments: tuple[str, ...], w_before, r_before, w_after, r_after) -> MixDecomposition:
    """Decompose the change of ``sum w r`` between two periods (arrays over segments).

    Args:
        w_before, w_after: each segment's demand (any scale; normalized to shares).
        r_before, r_after: each segment's signal mean per period (positive).
    """
    wb, wa = shares(w_before), shares(w_after)
    rb, ra = np.asarray(r_before, float), np.asarray(r_after, float)
    mb, ma, cross = float(wb @ rb), float(wa @ ra), float(wa @ rb)
    log_mix, log_rate = math.log(cross / mb), math.log(ma / cross)
    denom = abs(log_mix) + abs(log_rate)
    return MixDecomposition(dimension, tuple(segments), tuple(float(x) for x in wb), tuple(float(x) for x in wa),
                            ma / mb - 1, math.expm1(log_mix), math.expm1(log_rate), abs(log_mix) / denom if denom > 0 else 0.0)


def standardized(weights_fixed: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """The mix-standardized series ``S_t = sum_s w_s r_s,t``: ``rates`` shape ``(..., n, S)``, weights ``(..., S)``."""
    w = shares(weights_fixed)
    return np.einsum("...ts,...s->...t", np.asarray(rates, float), w)


#: Segments kept in a decomposition (the largest by demand).
MAX_SEGMENTS = 12


def from_means(dimension: str, rows: list[tuple[str, list[float], list[float]]]) -> tuple[MixDecomposition | None, str]:
    """The decomposition from each segment's ``(value, [demand before, after], [signal before, after])``
    means (``None, reason`` with fewer than 2 segments measured in both periods).

    Segments with a non-finite mean are left out; the :data:`MAX_SEGMENTS` largest by the
    window's demand are kept. The rows are read by :func:`obsctl.baselining.evidence.measure_mix`.
    """
    rows = [row for row in rows if all(np.isfinite(row[1])) and all(np.isfinite(row[2]))]
    rows.sort(key=lambda row: -row[1][1])
    rows = rows[:MAX_SEGMENTS]
    if len(rows) < 2:
        return None, f"mix by {dimension}: fewer than 2 segments with both demand and signal in both periods"
    segs = tuple(r[0] for r in rows)
    dec = decompose(dimension, segs, [r[1][0] for r in rows], [r[2][0] for r in rows], [r[1][1] for r in rows], [r[2][1] for r in rows])
    return dec, ""
