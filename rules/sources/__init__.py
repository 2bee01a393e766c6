"""The source catalogue: which server's metrics fill a class's canonical series.

A workload class names its serving ``source`` (default ``sdk``) and optionally a
``queue`` (Kueue, Slurm, Ray Serve); :func:`source_groups` emits, per class, recording
rules that fill the canonical series of :mod:`obsctl.rules.canonical` from that
server's own metric names, labelled ``workload_class``. A series the source does not
provide gets no rule, so it is absent (never 0). A queue source's series replace the
serving source's series of the same name (the scheduler's queue is the class's queue).

One module per source documents the names it reads and the versions they come from.
"""

from __future__ import annotations

from obsctl.rules.sources import (
    kueue,
    llamacpp,
    ray_serve,
    sdk,
    sglang,
    slurm,
    tgi,
    triton,
    vllm,
)
from obsctl.rules.sources.base import Ctx, Mapping, Source

#: Serving sources by the spec's ``source:`` name.
SOURCES: dict[str, Source] = {s.name: s for s in (sdk.SOURCE, vllm.SOURCE, tgi.SOURCE, triton.SOURCE, sglang.SOURCE,
                                                 llamacpp.SOURCE, ray_serve.SOURCE)}
#: Queue sources by the spec's ``queue.source:`` name.
QUEUE_SOURCES: dict[str, Source] = {s.name: s for s in (kueue.SOURCE, slurm.SOURCE, ray_serve.QUEUE)}

__all__ = ["QUEUE_SOURCES", "SOURCES", "Ctx", "Mapping", "Source", "class_mappings", "source_groups"]


def class_mappings(wc) -> list[tuple[Source, Mapping]]:
    """The (source, mapping) pairs that fill a class's canonical series, queue ones last.

    Args:
        wc: an :class:`obsctl.spec.WorkloadClass`.
    """
    serving = SOURCES[wc.source]
    queue = QUEUE_SOURCES[wc.queue.source] if wc.queue else None
    replaced = set(queue.records) if queue else set()
    pairs = [(serving, m) for m in serving.mappings if m.record not in replaced]
    return pairs + ([(queue, m) for m in queue.mappings] if queue else [])


def source_groups(spec, window: str = "5m") -> list[dict]:
    """Rule groups ``obsctl.sources.<class>``: one recording rule per canonical series the
    class's sources provide, labelled ``{workload_class}``.

    Args:
        spec: the loaded :class:`obsctl.spec.Spec`.
        window: range of every rate. The record names say ``rate5m`` (the contract);
            only tests pass a shorter window, to keep a live run to seconds.

    Returns:
        Prometheus rule-group dicts, classes sorted by name.
    """
    from obsctl.spec import promql_matchers

    groups = []
    for wc in sorted(spec.workload_classes, key=lambda c: c.name):
        serving_ctx = Ctx(promql_matchers(wc.selector), window)
        queue_ctx = Ctx(promql_matchers(wc.queue.selector), window, wc.queue) if wc.queue else None
        rules = [
            {"record": m.record, "expr": m.build(queue_ctx if src.kind == "queue" else serving_ctx),
             "labels": {"workload_class": wc.name}}
            for src, m in class_mappings(wc)
        ]
        groups.append({"name": f"obsctl.sources.{wc.name}", "rules": rules})
    return groups


def describe(wc) -> dict:
    """What the catalogue gives one class, for ``obsctl check``.

    Returns:
        ``{"source", "queue", "series": [canonical record names], "signals": [catalogue
        signal keys usable as ``catalogue:``], "lacks": text}``.
    """
    from obsctl.rules.canonical import CATALOGUE_SIGNALS, DERIVED_FROM

    mappings = [m for _, m in class_mappings(wc)]
    records = [m.record for m in mappings]
    own = set(records)
    outcomes = {o for m in mappings for o in m.outcomes}
    filled_by_sources = {m.record for s in (*SOURCES.values(), *QUEUE_SOURCES.values()) for m in s.mappings}
    # Catalogue signals over series the sources do not fill (cost, efficiency: derived by
    # other rule files from the canonical series) are offered to a class whose sources fill
    # one set of the series they are derived from (no cost per sample for a token server).
    records += [r for r, *_ in CATALOGUE_SIGNALS.values() if r not in filled_by_sources and r not in records
                and any(own.issuperset(alt) for alt in DERIVED_FROM.get(r, ((),)))]
    if getattr(wc, "mfu", None) is None:  # MFU is computed only for classes with an mfu: block
        from obsctl.rules.canonical import MFU

        records = [r for r in records if r != MFU]
    lacks = SOURCES[wc.source].lacks
    if wc.queue:
        lacks = f"{lacks}; queue {wc.queue.source}: {QUEUE_SOURCES[wc.queue.source].lacks}"
    return {
        "source": wc.source,
        "queue": wc.queue.source if wc.queue else None,
        "series": [m.record for m in mappings],
        "signals": sorted(k for k, (record, extra, *_) in CATALOGUE_SIGNALS.items()
                          if record in records and (not extra.startswith("outcome=") or extra.split('"')[1] in outcomes)),
        "lacks": lacks,
    }


def catalogue_gaps(spec) -> list[str]:
    """One line per (catalogue signal, class) whose source lacks the series: that signal
    will be absent for that class (not an error: one signal list serves every class)."""
    gaps = []
    for i, sig in enumerate(spec.signals):
        if sig.catalogue is None:
            continue
        for wc in spec.workload_classes:
            if sig.catalogue not in describe(wc)["signals"]:
                where = f"{spec.path}:{spec.line_of('signals', i)}" if spec.line_of("signals", i) else str(spec.path)
                queue = f" + queue {wc.queue.source}" if wc.queue else ""
                gaps.append(f"{where}: signals[{i}] {sig.name} (catalogue {sig.catalogue}): class {wc.name} "
                            f"(source {wc.source}{queue}) does not provide it; it stays absent there")
    return gaps
