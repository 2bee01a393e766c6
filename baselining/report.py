"""``obsctl report``: a short Markdown report of one initiative plus a PNG figure.

The report shows what a reader needs to trust the verdict: the lever and the expected
impact, baseline vs window (windows, means, sample and batch counts, population),
the change with its interval, the verdict and why, the guard signals (one row each:
signal, category, baseline mean, window mean, change, interval, verdict), the
real-sample coverage of baseline, window and guards with Prometheus' warnings
(:mod:`obsctl.baselining.measure.coverage`), the alerts that fired, and the PromQL. The
figure (matplotlib, Agg backend, no display needed) draws the baseline and
verification series on a common "minutes into the window" axis, their batch means as
steps, and the interval of the change as a band around the baseline mean.
Both files are written atomically.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from obsctl.atomicio import atomic_write_bytes, atomic_write_text  # noqa: E402
from obsctl.baselining import looks  # noqa: E402
from obsctl.baselining.statistics.comparison import METHOD  # noqa: E402
from obsctl.baselining.store import Store  # noqa: E402
from obsctl.baselining.text.present import (  # noqa: E402
    describe,
    guards_line,
    judged_means,
    lever_text,
    placebo_initiative_line,
    population_summary,
    report_lines,
    statistics_line,
    verdict_line,
)
from obsctl.durations import format_duration
from obsctl.errors import StoreError  # noqa: E402
from obsctl.escape import markdown_text  # noqa: E402
from obsctl.formatting import format_confidence, format_number, format_percent  # noqa: E402
from obsctl.records import Baseline, Initiative, Look, Population, VerificationResult  # noqa: E402
from obsctl.timeutil import rfc3339  # noqa: E402


def write_report(store: Store, initiative_id: str, out_dir: Path) -> tuple[Path, Path]:
    """Write ``<out>/<initiative id>.md`` and ``<out>/<initiative id>.png``.

    Everything that can fail short of the writes (the records, the look log, the figure,
    the text) is done first, so a failure leaves neither file; if the Markdown cannot be
    written, the figure written just before is rolled back.

    Raises:
        StoreError: unknown initiative, never verified, a damaged record or look log, or
            files not writable.
    """
    initiative = store.initiative(initiative_id)
    if not initiative.verifications:
        raise StoreError(f"initiative {initiative_id!r} has no verification yet; run: obsctl verify --initiative {initiative_id}")
    result = initiative.verifications[-1]
    baseline = store.baseline(result.baseline_id)
    out_dir = Path(out_dir)
    png_path, md_path = out_dir / f"{initiative.id}.png", out_dir / f"{initiative.id}.md"
    for path in (png_path, md_path):  # the id is validated on read; the files must still land in --out
        if path.resolve().parent != out_dir.resolve():
            raise StoreError(f"initiative id {initiative.id!r} would write outside {out_dir}; the record is damaged")
    seq = looks.sequence(store.looks(initiative.workload_class, initiative.primary_signal), initiative.started_at)
    figure = render_figure(baseline, result)
    text = render_markdown(initiative, baseline, result, png_path.name, seq)
    _write_pair(png_path, figure, md_path, text)
    return md_path, png_path


def _write_pair(png_path: Path, figure: bytes, md_path: Path, text: str) -> None:
    # Both files or neither new one: a figure without its report (or beside an older one)
    # would pass for a finished report. The old figure, if any, is put back on failure.
    try:
        old_figure = png_path.read_bytes() if png_path.is_file() else None
    except OSError as exc:
        raise StoreError(f"cannot read {png_path}: {exc.strerror or exc}") from None
    atomic_write_bytes(png_path, figure)
    try:
        atomic_write_text(md_path, text)
    except BaseException:
        with contextlib.suppress(OSError, StoreError):
            if old_figure is None:
                png_path.unlink()
            else:
                atomic_write_bytes(png_path, old_figure)
        raise


def render_figure(baseline: Baseline, result: VerificationResult) -> bytes:
    """PNG bytes: baseline vs window samples, batch means, interval band (values in the signal's unit)."""
    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=100)
    try:
        sides = (
            ("baseline", baseline.samples, baseline.stats.batch_means, baseline.window.start.timestamp(), "tab:blue"),
            ("window", result.samples, result.window_stats.batch_means if result.window_stats else [], result.window.start.timestamp(), "tab:orange"),
        )
        for label, samples, means, t0, color in sides:
            if samples:
                xs = [(t - t0) / 60 for t, _ in samples]
                ax.plot(xs, [v for _, v in samples], color=color, alpha=0.35, linewidth=0.8, label=f"{label} samples")
            if means and samples:
                # Batch means as horizontal steps over the samples each batch covers.
                size = len(samples) // len(means)
                kept = samples[len(samples) - size * len(means):]
                for j, mean in enumerate(means):
                    chunk = kept[j * size:(j + 1) * size]
                    ax.hlines(mean, (chunk[0][0] - t0) / 60, (chunk[-1][0] - t0) / 60, color=color, linewidth=2.2,
                              label=f"{label} batch means" if j == 0 else None)
        if result.baseline_mean is not None:
            ax.axhline(result.baseline_mean, color="tab:blue", linestyle="--", linewidth=1, label="baseline mean")
            if result.ci_low is not None and result.ci_high is not None:
                ax.axhspan(result.baseline_mean * (1 + result.ci_low), result.baseline_mean * (1 + result.ci_high), color="tab:green", alpha=0.18,
                           label=f"baseline mean x (1 + change), {format_confidence(result.confidence)} CI "
                                 f"{format_percent(result.ci_low)} .. {format_percent(result.ci_high)}")
        ax.set_xlabel("minutes into the window")
        ax.set_ylabel(f"{baseline.signal} ({baseline.unit})")
        ax.set_title(f"{baseline.workload_class}: {result.verdict} {format_percent(result.change_ratio)}")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(fig)


