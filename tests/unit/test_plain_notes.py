"""The statistical notes of a verdict as typed data in two renderings (baselining/text/notes.py):
every kind the statistics and the verdict make, seeded so each kind occurs, worded plainly
(no test name, statistic or p-value; what it means for the verdict) with the full diagnostic
beside it; the text output, the report and the snapshot lines built from them."""

from __future__ import annotations

import datetime as dt
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from obsctl.baselining.decide import verdict
from obsctl.baselining.statistics import placebo
from obsctl.baselining.statistics.comparison import Criterion, LookContext, judge
from obsctl.baselining.statistics.memory import fit_memory
from obsctl.baselining.text import notes as N
from obsctl.baselining.text.present import note_lines, statistics_line, statistics_plain
from obsctl.baselining.text.present_stationarity import stationarity_line, stationarity_plain
from obsctl.records import Assessment, Note, Stationarity, Tails, VerificationResult, Window

sys.path.insert(0, str(Path(__file__).parent))
from test_assumptions import STEP, _checked  # noqa: E402  (the seeded AR(1) windows of the checks' own tests)

#: What a diagnostic says and plain words never do: a p-value, a statistic, a test's name, a level.
CRITERION = Criterion(0.95, "higher_is_better", 0.02)  # a +-2 % margin at 95 %, higher is better

DIAGNOSTIC = re.compile(r"\bp\s*=|p-value|Yule|Walker|Ljung|Box|score|chi|\bF\b|\bdof\b|level 0\.|statistic|innovation|"
                        r"kurtosis|autocorrelation|prewhiten|variance ratio", re.IGNORECASE)


def plain_ok(text: str) -> bool:
    """Plain words: no diagnostic, and a consequence for the verdict."""
    return not DIAGNOSTIC.search(text) and ("verdict" in text or "interval" in text)


@pytest.mark.parametrize("kind", sorted(N.PLAIN))
def test_every_kind_is_worded_plainly_with_its_consequence(kind):
    for value in (None, 1.7, 600.0):
        text = N.plain_text(kind, value)
        assert plain_ok(text), (kind, text)


def test_an_unknown_kind_is_refused():
    with pytest.raises(KeyError):
        N.plain_text("no-such-kind")


def kinds_of(check) -> list[str]:
    return [f.kind for f in check.findings]


@pytest.mark.parametrize(("args", "want"), [
    ((0.9, 0.9, 960, 1.3), ["variance-noisier"]),  # +69 % variance, same memory
    ((0.9, 0.9, 960, 0.75), ["variance-quieter"]),  # -44 % variance, same memory
    ((0.90, 0.98, 2400), ["memory-own"]),  # memory tripled: the window's own, wider
    ((0.9, 0.75, 2400, 0.5), ["memory-kept"]),  # shorter memory: the baseline's is wider and kept
])
def test_each_window_check_gives_its_kind_worded_plainly_and_in_full(args, want):
    check, _, _ = _checked(np.random.default_rng(41), *args)
    assert not check.reason and kinds_of(check) == want
    (found,) = check.findings
    assert check.notes == (found.detail,)  # the record's notes: the diagnostics, unchanged
    note = N.note_of(found.kind, found.detail, found.value)
    assert plain_ok(note.plain), note.plain
    assert "p = " in note.detail and "level 0.001" in note.detail or found.kind.startswith("variance-"), note.detail
    assert "p = " in note.detail
    if found.kind == "memory-own":
        assert found.value == pytest.approx(check.memory.tau_seconds) and "swings last (now at least" in note.plain
    if found.kind == "variance-noisier":
        assert found.value == pytest.approx(check.checks[1].statistic) and f"about {found.value:.1f}x" in note.plain


