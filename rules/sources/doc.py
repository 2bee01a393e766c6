"""The source catalogue as Markdown (README's "Source catalogue" block, synced by
``scripts/sync_readme.py``): which canonical series each source fills, from which of the
server's metric names, and what it lacks."""

from __future__ import annotations

from obsctl.rules import canonical
from obsctl.rules.sources import QUEUE_SOURCES, SOURCES

#: Canonical series in the order people read them (the rows of the matrix).
ROWS = (
    canonical.INPUT_TOKENS, canonical.OUTPUT_TOKENS, canonical.CACHED_INPUT_TOKENS, canonical.TOKENS, canonical.REQUESTS, canonical.REQUESTS_OFFERED,
    canonical.SAMPLES, canonical.STEPS, canonical.STEP_TIME, canonical.REQUESTS_RUNNING, canonical.REQUESTS_WAITING,
    canonical.QUEUE_WAIT_P95, canonical.QUEUE_WAIT_MEAN, canonical.TTFT_P50, canonical.TTFT_P95, canonical.ITL_P95,
    canonical.E2E_P95, canonical.E2E_MEAN, canonical.PREFILL_P95, canonical.DECODE_P95, canonical.KV_CACHE_USAGE,
    canonical.PREFIX_CACHE_HIT, canonical.PREEMPTIONS, canonical.ENGINE_BUSY, canonical.ENGINE_FLOPS_PER_GPU,
)


def _cell(names: tuple[str, ...]) -> str:
    return "<br>".join(f"`{n}`" for n in names)


def render_markdown() -> str:
    """Matrix (canonical series x source: the metric names read) and one line per source."""
    sources = [*SOURCES.values(), *(s for s in QUEUE_SOURCES.values() if s.name not in SOURCES)]
    reads = {s.name: {m.record: m.reads for m in s.mappings} for s in sources}
    for queue in QUEUE_SOURCES.values():  # a queue source that is also a serving source adds nothing new
        for m in queue.mappings:
            reads[queue.name].setdefault(m.record, m.reads)
    head = "| canonical series | " + " | ".join(f"`{s.name}`" for s in sources) + " |"
    lines = [head, "|---" * (len(sources) + 1) + "|"]
    for record in ROWS:
        cells = [_cell(reads[s.name][record]) if record in reads[s.name] else "—" for s in sources]
        lines.append(f"| `{record}` | " + " | ".join(cells) + " |")
    lines += ["", "Catalogue signals (a spec signal's `catalogue:`; `obsctl check` lists the ones each class has):", "",
              "| `catalogue:` | reads | category | unit | direction |", "|---|---|---|---|---|"]
    filled = {m.record for s in sources for m in s.mappings}
    for key, (record, extra, category, unit, direction) in canonical.CATALOGUE_SIGNALS.items():
        if record in filled:  # the cost and efficiency ones are documented with rules/cost.py
            where = f"{record}{{{extra}}}" if extra else record
            lines.append(f"| `{key}` | `{where}` | {category} | {unit} | {direction.replace('_', ' ')} |")
    lines += ["", "| source | kind | versions | lacks | quirks handled |", "|---|---|---|---|---|"]
    for s in [*SOURCES.values(), *QUEUE_SOURCES.values()]:
        kind = "`queue.source`" if s.kind == "queue" else "`source`"
        lines.append(f"| `{s.name}` ({s.title}) | {kind} | {s.versions} | {s.lacks} | {'; '.join(s.quirks) or '—'} |")
    return "\n".join(lines) + "\n"
