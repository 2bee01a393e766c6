"""Records the loop keeps: baselines, initiatives and verification results.

These pydantic models are the on-disk schema of the store (one YAML file per record)
and the interface other parts read: ``obsctl.rules`` turns current baselines into
constant series, ``obsctl.dashboards`` and ``obsctl report`` show them.

All timestamps are timezone-aware UTC datetimes; all values are in the signal's unit.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from obsctl import names

Verdict = Literal["IMPROVED", "REGRESSED", "NO_CHANGE", "INCONCLUSIVE", "NO_DATA"]
#: A finite float (no NaN, no infinity): for stored values a verdict is computed from.
Finite = Annotated[float, Field(allow_inf_nan=False)]


#: The version of the store's record layout this obsctl reads and writes. Baselines and
#: initiatives carry it (``schema_version``); a record of another version is refused with
#: one line, never read by guesswork.
SCHEMA_VERSION = 1


def _record_id(text: str) -> str:
    if not names.is_record_id(text):
        raise ValueError(f"{text!r} is not a store id (one path component: letters, digits, '.', '_', '-')")
    return text


def _name(text: str) -> str:
    if not names.IDENT.match(text):
        raise ValueError(f"{text!r} is not a workload class or signal name (a-z first, then a-z, 0-9, '_', '-')")
    return text


def _variant(value: dict[str, str]) -> dict[str, str]:
    # The canary's label and values go into verify's PromQL: validated as the spec validates them.
    if not value:
        return value
    if not {"label", "control", "treatment"} <= value.keys() or not value.keys() <= {"label", "control", "treatment", "traffic_share"}:
        raise ValueError("must hold label, control and treatment (and optionally traffic_share)")
    if not names.is_label_name(value["label"]):
        raise ValueError(f"label {value['label']!r} is not a Prometheus label name")
    for key in ("control", "treatment"):
        if not value[key] or any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in value[key]):
            raise ValueError(f"{key} must be a non-empty label value without control characters")
    return value


def _description(text: str) -> str:
    # One printable line: it is shown in lists, the ledger and the report.
    if len(text) > MAX_LEVER_DESCRIPTION or any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in text):
        raise ValueError(f"must be one line of at most {MAX_LEVER_DESCRIPTION} printable characters")
    return text


#: The longest ``lever_description`` kept (characters).
MAX_LEVER_DESCRIPTION = 200

#: Names and ids read back from the store, validated with the spec's patterns (:mod:`obsctl.names`).
RecordId = Annotated[str, AfterValidator(_record_id)]
Name = Annotated[str, AfterValidator(_name)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Window(_Record):
    """A closed time window ``[start, end]`` in UTC, with the query step in seconds."""

    start: dt.datetime
    end: dt.datetime
    step_seconds: float = Field(gt=0)


class Population(_Record):
    """The workload population a query covered.

    Attributes:
        series_count: number of distinct input series seen in the window.
        label_sets: those series' label sets (``__name__`` included), at most 200 kept.
    """

    series_count: int = Field(ge=0)
    label_sets: list[dict[str, str]] = Field(default_factory=list)


class Statistics(_Record):
    """Summary of one signal's samples over a window (values in the signal's unit).

    ``batch_means`` are the means of ``batches`` contiguous, non-overlapping batches of
    the sample series, kept for plots and the report (the interval in ``verify`` comes
    from the long-run variance under the signal's memory model, not from them).
    """

    sample_count: int = Field(ge=0)
    mean: float
    median: float
    p5: float
    p95: float
    stddev: float
    batch_means: list[float]


class Hole(_Record):
    """A stretch of a window without fresh input: from the last real sample before it
    (or the window start) to the first real sample after it (or the window end)."""

    start: dt.datetime
    end: dt.datetime
    steps: int = Field(ge=0)


class Coverage(_Record):
    """Real-sample coverage of one signal over one window (``obsctl.baselining.measure.coverage``).

    Attributes:
        ratio: fresh step-grid points / grid points (0-1), at the signal level.
        fresh_points, grid_points: the counts behind ``ratio``.
        real_samples: distinct real input samples (scrape times, push times or value
            changes) in the window, at the signal level.
        input_interval_seconds: the inputs' own interval (median gap between real
            samples); None when fewer than two were seen.
        method: how freshness was told, ``scrape`` (sample counts) / ``push_time`` / ``value_change``
            joined by ``+`` when inputs differ.
        last_real_sample: the latest real input sample seen (may precede the window).
        stopped: no fresh input from ``last_real_sample`` to the window end.
        holes: the longest holes (at most 5), longest first.
        series_at_start, series_at_end, series_min, series_max: input series present
            (PromQL ``count``) at the first and last step, and the extremes: a rolling
            restart shows as a population change here, not as a hole.
    """

    ratio: float = Field(ge=0, le=1)
    fresh_points: int = Field(ge=0)
    grid_points: int = Field(ge=0)
    real_samples: int = Field(0, ge=0)
    input_interval_seconds: float | None = None
    method: str = "scrape"
    last_real_sample: dt.datetime | None = None
    stopped: bool = False
    holes: list[Hole] = Field(default_factory=list)
    series_at_start: int | None = None
    series_at_end: int | None = None
    series_min: int | None = None
    series_max: int | None = None


class Memory(_Record):
    """The signal's memory model (``obsctl.baselining.statistics.memory.MemoryModel``):
    an AR(p) fit on the history before the baseline window (``source=history``) or on
    the baseline window itself (``windows``: a lower bound). ``tau_seconds`` is the
    integrated autocorrelation time; ``variance`` (unit squared) and ``dof`` the scale."""

    method: str = "ar-yule-walker-aic"
    step_seconds: float = Field(ge=0.001, allow_inf_nan=False)  # Prometheus' finest step; no smaller than the window's (Baseline)
    coefficients: list[Finite]
    rho: list[Finite]
    variance: float
    mean: float
    samples: int = Field(ge=0)
    span_seconds: float = Field(ge=0)
    source: Literal["history", "windows"] = "history"
    dof: float | None = None
    tau_seconds: float | None = None


class CycleFit(_Record):
    """One harmonic test of a baseline's samples (``obsctl.baselining.designs.cycle``):
    the period tested (``day`` | ``week``), the Wald test's p-value, the fitted profile's
    half range as a ratio (0.28 = +-28 %) and its peak (hours into the period). A pure
    function of the baseline, so ``initiative start`` stores it for ``verify``."""

    cycle: Literal["day", "week"]
    # Strict, finite and in range: a tampered value (text, a boolean, NaN) would otherwise
    # read as "no cycle" and silently lift the before-after confound.
    p_value: float = Field(strict=True, ge=0, le=1, allow_inf_nan=False)
    amplitude: float = Field(strict=True, ge=0, le=1, allow_inf_nan=False)
    peak_hour: float = Field(strict=True, ge=0, le=168, allow_inf_nan=False)


CycleState = Literal["present", "absent", "unknown"]


class CycleKnowledge(_Record):
    """What the signal's history says about its daily and weekly cycles
    (``obsctl.baselining.designs.knowledge``), learnt at snapshot.

    ``daily`` / ``weekly``: ``present``, ``absent`` or ``unknown`` (the history is shorter
    than two periods); ``history_seconds``: the span read; the p-values and amplitudes
    (half range as a ratio) of the harmonic tests; ``profile``: the mean log offset of each
    hour of the day (24) or week (168, Monday 00:00 first) in ``timezone``, centred, with
    ``profile_counts`` the effective cycles behind each hour (0: never seen) and
    ``profile_variance`` (``profile_dof``) the residual variance of one clock hour's mean log
    around the profile; ``baseline_spread``: the profile's half range
    over the baseline's own hours (a baseline that mixes phases of a known cycle);
    ``memory``: the signal's memory model fitted to the memory history and the baseline
    window with the profile divided out (the profile design's; None without a profile or
    without enough history)."""

    daily: CycleState = "unknown"
    weekly: CycleState = "unknown"
    history_seconds: float = Field(0.0, ge=0, allow_inf_nan=False)
    daily_p: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    daily_amplitude: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    weekly_p: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    weekly_amplitude: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    timezone: str = "UTC"
    profile_cycle: Literal["day", "week"] | None = None
    profile: list[Finite] = Field(default_factory=list, max_length=168)
    profile_counts: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=list, max_length=168)
    profile_variance: float | None = Field(None, ge=0, allow_inf_nan=False)
    profile_dof: float | None = Field(None, gt=0, allow_inf_nan=False)
    baseline_spread: float | None = Field(None, ge=0, allow_inf_nan=False)
    memory: Memory | None = None


class PlaceboCheck(_Record):
    """The placebo comparisons of one window length in a baseline's history
    (:mod:`obsctl.baselining.statistics.placebo`): disjoint A/A comparisons of the
    baseline's length against ``window_seconds``, how many the model's 95 % interval held,
    and their variance over the model's."""

    window_seconds: float = Field(gt=0, allow_inf_nan=False)
    baseline_seconds: float = Field(gt=0, allow_inf_nan=False)
    starts: int = Field(ge=0)
    held: int = Field(ge=0)
    variance_ratio: float = Field(ge=0, allow_inf_nan=False)
    dof: float = Field(ge=0, allow_inf_nan=False)
    contradicted: bool