def test_the_verdict_types_the_judgements_notes_with_the_placebo_and_location():
    rng = np.random.default_rng(17)
    hist = rng.standard_normal(17280)
    t = np.arange(hist.size) * STEP
    model = fit_memory(t, 100 + hist, STEP)
    base = (t[-480:], 100 + hist[-480:])
    y = 100 + 1.5 * rng.standard_normal(960)  # noisier: rescaled, its own scale
    j = judge(base, (t[-1] + STEP + np.arange(960) * STEP, y), STEP, model, CRITERION, LookContext())
    j.extra_findings.append(verdict.placebo_finding(None, 7200, 14400, verdict.placebo_text(None, 7200, 14400)))
    typed = verdict.notes_of(j)
    assert [n.kind for n in typed] == ["variance-noisier", "scale-own", "placebo-unchecked"]
    assert [n.detail for n in typed[:2]] == j.notes  # assessment.notes keeps the full text
    assert "needs 1d6h of history" in typed[2].plain and "fewer than 5 comparisons" in typed[2].detail
    assert all(plain_ok(n.plain) for n in typed)
    guard = verdict.notes_of(j, "gpu_cost")  # a guard's: its own findings, the placebo stays in its assessment
    assert [(n.kind, n.subject) for n in guard] == [("variance-noisier", "gpu_cost"), ("scale-own", "gpu_cost")]


def test_the_placebo_findings_by_what_the_history_showed():
    held = placebo.Placebo(3600, 7200, 8, 8, 0.9, 7, False)
    widened = placebo.Placebo(3600, 7200, 8, 3, 2.4, 7, True)
    assert verdict.placebo_finding(held, 7200, 3600, "x").kind == "placebo-held"
    w = verdict.placebo_finding(widened, 7200, 3600, "y")
    assert (w.kind, w.value) == ("placebo-widened", 2.4) and "widened 2.4x" in N.plain_text(w.kind, w.value)
    u = verdict.placebo_finding(None, 7200, 3600, "z")
    assert u.kind == "placebo-unchecked" and u.value == placebo.MIN_PLACEBOS * 10800


def result_with(notes: list[Note], guard_notes: list[Note] = ()) -> VerificationResult:
    start = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
    from obsctl.records import GuardResult

    guards = [GuardResult(signal="gpu_cost", category="cost", unit="USD/h", direction="lower_is_better", baseline_id="a.gpu_cost.1",
                          query="q", verdict="NO_CHANGE", notes=list(guard_notes))] if guard_notes else []
    return VerificationResult(
        verdict="NO_CHANGE", baseline_id="a.tokens.1", signal="tokens", window=Window(start=start, end=start + dt.timedelta(hours=6),
                                                                                      step_seconds=60),
        baseline_mean=100.0, window_mean=100.1, change_ratio=0.001, ci_low=-0.01, ci_high=0.012, confidence=0.95,
        verified_at=start, primary_verdict="NO_CHANGE", primary_reason="within +-2.0 % at 95 % confidence", guards=guards,
        assessment=Assessment(method="m", tau_seconds=522.0, memory_source="history", n_eff_baseline=41.8, n_eff_window=36.4, dof=208,
                              look=1, boundary_z=2.84, interval_confidence=0.9956, planned_seconds=21600,
                              notes=[n.detail for n in notes]),
        notes=notes)


