"""A catalogue signal read from the raw series behind its recorded one: baselines from history.

A catalogue signal (``catalogue: tokens_per_second``) reads the class's canonical
recorded series (``sum(workload_class:obsctl_tokens:rate5m{workload_class="chat",...})``),
which exists only from the moment the generated rules were loaded. Right after install
Prometheus may hold weeks of the serving engine's own series (``vllm:generation_tokens_total``)
and none of the recorded ones. :func:`raw_query` inlines the rules that record the signal's
series, every level down to the raw series (:func:`obsctl.rules.inline.inline` over
:func:`obsctl.rules.lookback.recording_rules`, the rules ``obsctl rules generate`` writes),
so ``snapshot-baseline --from-raw`` measures past windows from the raw series: cost and
efficiency signals (``usd_per_million_tokens``: the cost rule over the GPU price, attribution
share and token rules) as well as the source's own series. A range query of the inlined
expression evaluates at each step what the rules would have recorded at that instant (for
rules in different groups: as if the groups ran in the order of the chain; module doc of
:mod:`obsctl.rules.inline`); the population is then the input series behind the recorded
one, and coverage is judged on them.

The class's matchers are pushed into the rules' inner selectors where the label passes
through unchanged; the catalogue's extra matcher on a label a rule's expression makes
(``outcome="success"`` of a ``label_replace``) becomes ``and on(outcome)`` with a
one-series vector carrying that label value: PromQL filters an expression's output labels
no other way. A chain that cannot be inlined with the same values (a recorded series read
over a range or an offset, a rule reading a series recorded later in its own group) is
refused with the reason, naming the rule; those are backfilled with ``promtool tsdb
create-blocks-from rules`` (docs/practice.md).
"""

from __future__ import annotations

from obsctl.spec import Signal, Spec, WorkloadClass


def raw_query(spec: Spec, wc: WorkloadClass, sig: Signal) -> tuple[str | None, str]:
    """The signal's query over the raw series behind ``wc``'s recorded series (module doc).

    Returns:
        ``(query, "")``; ``(None, why)`` when the signal cannot be read raw (then the
        caller keeps or refuses the recorded query); a spec PromQL signal (no
        ``catalogue:``) is raw already: ``(spec.query_for(sig, wc), "")``.
    """
    if sig.catalogue is None:
        return spec.query_for(sig, wc), ""
    from obsctl.rules.canonical import CATALOGUE_SIGNALS, DERIVED_FROM
    from obsctl.rules.inline import NotInlined, inline
    from obsctl.rules.lookback import recording_rules

    record = CATALOGUE_SIGNALS[sig.catalogue][0]
    rules = recording_rules(spec)
    own = f"obsctl.sources.{wc.name}"
    filled = {r.record for r in rules if r.group == own}
    if any(r.record == record and r.group.startswith("obsctl.sources.") for r in rules) and record not in filled:
        return None, f"the {wc.source} source does not fill {record}"
    if record in DERIVED_FROM and not any(filled.issuperset(need) for need in DERIVED_FROM[record]):
        need = " or ".join(" and ".join(s) for s in DERIVED_FROM[record])
        return None, f"{record} is computed from {need}, which the {wc.source} source does not fill"
    if not any(r.record == record and r.labels.get("workload_class", wc.name) == wc.name for r in rules):
        return None, f"no generated rule records {record} for the class {wc.name}"
    try:
        return inline(spec.query_for(sig, wc), rules), ""
    except NotInlined as exc:
        return None, (f"{record} cannot be read from the raw series with the same values: {exc}; "
                      "backfill the generated rules with promtool tsdb create-blocks-from rules (docs/practice.md)")