class Stationarity(_Record):
    """The baseline window's own stationarity test (``obsctl.baselining.statistics.stationarity``):
    a step and a trend inside it under its memory model, each a Monte-Carlo p-value.
    ``moved``: either below ``level / 2``; ``kind`` the better-fitting one; ``step_at`` the
    most likely split (UTC), ``step_ratio`` the level after it over before it, minus 1,
    ``trend_ratio`` the fitted line's change over the window over the mean."""

    method: str = "cusum-step+ols-trend, parametric Monte-Carlo under the memory model"
    step_p_value: float = Field(ge=0, le=1, allow_inf_nan=False)
    trend_p_value: float = Field(ge=0, le=1, allow_inf_nan=False)
    moved: bool
    kind: Literal["", "step", "trend"] = ""
    step_at: dt.datetime
    step_ratio: float | None = None
    trend_ratio: float | None = None
    level: float = Field(gt=0, lt=1, allow_inf_nan=False)
    simulations: int = Field(ge=1)
    samples: int = Field(ge=0)
    block_seconds: float = Field(gt=0, allow_inf_nan=False)


class BaselineSide(_Record):
    """A baseline's side of every verdict (``statistics.verdict.BaselineSide``: its mean and
    the variance of that mean under its memory model, at ``step_seconds``), a pure function
    of the baseline, so ``initiative start`` stores it and ``verify`` need not read the
    baseline's samples. ``var_mean`` is NaN when the baseline is too short for its memory,
    ``dof`` infinite when the scale is known."""

    baseline_id: RecordId
    step_seconds: float = Field(ge=0.001, allow_inf_nan=False)
    constant: bool
    mean: Finite
    var_mean: float
    dof: float
    n: int = Field(ge=0)
    n_eff: float = Field(ge=0, allow_inf_nan=False)
    span_seconds: float = Field(ge=0, allow_inf_nan=False)
    sd: float
    scale_source: Literal["history", "own"]
    own_sd: float

    @model_validator(mode="after")
    def _ranges(self) -> BaselineSide:
        if not (math.isnan(self.var_mean) or 0 <= self.var_mean < math.inf):
            raise ValueError(f"var_mean {self.var_mean!r} is neither NaN (too short) nor a finite variance")
        if not self.dof > 0:
            raise ValueError(f"dof {self.dof!r} is not positive")
        return self