KINDS = {  # one note of each kind the verdict makes, with a diagnostic as the statistics word it
    "assumption-short": "assumption failed: the window's memory differs from the baseline's (Ljung-Box Q = 47.8 on 5 lags of 55 "
                        "prewhitened innovations, p = 3.8e-09; level 0.001): ... too short to fit its own (needs 200)",
    "assumption-memory-long": "assumption failed: ... (Yule-Walker score S = 59.7, p = 1.4e-11; level 0.001): fitted on the window, "
                              "its memory is at least 38s",
    "baseline-moved": "baseline a.tokens.1: stationarity: MOVED inside the window: a step of +8.1 % at 2026-01-05T03:00:00Z (step "
                      "test p = 0.0001, trend test p = 0.2; level 0.05 (each at half) under the signal's memory, 999 simulations)",
    "assumption-few": "assumption failed: ... (p = 1e-5; level 0.001): the window holds about 3.2 independent samples",
    "baseline-later-level": "baseline a.tokens.1: its stationarity test did not flag the baseline at level 0.05, but step test p = "
                            "0.2, trend test p = 0.4, the smaller below 0.5: the window was judged again against the part after "
                            "the most likely split (2026-01-05T03:00:00Z)",
    "memory-kept": "assumption check: the window's memory differs from the baseline's (Yule-Walker score S = 11.0 on 1 lag(s) of "
                   "359 prewhitened innovations (scale-free), p = 7.9e-93; level 0.001): the baseline's model gives the wider "
                   "interval and was kept",
    "memory-own": "assumption check: ... (Ljung-Box Q = 88.1 on 20 lags of 400 prewhitened innovations, p = 1e-10; level 0.001): "
                  "the window is judged under its own memory",
    "memory-batches": "assumption check: the window's memory differs from the baseline's (Yule-Walker score S = 33.1 on 6 lag(s) "
                      "of 609 prewhitened innovations (scale-free), p = 9.9e-06; level 0.001): fitted on the window, its memory is "
                      "at least 1m10s (integrated autocorrelation time), fewer than 20 of it in the window to fit it: the window's "
                      "mean was judged from 4 batch means (3 dof, 8.6 effective samples)",
    "variance-noisier": "the window's innovations are noisier than the baseline model's (innovation variance ratio 1.69 (window / "
                        "model, 950 dof), p = 2e-09): the model's variance at the window's scale was used",
    "variance-quieter": "the window is quieter than the baseline model (innovation variance ratio 0.56, p = 1e-12) and as predictable "
                        "(one-step predictability ratio 1.01, p = 0.4): a change of variance, not of memory",
    "scale-own": "the window's spread (sd 38.88) differs from the history's (sd 32.99): its own scale was used",
    "level": "the sequence's level 95 % (fixed at its first look, 2026-01-05T00:00:00Z) is kept; verification.confidence is now 99 %",
    "location-trimmed": "location: 10 % trimmed mean (cut from each tail), because the baseline is heavy-tailed (12 of 5,760 samples)",
    "location-mean": "location: mean, because the spec marks the signal not spiky",
    "placebo-held": "on 8 placebo starts in this signal's history (2h against 1h) the model's interval held 8 times (variance ratio 0.90)",
    "placebo-widened": "on 8 placebo starts ... (variance ratio 2.40): the model's variance is too small, the interval is widened 2.40x "
                       "with 7 dof",
    "placebo-unchecked": "not checked: the baseline's history holds fewer than 5 comparisons of this length (needs 2d12h)",
}


def test_kinds_cover_every_worded_kind():
    assert set(KINDS) == set(N.PLAIN)


def test_text_output_is_plain_by_default_and_full_with_verbose():
    typed = [N.note_of(k, d, 1.5) for k, d in KINDS.items()]
    guard = [N.note_of("memory-kept", KINDS["memory-kept"], subject="gpu_cost")]
    result = result_with(typed, guard)
    default = note_lines(result, verbose=False)
    assert len(default) == len(KINDS) + 1 - len(N.REASONS)  # a refusal's plain words are the verdict's reason, not a note
    for line in default:
        assert not DIAGNOSTIC.search(line), line
    assert default[-1].startswith("guard gpu_cost: note: the change may have altered how long")
    assert not any(N.plain_text(kind) in "\n".join(default) for kind in N.REASONS)
    assert sum(line.startswith("placebo: ") for line in default) == 3 and sum(line.startswith("location: ") for line in default) == 2
    verbose = note_lines(result, verbose=True)
    for kind, detail in KINDS.items():
        assert f"  diagnostic: {detail}" in verbose, kind
    assert verbose[verbose.index(default[0]) + 1] == f"  diagnostic: {KINDS['memory-kept']}"  # under its plain words
    assert f"note: {N.plain_text('assumption-few')}" in verbose
    # The statistics line: the look and the window plainly; boundary, memory, samples and dof with --verbose.
    plain = statistics_plain(result)
    assert plain == "statistics: look 1 at this change (its interval holds however often you look), window 6h of planned 6h; " \
                    "within +-2.0 % at 95 % confidence"
    assert "boundary z = 2.84" in statistics_line(result) and "dof" in statistics_line(result)


