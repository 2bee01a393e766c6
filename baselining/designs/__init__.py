"""Comparison designs: which windows and which series a verdict compares.

One module per design, each with one ``effect(...)`` function returning an
:class:`~obsctl.baselining.designs.effect.Effect` (a ratio with its interval, by the one
definition in :mod:`.effect`):

``before_after``  window vs stored baseline (the default)
``seasonal``      window vs the same hours of day / week of the stored baseline
``control``       difference in differences against an untouched control class
``canary``        treatment vs control replicas of one class in the same window

and the checks of what a design cannot remove: :mod:`.cycle` (a daily / weekly cycle in
the baseline), :mod:`.demand` (demand change and saturation per period; throughput that
is demand-bound), :mod:`.mix` (rate/mix decomposition). :mod:`.judge` turns an effect and
its checks into the verdict. The statistics (variance of a mean under autocorrelation)
come from :mod:`obsctl.baselining.statistics` through :mod:`.estimator`.
"""

from __future__ import annotations

#: Design names as the spec and ``initiative start --design`` spell them.
DESIGNS: tuple[str, ...] = ("before-after", "control", "canary", "seasonal")
