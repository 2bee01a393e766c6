"""The verdict of a design's comparison, read top to bottom like docs/verification-designs.md.

1. The effect is undefined -> NO_DATA when a side has no samples, else INCONCLUSIVE.
2. The interval of the effect against the margin ``min_effect_ratio``, by the one
   decision rule (:func:`obsctl.baselining.statistics.decision.decide`: NO_CHANGE inside
   the margin, IMPROVED / REGRESSED past it, INCONCLUSIVE otherwise).
3. The confounds the design cannot remove make the verdict INCONCLUSIVE with their
   reason (which names the better design or signal), whatever the interval said:
   - ``before-after`` on a baseline with a daily or weekly cycle (:mod:`.cycle`);
   - any design when a cycle is unknown and the window holds phases the baseline does
     not (``CycleCheck.refusal == "cycle-unknown"``, :mod:`.knowledge`);
   - a primary that follows demand and is demand-bound (:mod:`.demand`), in every design;
   - a mix shift that explains most of the change (:mod:`.mix`).
   NO_DATA and REGRESSED-by-guards are decided elsewhere (:func:`obsctl.baselining.decide.verdict.overall_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from obsctl.baselining.designs.cycle import CycleCheck
from obsctl.baselining.designs.demand import LoadContext
from obsctl.baselining.designs.effect import Effect
from obsctl.baselining.designs.mix import MixDecomposition
from obsctl.baselining.statistics.decision import Estimate, decide


@dataclass(frozen=True)
class Judgement:
    """A design's verdict with everything a reader needs to see why.

    Attributes:
        verdict, reason: the verdict and its one-line reason.
        interval_verdict: what the interval alone said (before the confound checks).
        notes: context lines (cycle, demand and saturation, mix, control's movement).
    """

    verdict: str
    reason: str
    interval_verdict: str
    effect: Effect
    cycle: CycleCheck | None = None
    load: LoadContext | None = None
    mix: MixDecomposition | None = None
    notes: list[str] = field(default_factory=list)


def as_estimate(e: Effect, level: float | None = None) -> Estimate:
    """The effect as the :class:`~obsctl.baselining.statistics.decision.Estimate` the decision rule reads.

    ``level``: the level the interval claims (on a change's sequence of looks, the level over
    all looks; the effect's own ``confidence`` is then the per-look level it was computed at);
    default the effect's."""
    return Estimate(e.ratio, e.ci_low, e.ci_high, level or e.confidence, e.dof, reason=e.reason)


def judge(effect: Effect, direction: str, min_effect_ratio: float, *, cycle: CycleCheck | None = None,
          load: LoadContext | None = None, mix: MixDecomposition | None = None, level: float | None = None) -> Judgement:
    """Apply the rules of the module doc. ``direction``: ``higher_is_better`` | ``lower_is_better``;
    ``level``: as :func:`as_estimate`."""
    notes = []
    if cycle is not None:
        notes.append(cycle.reason)
    if load is not None:
        notes.append(load.line() + (f" ({load.reason})" if load.reason and not load.demand_bound else ""))
    if mix is not None:
        notes.append(mix.line())
    if effect.context.get("control_change") is not None:
        notes.append(f"control moved {effect.context['control_change'] * 100:+.1f} % on its own")
    if effect.ratio is None or effect.ci_low is None:
        verdict = "NO_DATA" if effect.empty else "INCONCLUSIVE"
        return Judgement(verdict, effect.reason, verdict, effect, cycle, load, mix, notes)
    verdict, reason = decide(as_estimate(effect, level), direction, min_effect_ratio)  # type: ignore[arg-type]
    first = verdict
    override, why = confounds(effect.design, cycle, load, mix, min_effect_ratio)
    if override and verdict != "NO_DATA":
        verdict, reason = override, f"{why} (the interval alone said {first})"
    return Judgement(verdict, reason, first, effect, cycle, load, mix, notes)


def confounds(design: str, cycle: CycleCheck | None, load: LoadContext | None, mix: MixDecomposition | None,
              min_effect_ratio: float) -> tuple[str | None, str]:
    """Rule 3: ``("INCONCLUSIVE", reason)`` when a confound the design cannot remove is present, else ``(None, "")``."""
    if cycle is not None and cycle.detected and (design == "before-after" or cycle.refusal == "cycle-unknown"):
        return "INCONCLUSIVE", cycle.reason
    if load is not None and load.demand_bound:
        return "INCONCLUSIVE", load.reason
    if mix is not None and mix.dominates(min_effect_ratio):
        return "INCONCLUSIVE", f"the mix explains {mix.mix_share:.0%} of the change: {mix.line()}"
    return None, ""