class Assessment(_Record):
    """How a verdict was reached (docs/verification.md): the method, the memory used,
    effective sample sizes, the look and its boundary, the planned window."""

    method: str = ""
    tau_seconds: float | None = None
    memory_source: str | None = None
    n_eff_baseline: float | None = None
    n_eff_window: float | None = None
    dof: float | None = None
    look: int | None = None
    min_fraction: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    boundary_z: float | None = None
    interval_confidence: float | None = None
    planned_seconds: float | None = None
    guard_test: str | None = None
    placebo: str | None = None
    p_worse: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    location: str | None = None
    notes: list[str] = Field(default_factory=list)


class Tails(_Record):
    """A baseline's heavy-tail test (``obsctl.baselining.statistics.robust.tail_test`` on its
    history and window) and, where the snapshot judged the signal robustly (spec ``spiky``
    or heavy tails), the memory model of the winsorised history that the trimmed mean's
    interval uses."""

    heavy: bool = False
    outliers: int = Field(0, ge=0)
    samples: int = Field(0, ge=0)
    share: float = Field(0.0, ge=0, le=1, allow_inf_nan=False)
    robust_sd: float = Field(0.0, ge=0, allow_inf_nan=False)
    trim: float = Field(0.1, ge=0, lt=0.5)
    memory: Memory | None = None


