"""Review state as Prometheus series (``obsctl publish``; why a push: docs/practice.md#publishing).

:func:`collect` turns the spec, the store and (optionally) a review into a fresh
``prometheus_client`` registry of gauges, named in :mod:`obsctl.rules.loop_series`:

- per current baseline: its window's end (where its age starts, as in the review) and the age it may reach (the class's
  cadence: ``review.max_age``, else ``review.stale_periods`` cadence periods), so
  ``ObsctlBaselineStale`` is evaluated by Prometheus itself between publishes;
- per active initiative: its planned end (``ObsctlInitiativeOverdue``);
- per initiative event (start, each look, verdict, promote, close): its time, the series
  the class dashboards' annotations read (value as the time, no Grafana API needed);
- per verified initiative: the last look's change (the loop dashboard's ledger table) and
  its verdict as a state set, 1 for the verdict and 0 for the other four (the rollout
  gates' series, docs/rollouts.md);
- from the review (:func:`obsctl.baselining.practice.review.review`): drifted baselines' change,
  targets' progress and elapsed time, each class's best opportunity in USD/month, and
  the findings counted by (class, signal, kind, severity, owner) (``ObsctlTargetBehind``).

:func:`push` replaces the Pushgateway group ``{job="obsctl-publish", instance=<spec identity>}``
(:func:`grouping_key`: the spec's ``name``, else its file name; HTTP PUT: series of a
finding that went away disappear with the next push), after checking that the group is
not another spec's (:func:`spec_fingerprint`, published as ``obsctl_publish_info``);
:func:`write_textfile` writes the same exposition atomically for node_exporter's textfile
collector. Values are plain numbers: instants in unix seconds, durations in seconds,
ratios 0-1 (0.1 = +10 %), money in USD/month.
"""

from __future__ import annotations

import datetime as dt
import math
import typing
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

from obsctl.baselining.store import ACTIVE_STATUSES, Store
from obsctl.records import Verdict
from obsctl.rules import loop_series as S
from obsctl.spec import CADENCE_SECONDS, Spec

#: The Pushgateway job of the pushed group (its grouping key adds ``instance``).
JOB = "obsctl-publish"
#: The states of the verdict state set (every verdict a look can give).
VERDICTS: tuple[str, ...] = typing.get_args(Verdict)


def _ts(moment: dt.datetime) -> float:
    return moment.timestamp()


def initiative_events(initiative) -> list[dict]:
    """The initiative's events, oldest first: ``{"event", "at" (datetime), "look", "verdict"}``.

    ``start`` at ``started_at``; a ``look`` per verification at its ``verified_at``; the
    ``verdict`` at the last look (the verdict the initiative ended or stands on);
    ``promote`` / ``close`` at ``ended_at``.
    """
    events = [{"event": "start", "at": initiative.started_at, "look": "", "verdict": ""}]
    for n, v in enumerate(initiative.verifications, 1):
        events.append({"event": "look", "at": v.verified_at, "look": str(n), "verdict": v.verdict})
    if initiative.verifications:
        last = initiative.verifications[-1]
        events.append({"event": "verdict", "at": last.verified_at, "look": str(len(initiative.verifications)), "verdict": last.verdict})
    if initiative.ended_at is not None and initiative.status in ("promoted", "closed"):
        last_verdict = initiative.verifications[-1].verdict if initiative.verifications else ""
        events.append({"event": "promote" if initiative.status == "promoted" else "close", "at": initiative.ended_at,
                       "look": "", "verdict": last_verdict})
    return events


