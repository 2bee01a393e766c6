"""The verification context dashboard: what a reader needs to see why a verdict is what it is.

Per class (``$workload_class``) and primary signal (``$signal``, the spec's signals):

* **demand and saturation**: the saturation state over time and now (the one definition of
  :mod:`obsctl.rules.saturation`), the offered load (arrivals incl. rejected), busy fraction
  and waiting requests: throughput measures capacity only while a queue builds
  (docs/verification-designs.md, demand-bound rule);
* **the primary signal against its baseline**: current value, the stored baseline and
  ``current / baseline - 1``;
* **treated vs control** (``$control_class``): both classes' signal and demand side by side,
  the control's own movement against its baseline, and the control-adjusted change
  ``(T / T_baseline) / (C / C_baseline) - 1`` (the ``control`` design's effect, here on
  instant values; ``verify`` estimates it on time-aligned batches with an interval);
* **canary** rows, one per class whose spec sets ``comparison.classes.<name>.variant``: each
  signal the variant label can split (its query uses ``$selector``) for the control and the
  treatment replicas side by side, and ``treatment / control - 1`` (the ``canary`` effect).
  Signals read from node-level series (``$node_selector``, ``$class`` only) cannot be split
  by replica and get no canary panel.

Only series that exist are drawn: canonical per-class series (:mod:`obsctl.rules.canonical`),
the signal recordings and baselines (:mod:`obsctl.rules.loop_series`), and for canaries the
signal's own PromQL with the variant label added, as ``verify`` runs it.
"""

from __future__ import annotations

from obsctl.dashboards import grafana as g
from obsctl.dashboards.per_class import CLASS, by_class, class_variable
from obsctl.rules import canonical as C
from obsctl.rules.loop_series import BASELINE_VALUE, CLASS_INFO, JOIN
from obsctl.spec import Spec, WorkloadClass, escape_label_value

UID = "obsctl-verification"
_L = "{{workload_class}}"
#: Matchers of the control class (single value, substituted by Grafana).
CONTROL = 'workload_class="$control_class"'


def _signal(spec: Spec, matchers: str) -> str:
    """The ``$signal`` recording of the classes in ``matchers`` (every signal recording carries ``signal``)."""
    names = "|".join(sorted({s.record_name for s in spec.signals}))
    return f'{{__name__=~"{names}",signal="$signal",{matchers}}}'


def _baseline(matchers: str) -> str:
    return f'{BASELINE_VALUE}{{signal="$signal",{matchers}}}'


def _to_baseline(spec: Spec, matchers: str) -> str:
    """``current / baseline`` per class, joined on the identity labels."""
    return f"{_signal(spec, matchers)} / {JOIN} {_baseline(matchers)}"


def _default_signal(spec: Spec) -> str:
    """The first target's signal (what an initiative usually judges), else the first signal."""
    return spec.targets[0].signal if spec.targets else min(s.name for s in spec.signals)


def _default_control(spec: Spec) -> str:
    """The first control class the spec configures, else the last class by name (pick one the change leaves alone)."""
    controls = sorted(cc.control for cc in spec.comparison.classes.values() if cc.control)
    return controls[0] if controls else max(c.name for c in spec.workload_classes)


def _load_panels() -> list[tuple[object, int, int]]:
    return [
        (g.timeseries("Saturation state over time", [g.query(
            f"sum by (workload_class, state) ({C.SATURATION_STATE}{{{CLASS}}} == 1)", "{{workload_class}} {{state}}")],
            "none", "1 while the class is in that state. A throughput primary is demand-bound (INCONCLUSIVE) when the "
            "class was not saturated or constrained in either period. Definition: docs/rules.md#saturation-state."), 16, 7),
        (g.table("Saturation state now", [g.query(f"{C.SATURATION_STATE}{{{CLASS}}} == 1", instant=True, table=True)]), 8, 7),
        (g.timeseries("Demand (offered load)", [g.query(by_class(C.REQUESTS_OFFERED), _L)], "reqps",
                      "Arrivals per second including rejected ones; verify reports its change between the periods."), 8, 7),
        (g.timeseries("Busy fraction (GPU, else engine, else CPU)", [g.query(by_class(C.BUSY_RATIO, agg="max"), _L)], "percentunit"), 8, 7),
        (g.timeseries("Requests waiting", [g.query(by_class(C.REQUESTS_WAITING), _L)], "none",
                      "The class's queue depth: work waiting for the service."), 8, 7),
    ]


