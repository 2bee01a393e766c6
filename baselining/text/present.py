"""Every line obsctl prints or writes about a verdict, a plan, a coverage or a design.

The loop's modules return records and numbers; this module turns them into text, in one
style (:mod:`obsctl.formatting`, :func:`obsctl.durations.format_duration`). Nothing here
decides anything, and no text written here is read back as data.
"""

from __future__ import annotations

import math

from obsctl.baselining.designs import WORDING, Wording
from obsctl.baselining.statistics import power as stats_planner
from obsctl.baselining.statistics.memory import MIN_MEMORIES
from obsctl.baselining.text.notes import note_lines as typed_note_lines
from obsctl.durations import format_duration
from obsctl.escape import markdown_text, terminal_text
from obsctl.formatting import format_confidence, format_number, format_percent
from obsctl.records import Coverage, GuardResult, Population, VerificationResult
from obsctl.timeutil import rfc3339


def lever_text(lever: str, description: str = "") -> str:
    """``batch-size``, or ``other: <description>`` for a lever outside the list (plain text:
    Markdown callers escape it)."""
    return f"other: {description}" if lever == "other" else lever


def interval_text(low: float | None, high: float | None, confidence: float, exact: bool = False) -> str:
    if exact:
        return "exact: both sides constant"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{format_confidence(confidence)} CI undefined"
    return f"{format_confidence(confidence)} CI {format_percent(low)} .. {format_percent(high)}"


def statistics_line(result: VerificationResult) -> str:
    """``statistics: look 2, boundary z = 2.96 (99.7 % interval), window 30 min of planned 1 h; memory 9.8 min
    (3.0 d of history), 7.3 / 3.6 effective samples (baseline / window), 880 dof; <reason>`` ("" without an assessment)."""
    a = result.assessment
    if a is None:
        return ""
    dur = format_duration
    parts = []
    if a.look is not None:
        bound = f", boundary z = {a.boundary_z:.2f}" if a.boundary_z is not None else ""
        conf = f" ({format_confidence(a.interval_confidence)} interval)" if a.interval_confidence else ""
        span = (result.window.end - result.window.start).total_seconds()
        planned = f", window {dur(span)} of planned {dur(a.planned_seconds)}" if a.planned_seconds else ""
        parts.append(f"look {a.look}{bound}{conf}{planned}")
    if a.tau_seconds is not None:
        src = "from the windows only: a lower bound" if a.memory_source == "windows" else "from history"
        eff = (f", {a.n_eff_baseline:.1f} / {a.n_eff_window:.1f} effective samples (baseline / window)"
               if a.n_eff_baseline is not None and a.n_eff_window is not None
               else f", {a.n_eff_window:.1f} effective samples (window)" if a.n_eff_window is not None else "")  # a design judging one paired series
        dof = f", {a.dof:.0f} dof" if a.dof is not None else ""
        parts.append(f"memory {dur(a.tau_seconds)} ({src}){eff}{dof}")
    return "statistics: " + "; ".join(parts + [result.primary_reason]) if parts else ""


def statistics_plain(result: VerificationResult) -> str:
    """The default output's ``statistics:`` line: the look and the window in plain words, then
    the reason (:func:`statistics_line` is the full one: boundary, memory, effective samples,
    dof); "" without an assessment."""
    a = result.assessment
    if a is None:
        return ""
    parts = []
    if a.look is not None:
        span = (result.window.end - result.window.start).total_seconds()
        planned = f", window {format_duration(span)} of planned {format_duration(a.planned_seconds)}" if a.planned_seconds else ""
        parts.append(f"look {a.look} at this change (its interval holds however often you look){planned}")
    return "statistics: " + "; ".join(parts + [result.primary_reason]) if parts or a.tau_seconds is not None else ""


def note_lines(result: VerificationResult, verbose: bool = True) -> list[str]:
    """``note: ...`` for each note of the primary, then ``guard <signal>: note: ...`` for each
    guard's, for text output: the plain words, each followed by its diagnostic when
    ``verbose`` (:func:`obsctl.baselining.text.notes.note_lines`). An older record has its
    notes in full only (``assessment.notes``): they are shown as they are.

    A note the design's lines already show (:func:`context_lines`) is not repeated."""
    shown = set(context_lines(result.design_context))
    if result.notes or any(g.notes for g in result.guards):
        return typed_note_lines([*result.notes, *(n for g in result.guards for n in g.notes)], verbose, shown)
    lines = [f"note: {terminal_text(n)}" for n in (result.assessment.notes if result.assessment else []) if n and n not in shown]
    for g in result.guards:
        lines += [f"guard {terminal_text(g.signal)}: note: {terminal_text(n)}" for n in (g.assessment.notes if g.assessment else []) if n]
    return lines


