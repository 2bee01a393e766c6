"""Baseline, target and target-gap series, from the baseline store and the spec's targets.

* baseline: ``workload_class:obsctl_signal_baseline:value{workload_class, signal}`` =
  ``vector(<baseline stats.mean>)`` and ``obsctl_baseline_info{...metadata} = 1``; with the
  spec, also the regression alert's threshold from the baseline's spread
  (``workload_class:obsctl_signal_regression_threshold:value``, :mod:`obsctl.rules.regression`).
* target: absolute targets are a constant. A relative target anchored in the store
  (``obsctl.baselining.practice.targets``: the baseline current when the target first met one) is
  the constant ``anchor x (1 + relative)``, the value ``target show`` and ``review`` use,
  and its info series carries ``anchor_baseline_id`` and ``anchored_at``; a promotion does
  not move it. Without an anchor (no baseline yet, or rules made with ``--empty-store``)
  it is computed from the baseline series, ``baseline * (1 + relative)``, and has no
  value while there is no baseline (ObsctlBaselineMissing says so).
* gap: ``(current - target) / target`` per signal, joined ``on(workload_class, signal)``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable

from obsctl.records import Baseline
from obsctl.rules.loop_series import (
    BASELINE_INFO,
    BASELINE_VALUE,
    JOIN,
    REGRESSION_THRESHOLD,
    TARGET_GAP,
    TARGET_INFO,
    TARGET_VALUE,
    number,
    selector,
)
from obsctl.rules.regression import regression_threshold
from obsctl.spec import Spec


def rfc3339(moment: dt.datetime) -> str:
    """A datetime as an RFC 3339 UTC string (``2026-01-02T03:04:05Z``); naive means UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def select_baselines(spec: Spec, baselines: Iterable[Baseline]) -> tuple[list[Baseline], list[str]]:
    """The baselines to publish: one per (class, signal) of the spec, the newest if several.

    Baselines for a class or signal the spec no longer has, or with a non-finite mean,
    are left out (a NaN baseline would silence every comparison; left out, the
    ObsctlBaselineMissing alert shows it instead).

    Returns:
        (baselines sorted by class then signal, one warning line per baseline left out).
    """
    classes = {c.name for c in spec.workload_classes}
    signals = {s.name for s in spec.signals}
    chosen: dict[tuple[str, str], Baseline] = {}
    warnings = []
    for b in baselines:
        if b.workload_class not in classes or b.signal not in signals:
            warnings.append(f"baseline {b.id}: class {b.workload_class!r} / signal {b.signal!r} not in the spec; skipped")
        elif not math.isfinite(b.stats.mean):
            warnings.append(f"baseline {b.id}: mean is {b.stats.mean}; skipped")
        else:
            key = (b.workload_class, b.signal)
            if key not in chosen or b.created_at > chosen[key].created_at:
                chosen[key] = b
    return [chosen[k] for k in sorted(chosen)], warnings


def baseline_groups(baselines: list[Baseline], spec: Spec | None = None) -> list[dict]:
    """The ``obsctl.baselines`` group: value, regression threshold (when ``spec`` is given:
    the signal's tolerance, floor and direction) and info series per baseline (already selected)."""
    rules: list[dict] = []
    for b in baselines:
        identity = {"workload_class": b.workload_class, "signal": b.signal}
        rules.append({"record": BASELINE_VALUE, "expr": f"vector({number(b.stats.mean)})", "labels": identity})
        if spec is not None:
            threshold = regression_threshold(spec.signal(b.signal), b.stats)
            rules.append({"record": REGRESSION_THRESHOLD, "expr": f"vector({number(threshold)})", "labels": dict(identity)})
        rules.append({
            "record": BASELINE_INFO,
            "expr": "vector(1)",
            "labels": {
                **identity,
                "baseline_id": b.id,
                "window_start": rfc3339(b.window.start),
                "window_end": rfc3339(b.window.end),
                "population_series": str(b.population.series_count),
                "snapshot_time": rfc3339(b.created_at),
            },
        })
    return [{"name": "obsctl.baselines", "rules": rules}]


def target_groups(spec: Spec, anchored: dict | None = None) -> list[dict]:
    """The ``obsctl.targets`` group (target value and info) and ``obsctl.target_gaps``.

    Targets are sorted by (class, signal). A gap rule is written for each signal that
    has at least one target. ``anchored``: ``{(class, signal): (value, record)}`` of the
    anchored relative targets (:func:`obsctl.baselining.practice.targets.anchored_values`).
    """
    anchored = anchored or {}
    targets = sorted(spec.targets, key=lambda t: (t.workload_class, t.signal))
    rules: list[dict] = []
    for t in targets:
        identity = {"workload_class": t.workload_class, "signal": t.signal}
        anchor = anchored.get((t.workload_class, t.signal)) if t.absolute is None else None
        if t.absolute is not None:
            expr = f"vector({number(t.absolute)})"
        elif anchor is not None:
            expr = f"vector({number(anchor[0])})"
        else:
            expr = f"{selector(BASELINE_VALUE, **identity)} * (1 + {number(t.relative)})"
        rules.append({"record": TARGET_VALUE, "expr": expr, "labels": identity})
        extra = {} if anchor is None else {"anchor_baseline_id": anchor[1].anchor_baseline_id or "",
                                           "anchored_at": rfc3339(anchor[1].anchored_at)}
        rules.append({
            "record": TARGET_INFO,
            "expr": "vector(1)",
            "labels": {
                **identity,
                "driver": t.driver,
                "deadline": t.deadline.isoformat(),
                "type": "absolute" if t.absolute is not None else "relative",
                **extra,
            },
        })
    gaps = []
    for name in sorted({t.signal for t in targets}):
        current = spec.signal(name).record_name
        target = selector(TARGET_VALUE, signal=name)
        gaps.append({
            "record": TARGET_GAP,
            "expr": f"({current} - {JOIN} {target})\n/ {JOIN} {target}",
            "labels": {"signal": name},
        })
    return [{"name": "obsctl.targets", "rules": rules}, {"name": "obsctl.target_gaps", "rules": gaps}]
