"""The ledger as text lines and as Markdown, and its files (:mod:`obsctl.baselining.practice.ledger` builds it).

Numbers in obsctl's one style (:mod:`obsctl.formatting`). In Markdown every piece of text
obsctl did not write (initiative names, descriptions, lessons, effort, ids, class and
signal names, units) goes through :func:`obsctl.escape.markdown_text`; in the text lines
through :func:`obsctl.escape.terminal_text`, so a line break in a lesson cannot forge a
line and an escape sequence never reaches the terminal.
"""

from __future__ import annotations

import math
from pathlib import Path

from obsctl.atomicio import atomic_write_bytes, atomic_write_text
from obsctl.baselining.practice.ledger import Chain, Entry, Ledger, render_figure
from obsctl.baselining.text.present import lever_text
from obsctl.escape import markdown_text as md
from obsctl.escape import terminal_text as tt
from obsctl.formatting import format_confidence, format_number, format_percent
from obsctl.timeutil import rfc3339


def _effect(e: Entry) -> str:
    if e.verdict is None:
        return "not verified"
    if e.change_ratio is None:
        return e.verdict
    interval = ""
    if e.ci_low is not None and e.ci_high is not None and math.isfinite(e.ci_low) and math.isfinite(e.ci_high):
        interval = f" ({format_confidence(e.confidence or 0.95)} CI {format_percent(e.ci_low)} .. {format_percent(e.ci_high)})"
    return f"{e.verdict} {format_percent(e.change_ratio)}{interval}"


def _usd(value: float | None, sign: bool = True) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+,.0f} USD/month" if sign else f"{value:,.0f} USD/month"


def _cost(e: Entry, escape=lambda text: text) -> str:
    parts = [f"effort {escape(e.effort)}" if e.effort else "effort not recorded"]
    if e.usd_per_month_change is not None:
        parts.append(f"spend {_usd(e.usd_per_month_change)} ({_usd(e.usd_per_month_before, False)} -> "
                     f"{_usd(e.usd_per_month_after, False)})")
    else:
        parts.append("spend change n/a")
    return ", ".join(parts)


def _when(e: Entry) -> str:
    end = f" -> {e.status} {e.ended_at.date().isoformat()}" if e.ended_at else f", {e.status}"
    return f"started {e.started_at.date().isoformat()}{end}"


def _step_line(chain: Chain, i: int) -> str:
    s = chain.steps[i]
    what = "origin" if i == 0 else f"promoted from {tt(s.initiative or '')}"
    step = "" if s.step_ratio is None else f", step {format_percent(s.step_ratio)}"
    return (f"    {s.created_at.date().isoformat()}  {format_number(s.mean)} {tt(chain.unit)}  ({what}{step}, "
            f"cumulative {format_percent(s.cumulative_ratio)})")


def ledger_lines(ledger: Ledger) -> list[str]:
    """The ledger as text: per initiative what changed, its effect, what it cost and taught;
    then each class's staircase of promoted baselines."""
    lines = [f"ledger as of {rfc3339(ledger.as_of)}: {len(ledger.entries)} initiative(s), {len(ledger.chains)} chain(s)"]
    if not ledger.entries:
        lines.append("no initiatives yet (obsctl initiative start)")
    for e in ledger.entries:
        expected = f", expected {format_percent(e.expected_impact_ratio)}" if e.expected_impact_ratio is not None else ""
        lines.append(f"{tt(e.id)}: {tt(e.name)} ({tt(lever_text(e.lever, e.lever_description))}) on "
                     f"{tt(e.workload_class)}/{tt(e.signal)}, {_when(e)}")
        if e.notes:
            lines.append(f"  notes: {tt(' / '.join(e.notes.splitlines()))}")
        expected = ", placebo (A/A): nothing was changed, NO_CHANGE expected" if e.placebo else expected
        lines.append(f"  effect: {_effect(e)}{expected}; {e.looks} look(s), design {e.design}")
        lines.append(f"  cost: {_cost(e, tt)}")
        lines.append(f"  lesson: {tt(e.lesson) if e.lesson else 'none recorded'}")
        if e.promote_override:
            lines.append(f"  promoted without every guard judged: {tt(e.promote_override)}")
    for chain in ledger.chains:
        lines.append(f"{tt(chain.workload_class)}/{tt(chain.signal)}: {len(chain.steps) - 1} promotion(s), cumulative "
                     f"{format_percent(chain.cumulative_ratio)} (verified {format_percent(chain.verified_ratio)})")
        lines += [_step_line(chain, i) for i in range(len(chain.steps))]
    lines += [f"note: {tt(n)}" for n in ledger.notes]
    return lines


