"""The outcome ledger: what the team changed, what it verifiably did, what it cost and
taught, and how the promoted baselines compound (``obsctl ledger``).

:func:`build_ledger` reads the store (and, for the money, Prometheus) and returns a
:class:`Ledger`:

- one :class:`Entry` per initiative, oldest first: the lever and what was changed (its
  name, and the notes kept at start and close), the
  last verification's verdict and relative change with its interval, the expected
  impact, the effort and lesson recorded at start, promote or close, and the change of
  the class's spend in USD/month: the mean of the class's cost series
  (``workload_class:obsctl_cost_usd_per_hour:sum``) over the verification window minus
  its mean over the baseline window, times :data:`HOURS_PER_MONTH`. None where a side has
  no cost data, the initiative was never verified, or it had no baseline window (a canary
  shares its class's spend between both arms);
- one :class:`Chain` per (class, signal) with a promoted baseline that was an
  initiative's primary signal: the staircase of that signal's baselines from the one the
  first promoted initiative started from, each step's mean, its ratio to the previous
  step and to the origin (``cumulative_ratio``), and the product of the verified changes
  (``verified_ratio``: the gain the verdicts vouch for; the staircase adds whatever moved
  between a verdict and the promotion).

Text and Markdown come from :mod:`obsctl.baselining.text.present_ledger`; :func:`render_figure`
draws the staircase and the effects with their intervals (matplotlib, Agg backend).
"""

from __future__ import annotations

import datetime as dt
import io
import math
from dataclasses import asdict, dataclass, field

from obsctl.baselining.store import Store
from obsctl.records import Baseline, Initiative
from obsctl.rules import canonical as C
from obsctl.spec import Spec, escape_label_value
from obsctl.timeutil import rfc3339

#: Hours in a month (365 x 24 / 12), as ``obsctl review`` counts them.
HOURS_PER_MONTH = 730.0


@dataclass
class Entry:
    """One initiative in the ledger (ratios: 0.1 = +10 %; money: USD/month).

    ``verdict``, ``change_ratio``, ``ci_low``, ``ci_high``, ``confidence`` are the last
    verification's (None: never verified). ``usd_per_month_before`` / ``_after`` are the
    class's spend over the baseline / verification window; ``usd_per_month_change`` their
    difference (negative: cheaper).
    """

    id: str
    name: str
    workload_class: str
    lever: str
    notes: str
    status: str
    signal: str
    unit: str
    direction: str
    design: str
    started_at: dt.datetime
    ended_at: dt.datetime | None
    expected_impact_ratio: float | None
    verdict: str | None
    change_ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float | None
    verified_at: dt.datetime | None
    looks: int
    effort: str
    lesson: str
    usd_per_month_before: float | None = None
    usd_per_month_after: float | None = None
    usd_per_month_change: float | None = None
    promoted_baseline: str | None = None
    #: What the lever is when ``lever`` is ``other`` (the initiative's ``lever_description``).
    lever_description: str = ""
    #: Why it was promoted without every guard judged (``baseline promote --override-reason``), ``""`` if not.
    promote_override: str = ""
    #: A placebo (A/A) initiative (``initiative start --placebo``): nothing was changed.
    placebo: bool = False

    def as_dict(self) -> dict:
        """JSON form: every field, instants as RFC 3339."""
        out = asdict(self)
        for key in ("started_at", "ended_at", "verified_at"):
            out[key] = rfc3339(out[key]) if out[key] else None
        return out


@dataclass
class Step:
    """One step of a staircase: a baseline of the chain and where it stands."""

    baseline_id: str
    created_at: dt.datetime
    mean: float
    source: str
    initiative: str | None
    step_ratio: float | None
    cumulative_ratio: float | None

    def as_dict(self) -> dict:
        return {**asdict(self), "created_at": rfc3339(self.created_at)}


@dataclass
class Chain:
    """The compounding chain of one (class, signal): steps oldest first (the origin first)."""

    workload_class: str
    signal: str
    unit: str
    direction: str
    steps: list[Step]
    verified_ratio: float | None

    @property
    def cumulative_ratio(self) -> float | None:
        """The last step's ratio to the origin."""
        return self.steps[-1].cumulative_ratio if self.steps else None

    def as_dict(self) -> dict:
        return {"workload_class": self.workload_class, "signal": self.signal, "unit": self.unit, "direction": self.direction,
                "cumulative_ratio": self.cumulative_ratio, "verified_ratio": self.verified_ratio,
                "steps": [s.as_dict() for s in self.steps]}


