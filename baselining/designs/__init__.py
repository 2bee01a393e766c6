"""Comparison designs: which windows and which series a verdict compares.

One module per design, each with one ``effect(...)`` function returning an
:class:`~obsctl.baselining.designs.effect.Effect` (a ratio with its interval, by the one
definition in :mod:`.effect`):

``before_after``  window vs stored baseline (the default)
``seasonal``      window vs the same hours of day / week of the stored baseline
``profile``       before-after with the signal's known cycle divided out (the default
                  when the history shows a daily or weekly cycle, :mod:`.knowledge`)
``control``       difference in differences against an untouched control class
``canary``        treatment vs control replicas of one class in the same window

and the checks of what a design cannot remove: :mod:`.cycle` (a daily / weekly cycle in
the baseline), :mod:`.demand` (demand change and saturation per period; throughput that
is demand-bound), :mod:`.mix` (rate/mix decomposition). :mod:`.judge` turns an effect and
its checks into the verdict. The statistics (variance of a mean under autocorrelation)
come from :mod:`obsctl.baselining.statistics` through :mod:`.estimator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from obsctl.spec import Design

#: Design names as the spec (:data:`obsctl.spec.Design`) and ``initiative start --design`` spell them (each module's ``DESIGN.name``).
DESIGNS: tuple[str, ...] = get_args(Design)


@dataclass(frozen=True)
class Wording:
    """How outputs name a design's effect (read by :func:`obsctl.baselining.text.present.context_lines`
    without loading the design modules).

    Attributes:
        formula: the effect's definition, e.g. ``T / C - 1``.
        groups: the effect's context holds the two groups' means (``treatment_mean``, ``control_mean``).
        same_hours: the effect's context holds the matched cycles (``cycles``, ``cycle``, ``matched_share``).
    """

    formula: str = "ratio"
    groups: bool = False
    same_hours: bool = False


#: Each design's :class:`Wording` by name (before-after: the default).
WORDING: dict[str, Wording] = {
    "canary": Wording("T / C - 1", groups=True),
    "control": Wording("(T_a / T_b) / (C_a / C_b) - 1"),
    "seasonal": Wording("window / same hours - 1", same_hours=True),
    "profile": Wording("mean(W / cycle) / mean(B / cycle) - 1"),
}