def placebo_initiative_line(verdict: str) -> str:
    """The line a placebo (A/A) initiative's verdict carries: what it should say, and what
    this verdict means (``initiative start --placebo``)."""
    meaning = {"NO_CHANGE": "as expected: the tool held NO_CHANGE on this stack",
               "INCONCLUSIVE": "not decided yet: a longer window should reach NO_CHANGE",
               "NO_DATA": "no data: check the signal's series",
               }.get(verdict, f"a false {verdict}: nothing was changed, so report it with the diagnostics (verify --verbose)")
    return f"placebo (A/A) initiative: nothing was changed, NO_CHANGE expected; {meaning}"


def guards_line(result: VerificationResult) -> str:
    """``guards: usd_per_million_tokens IMPROVED -48.0 %, probe_cosine_similarity NO_CHANGE, gpu_utilization NO_DATA``.

    The change is shown for IMPROVED, REGRESSED and INCONCLUSIVE guards when defined.
    """
    if not result.guards_evaluated:
        return "guards: not evaluated"
    missing = [f"{name} NOT EVALUATED (no baseline)" for name in result.guards_missing]
    if not result.guards and not missing:
        return "guards: none (verification.guards chooses no signal other than the primary)"
    parts = []
    for g in result.guards:
        show = g.verdict in ("IMPROVED", "REGRESSED", "INCONCLUSIVE") and g.change_ratio is not None
        parts.append(f"{g.signal} {g.verdict}" + (f" {format_percent(g.change_ratio)}" if show else ""))
    return "guards: " + ", ".join(parts + missing)


def judged_means(result: VerificationResult) -> tuple[float | None, float | None]:
    """The baseline and window means the verdict was computed with (signal unit), the one
    pair every output shows (the verdict line, the report's table).

    These are the comparison's own sides (``result.baseline_mean`` / ``window_mean``: every
    kept sample, or the design's sides, or the period right before the start for an aged
    baseline), not the stored summaries (``Baseline.stats.mean`` and ``window_stats.mean``
    drop the oldest ``n mod batches`` samples for the batch means). None where undefined.
    """
    return result.baseline_mean, result.window_mean


def verdict_line(result: VerificationResult, unit: str) -> str:
    """One readable line, e.g. ``IMPROVED: tokens_per_second +218.4 % (95 % CI +205.1 % .. +231.9 %),
    baseline 2,410 -> window 7,673 tokens/s; alerts fired: none``.

    When a guard overrode the primary's verdict the line starts with the overall
    verdict and its reason, then the primary: ``REGRESSED: quality guard q regressed
    -10.0 % (95 % CI ..); primary tokens_per_second IMPROVED +30.0 % (..), baseline ..``."""
    alerts = ", ".join(result.alerts_fired) or "none"
    primary = result.primary_verdict
    means = "baseline {} -> window {}".format(*(format_number(m) for m in judged_means(result)))
    if primary != result.verdict:
        return (
            f"{result.verdict}: {result.reason}; primary {result.signal} {primary} {format_percent(result.change_ratio)} "
            f"({interval_text(result.ci_low, result.ci_high, result.confidence)}), "
            f"{means} {unit}; alerts fired: {alerts}"
        )
    if result.verdict == "NO_DATA":
        return f"NO_DATA: {result.signal}: {result.reason}; alerts fired: {alerts}"
    if result.ci_low is None or result.ci_high is None or not (math.isfinite(result.ci_low) and math.isfinite(result.ci_high)):
        interval = f"{format_confidence(result.confidence)} CI undefined: {result.reason}"
    else:
        interval = f"{format_confidence(result.confidence)} CI {format_percent(result.ci_low)} .. {format_percent(result.ci_high)}"
    return (
        f"{result.verdict}: {result.signal} {format_percent(result.change_ratio)} ({interval}), "
        f"{means} {unit}; alerts fired: {alerts}"
    )


#: Labels that name a replica, in the order they are looked for (Kubernetes, Prometheus).
REPLICA_LABELS = ("pod", "instance", "replica")


def population_summary(pop: Population | None, noun: str = "series") -> str:
    """A population in a few words: ``2 replicas (instance), 24 series``, or ``24 series``
    when no replica label is found (the full label sets are long: one histogram is a set
    per bucket); ``no input series found`` for none."""
    if pop is None or pop.series_count == 0:
        return "no input series found"
    label = next((n for n in REPLICA_LABELS if any(ls.get(n) for ls in pop.label_sets)), None)
    replicas = len({ls[label] for ls in pop.label_sets if ls.get(label)}) if label else None
    who = f"{replicas} replica{'s' if replicas != 1 else ''} ({label}), " if replicas else ""
    return f"{who}{pop.series_count} {noun}"