@dataclass
class Ledger:
    """The ledger as of ``as_of`` (UTC): entries oldest first, chains by (class, signal)."""

    as_of: dt.datetime
    entries: list[Entry]
    chains: list[Chain]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """``{"as_of", "initiatives": [...], "chains": [...], "notes": [...]}``."""
        return {"as_of": rfc3339(self.as_of), "initiatives": [e.as_dict() for e in self.entries],
                "chains": [c.as_dict() for c in self.chains], "notes": self.notes}


def _ratio(new: float, old: float) -> float | None:
    return new / old - 1 if old and math.isfinite(old) and math.isfinite(new) else None


def class_spend(client, workload_class: str, start: dt.datetime, end: dt.datetime) -> float | None:
    """Mean USD/month of the class's cost series over ``[start, end]`` (None: no data).

    ``avg_over_time`` of ``workload_class:obsctl_cost_usd_per_hour:sum{workload_class}``
    over the window, evaluated at its end, summed, times :data:`HOURS_PER_MONTH`.

    Raises:
        PrometheusUnavailable, UsageError: from the client.
    """
    seconds = int(round((end - start).total_seconds()))
    if seconds < 1:
        return None
    series = f'{C.COST_USD_PER_HOUR}{{workload_class="{escape_label_value(workload_class)}",{C.OWN_SERIES}}}'
    answer = client.query(f"sum(avg_over_time({series}[{seconds}s]))", end)
    values = [s.value for s in answer if math.isfinite(s.value)]
    return sum(values) * HOURS_PER_MONTH if values else None


def _entry(spec: Spec, store: Store, i: Initiative, client, notes: list[str]) -> Entry:
    last = i.verifications[-1] if i.verifications else None
    try:
        sig = spec.signal(i.primary_signal)
        unit, direction = sig.unit, sig.direction
    except Exception:  # a signal the spec no longer has: the record still tells its story
        unit, direction = "", "higher_is_better"
    promoted = None
    if i.status == "promoted":
        current = [b for b in store.history(i.workload_class, i.primary_signal) if b.initiative == i.id]
        promoted = current[-1].id if current else None
    entry = Entry(
        id=i.id, name=i.name, workload_class=i.workload_class, lever=i.lever,
        notes=i.notes, status=i.status, signal=i.primary_signal,
        unit=unit, direction=direction, design=i.design, started_at=i.started_at, ended_at=i.ended_at,
        expected_impact_ratio=i.expected_impact_ratio, verdict=last.verdict if last else None,
        change_ratio=last.change_ratio if last else None, ci_low=last.ci_low if last else None,
        ci_high=last.ci_high if last else None, confidence=last.confidence if last else None,
        verified_at=last.verified_at if last else None, looks=len(i.verifications), effort=i.effort, lesson=i.lesson,
        promoted_baseline=promoted, lever_description=i.lever_description, promote_override=i.promote_override, placebo=i.placebo,
    )
    if client is not None and last is not None and i.baseline_id:
        base = store.baseline(i.baseline_id, samples=False)
        before = class_spend(client, i.workload_class, base.window.start, base.window.end)
        after = class_spend(client, i.workload_class, last.window.start, last.window.end)
        entry.usd_per_month_before, entry.usd_per_month_after = before, after
        if before is not None and after is not None:
            entry.usd_per_month_change = after - before
        else:
            notes.append(f"{i.id}: no cost series ({C.COST_USD_PER_HOUR}) for {i.workload_class} in "
                         f"{'the baseline window' if before is None else 'the verification window'}; USD/month n/a")
    return entry