def collect(spec: Spec, store: Store, result=None, now: dt.datetime | None = None) -> CollectorRegistry:
    """A fresh registry holding the review state.

    Args:
        result: a :class:`obsctl.baselining.practice.review.ReviewResult` (None: only what the
            store says; no drift, target, opportunity or findings series).
        now: the publishing instant (default: now, UTC).

    Raises:
        StoreError: an unreadable record.
    """
    from obsctl.baselining.practice.review import max_age_seconds, planned_end
    from obsctl.timeutil import utcnow

    registry = CollectorRegistry(auto_describe=True)
    ident = ["workload_class", "signal"]
    created = Gauge(S.REVIEW_BASELINE_END, "End of the current baseline's window, where its age starts (unix s).", ident,
                    registry=registry)
    max_age = Gauge(S.REVIEW_BASELINE_MAX_AGE, "Age the current baseline may reach before it is stale (s).", ident, registry=registry)
    due = Gauge(S.REVIEW_INITIATIVE_DUE, "Planned end of an active initiative (unix s).",
                ["workload_class", "initiative", "lever"], registry=registry)
    events = Gauge(S.INITIATIVE_EVENT, "Time of an initiative event (unix s).",
                   ["workload_class", "initiative", "lever", "event", "look", "verdict"], registry=registry)
    ledger = Gauge(S.LEDGER_CHANGE, "Last look's relative change of the primary signal (ratio).",
                   ["workload_class", "initiative", "lever", "signal", "verdict", "status"], registry=registry)
    verdicts = Gauge(S.INITIATIVE_VERDICT, "The last look's verdict (state set: 1 for the verdict, 0 for the others).",
                     ["workload_class", "initiative", "lever", "verdict"], registry=registry)
    published = Gauge(S.REVIEW_PUBLISHED, "When this state was published (unix s).", registry=registry)
    cadences = dict(result.cadences) if result is not None else {}
    classes = {wc.name: wc for wc in spec.workload_classes}
    for b in store.current_baselines():
        if b.workload_class not in classes:
            continue
        cadence = cadences.get(b.workload_class) or classes[b.workload_class].cadence or spec.cadence
        created.labels(b.workload_class, b.signal).set(_ts(b.window.end))  # one age: from the window's end (review.py too)
        max_age.labels(b.workload_class, b.signal).set(max_age_seconds(spec, CADENCE_SECONDS[cadence]))
    for i in store.initiatives():
        if i.workload_class not in classes:
            continue
        if i.status in ACTIVE_STATUSES:
            due.labels(i.workload_class, i.id, i.lever).set(_ts(planned_end(spec, i)))
        for e in initiative_events(i):
            events.labels(i.workload_class, i.id, i.lever, e["event"], e["look"], e["verdict"]).set(_ts(e["at"]))
        last = i.verifications[-1] if i.verifications else None
        if last is not None and last.change_ratio is not None and math.isfinite(last.change_ratio):
            ledger.labels(i.workload_class, i.id, i.lever, i.primary_signal, last.verdict, i.status).set(last.change_ratio)
        if last is not None:
            for state in VERDICTS:
                verdicts.labels(i.workload_class, i.id, i.lever, state).set(1 if state == last.verdict else 0)
    if result is not None:
        _review_series(registry, result)
    published.set(_ts(now or utcnow()))
    return registry


def _review_series(registry: CollectorRegistry, result) -> None:
    drift = Gauge(S.REVIEW_DRIFT, "A drifted baseline's change since it was taken (ratio).", ["workload_class", "signal"], registry=registry)
    progress = Gauge(S.REVIEW_TARGET_PROGRESS, "A target's progress from its anchor to its value (ratio).",
                     ["workload_class", "signal", "owner"], registry=registry)
    elapsed = Gauge(S.REVIEW_TARGET_ELAPSED, "Share of a target's time, anchor to deadline, elapsed (ratio).",
                    ["workload_class", "signal", "owner"], registry=registry)
    opportunity = Gauge(S.REVIEW_OPPORTUNITY, "The class's best opportunity (USD/month).", ["workload_class", "lever"], registry=registry)
    findings = Gauge(S.REVIEW_FINDINGS, "Findings of the last review.", ["workload_class", "signal", "kind", "severity", "owner"],
                     registry=registry)

    def finite(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    for f in result.findings:
        cls, sig, owner = f.workload_class or "", f.signal or "", f.owner or ""
        findings.labels(cls, sig, f.kind, f.severity, owner).inc()
        ev = f.evidence or {}
        if f.kind == "baseline_drifted" and finite(ev.get("change")):
            drift.labels(cls, sig).set(ev["change"])
        if f.kind.startswith("target_") and finite(ev.get("progress")) and finite(ev.get("elapsed")):
            progress.labels(cls, sig, owner).set(ev["progress"])
            elapsed.labels(cls, sig, owner).set(ev["elapsed"])
        if f.kind == "opportunity" and finite(f.usd_per_month):
            opportunity.labels(cls, str(ev.get("lever") or "")).set(f.usd_per_month)


#: The series that says which spec a pushed group belongs to (value 1).
PUBLISH_INFO = "obsctl_publish_info"


def grouping_key(spec: Spec, instance: str | None = None) -> dict[str, str]:
    """``{"instance": ...}``: ``instance`` (``publish --instance``), else the spec's ``name``,
    else the spec file's name without suffix (``obsctl``): one group per spec identity."""
    return {"instance": instance or spec.name or (spec.path.stem if spec.path else "obsctl")}


def spec_fingerprint(spec: Spec) -> str:
    """What tells two specs apart when they publish under one instance: 12 hex digits of
    sha256 over the spec's ``name`` when it has one (a named spec stays itself when it gains
    a class or its store moves), else over its sorted workload class names and store path."""
    import hashlib

    parts = [spec.name] if spec.name else ["", *sorted(c.name for c in spec.workload_classes), str(spec.store_path())]
    text = "\0".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def add_identity(spec: Spec, registry: CollectorRegistry, instance: str | None = None) -> None:
    """Add ``obsctl_publish_info{spec_name, fingerprint} 1`` to ``registry``."""
    Gauge(PUBLISH_INFO, "Which spec published this group (its name and fingerprint).", ["spec_name", "fingerprint"],
          registry=registry).labels(grouping_key(spec, instance)["instance"], spec_fingerprint(spec)).set(1)


def group_owner(gateway: str, instance: str, timeout: float) -> str | None:
    """The fingerprint of the group ``{job=obsctl-publish, instance}`` on the Pushgateway
    (its ``/api/v1/metrics``: ``{"status": "success", "data": [{"labels": {...}, "<metric>":
    {"metrics": [{"labels": {...}}, ...]}}, ...]}``), None when there is no such group or it has none.

    Raises:
        PrometheusUnavailable: the gateway cannot be read, or its answer is not that list
            (one line; the push is refused, since the group it would replace is unknown).
    """
    import requests

    from obsctl.errors import PrometheusUnavailable

    try:
        answer = requests.get(f"{gateway}/api/v1/metrics", timeout=timeout)
        answer.raise_for_status()
        body = answer.json()
    except (requests.RequestException, ValueError) as exc:
        raise PrometheusUnavailable(f"Pushgateway {gateway}: push failed: cannot read its groups ({exc.__class__.__name__})") from None
    groups = body.get("data") if isinstance(body, dict) and body.get("status") == "success" else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("labels", {}), dict) for g in groups):
        raise PrometheusUnavailable(f"Pushgateway {gateway}: push refused: its /api/v1/metrics answer is not the list of groups a "
                                    "Pushgateway serves, so the group this push would replace cannot be checked")
    for group in groups:
        labels = group.get("labels") or {}
        if labels.get("job") == JOB and labels.get("instance") == instance:
            if PUBLISH_INFO not in group:
                return None
            family = group[PUBLISH_INFO]
            metrics = family.get("metrics") if isinstance(family, dict) else None
            for metric in metrics if isinstance(metrics, list) else []:
                labels = metric.get("labels") if isinstance(metric, dict) else None
                found = labels.get("fingerprint") if isinstance(labels, dict) else None
                if isinstance(found, str) and found:
                    return found
            raise PrometheusUnavailable(f"Pushgateway {gateway}: push refused: the group job={JOB} instance={instance} carries "
                                        f"{PUBLISH_INFO} without a readable fingerprint, so whose state it holds cannot be checked")
    return None