def describe(c: Coverage | None, step: float | None = None) -> str:
    """One line, e.g. ``coverage 98.3 % (236/240 steps fresh, 118 real samples every 30s, timestamp);
    largest hole 2026-01-05T05:00:00Z .. 05:20:00Z (20 min)``; ``coverage not measured`` for None."""
    if c is None:
        return "coverage not measured"
    every = f" every {format_duration(c.input_interval_seconds)}" if c.input_interval_seconds else ""
    text = f"coverage {c.ratio * 100:.1f} % ({c.fresh_points}/{c.grid_points} steps fresh, {c.real_samples} real samples{every}, {c.method})"
    if c.stopped and c.last_real_sample is not None:
        text += f"; no fresh samples after {rfc3339(c.last_real_sample)}"
    elif c.holes:
        h = c.holes[0]
        text += f"; largest hole {rfc3339(h.start)} .. {rfc3339(h.end)} ({format_duration((h.end - h.start).total_seconds())})"
    if c.series_at_start is not None and (c.series_at_start != c.series_at_end or c.series_min != c.series_max):
        text += f"; input series {c.series_at_start} at start, {c.series_at_end} at end ({c.series_min}-{c.series_max}: population change)"
    return text


def output_lines(c: Coverage | None, warnings: list[str]) -> list[str]:
    """Lines for text output: the coverage line, then one ``warning: ...`` per Prometheus warning."""
    return [describe(c), *(f"warning: {w}" for w in warnings)]


def verification_lines(result) -> list[str]:
    """Text lines of a :class:`obsctl.records.VerificationResult`: the change's transition
    excluded from the window (``transition: excluded ...``), the window's
    coverage and warnings, then each guard's (``guard <signal>: coverage ...``)."""
    lines = [f"window {line}" if not line.startswith("warning") else line for line in output_lines(result.coverage, result.warnings)]
    transition = getattr(result, "transition", None)
    if transition is not None and transition.text:
        lines.insert(0, f"transition: {transition.text}")
    if result.partial:
        lines.append("window answer is PARTIAL: the verdict is at most INCONCLUSIVE")
    for g in result.guards:
        lines += [f"guard {g.signal}: {line}" for line in output_lines(g.coverage, g.warnings)]
    typed = any(n.kind.startswith("placebo-") for n in getattr(result, "notes", []))  # then a note says it (note_lines)
    if result.assessment is not None and result.assessment.placebo and not typed:
        lines.append(f"placebo: {result.assessment.placebo}")
    located = any(n.kind.startswith("location-") for n in getattr(result, "notes", []))  # then a note says it (note_lines)
    if result.assessment is not None and result.assessment.location and not located:  # which location the verdict judged
        lines.append(result.assessment.location)
    return lines


def context_lines(context: dict, verbose: bool = True) -> list[str]:
    """The lines outputs and reports print for a result's ``design_context`` (may be empty);
    without ``verbose`` the effect's line leaves out its log-scale standard error and memory,
    and the cycle test's line (its p-value and level) is left out (``verify`` without
    ``--verbose``; the report and JSON keep them)."""
    if not context:
        return []
    lines = [f"design: {context.get('design', 'before-after')}"]
    eff = context.get("effect") or {}
    if eff.get("ratio") is not None and eff.get("ci_low") is not None:
        what = WORDING.get(eff["design"], Wording()).formula
        sides = ""
        if WORDING.get(eff["design"], Wording()).groups and eff.get("treatment_mean") is not None:
            sides = f"; treatment {eff['treatment_mean']:.4g} vs control {eff['control_mean']:.4g}"
        model = f", log-scale se {eff['log_se']:.3g}, memory {eff.get('tau_seconds') or 0:.0f} s" if verbose else ""
        lines.append(f"effect {what} = {eff['ratio'] * 100:+.1f} % ({eff['confidence'] * 100:.3g} % CI {eff['ci_low'] * 100:+.1f} % .. "
                     f"{eff['ci_high'] * 100:+.1f} %{model}{sides})")
    ctrl = context.get("control")
    if ctrl and ctrl.get("change") is not None:
        lines.append(f"control {ctrl['class']}: moved {ctrl['change'] * 100:+.1f} % on its own "
                     f"(treated {ctrl['treated_change'] * 100:+.1f} %)" if ctrl.get("treated_change") is not None else
                     f"control {ctrl['class']}: moved {ctrl['change'] * 100:+.1f} % on its own")
    if WORDING.get(eff.get("design"), Wording()).same_hours:
        lines.append(f"seasonal: the window vs the same hours of {eff.get('cycles')} earlier {eff.get('cycle')}(s) "
                     f"({eff.get('timezone')}), {eff.get('matched_share', 0):.0%} of samples matched")
    for note in context.get("notes", []):
        if note and note not in lines and not note.startswith("design:"):
            lines.append(note)
    cyc = context.get("cycle") or {}
    if verbose and cyc.get("p_value") is not None:  # the cycle test behind the lines above (designs.cycle)
        from obsctl.baselining.designs.cycle import ALPHA as CYCLE_ALPHA  # here: a snapshot loads no design module

        amp = f", fitted +-{cyc['amplitude']:.1%}" if cyc.get("amplitude") is not None else ""
        lines.append(f"cycle test ({'weekly' if cyc.get('cycle') == 'week' else 'daily'}): p = {cyc['p_value']:.2g} at level "
                     f"{CYCLE_ALPHA:g}{amp}: {'a cycle' if cyc.get('detected') else 'no cycle'}")
    return lines