def _chain(spec: Spec, store: Store, workload_class: str, signal: str, promoted: list[Initiative]) -> Chain | None:
    history = store.history(workload_class, signal)
    by_id = {b.id: b for b in history}
    firsts = [i for i in promoted if i.baseline_id in by_id]
    if not firsts:
        return None
    origin = by_id[firsts[0].baseline_id]
    chain: list[Baseline] = [origin] + [b for b in history if b.source == "promoted" and b.created_at > origin.created_at
                                        and b.initiative in {i.id for i in promoted}]
    steps, previous = [], None
    for b in chain:
        steps.append(Step(baseline_id=b.id, created_at=b.created_at, mean=b.stats.mean, source=b.source, initiative=b.initiative,
                          step_ratio=_ratio(b.stats.mean, previous.stats.mean) if previous else None,
                          cumulative_ratio=_ratio(b.stats.mean, origin.stats.mean)))
        previous = b
    verified = 1.0
    for i in promoted:
        change = i.verifications[-1].change_ratio if i.verifications else None
        if change is None or not math.isfinite(change):
            verified = math.nan
            break
        verified *= 1 + change
    return Chain(workload_class=workload_class, signal=signal, unit=origin.unit, direction=origin.direction, steps=steps,
                 verified_ratio=verified - 1 if math.isfinite(verified) else None)


def build_ledger(spec: Spec, store: Store, client=None, classes: list[str] | None = None,
                 as_of: dt.datetime | None = None) -> Ledger:
    """The ledger of ``classes`` (default: every class with an initiative).

    Args:
        client: a :class:`obsctl.promapi.PrometheusClient` for the USD/month figures;
            None leaves them None (``obsctl ledger --no-cost``).
        as_of: the instant the ledger is stamped with (default now, UTC).

    Raises:
        SpecError: an unknown class in ``classes``. StoreError: an unreadable record.
        PrometheusUnavailable: Prometheus unreachable while pricing.
    """
    from obsctl.timeutil import utcnow

    for name in classes or []:
        spec.workload_class(name)
    records = [i for i in store.initiatives() if not classes or i.workload_class in classes]
    records.sort(key=lambda i: (i.started_at, i.id))
    notes: list[str] = []
    entries = [_entry(spec, store, i, client, notes) for i in records]
    chains = []
    pairs = sorted({(i.workload_class, i.primary_signal) for i in records if i.status == "promoted"})
    for workload_class, signal in pairs:
        promoted = [i for i in records if i.status == "promoted" and (i.workload_class, i.primary_signal) == (workload_class, signal)]
        chain = _chain(spec, store, workload_class, signal, promoted)
        if chain is not None:
            chains.append(chain)
    return Ledger(as_of=as_of or utcnow(), entries=entries, chains=chains, notes=notes)


# --- the figure ----------------------------------------------------------------------------


def render_figure(ledger: Ledger) -> bytes:
    """PNG bytes: left, each chain's cumulative change (%) as a staircase over time; right,
    each verified initiative's change with its interval (%), coloured by verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=100)
    try:
        for chain in ledger.chains:
            times = [s.created_at for s in chain.steps] + [ledger.as_of]
            values = [100 * (s.cumulative_ratio or 0.0) for s in chain.steps]
            left.step(times, values + values[-1:], where="post", marker="o", label=f"{chain.workload_class} / {chain.signal}")
        left.axhline(0, color="grey", linewidth=0.8)
        left.set_title("Promoted baselines: cumulative change")
        left.set_ylabel("change vs the chain's origin (%)")
        if ledger.chains:
            left.legend(loc="best", fontsize=8)
        else:
            left.text(0.5, 0.5, "no promoted baseline yet", ha="center", va="center", transform=left.transAxes)
        left.tick_params(axis="x", labelrotation=30)
        verified = [e for e in ledger.entries if e.change_ratio is not None and math.isfinite(e.change_ratio)]
        colours = {"IMPROVED": "tab:green", "REGRESSED": "tab:red", "NO_CHANGE": "tab:blue"}
        for y, e in enumerate(verified):
            x = 100 * e.change_ratio
            if e.ci_low is not None and e.ci_high is not None and math.isfinite(e.ci_low) and math.isfinite(e.ci_high):
                right.errorbar(x, y, xerr=[[x - 100 * e.ci_low], [100 * e.ci_high - x]], fmt="o", capsize=4,
                               color=colours.get(e.verdict or "", "tab:grey"))
            else:
                right.plot(x, y, "o", color=colours.get(e.verdict or "", "tab:grey"))
        right.set_yticks(range(len(verified)), [f"{e.id} ({e.verdict})" for e in verified], fontsize=8)
        right.axvline(0, color="grey", linewidth=0.8)
        right.set_title("Verified effects (last look, with interval)")
        right.set_xlabel("change of the primary signal (%)")
        if not verified:
            right.text(0.5, 0.5, "no verified initiative yet", ha="center", va="center", transform=right.transAxes)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)