def test_an_older_record_without_typed_notes_shows_its_notes_as_they_are():
    result = result_with([])
    result.assessment.notes = ["the window's spread (sd 2) differs from the history's (sd 1): its own scale was used"]
    assert note_lines(result, verbose=False) == [f"note: {result.assessment.notes[0]}"]


def test_the_report_shows_both_renderings_escaped():
    from obsctl.baselining.report import _statistics_lines

    hostile = "p = 0.001 on <b>*every*</b> [label](http://x) | `tick`"
    result = result_with([N.note_of("memory-kept", hostile)], [N.note_of("scale-own", "sd 2 vs sd 1 _x_", subject="gpu_cost")])
    lines = _statistics_lines(result)
    (note,) = [line for line in lines if line.startswith("- Note: ")]
    assert note.startswith(f"- Note: {N.plain_text('memory-kept')}. Diagnostic: ")
    assert "<b>" not in note and "\\*every\\*" in note and "\\[label\\]" in note and "\\|" in note and "\\`tick\\`" in note
    (guard,) = [line for line in lines if line.startswith("- Guard ")]
    assert guard.startswith("- Guard `gpu_cost` note: ") and "\\_x\\_" in guard
    assert "boundary z = 2.84" in "\n".join(lines)  # the full statistics line


def test_the_snapshots_stationarity_and_tails_lines_plain_and_full():
    at = dt.datetime(2026, 1, 5, 3, tzinfo=dt.UTC)
    common = {"level": 0.05, "simulations": 999, "samples": 360, "block_seconds": 600.0, "step_at": at}
    steady = Stationarity(moved=False, step_p_value=0.91, trend_p_value=0.49, **common)
    assert stationarity_plain(steady) == "stationarity: steady, no step or trend inside the window"
    assert "step test p = 0.91" in stationarity_line(steady)
    moved = Stationarity(moved=True, kind="step", step_p_value=0.0001, trend_p_value=0.2, step_ratio=0.081, **common)
    text = stationarity_plain(moved)
    assert text.startswith("stationarity: MOVED inside the window: a step of +8.1 % at 2026-01-05T03:00:00Z")
    assert "INCONCLUSIVE" in text and not DIAGNOSTIC.search(text) and "p = 0.0001" in stationarity_line(moved)
    from obsctl.records import Memory

    spiky = Tails(heavy=True, outliers=12, samples=5760, share=12 / 5760, robust_sd=1.0,
                  memory=Memory(step_seconds=15.0, coefficients=[0.5], rho=[1.0, 0.5], variance=1.0, mean=0.0, samples=5760,
                                span_seconds=86400.0, tau_seconds=45.0))
    assert N.tails_plain(spiky).startswith("spiky (12 of 5,760 samples far from the median): verdicts against it compare 10 % trimmed")
    assert not DIAGNOSTIC.search(N.tails_plain(spiky)) and N.tails_plain(Tails()) == ""
    assert math.isfinite(spiky.share)


def test_a_refused_window_gets_a_plain_reason_and_keeps_the_diagnostic_as_a_note():
    rng = np.random.default_rng(18)
    from test_assumptions import ar1

    z = ar1(rng, 0.90, 17280 + 480)
    t = np.arange(z.size) * STEP
    model = fit_memory(t[:17280 + 240], 100 + z[:17280 + 240], STEP)
    base = (t[17280:17280 + 240], 100 + z[17280:17280 + 240])
    w = ar1(rng, 0.98, 160, start=z[17280 + 239])  # the memory changed; 160 samples cannot fit the window's own
    j = judge(base, (t[17520:17680], 100 + w), STEP, model, CRITERION, LookContext())
    full = j.reason
    assert j.failure is not None and j.failure.kind == "assumption-short" and full.startswith("assumption failed") and "p = " in full
    verdict.plain_failure(j)
    assert j.reason == N.plain_text("assumption-short", 200 * STEP) and "at least 50m" in j.reason and plain_ok(j.reason)
    assert j.notes[0] == full and verdict.notes_of(j)[0].kind == "assumption-short"
    verdict.plain_failure(j)  # once only
    assert j.notes.count(full) == 1
    w = ar1(rng, 0.98, 480, start=z[17280 + 239])  # 2 h: fits its own memory, but spans fewer than 20 of it
    long = judge(base, (t[17520] + np.arange(480) * STEP, 100 + w), STEP, model, CRITERION, LookContext())
    assert long.failure.kind == "assumption-memory-long" and long.failure.value > 480 * STEP
    assert "no verdict until the window is at least" in verdict.plain_failure(long).reason