class Baseline(_Record):
    """A documented state of one signal for one workload class (``schema_version``: :data:`SCHEMA_VERSION`).

    Attributes:
        id: unique id, ``<class>.<signal>.<UTC timestamp>``.
        workload_class, signal: identity; the pair has at most one *current* baseline.
        query: the PromQL that was evaluated (selector filled in).
        window: the window the statistics cover.
        population: the input series behind the signal.
        stats: the statistics; ``stats.mean`` is the baseline value published as a series.
        created_at: when the snapshot was taken (UTC).
        source: ``snapshot`` (``obsctl snapshot-baseline``) or ``promoted`` (from an
            initiative's verification window, ``obsctl baseline promote``).
        initiative: id of the initiative whose window was promoted, if any.
        samples: the raw (timestamp seconds, value) samples, kept for re-analysis: the
            step-grid points with fresh input only (holes allowed); stored in a sidecar
            (docs/store.md).
        coverage, warnings, partial: the window's real-sample coverage, Prometheus'
            warnings, and whether it was stored partial (``--allow-partial``; every
            verdict against it is at most INCONCLUSIVE). docs/coverage.md.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    id: RecordId
    workload_class: Name
    signal: Name
    unit: str
    direction: Literal["higher_is_better", "lower_is_better"]
    query: str
    window: Window
    population: Population
    stats: Statistics
    created_at: dt.datetime
    source: Literal["snapshot", "promoted"] = "snapshot"
    initiative: str | None = None
    samples: list[tuple[float, float]] = Field(default_factory=list)
    coverage: Coverage | None = None
    warnings: list[str] = Field(default_factory=list)
    partial: bool = False
    memory: Memory | None = None
    #: The placebo checks of the history the memory was fitted on, per window length ([]: too little history).
    placebo: list[PlaceboCheck] = Field(default_factory=list)
    #: The heavy-tail test and the robust location's memory (None: taken before the test existed).
    tails: Tails | None = None
    #: The daily and weekly cycles its history shows (None: not learnt, an older record).
    cycles: CycleKnowledge | None = None
    #: The window's own stationarity test (a step, a trend inside it); None: not tested.
    stationarity: Stationarity | None = None

    @model_validator(mode="after")
    def _memory_step(self) -> Baseline:
        # The memory model is fitted at the window's step or a multiple of it (history);
        # a finer one (a tampered record) would make every verify build a huge grid.
        for name, memory in (("memory", self.memory), ("tails.memory", self.tails.memory if self.tails else None)):
            if memory is not None and memory.step_seconds < self.window.step_seconds * (1 - 1e-9):
                raise ValueError(f"{name}.step_seconds {memory.step_seconds:g} is below the window's step {self.window.step_seconds:g}")
        return self


class Note(_Record):
    """A statistical note on a verdict, in two renderings (``obsctl.baselining.text.notes``).

    Attributes:
        kind: what the note is about, a key of ``obsctl.baselining.text.notes.PLAIN``
            (``memory-kept``, ``variance-noisier``, ``placebo-held``, ...).
        subject: ``""`` for the primary signal, else the guard signal it is about.
        plain: what it means for the verdict and what to do, in plain words (the default
            text output).
        detail: the full diagnostic: the test, its statistic, p-value and level, the model
            (``verify --verbose``, JSON, the report).
    """

    kind: str
    subject: str = ""
    plain: str
    detail: str


class GuardResult(_Record):
    """One guard signal of a verification: another signal of the initiative's class,
    measured over the same window with its own baseline's PromQL and judged like the
    primary (memory model, Fieller change and interval, direction-aware verdict).

    Attributes:
        signal, category, unit, direction: the guard signal (category from the spec:
            utilization | throughput | cost | quality | saturation).
        baseline_id: the guard's baseline (recorded when the initiative started, else
            the class x signal's current one at verify time).
        verdict: the guard's own verdict; only REGRESSED changes the overall verdict.
        change_ratio, ci_low, ci_high: as in :class:`VerificationResult` (ratio, 0.1 = +10 %).
        exact: both sides were constant, so the change has no sampling error.
        window_stats, population, samples: the guard's window (kept so promote can make
            it the guard's baseline).
    """

    signal: Name
    category: str
    unit: str
    direction: Literal["higher_is_better", "lower_is_better"]
    baseline_id: RecordId
    query: str
    verdict: Verdict
    reason: str = ""
    baseline_mean: float | None = None
    window_mean: float | None = None
    change_ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    exact: bool = False
    window_stats: Statistics | None = None
    population: Population | None = None
    samples: list[tuple[float, float]] = Field(default_factory=list)
    coverage: Coverage | None = None
    warnings: list[str] = Field(default_factory=list)
    partial: bool = False
    assessment: Assessment | None = None
    #: The guard's statistical notes in plain words and in full (empty in an older record).
    notes: list[Note] = Field(default_factory=list)


class TransitionEvent(_Record):
    """One population event in a change's rollout: when, what (restart | appeared | disappeared), which series."""

    at: dt.datetime
    kind: str
    series: str = ""