def ledger_markdown(ledger: Ledger, figure: str | None = None) -> str:
    """The ledger as a Markdown document: one table of initiatives per class, then the
    class's staircase table; ``figure`` (a file name) is linked when given."""
    out = ["# Outcome ledger", "", f"As of {rfc3339(ledger.as_of)}.", ""]
    if figure:
        out += [f"![Cumulative change of the promoted baselines and the verified effects]({md(figure)})", ""]
    classes = sorted({e.workload_class for e in ledger.entries} | {c.workload_class for c in ledger.chains})
    if not classes:
        out += ["No initiatives yet.", ""]
    for name in classes:
        out += [f"## {md(name)}", "",
                "| initiative | lever | what changed | effect | expected | cost | lesson |",
                "|---|---|---|---|---|---|---|"]
        for e in (e for e in ledger.entries if e.workload_class == name):
            expected = "placebo (A/A)" if e.placebo else (format_percent(e.expected_impact_ratio) if e.expected_impact_ratio is not None else "n/a")
            changed = md(e.name) + (f" ({md(' / '.join(e.notes.splitlines()))})" if e.notes else "")
            # Verdicts, numbers and statuses are obsctl's own words; the rest is escaped.
            override = f" (promoted without every guard judged: {md(e.promote_override)})" if e.promote_override else ""
            out.append(f"| {md(e.id)} ({e.status}) | {md(lever_text(e.lever, e.lever_description))} | {changed} | {_effect(e)}{override} on {md(e.signal)} | "
                       f"{expected} | {_cost(e, md)} | {md(e.lesson) or 'none recorded'} |")
        out.append("")
        for chain in (c for c in ledger.chains if c.workload_class == name):
            out += [f"### Staircase of {md(chain.signal)}", "",
                    f"Cumulative {format_percent(chain.cumulative_ratio)} since the origin; the verified changes "
                    f"compound to {format_percent(chain.verified_ratio)}.", "",
                    "| date | baseline | mean | from | step | cumulative |", "|---|---|---|---|---|---|"]
            for i, s in enumerate(chain.steps):
                source = "origin" if i == 0 else md(s.initiative or "")
                out.append(f"| {s.created_at.date().isoformat()} | {md(s.baseline_id)} | {format_number(s.mean)} {md(chain.unit)} | "
                           f"{source} | {format_percent(s.step_ratio) if s.step_ratio is not None else ''} | "
                           f"{format_percent(s.cumulative_ratio)} |")
            out.append("")
    if ledger.notes:
        out += ["## Notes", ""] + [f"- {md(n)}" for n in ledger.notes] + [""]
    return "\n".join(out)


def write_ledger(ledger: Ledger, out_dir: Path) -> tuple[Path, Path]:
    """Write ``<out>/ledger.md`` and ``<out>/ledger.png`` (:func:`obsctl.baselining.practice.ledger.render_figure`) atomically; returns their paths.

    Raises:
        WriteError: a file could not be written.
    """
    out_dir = Path(out_dir)
    png, md = out_dir / "ledger.png", out_dir / "ledger.md"
    atomic_write_bytes(png, render_figure(ledger))
    atomic_write_text(md, ledger_markdown(ledger, png.name))
    return md, png