def test_a_population_in_a_few_words():
    from obsctl.baselining.text.present import population_summary
    from obsctl.records import Population

    buckets = [{"__name__": "x_bucket", "instance": f"10.0.0.{r}:8000", "le": str(le)} for r in (1, 2) for le in range(12)]
    assert population_summary(Population(series_count=24, label_sets=buckets)) == "2 replicas (instance), 24 series"
    pods = [{"pod": "a", "instance": "i1"}, {"pod": "a", "instance": "i2"}]  # pod first: Kubernetes names the replica
    assert population_summary(Population(series_count=2, label_sets=pods), "input series") == "1 replica (pod), 2 input series"
    assert population_summary(Population(series_count=1, label_sets=[{"job": "w"}])) == "1 series"
    assert population_summary(None) == population_summary(Population(series_count=0)) == "no input series found"


def test_a_placebo_initiatives_verdict_says_what_it_means():
    from obsctl.baselining.text.present import placebo_initiative_line

    assert placebo_initiative_line("NO_CHANGE").endswith("as expected: the tool held NO_CHANGE on this stack")
    assert "a longer window" in placebo_initiative_line("INCONCLUSIVE")
    for wrong in ("IMPROVED", "REGRESSED"):
        assert f"a false {wrong}: nothing was changed" in placebo_initiative_line(wrong)


def test_a_designs_effect_line_leaves_its_model_to_verbose():
    from obsctl.baselining.text.present import context_lines

    ctx = {"design": "control", "effect": {"design": "control", "ratio": 0.081, "ci_low": 0.05, "ci_high": 0.11, "confidence": 0.95,
                                           "log_se": 0.0142, "tau_seconds": 312.0}}
    plain, full = context_lines(ctx, verbose=False), context_lines(ctx)
    assert plain[1] == "effect (T_a / T_b) / (C_a / C_b) - 1 = +8.1 % (95 % CI +5.0 % .. +11.0 %)"
    assert full[1] == "effect (T_a / T_b) / (C_a / C_b) - 1 = +8.1 % (95 % CI +5.0 % .. +11.0 %, log-scale se 0.0142, memory 312 s)"


def test_the_cycle_test_is_a_verbose_line_its_reasons_carry_no_p_value():
    from obsctl.baselining.designs.cycle import ALPHA, assess
    from obsctl.baselining.text.present import context_lines
    from obsctl.records import CycleFit

    found = assess([CycleFit(cycle="day", p_value=1e-6, amplitude=0.04, peak_hour=14.0)], 0.02)
    none = assess([CycleFit(cycle="day", p_value=0.42, amplitude=0.003, peak_hour=3.0)], 0.02)
    assert found.detected and not none.detected
    assert "p = " not in found.reason and "p = " not in none.reason and "peak at hour 14" in found.reason
    ctx = {"design": "before-after", "notes": [found.reason],
           "cycle": {"checked": True, "detected": True, "cycle": "day", "amplitude": 0.04, "p_value": 1e-6, "reason": found.reason}}
    assert context_lines(ctx, verbose=False) == ["design: before-after", found.reason]
    assert context_lines(ctx)[-1] == f"cycle test (daily): p = 1e-06 at level {ALPHA:g}, fitted +-4.0%: a cycle"
