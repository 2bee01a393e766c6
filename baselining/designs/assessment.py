"""A design's own assessment: how the effect it judged was reached.

The :class:`~obsctl.records.Assessment` a verdict records describes the comparison that
decided it. For a design with an effect of its own (seasonal, control, canary, profile)
that is the design's log series, not the before-after comparison of the window with the
baseline: its memory model (:attr:`~obsctl.baselining.designs.effect.Effect.memory_source`,
``tau_seconds``), the effective samples of each series it judged
(:attr:`~obsctl.baselining.designs.effect.Effect.n_eff`: ``baseline`` for a design with a
baseline period, ``window``), its t dof, and the look it was judged at
(:class:`~obsctl.baselining.designs.branch.Look`: the boundary, its ``t_min`` and the
per-look level the interval was computed at).
"""

from __future__ import annotations

import math

from obsctl.baselining.designs.branch import Look
from obsctl.baselining.designs.effect import Effect
from obsctl.records import Assessment


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def of(effect: Effect, method: str, look: Look) -> Assessment:
    """The :class:`~obsctl.records.Assessment` of ``effect``, judged by ``method`` at ``look``.

    ``interval_confidence`` is the level the effect's interval was computed at
    (``effect.confidence``: the look's per-look level); figures that are undefined (an
    effect too short for its memory) are None.
    """
    tau = _finite(effect.context.get("tau_seconds"))
    return Assessment(method=method, tau_seconds=tau, memory_source=effect.memory_source if tau is not None else None,
                      n_eff_baseline=_finite(effect.n_eff.get("baseline")), n_eff_window=_finite(effect.n_eff.get("window")),
                      dof=_finite(effect.dof), look=look.number, min_fraction=look.min_fraction, boundary_z=_finite(look.boundary_z),
                      interval_confidence=effect.confidence, planned_seconds=look.planned_seconds)
