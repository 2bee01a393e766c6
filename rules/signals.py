"""Recording rules for every workload class x signal: the spec's PromQL, recorded per class.

Each rule records ``signal.record_name`` (``workload_class:<metric>:<operations>``) with
the identity labels ``{workload_class, signal}``; the query comes from
``Spec.query_for`` (class selectors escaped there). One rule group per class.
"""

from __future__ import annotations

from obsctl.spec import Spec


def signal_groups(spec: Spec) -> list[dict]:
    """Rule groups ``obsctl.signals.<class>``, one recording rule per signal (sorted by name).

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
            for sig in sorted(spec.signals, key=lambda s: s.name)
        ]
        groups.append({"name": f"obsctl.signals.{wc.name}", "rules": rules})
    return groups
