"""The text of a review: the terminal lines of ``obsctl review`` and its Markdown document.

Untrusted text (class, signal and owner names, drivers, reasons that quote Prometheus)
goes through :func:`obsctl.escape.markdown_text` in the document.
"""

from __future__ import annotations

from obsctl.escape import markdown_text
from obsctl.formatting import format_number
from obsctl.timeutil import rfc3339


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{format_number(value)} USD/mo"


def review_lines(result) -> list[str]:
    """One header line, then per finding ``SEVERITY kind class/signal [USD/mo]: summary`` and
    an indented ``-> action`` line; a closing count line."""
    lines = [f"review as of {rfc3339(result.as_of)}: {len(result.classes)} class(es) "
             f"({', '.join(f'{c} {result.cadences[c]}' for c in result.classes)})"]
    for f in result.findings:
        where = "/".join(x for x in (f.workload_class or "cluster", f.signal) if x)
        money = f" [{_usd(f.usd_per_month)}]" if f.usd_per_month is not None else ""
        owner = f" (owner {f.owner})" if f.owner else ""
        lines.append(f"{f.severity.upper():8} {f.kind} {where}{money}: {f.summary}{owner}")
        lines.append(f"         -> {f.action}")
    counts = {s: sum(1 for f in result.findings if f.severity == s) for s in ("critical", "warning", "info")}
    lines.append(f"{len(result.findings)} finding(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return lines


def review_markdown(result) -> str:
    """The dated review document: a heading, the cadences, the findings table ranked by money."""
    md = markdown_text
    out = [f"# Review {result.as_of.date().isoformat()}", "",
           f"As of {md(rfc3339(result.as_of))}. Classes: "
           + ", ".join(f"{md(c)} ({result.cadences[c]})" for c in result.classes) + ".", ""]
    if not result.findings:
        out += ["Nothing to report: every baseline is current and undrifted, every target on track.", ""]
        return "\n".join(out)
    out += ["| # | severity | kind | class | signal | USD/month | finding | action | owner |",
            "|---|---|---|---|---|---|---|---|---|"]
    for n, f in enumerate(result.findings, 1):
        cells = [str(n), f.severity, f.kind, md(f.workload_class or "cluster"), md(f.signal or "-"),
                 "-" if f.usd_per_month is None else format_number(f.usd_per_month), md(f.summary), md(f.action),
                 md(f.owner or "-")]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)