def _primary_panels(spec: Spec) -> list[tuple[object, int, int]]:
    return [
        (g.timeseries("$signal against its baseline", [
            g.query(_signal(spec, CLASS), "{{workload_class}} current", "A"),
            g.query(_baseline(CLASS), "{{workload_class}} baseline", "B")], "none",
            "The signal's recording and the class's current stored baseline (its mean)."), 16, 8),
        (g.timeseries("$signal vs baseline", [g.query(f"{_to_baseline(spec, CLASS)} - 1", _L)], "percentunit",
                      "current / baseline - 1 (sign: see the signal's direction)."), 8, 8),
    ]


def _control_panels(spec: Spec) -> list[tuple[object, int, int]]:
    treated, control = _to_baseline(spec, CLASS), _to_baseline(spec, CONTROL)
    return [
        (g.timeseries("$signal: treated and control", [
            g.query(_signal(spec, CLASS), "{{workload_class}} (treated)", "A"),
            g.query(_signal(spec, CONTROL), "{{workload_class}} (control)", "B")], "none",
            "The same signal of the treated classes and of $control_class, side by side."), 12, 8),
        (g.timeseries("Demand: treated and control", [
            g.query(by_class(C.REQUESTS_OFFERED), "{{workload_class}} (treated)", "A"),
            g.query(f"sum by (workload_class) ({C.REQUESTS_OFFERED}{{{CONTROL}}})", "{{workload_class}} (control)", "B")],
            "reqps", "A shared demand drift moves both; a change only the treated class sees is not confounded by it."), 12, 8),
        (g.timeseries("Control's own movement and control-adjusted change", [
            g.query(f"{control} - 1", "$control_class vs its baseline (control)", "A"),
            g.query(f"({treated}) / ignoring(workload_class) group_left() ({control}) - 1",
                    "{{workload_class}}: (T/T_baseline)/(C/C_baseline) - 1", "B")], "percentunit",
            "The control design's effect on instant values; verify estimates it on time-aligned batches of the "
            "baseline period and the window, with an interval."), 24, 8),
    ]


def _canary_panels(spec: Spec, wc: WorkloadClass) -> list[tuple[object, int, int]]:
    variant = spec.comparison.for_class(wc.name).variant
    label = variant.label
    items = []
    for sig in sorted((s for s in spec.signals if "$selector" in s.query), key=lambda s: s.name):
        q = {side: spec.query_for(sig, wc.model_copy(update={"selector": {**wc.selector, label: value}}))
             for side, value in (("control", variant.control), ("treatment", variant.treatment))}
        items.append((g.timeseries(f"{sig.name} ({sig.unit}) by {label}", [
            g.query(q["control"], f'{label}="{escape_label_value(variant.control)}" (control)', "A"),
            g.query(q["treatment"], f'{label}="{escape_label_value(variant.treatment)}" (treatment)', "B")],
            g.unit(sig.unit), f"{sig.category}; the class's signal query with {label} added to its selector."), 16, 7))
        items.append((g.stat(f"{sig.name}: treatment / control - 1", [g.query(
            f"({q['treatment']}) / ({q['control']}) - 1", "T/C - 1", instant=True)], "percentunit",
            "The canary design's effect now (verify: over the window, with an interval)."), 8, 7))
    return items


def build(spec: Spec) -> dict:
    """The verification context dashboard as Grafana JSON.

    Variables: ``$workload_class`` (multi), ``$signal`` (one of the spec's signals; default the
    first target's), ``$control_class`` (one class; default the first configured control).
    Canary rows only for classes with a ``variant`` in ``comparison.classes``.
    """
    sections = [("Demand and saturation", _load_panels()), ("Primary signal against its baseline", _primary_panels(spec)),
                ("Treated vs control ($control_class)", _control_panels(spec))]
    for wc in sorted(spec.workload_classes, key=lambda c: c.name):
        variant = spec.comparison.for_class(wc.name).variant
        if variant is not None:
            sections.append((f"{wc.name}: canary {variant.label}={variant.treatment} vs {variant.control}", _canary_panels(spec, wc)))
    variables = [class_variable(spec),
                 g.custom_variable("signal", "Primary signal", sorted(s.name for s in spec.signals), _default_signal(spec)),
                 g.single_variable("control_class", "Control class",
                                   f"label_values({CLASS_INFO}, workload_class)",
                                   _default_control(spec))]
    return g.dashboard(g.Header("obsctl / verification context", UID,
                                "Why a verdict is what it is: demand and saturation, the primary signal against its baseline, "
                                "treated vs control and canary variants (generated by obsctl; docs/verification-designs.md).",
                                ["obsctl", "verification", "generated"]),
                       sections, variables)
