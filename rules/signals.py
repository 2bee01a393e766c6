"""Recording rules for every workload class x signal.

Each rule records ``signal.record_name`` (``workload_class:<metric>:<operations>``) with
the identity labels ``{workload_class, signal}``, for the signals a class's source can
fill (:func:`class_signals`).

* A catalogue signal reads the class's canonical series, which carry ``workload_class``
  already: one rule per signal for every class, ``sum by (workload_class)`` of the series
  joined ``on(workload_class)`` with the pairs of :data:`CLASS_SIGNAL_INFO` (the same
  value per class as the per-class query ``sum(<record>{workload_class="<class>"})``).
* A PromQL signal reads raw series through the class's ``$selector`` / ``$node_selector``,
  which the raw series carry no class label to group by: one rule per class, in the
  group ``obsctl.signals.<class>`` (query from ``Spec.query_for``, selectors escaped there).

The ``obsctl.signals`` group holds the class info series (owner, kind, source), one
:data:`CLASS_SIGNAL_INFO` rule per signal (the classes that can fill it) and the
catalogue signals, in that order, so the signals read the info series of the same evaluation.
"""

from __future__ import annotations

from obsctl.rules.canonical import CATALOGUE_SIGNALS, OWN_SERIES
from obsctl.rules.loop_series import CLASS_INFO, CLASS_SIGNAL_INFO, class_regex, selector
from obsctl.spec import Signal, Spec, WorkloadClass


def class_signals(spec: Spec, wc: WorkloadClass) -> list[Signal]:
    """The signals ``wc`` can have, sorted by name: every PromQL signal, and the catalogue
    signals the class's source (and queue) fill (:func:`obsctl.rules.sources.describe`).

    A catalogue signal over a series the source never provides (time to first token of
    an SDK class, MFU without an ``mfu:`` block) gets no rule, alert or panel for that
    class; ``obsctl check`` names each such gap.
    """
    from obsctl.rules.sources import describe

    offered = set(describe(wc)["signals"])
    return [s for s in sorted(spec.signals, key=lambda s: s.name) if s.catalogue is None or s.catalogue in offered]


def class_info_rules(spec: Spec) -> list[dict]:
    """:data:`CLASS_INFO` per class (a constant ``vector(1)``: the class's own data) and one
    :data:`CLASS_SIGNAL_INFO` rule per signal, ``group by (workload_class)`` of the info
    series of the classes that can have it (:func:`class_signals`): one series per pair."""
    classes = sorted(spec.workload_classes, key=lambda c: c.name)
    rules: list[dict] = []
    for wc in classes:
        labels = {"workload_class": wc.name, "kind": wc.kind, "source": wc.source}
        if wc.owner:
            labels["owner"] = wc.owner
        rules.append({"record": CLASS_INFO, "expr": "vector(1)", "labels": labels})
    filling = {wc.name: {s.name for s in class_signals(spec, wc)} for wc in classes}
    for sig in sorted(spec.signals, key=lambda s: s.name):
        names = [name for name, have in filling.items() if sig.name in have]
        if names:
            info = CLASS_INFO if len(names) == len(classes) else f"{CLASS_INFO}{{{class_regex(names)}}}"
            rules.append({"record": CLASS_SIGNAL_INFO, "expr": f"group by (workload_class) ({info})", "labels": {"signal": sig.name}})
    return rules


def catalogue_rule(sig: Signal) -> dict:
    """The one rule of a catalogue signal for every class that can have it."""
    record, extra, *_ = CATALOGUE_SIGNALS[sig.catalogue]
    matchers = ",".join(m for m in (extra, OWN_SERIES) if m)
    expr = (f"sum by (workload_class) (\n  {record}{{{matchers}}}\n"
            f"  and on(workload_class) {selector(CLASS_SIGNAL_INFO, signal=sig.name)}\n)")
    return {"record": sig.record_name, "expr": expr, "labels": {"signal": sig.name}}


def signal_groups(spec: Spec) -> list[dict]:
    """Rule groups ``obsctl.signals.<class>`` (the class's PromQL signals, one rule each,
    for the classes that have any), then ``obsctl.signals`` (:func:`class_info_rules`
    and one rule per catalogue signal some class can have).

    Returns:
        A list of Prometheus rule-group dicts (``name``, ``rules``).
    """
    groups = []
    for wc in sorted(spec.workload_classes, key=lambda c: c.name):
        rules = [
            {
                "record": sig.record_name,
                "expr": spec.query_for(sig, wc),
                "labels": {"workload_class": wc.name, "signal": sig.name},
            }
            for sig in class_signals(spec, wc) if sig.catalogue is None
        ]
        if rules:
            groups.append({"name": f"obsctl.signals.{wc.name}", "rules": rules})
    fillable = {s.name for wc in spec.workload_classes for s in class_signals(spec, wc)}
    shared = [catalogue_rule(sig) for sig in sorted(spec.signals, key=lambda s: s.name)
              if sig.catalogue is not None and sig.name in fillable]
    return groups + [{"name": "obsctl.signals", "rules": class_info_rules(spec) + shared}]