def _population(pop: Population | None) -> str:
    """The population in a table cell: ``2 replicas (instance), 24 series`` (:func:`population_summary`),
    linked to the full list under "Input series"."""
    if pop is None or pop.series_count == 0:
        return population_summary(pop)
    return f"{population_summary(pop)} (listed under [Input series](#input-series))"


def _labels(label_set: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(label_set.items())) + "}"


def _input_series(baseline: Baseline, result: VerificationResult) -> list[str]:
    """The "Input series" section: every stored label set of each side, one escaped line each
    (label values come from whatever series match the selector)."""
    lines = ["## Input series", ""]
    for name, pop in (("Baseline", baseline.population), ("Verification window", result.population)):
        sets = pop.label_sets if pop is not None else []
        more = f" (the first {len(sets)} kept)" if pop is not None and pop.series_count > len(sets) else ""
        lines += [f"{name}: {pop.series_count if pop else 0} series{more}", ""]
        lines += [f"- {markdown_text(_labels(ls))}" for ls in sets] or ["- none"]
        lines.append("")
    return lines


def _guard_table(result: VerificationResult) -> list[str]:
    """The "Guard signals" section: a table, or one line saying why there is none."""
    lines = ["## Guard signals", ""]
    if not result.guards and not result.guards_missing:
        return [*lines, guards_line(result), ""]
    lines += [
        "A REGRESSED guard makes the overall verdict REGRESSED; a NO_DATA, INCONCLUSIVE or not evaluated guard keeps it at most "
        "INCONCLUSIVE unless verification.optional_guards names it.",
        "",
        "| signal | category | baseline mean | window mean | change | CI | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in result.guards:
        if g.exact:
            ci = "exact (both constant)"
        elif g.ci_low is not None and g.ci_high is not None:
            ci = f"{format_percent(g.ci_low)} .. {format_percent(g.ci_high)}"
        else:
            ci = "undefined"
        means = [f"{format_number(m)} {markdown_text(g.unit)}" if m is not None else "n/a" for m in (g.baseline_mean, g.window_mean)]
        lines.append(f"| `{g.signal}` | {g.category} | {means[0]} | {means[1]} "
                     f"| {format_percent(g.change_ratio)} | {ci} | **{g.verdict}** |")
    lines += [f"| `{name}` | | n/a | n/a | n/a | n/a | **NOT EVALUATED** (no baseline) |" for name in result.guards_missing]
    return [*lines, ""]


def _interval_note(method: str) -> str:
    """How the primary's interval was reached: the before-after comparison's Fieller interval,
    or a design's own on its log series (its assessment's ``method`` names it)."""
    if method and method != METHOD:
        return "(the design's interval on the log scale, under its series' memory; docs/verification-designs.md)"
    return "(Fieller interval from the long-run variance under the signal's memory; docs/verification.md)"


def _guard_label(signal: str) -> str:
    """``Guard `name```; a name from a record that a code span cannot hold as it is (a
    backtick, a line break, anything but a signal name's characters) as escaped text."""
    if re.fullmatch(r"[A-Za-z0-9_.:-]+", signal):
        return f"Guard `{signal}`"
    return f"Guard {markdown_text(signal)}"


def _statistics_lines(result: VerificationResult) -> list[str]:
    """The "Statistics" section: method, memory, effective samples, look and boundary, planned window."""
    a = result.assessment
    if a is None:
        return []
    lines = ["## Statistics", "", f"- Method: {a.method}", f"- {markdown_text(statistics_line(result).removeprefix('statistics: '))}"]
    if a.look is not None:
        lines.append(f"- Look {a.look} on the change's confidence sequence (every verify is a look; the interval holds at all of them at once); "
                     f"boundary z = {a.boundary_z:.3f}" if a.boundary_z is not None else f"- Look {a.look}: no boundary (the window could not decide)")
    typed = [*result.notes, *(n for g in result.guards for n in g.notes)]
    if a.placebo and not any(n.kind.startswith("placebo-") for n in typed):
        lines.append(f"- Placebo: {markdown_text(a.placebo)}")
    if typed:  # each note in plain words, then its diagnostic (verify shows the latter with --verbose)
        lines += [f"- {_guard_label(n.subject) + ' note' if n.subject else 'Note'}: {markdown_text(n.plain)}. "
                  f"Diagnostic: {markdown_text(n.detail)}" for n in typed]
    else:  # an older record: its notes in full only
        lines += [f"- Note: {markdown_text(n)}" for n in a.notes]
    return [*lines, ""]


def _look_lines(sequence: list[Look]) -> list[str]:
    """The "Looks" section: the primary signal's look log for this change, oldest first."""
    if not sequence:
        return []
    lines = ["## Looks", "",
             f"Every verify of this change is logged before its verdict is shown ({len(sequence)} look(s) since "
             f"{rfc3339(sequence[0].sequence_start)}, at {format_confidence(sequence[0].confidence)} over all of them).", "",
             "| look | when (UTC) | window end | initiative | verdict | change | interval |", "|---|---|---|---|---|---|---|"]
    for look in sequence:
        ci = f"{format_percent(look.ci_low)} .. {format_percent(look.ci_high)}" if look.ci_low is not None and look.ci_high is not None else "undefined"
        lines.append(f"| {look.number} | {rfc3339(look.looked_at)} | {rfc3339(look.window_end)} | `{look.initiative}` | {look.verdict} "
                     f"| {format_percent(look.change_ratio)} | {ci} |")
    return [*lines, ""]


def _coverage_lines(baseline: Baseline, result: VerificationResult) -> list[str]:
    """The "Coverage and warnings" section: real-sample coverage of each side and guard, then every warning."""
    lines = ["## Coverage and warnings", "",
             f"- Window: {describe(result.coverage)}" + (" **(partial answer)**" if result.partial else ""),
             f"- Baseline: {describe(baseline.coverage)}" + (" **(stored partial, --allow-partial)**" if baseline.partial else "")]
    lines += [f"- Guard `{g.signal}`: {describe(g.coverage)}" + (" **(partial answer)**" if g.partial else "") for g in result.guards]
    warned = [("window", w) for w in result.warnings] + [("baseline", w) for w in baseline.warnings]
    warned += [(f"guard {g.signal}", w) for g in result.guards for w in g.warnings]
    lines += [f"- Prometheus warning ({side}): {markdown_text(w)}" for side, w in warned] or ["- Prometheus warnings: none"]
    return [*lines, ""]


def _window_text(window) -> str:
    return f"{rfc3339(window.start)} .. {rfc3339(window.end)} ({format_duration((window.end - window.start).total_seconds())})"


def _code_block(text: str, language: str) -> list[str]:
    """A fenced code block that ``text`` cannot close: the fence is longer than any run of
    backticks in it (CommonMark 0.31 section 4.5)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text, fence]


def render_markdown(initiative: Initiative, baseline: Baseline, result: VerificationResult, figure_name: str,
                    sequence: list[Look] = ()) -> str:
    """The Markdown report text (figure referenced by relative file name); ``sequence``: the
    primary signal's look log for the change (:mod:`obsctl.baselining.looks`)."""
    ws = result.window_stats
    expected = format_percent(initiative.expected_impact_ratio) if initiative.expected_impact_ratio is not None else "not given"
    if initiative.placebo:
        expected = f"none ({placebo_initiative_line(result.verdict)})"
    ci = (f"{format_percent(result.ci_low)} .. {format_percent(result.ci_high)}" if result.ci_low is not None and result.ci_high is not None else "undefined")

    def row(name: str, b: object, w: object) -> str:
        return f"| {name} | {b} | {w} |"

    md = markdown_text
    lines = [
        f"# {md(initiative.name)}: {result.verdict}",
        "",
        f"**{md(verdict_line(result, baseline.unit))}**",
        "",
        f"- Initiative: `{initiative.id}`, lever **{md(lever_text(initiative.lever, initiative.lever_description))}**, "
        f"workload class **{initiative.workload_class}**, started {rfc3339(initiative.started_at)}, status {initiative.status}",
        f"- Primary signal: `{baseline.signal}` ({md(baseline.unit)}, {baseline.direction.replace('_', ' ')}); expected impact {expected}",
        f"- Verdict: **{result.verdict}** ({md(result.reason)}); verified {rfc3339(result.verified_at)}",
        f"- Change: {format_percent(result.change_ratio)}, {format_confidence(result.confidence)} confidence interval {ci} "
        + (_interval_note(result.assessment.method) if result.assessment
           else "(both sides constant: no sampling error)" if result.ci_low is not None else ""),
        f"- Primary signal's own verdict: **{result.primary_verdict or result.verdict}**",
        *([f"- Promoted without every guard judged: {md(initiative.promote_override)}"] if initiative.promote_override else []),
        f"- Alerts fired in the window: {md(', '.join(result.alerts_fired)) or 'none'}",
        "",
        *_guard_table(result),
        *_statistics_lines(result),
        *_look_lines(sequence),
        *report_lines(result),
        *_coverage_lines(baseline, result),
        "| | baseline | verification window |",
        "|---|---|---|",
        row("id / source", f"`{baseline.id}` ({baseline.source})", f"initiative `{initiative.id}`"),
        row("window (UTC)", _window_text(baseline.window), _window_text(result.window)),
        row("step", f"{baseline.window.step_seconds:g}s", f"{result.window.step_seconds:g}s"),
        row("samples", baseline.stats.sample_count, ws.sample_count if ws else 0),
        # The means the verdict was computed with, as its line above shows them (present.judged_means).
        row("mean", *(format_number(m) for m in judged_means(result))),
        row("median", format_number(baseline.stats.median), format_number(ws.median if ws else None)),
        row("p5 / p95", f"{format_number(baseline.stats.p5)} / {format_number(baseline.stats.p95)}",
            f"{format_number(ws.p5 if ws else None)} / {format_number(ws.p95 if ws else None)}"),
        row("batch means", len(baseline.stats.batch_means), len(ws.batch_means) if ws else 0),
        row("population", _population(baseline.population), _population(result.population)),
        "",
        f"![{baseline.signal}: baseline vs window]({figure_name})",
        "",
        "PromQL:",
        "",
        *_code_block(result.query or baseline.query, "promql"),
        "",
        *_input_series(baseline, result),
    ]
    return "\n".join(lines)