def report_lines(result) -> list[str]:
    """The report's "Comparison design" section for a verification result (Markdown lines)."""
    ctx = result.design_context
    design = result.design
    lines = ["## Comparison design", "", f"- Design: **{design}**"]
    lines += [f"- {markdown_text(line)}" for line in context_lines(ctx)[1:]]  # notes carry label values
    load = ctx.get("load")
    if load:
        b, a = load["before"], load["after"]
        fmt = lambda v: "n/a" if v is None else f"{v:.4g}"
        periods = (b,) if b == a else (b, a)
        lines += ["", "| period | demand (req/s) | saturation state | queued share |", "|---|---|---|---|",
                  *[f"| {p['name']} | {fmt(p['demand'])} | {p['state'] or 'unknown'} | "
                    f"{'n/a' if p['queued_share'] is None else format(p['queued_share'], '.0%')} |" for p in periods]]
        if load.get("demand_change") is not None:
            lines.append(f"\nDemand changed {load['demand_change'] * 100:+.1f} % between the periods.")
    m = ctx.get("mix")
    if m:
        lines += ["", f"| {markdown_text(m['dimension'])} | share before | share after |", "|---|---|---|",
                  *[f"| {markdown_text(str(s))} | {b:.0%} | {a:.0%} |" for s, b, a in zip(m["segments"], m["share_before"], m["share_after"], strict=True)],
                  "", (f"Rate/mix decomposition: change {m['total_change'] * 100:+.1f} % = mix {m['mix_change'] * 100:+.1f} % "
                  f"x rate {m['rate_change'] * 100:+.1f} % (the mix explains {m['mix_share']:.0%}).")]
    return [*lines, ""]


def plan_lines(plan: stats_planner.Plan, label: str) -> list[str]:
    """Readable lines of a plan for ``label`` (``class/signal``)."""
    dur = format_duration
    src = "from the windows only: a lower bound" if plan.memory_source == "windows" else "from history"
    lines = [f"{label}: memory {dur(plan.tau_seconds)} ({src}); a window can decide from {dur(plan.min_window_seconds) if plan.min_window_seconds else 'n/a'}"]
    if plan.memory_source == "windows":  # verify's honest-memory rule refuses every look against such a baseline
        lines.append(f"no verdict can rest on a memory fitted on the baseline alone: re-snapshot the baseline with at least "
                     f"{dur(MIN_MEMORIES * plan.tau_seconds)} of history before it (verification.memory_history) before the change")
    if plan.window_seconds:
        lines.append(f"detect {plan.effect:+.1%} with {plan.power:.0%} power at {plan.confidence:.0%} confidence "
                     f"(any number of looks, boundary z = {plan.boundary_z:.2f}): "
                     f"window {dur(plan.window_seconds)}")
    else:
        lines.append(f"detect {plan.effect:+.1%}: not reachable within {dur(stats_planner.MAX_PLAN_SECONDS)} against this baseline (re-snapshot a longer one)")
    mde = f"{plan.mde:.1%}" if plan.mde is not None else "none (the window is too short for the memory)"
    lines.append(f"smallest effect detectable with the default {dur(plan.default_window_seconds)} window: {mde}")
    nc = dur(plan.no_change_window_seconds) if plan.no_change_window_seconds else "not reachable with this baseline"
    eq = dur(plan.no_change_equal_seconds) if plan.no_change_equal_seconds else "n/a"
    lines.append(f"NO_CHANGE within +-{plan.margin:.1%}: window {nc}; with a baseline as long as the window: {eq} each")
    return lines


def guard_regressions(guards: list[GuardResult], confidence: float) -> str:
    """``quality guard q regressed -10.0 % (95 % CI -11.2 % .. -8.8 %)`` for each REGRESSED guard, ``; ``-joined ("" if none)."""
    def one(g: GuardResult) -> str:
        change = format_percent(g.change_ratio) if g.change_ratio is not None else \
            f"from {format_number(g.baseline_mean)} to {format_number(g.window_mean)}"
        # The level the guarantee holds at over all looks (the per-look level is in the assessment).
        return f"{g.category} guard {g.signal} regressed {change} ({interval_text(g.ci_low, g.ci_high, confidence, g.exact)})"

    return "; ".join(one(g) for g in guards if g.verdict == "REGRESSED")
