"""Recording rules for every workload class x signal: the spec's PromQL, recorded per class.

Each rule records ``signal.record_name`` (``workload_class:<metric>:<operations>``) with
the identity labels ``{workload_class, signal}``; the query comes from
``Spec.query_for`` (class selectors escaped there). One rule group per class, for the
signals its source can fill (:func:`class_signals`), and the ``obsctl.classes`` group:
the class info series (owner, kind, source) and one series per generated pair.
"""

from __future__ import annotations

from obsctl.rules.loop_series import CLASS_INFO, CLASS_SIGNAL_INFO
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


def class_info_group(spec: Spec) -> dict:
    """The ``obsctl.classes`` group: :data:`CLASS_INFO` per class and :data:`CLASS_SIGNAL_INFO`
    per (class, signal) of :func:`class_signals`, constants ``vector(1)``."""
    rules: list[dict] = []
    for wc in sorted(spec.workload_classes, key=lambda c: c.name):
        labels = {"workload_class": wc.name, "kind": wc.kind, "source": wc.source}
        if wc.owner:
            labels["owner"] = wc.owner
        rules.append({"record": CLASS_INFO, "expr": "vector(1)", "labels": labels})
        rules += [{"record": CLASS_SIGNAL_INFO, "expr": "vector(1)", "labels": {"workload_class": wc.name, "signal": s.name}}
                  for s in class_signals(spec, wc)]
    return {"name": "obsctl.classes", "rules": rules}


def signal_groups(spec: Spec) -> list[dict]:
    """Rule groups ``obsctl.signals.<class>``, one recording rule per signal the class can
    have (:func:`class_signals`), then the ``obsctl.classes`` group.

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
            for sig in class_signals(spec, wc)
        ]
        if rules:  # a class whose source fills none of the signals has no group
            groups.append({"name": f"obsctl.signals.{wc.name}", "rules": rules})
    return groups + [class_info_group(spec)]