def push(spec: Spec, registry: CollectorRegistry, gateway: str, timeout: float = 10.0, instance: str | None = None) -> None:
    """Replace the group ``{job=obsctl-publish, instance}`` (:func:`grouping_key`) on the
    Pushgateway at ``gateway``, unless another spec published it: two specs never
    overwrite each other.

    Raises:
        UsageError: the group holds another spec's state (its ``obsctl_publish_info``
            fingerprint differs): give the spec a ``name`` or ``--instance``.
        PrometheusUnavailable: the gateway is unreachable or refuses the push (one line).
    """
    from prometheus_client import push_to_gateway

    from obsctl.errors import PrometheusUnavailable, UsageError

    key = grouping_key(spec, instance)
    try:
        add_identity(spec, registry, instance)  # every pushed group says whose it is
    except ValueError:
        pass  # the caller added it already
    owner = group_owner(gateway, key["instance"], timeout)
    if owner is not None and owner != spec_fingerprint(spec):
        raise UsageError(f"Pushgateway {gateway}: the group job={JOB} instance={key['instance']} holds another spec's state "
                         f"(fingerprint {owner}, this spec's is {spec_fingerprint(spec)}): pushing would erase it; give this spec "
                         "its own name (name: <team> in the spec) or publish --instance NAME")
    try:
        push_to_gateway(gateway, job=JOB, registry=registry, grouping_key=key, timeout=timeout)
    except OSError as exc:  # urllib's URLError and HTTPError are OSErrors
        reason = getattr(exc, "reason", None) or getattr(exc, "code", None) or exc.__class__.__name__
        raise PrometheusUnavailable(f"Pushgateway {gateway}: push failed: {reason}") from None


def write_textfile(registry: CollectorRegistry, path: Path) -> None:
    """Write the exposition to ``path`` atomically (node_exporter's textfile collector reads ``*.prom``).

    Raises:
        UsageError: ``path`` is not a ``*.prom`` name (node_exporter would never read it), its
            folder does not exist (a mistyped folder is not created), or it exists and is not a
            regular file (a device, a FIFO, a symbolic link: never replaced).
        WriteError: the file could not be written.
    """
    import os
    import stat

    from prometheus_client import generate_latest

    from obsctl.atomicio import atomic_write_bytes
    from obsctl.errors import UsageError

    path = Path(path)
    if path.suffix != ".prom":
        raise UsageError(f"--textfile {str(path)!r}: node_exporter's textfile collector reads only *.prom files")
    if not path.parent.is_dir():
        raise UsageError(f"--textfile {str(path)!r}: the folder {str(path.parent)!r} does not exist (node_exporter's "
                         "--collector.textfile.directory)")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"--textfile {str(path)!r} exists and is not a regular file: refusing to replace it")
    atomic_write_bytes(path, generate_latest(registry))
