"""PromQL building blocks shared by the source modules.

Every helper returns PromQL text. ``sel`` is the class's rendered label matchers
(``job="vllm",model_name="x"``, from :func:`obsctl.spec.promql_matchers`), ``w`` the
range of the rates (``5m``). Metric names are never matched by regular expression: a
name regex would also pick up the ``_created`` series that ``prometheus_client`` writes
next to every counter and histogram, and a renamed metric's other spelling.
"""

from __future__ import annotations

from collections.abc import Sequence


def vec(metric: str, sel: str, extra: str = "") -> str:
    """``metric{sel,extra}``; both matcher strings may be empty."""
    matchers = ",".join(m for m in (sel, extra) if m)
    return f"{metric}{{{matchers}}}" if matchers else metric


def first_of(exprs: Sequence[str], on: Sequence[str]) -> str:
    """The first of several spellings of one series, per target, never two at once.

    ``A or (B unless on(<on>) A) or (C unless on(<on>) (A or B))``: a target (identified by
    the ``on`` labels, e.g. instance, job, model_name) that exposes an earlier spelling
    contributes only that one, so a server that publishes the old and the new name during
    a deprecation window is counted once, and a target still on the old name is counted
    by it. One candidate is returned unchanged.
    """
    if len(exprs) == 1:
        return exprs[0]
    labels = ", ".join(on)
    out, seen = f"({exprs[0]})", f"({exprs[0]})"
    for expr in exprs[1:]:
        out = f"{out}\nor\n(({expr}) unless on({labels}) {seen})"
        seen = f"({seen} or ({expr}))"
    return out


def rates(names: Sequence[str], sel: str, w: str, extra: str = "") -> list[str]:
    """``rate(name{sel}[w])`` for each spelling."""
    return [f"rate({vec(n, sel, extra)}[{w}])" for n in names]


def counter_sum(names: Sequence[str], sel: str, w: str, on: Sequence[str], scale: float = 1.0, extra: str = "") -> str:
    """Per-second increase summed over the class: ``sum(first_of(rate(...)))``, times ``scale``."""
    expr = f"sum(\n{first_of(rates(names, sel, w, extra), on)}\n)"
    return expr if scale == 1.0 else f"{expr} * {scale!r}"


def gauge(names: Sequence[str], sel: str, on: Sequence[str], agg: str = "sum", extra: str = "", collapse: str = "") -> str:
    """A gauge aggregated over the class (``sum`` or ``avg``); negative values (the ``-1``
    "no data" sentinel some servers publish) are dropped, so no data stays absent.

    ``collapse``: a label whose series repeat one value (SGLang's ``tp_rank``), folded
    with ``max without(collapse)`` before aggregating.
    """
    inner = first_of([vec(n, sel, extra) for n in names], on)
    inner = f"({inner}) >= 0"
    if collapse:
        inner = f"max without({collapse}) ({inner})"
    return f"{agg}(\n{inner}\n)"


def quantile(q: float, names: Sequence[str], sel: str, w: str, on: Sequence[str], scale: float = 1.0, extra: str = "") -> str:
    """``histogram_quantile(q, sum by (le) (rate(<name>_bucket[w])))`` over the first
    spelling per target (buckets of two spellings are never mixed); ``scale`` converts
    units (0.001 for milliseconds). Absent (not NaN) when nothing was observed."""
    buckets = [f"{n}_bucket" for n in names]
    # No observation in the window gives NaN; ">= 0" drops it, so an idle class is absent.
    expr = f"histogram_quantile({q!r}, sum by (le) (\n{first_of(rates(buckets, sel, w, extra), on)}\n)) >= 0"
    return expr if scale == 1.0 else f"({expr}) * {scale!r}"


def mean(sum_names: Sequence[str], count_names: Sequence[str], sel: str, w: str, on: Sequence[str], scale: float = 1.0,
         extra: str = "") -> str:
    """Mean per event: summed rate of the ``_sum`` counter over the summed rate of the
    count (a ratio of sums), times ``scale``."""
    num = counter_sum(sum_names, sel, w, on, extra=extra)
    den = counter_sum(count_names, sel, w, on, extra=extra)
    expr = f"({num}\n/\n{den}) >= 0"  # 0/0 (no events in the window) is NaN: dropped, absent
    return expr if scale == 1.0 else f"({expr}) * {scale!r}"


def relabel_outcome(expr: str, label: str, mapping: Sequence[tuple[str, str]], default: str | None) -> str:
    """Set ``outcome`` from the server's ``label`` with ``label_replace``.

    ``mapping``: ``(outcome, regex)`` pairs, applied in order (later ones win);
    ``default``: the outcome of a value no regex matches, or of a series without the
    label (None: such series keep no outcome and are dropped by the caller's filter).
    """
    if default is not None:
        expr = f'label_replace({expr}, "outcome", "{default}", "", "")'
    for outcome, regex in mapping:
        expr = f'label_replace({expr}, "outcome", "{outcome}", "{label}", "{regex}")'
    return expr


def outcome_sum(parts: Sequence[str]) -> str:
    """``sum by (outcome) (part1 or part2 ...)`` of outcome-labelled rates; the parts come
    from different metrics, so their series never collide in ``or`` unless they share
    labels. Each part should already be ``sum by (outcome)``."""
    return "sum by (outcome) (\n" + "\nor\n".join(f"({p})" for p in parts) + "\n)"


def plus_optional(required: str, optional: str) -> str:
    """``required + (optional or vector(0))``: a counter the server creates only at its
    first increment (errors) counts as 0 while the required one exists; absent when the
    required one is."""
    return f"{required}\n+\n({optional} or vector(0))"


def busy_from_queue(waiting: str, otherwise: str) -> str:
    """An engine's own busy fraction (``ENGINE_BUSY``): 1 while ``waiting`` (a summed gauge
    of requests queued for the engine's capacity) is above 0 (an engine queues only what its
    running batch cannot take), else ``otherwise`` (a 0-1 usage, or 0 when nothing runs)."""
    return f"(0 * (({waiting}) > 0) + 1)\nor\n{otherwise}"


def held_change(gauges: Sequence[str], sel: str, w: str, on: Sequence[str], collapse: str = "") -> str:
    """Per-second change of the requests an engine holds (running + waiting gauges) over the
    window, ``sum(deriv(g[w]))`` per gauge; with :func:`plus_optional`-style ``or vector(0)``
    so a missing gauge adds nothing. Finished + this = arrivals (offered load)."""
    parts = []
    for g in gauges:
        inner = f"deriv({vec(g, sel)}[{w}])"
        if collapse:
            inner = f"max without({collapse}) ({inner})"
        parts.append(f"(sum(\n{inner}\n) or vector(0))")
    return " + ".join(parts)
