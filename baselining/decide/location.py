"""Which location a verdict judges, from the spec and the baseline (no I/O).

:func:`location_for` reads the signal's spec ``spiky`` and the baseline's stored tail test
(:class:`obsctl.records.Tails`) through :func:`obsctl.baselining.statistics.robust.choose`,
and gives the memory model the comparison runs under: the winsorised history's for a
trimmed mean (the snapshot fitted it), else the baseline's own. A trimmed mean needs the
baseline's samples and that memory; a baseline stored without either (taken before the
spec marked the signal spiky) is judged by its mean, and the verdict says why.
"""

from __future__ import annotations

from obsctl.baselining.statistics import robust
from obsctl.baselining.statistics.memory import MemoryModel
from obsctl.records import Baseline
from obsctl.spec import Spec


def location_for(spec: Spec, baseline: Baseline, memory: MemoryModel | None) -> tuple[robust.Location, MemoryModel | None]:
    """``(location, memory)`` of a verdict on ``baseline`` (module doc); ``memory`` is the
    baseline's own model, returned unchanged for the mean."""
    sig = next((s for s in spec.signals if s.name == baseline.signal), None)
    spiky = sig.spiky if sig is not None else None
    t = baseline.tails
    test = robust.TailTest(t.heavy, t.outliers, t.samples, t.share, t.robust_sd) if t is not None else None
    loc = robust.choose(spiky, test, t.trim if t is not None else robust.TRIM)
    if not loc.robust:
        return loc, memory
    if len(baseline.samples) < 2:
        return robust.Location("mean", loc.trim, f"{loc.why}, but the baseline's samples are not stored: judged by its mean"), memory
    if t is not None and t.memory is not None:
        return loc, MemoryModel.from_dict(t.memory.model_dump())
    return robust.Location("mean", loc.trim, f"{loc.why}, but the baseline was snapshot without the trimmed mean's memory "
                                             "(fitted on the winsorised history): judged by its mean; re-snapshot the baseline "
                                             "to judge its trimmed mean"), memory