class TransitionRecord(_Record):
    """The change's transition a verdict excluded (``baselining.measure.transition``).

    Attributes:
        change_at: the initiative's start.
        judged_start: where the judged window starts (``change_at`` when nothing was excluded,
            the window was too short, or ``--no-trim``).
        excluded_until: the end of the transition (the judged start when trimmed).
        lookback_seconds, lookback_source: the signals' longest look-back and what gives it.
        events: the population events in the rollout.
        trimmed: False with ``verify --no-trim``.
        too_short: the window after the transition was too short to judge (INCONCLUSIVE).
        ready_at: when the window after the transition is long enough.
        text: the exclusion in words, as the verdict's output shows it.
        notes: inputs whose events could not be read.
    """

    change_at: dt.datetime
    judged_start: dt.datetime
    excluded_until: dt.datetime
    lookback_seconds: float = 0.0
    lookback_source: str = ""
    events: list[TransitionEvent] = Field(default_factory=list)
    trimmed: bool = True
    too_short: bool = False
    ready_at: dt.datetime | None = None
    text: str = ""
    notes: list[str] = Field(default_factory=list)


class VerificationResult(_Record):
    """Outcome of ``obsctl verify`` for one initiative.

    Attributes:
        verdict: the overall verdict, IMPROVED | REGRESSED | NO_CHANGE | INCONCLUSIVE |
            NO_DATA: the primary's verdict, except that a REGRESSED guard makes it
            REGRESSED (see ``baselining.verdict.overall_verdict``).
        reason: why the overall verdict is what it is (the primary's reason, or the
            guards' when they override it).
        primary_verdict, primary_reason: the primary signal's own verdict and reason.
        guards: the guard signals' results (empty with --no-guards).
        guards_evaluated: False for ``--no-guards``.
        guards_missing: the signals ``verification.guards`` chooses for the class that
            could not be evaluated because they have no baseline (a guard not judged is
            not a pass: it caps the verdict like a NO_DATA guard, and promote refuses it).
        change_ratio: relative change of the window mean vs the baseline mean
            (0.30 = +30 %); ``None`` when there is no data.
        ci_low, ci_high: confidence interval of ``change_ratio`` at ``confidence``.
        alerts_fired: names of regression alerts seen firing in the window (ALERTS).
        window_stats: statistics of the verification window.
        coverage, warnings, partial: the primary window's real-sample coverage and
            Prometheus' warnings (guards carry their own); ``partial`` caps the verdict
            at INCONCLUSIVE. docs/coverage.md.
    """

    verdict: Verdict
    baseline_id: RecordId
    signal: Name
    window: Window
    baseline_mean: float | None
    window_mean: float | None
    change_ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    alerts_fired: list[str] = Field(default_factory=list)
    window_stats: Statistics | None = None
    population: Population | None = None
    query: str = ""
    samples: list[tuple[float, float]] = Field(default_factory=list)
    reason: str = ""
    verified_at: dt.datetime
    primary_verdict: Verdict
    primary_reason: str = ""
    guards: list[GuardResult] = Field(default_factory=list)
    guards_evaluated: bool = False
    guards_missing: list[Name] = Field(default_factory=list)
    coverage: Coverage | None = None
    warnings: list[str] = Field(default_factory=list)
    partial: bool = False
    assessment: Assessment | None = None
    #: Comparison design and its context: the control's own movement, demand
    #: and saturation per period, the mix decomposition, the cycle check (``designs.run``).
    design: str = "before-after"
    design_context: dict = Field(default_factory=dict)
    #: The change's transition excluded from the judged window (None: not computed, e.g. an older record).
    transition: TransitionRecord | None = None
    #: The primary's statistical notes, each in plain words and in full, and the sequence's
    #: level kept (each guard carries its own; empty in an older record: its notes are
    #: ``assessment.notes``, full only).
    notes: list[Note] = Field(default_factory=list)


class Initiative(_Record):
    """One change at a time on one workload class, with its lever and expected impact.

    Attributes:
        id: slug of the name plus start date.
        lever: one of :data:`obsctl.spec.LEVERS`; ``other`` names a lever outside the list,
            described by ``lever_description`` (required then, and refused with another lever).
        owner: who answers for it (the spec's owner pattern), None: the class's owner.
        due: the date it should be decided by (UTC midnight), None: start + planned window.
        primary_signal: the signal the verdict is based on.
        expected_impact_ratio: expected relative change of the primary signal (0.2 = +20 %).
        baseline_id: the baseline current when the initiative started.
        guard_baseline_ids: ``{signal: baseline id}`` of the class's other current
            baselines when the initiative started (the guard signals' baselines).
        status: open -> verified (a verification result is stored) -> promoted | closed.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    id: RecordId
    name: str
    lever: names.Lever
    lever_description: Annotated[str, AfterValidator(_description)] = ""
    owner: str | None = Field(None, min_length=1, max_length=128, pattern=names.OWNER_PATTERN)
    due: dt.date | None = None
    workload_class: Name
    primary_signal: Name
    expected_impact_ratio: float | None = None
    baseline_id: RecordId | Literal[""]
    started_at: dt.datetime
    status: Literal["open", "verified", "promoted", "closed"] = "open"
    guard_baseline_ids: dict[Name, RecordId] = Field(default_factory=dict)
    verifications: list[VerificationResult] = Field(default_factory=list)
    #: At least 1 s, at most the longest duration a spec may give (timeutil.MAX_DURATION_SECONDS, 100 years).
    planned_window_seconds: float | None = Field(None, ge=1, le=100 * 31_536_000, allow_inf_nan=False)
    #: Comparison design (``before-after`` | ``control`` | ``canary`` | ``seasonal``), the
    #: control class (``control``), the canary's ``{label, control, treatment}``; a canary
    #: may start without a baseline (``baseline_id`` is then ``""``).
    design: str = "before-after"
    #: Why the design was chosen when no flag or spec named it (a cycle the history shows).
    design_note: str = ""
    control_class: Name | None = None
    variant: Annotated[dict[str, str], AfterValidator(_variant)] = Field(default_factory=dict)
    #: The before-after design's cycle tests of the baseline (``baseline_id``), computed
    #: at start; ``[]``: the baseline spans < 1 day (nothing to test); None: not computed
    #: (another design).
    baseline_cycle: list[CycleFit] | None = None
    #: The primary's and the guards' baseline sides at the verification step, computed at
    #: start (``BaselineSide``); verify judges them without reading the baselines' samples.
    baseline_sides: list[BaselineSide] = Field(default_factory=list)
    notes: str = ""
    #: What the change cost the team, as they put it (``--effort`` at start or close,
    #: e.g. ``3 engineer-days``); shown by the ledger, never computed with.
    effort: str = ""
    #: What it taught (``--lesson`` at ``baseline promote`` and ``initiative close``).
    lesson: str = ""
    #: When it was promoted or closed (UTC); None while open or verified.
    ended_at: dt.datetime | None = None
    #: Why it was promoted although its verdict was not judged with all the spec's guards
    #: (``baseline promote --override-reason``); ``""``: promoted with every guard judged.
    promote_override: str = ""
    #: Each rebinding to a fresh baseline before the first look (``initiative rebase``):
    #: ``{"at", "from", "to", "reason"}`` (RFC 3339, baseline ids, the stated reason).
    rebased: list[dict[str, str]] = Field(default_factory=list)
    #: A placebo (A/A) initiative: nothing was changed; it shows the team the verdict
    #: holding NO_CHANGE on its own stack (``initiative start --placebo``); never promoted.
    placebo: bool = False

    @model_validator(mode="after")
    def _lever_description(self) -> Initiative:
        # ``other`` says what the lever is; a listed lever's name says it already.
        if self.lever == "other" and not self.lever_description.strip():
            raise ValueError("lever 'other' needs a lever_description")
        if self.lever != "other" and self.lever_description:
            raise ValueError(f"lever_description is for lever 'other', not {self.lever!r}")
        return self


class Look(_Record):
    """One look at a change: a line of the append-only look log (``STORE/looks/<class>/<signal>.jsonl``).

    A change is a (workload class, signal, ``sequence_start``) sequence: every look
    judges the window cumulative from ``sequence_start`` on one confidence sequence
    (:mod:`obsctl.baselining.statistics.anytime`), whose level and first information time
    ``t_min`` the first look fixes. Closing an initiative and starting another does not start a new
    sequence on data already looked at (:mod:`obsctl.baselining.looks`).

    Attributes:
        number: this look's number in the sequence (1-based).
        initiative: the initiative that looked; role: ``primary`` or ``guard``.
        window_start, window_end: the window judged (UTC).
        confidence: the sequence's two-sided level over all looks (fixed at look 1).
        min_fraction: the sequence's ``t_min`` (fixed at look 1); None where no look had one.
        verdict, change_ratio, ci_low, ci_high: what the look said.
        looked_at: when (UTC).
        baseline_id: the baseline the look compared with (None: a canary's control group);
            a sequence keeps the baseline of its first look.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    workload_class: Name
    signal: Name
    sequence_start: dt.datetime
    number: int = Field(ge=1)
    initiative: RecordId
    role: Literal["primary", "guard"] = "primary"
    window_start: dt.datetime
    window_end: dt.datetime
    confidence: float = Field(gt=0, lt=1)
    min_fraction: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    verdict: Verdict
    change_ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    looked_at: dt.datetime
    baseline_id: RecordId | None = None
    #: What was looked at: the signal's PromQL normalised to its input selectors
    #: (:func:`obsctl.baselining.looks.query_key`); ``""`` in looks logged before it was recorded.
    query_key: str = ""
