"""``obsctl review`` on a planted fleet in a real Prometheus (backfilled history) and a
store seeded through obsctl's own snapshot: each planted condition is reported with its
kind, the idle-GPU opportunity's USD/month matches the planted values to 1 %, findings are
ranked by money, and nothing else is flagged.

The fleet (gauges per replica, 60 s, 13 days ending at ``T``; every class has an owner):

- ``chat``: stationary; targets tps >= 900 (met); idle attributed GPUs (the
  recorded idle-waste series, varying) and a promoted initiative 5 days ago, verified
  +10 % against an expected +25 % (prediction accuracy 0.15) and promoted without a lesson.
- ``embed``: tps drops 15 % 7 days before ``T`` after a baseline at ``T - 8d`` (drifted); a
  relative +6 % target anchored 200 days ago, due in 165 days (behind); a closed initiative.
- ``rank``: no tps baseline (missing); an initiative verified IMPROVED 3 days ago, never
  promoted (unpromoted).
- ``batch``: baselines 11 days old with ``review.max_age: 10d`` (stale); a tps target 3x
  the current level in 60 days (unrealistic); an open initiative past its 6 h plan (overdue).
- ``vision``: a third replica from ``T - 5d`` (population changed on both signals); a +50 %
  target on a utilization ratio of 0.8 (impossible: 1.2).
- cluster: unattributed GPUs (a smaller opportunity, for the ranking).
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.practice import targets as target_rules
from obsctl.baselining.snapshot import SnapshotRequest, snapshot
from obsctl.baselining.store import Store
from obsctl.cli import cli
from obsctl.promapi import PrometheusClient
from obsctl.records import Initiative, VerificationResult
from obsctl.spec import load_spec
from support.prometheus import served_history

STEP = 60
DAY = 86400
TPS, UTIL = "obsctl_planted_tokens_per_second", "obsctl_planted_gpu_utilization_ratio"
IDLE = "workload_class:obsctl_idle_waste_usd_per_hour:sum"
COST = "workload_class:obsctl_cost_usd_per_hour:sum"
UNATTRIBUTED = "cluster:obsctl_unattributed_waste_usd_per_hour:sum"
CLASSES = ("chat", "embed", "rank", "batch", "vision")
#: A fixed "now" for the fleet (2026-12-01T06:40:00Z), not the wall clock: its review instant ``T`` is 05:00 that day.
FLEET_NOW = 1_796_107_200


class Fleet:
    """What was planted: ``T`` (unix s, the review instant), the series and the idle values."""

    def __init__(self, now: float):
        self.T = int(now // 3600) * 3600 - 3600
        self.start = self.T - 13 * DAY
        self.times = np.arange(self.start, self.T + 1, STEP)
        rng = np.random.default_rng(20260501)
        self.series: dict[tuple[str, tuple], np.ndarray] = {}
        for cls in CLASSES:
            for replica in ("a", "b", "c"):
                n = self.times.size
                tps = 500 * (1 + _ar1(rng, n, 0.9, 0.02))
                util = 0.8 * (1 + _ar1(rng, n, 0.9, 0.01))
                present = np.ones(n, bool)
                if replica == "c":
                    if cls != "vision":
                        continue
                    present = self.times > self.T - 5 * DAY
                if cls == "vision":  # three replicas share the same total after the third joins
                    tps = np.where(self.times > self.T - 5 * DAY, tps * 2 / 3, tps)
                if cls == "embed":
                    tps = np.where(self.times > self.T - 7 * DAY, tps * 0.85, tps)
                labels = (("gpu_model", "NVIDIA H100 80GB HBM3"), ("instance", f"{cls}-{replica}"), ("workload", cls))
                self.series[(TPS, labels)] = np.where(present, tps, np.nan)
                self.series[(UTIL, labels)] = np.where(present, util, np.nan)
        hours = (self.times - self.start) / 3600
        self.idle = 4.1 + 2.0 * np.sin(2 * math.pi * hours / 24) + 0.5 * (hours % 7 < 1)
        self.unattributed = np.full(self.times.size, 1.2)
        self.cost = np.full(self.times.size, 20.0)

    def idle_usd_per_month(self) -> float:
        """The mean of the planted idle waste over ``(T - 7d, T]`` x 730 h."""
        keep = (self.times > self.T - 7 * DAY) & (self.times <= self.T)
        return float(self.idle[keep].mean()) * 730

    def openmetrics(self) -> str:
        lines = []
        for metric in (TPS, UTIL):
            lines.append(f"# TYPE {metric} gauge")
            for (name, labels), values in self.series.items():
                if name != metric:
                    continue
                text = ",".join(f'{k}="{v}"' for k, v in labels)
                lines += [f"{metric}{{{text}}} {v:.6f} {t}" for t, v in zip(self.times, values, strict=True) if np.isfinite(v)]
        for metric, labels, values in ((IDLE, 'workload_class="chat"', self.idle), (COST, 'workload_class="chat"', self.cost),
                                       (UNATTRIBUTED, "", self.unattributed)):
            lines.append(f"# TYPE {metric.replace(':', '_')} gauge")
            lines += [f"{metric}{{{labels}}} {v:.6f} {t}" for t, v in zip(self.times, values, strict=True)]
        lines.append("# EOF")
        return "\n".join(lines) + "\n"


def _ar1(rng, n: int, phi: float, sd: float) -> np.ndarray:
    e = rng.normal(0, sd * math.sqrt(1 - phi * phi), n)
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def _at(fleet: Fleet, offset_days: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(fleet.T + offset_days * DAY, dt.UTC)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    fleet = Fleet(FLEET_NOW)
    work = tmp_path_factory.mktemp("review-fleet")
    with served_history(work / "prom", fleet.openmetrics()) as served:
        spec_path = work / "obsctl.yaml"
        spec_path.write_text(yaml.safe_dump(_spec(served.url, fleet)))
        spec = load_spec(spec_path)
        _seed(spec, fleet)
        yield fleet, spec_path, spec


def _spec(url: str, fleet: Fleet) -> dict:
    deadline = lambda days: _at(fleet, days).date().isoformat()  # noqa: E731
    return {
        "prometheus": {"url": url}, "store": "store", "cadence": "weekly",
        "review": {"max_age": "10d", "folder": "reviews"},
        "verification": {"step": "60s", "window": "1d", "memory_history": "1d"},
        "workload_classes": [{"name": c, "kind": "training" if c == "batch" else "inference", "selector": {"workload": c},
                              "owner": f"team-{c}"} for c in CLASSES],
        "signals": [
            {"name": "tps", "category": "throughput", "query": f"sum({TPS}{{$selector}})", "unit": "tokens/s",
             "direction": "higher_is_better"},
            {"name": "util", "category": "utilization", "query": f"avg({UTIL}{{$selector}})", "unit": "ratio",
             "direction": "higher_is_better"},
        ],
        "targets": [
            {"workload_class": "chat", "signal": "tps", "absolute": 900, "driver": "capacity", "deadline": deadline(90)},
            {"workload_class": "embed", "signal": "tps", "relative": 0.06, "driver": "Q3 <plan>", "deadline": deadline(165)},
            {"workload_class": "batch", "signal": "tps", "absolute": 3000, "driver": "launch", "deadline": deadline(60)},
            {"workload_class": "vision", "signal": "util", "relative": 0.5, "driver": "efficiency", "deadline": deadline(120)},
        ],
    }


def _seed(spec, fleet: Fleet) -> None:
    client, store = PrometheusClient.from_spec(spec), Store(spec.store_path())
    for classes, signals, end in ((["chat"], None, -3), (["embed"], None, -8), (["rank"], ["util"], -3), (["batch"], None, -11),
                                  (["vision"], None, -6)):
        report = snapshot(spec, client, store, SnapshotRequest(classes, signals, "1d", _at(fleet, end)))
        assert len(report.stored) == len(signals or ["tps", "util"]), [o.reason for o in report.outcomes]
    embed = store.current_baseline("embed", "tps", samples=False)
    for t in spec.targets:
        when = _at(fleet, -1)
        if t.workload_class == "embed":
            target_rules.save(store, target_rules.TargetRecord(
                workload_class="embed", signal="tps", relative=t.relative, deadline=t.deadline, anchor_baseline_id=embed.id,
                anchor_value=1000.0, anchored_at=_at(fleet, -200), reviewed_at=when))
        else:
            target_rules.mark_reviewed(store, t, when)

    def initiative(iid, cls, status, started, **extra):
        b = store.current_baseline(cls, "util", samples=False)
        store.add_initiative(Initiative(id=iid, name=iid, lever="batch-size", workload_class=cls, primary_signal="tps",
                                        baseline_id=b.id, started_at=_at(fleet, started), status="open", **extra))
        if status != "open":
            i = store.initiative(iid)
            store.save_initiative(i.model_copy(update={"status": status}))

    verified = VerificationResult(verdict="IMPROVED", primary_verdict="IMPROVED", baseline_id="x", signal="tps",
                                  window=_window(fleet), baseline_mean=1000, window_mean=1100, change_ratio=0.1, ci_low=0.05,
                                  ci_high=0.15, confidence=0.95, verified_at=_at(fleet, -2))
    initiative("chat-promoted", "chat", "promoted", -5, verifications=[verified], expected_impact_ratio=0.25)
    initiative("embed-closed", "embed", "closed", -10)
    initiative("rank-unpromoted", "rank", "verified", -3, verifications=[verified])
    initiative("batch-overdue", "batch", "open", -2, planned_window_seconds=6 * 3600)
    initiative("vision-closed", "vision", "closed", -4)


def _window(fleet):
    from obsctl.records import Window

    return Window(start=_at(fleet, -3), end=_at(fleet, -2), step_seconds=60)


EXPECTED = {
    ("target_met", "chat", "tps"), ("opportunity", "chat", None),
    ("lesson_missing", "chat", "tps"), ("prediction_accuracy", "chat", None),
    ("baseline_drifted", "embed", "tps"), ("target_behind", "embed", "tps"),
    ("baseline_missing", "rank", "tps"), ("initiative_unpromoted", "rank", "tps"),
    ("baseline_stale", "batch", "tps"), ("baseline_stale", "batch", "util"), ("target_unrealistic", "batch", "tps"),
    ("initiative_overdue", "batch", "tps"),
    ("population_changed", "vision", "tps"), ("population_changed", "vision", "util"), ("target_impossible", "vision", "util"),
    ("opportunity", None, None),
    # No saturation state series in the fleet: every class's throughput may be demand.
    *(("saturation_unknown", c, None) for c in CLASSES),
}


def _run(spec_path, *args):
    return CliRunner().invoke(cli, ["review", "--spec", str(spec_path), *args], catch_exceptions=False)


def test_review_reports_each_planted_condition_and_nothing_else(planted):
    fleet, spec_path, _spec_ = planted
    result = _run(spec_path, "--as-of", _at(fleet, 0).isoformat(), "--output", "json")
    assert result.exit_code == 10, result.output
    doc = json.loads(result.stdout)
    assert doc["as_of"] == _at(fleet, 0).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Progress on stderr, one line per class in review order, each with its finding count.
    n = len(doc["classes"])
    assert result.stderr.splitlines() == [
        f"[{k}/{n}] {c} ... {sum(f['workload_class'] == c for f in doc['findings'])} finding"
        + ("" if sum(f["workload_class"] == c for f in doc["findings"]) == 1 else "s")
        for k, c in enumerate(doc["classes"], start=1)]
    found = [(f["kind"], f["workload_class"], f["signal"]) for f in doc["findings"]]
    assert sorted(found, key=str) == sorted(EXPECTED, key=str), json.dumps(doc["findings"], indent=1)[:6000]
    by = {(f["kind"], f["workload_class"], f["signal"]): f for f in doc["findings"]}
    idle = by[("opportunity", "chat", None)]
    assert idle["usd_per_month"] == pytest.approx(fleet.idle_usd_per_month(), rel=0.01)
    assert idle["evidence"]["lever"] == "right-sizing"
    assert by[("opportunity", None, None)]["usd_per_month"] == pytest.approx(1.2 * 730, rel=0.01)
    # Ranked by money: the two priced findings first, the larger one leading.
    assert [f["usd_per_month"] for f in doc["findings"][:2]] == sorted([f["usd_per_month"] for f in doc["findings"][:2]], reverse=True)
    assert all(f["usd_per_month"] is None for f in doc["findings"][2:])
    drift = by[("baseline_drifted", "embed", "tps")]["evidence"]
    assert drift["change_ratio"] == pytest.approx(-0.15, abs=0.02) and drift["ci_high"] < 0
    # The cycle is read from what Prometheus holds before the review period (13 days of
    # series, the period the last 7): 6 days, the baseline included; a weekly cycle cannot
    # be known from them and the finding says so.
    assert drift["cycle_history_seconds"] == pytest.approx(6 * DAY, abs=3600)
    assert drift["weekly_cycle_known"] is False and "before the review period" in drift["cycle_note"]
    assert by[("target_impossible", "vision", "util")]["severity"] == "critical"
    assert by[("target_unrealistic", "batch", "tps")]["evidence"]["required_per_quarter"] > 0.30
    assert by[("population_changed", "vision", "tps")]["evidence"]["changes"] == ["replicas 2 -> 3"]
    accuracy = by[("prediction_accuracy", "chat", None)]["evidence"]
    assert accuracy["count"] == 1 and accuracy["mean_absolute_error"] == pytest.approx(0.15)
    for f in doc["findings"]:
        assert f["action"] and "\n" not in f["action"] and f["severity"] in ("info", "warning", "critical")


def test_review_of_one_class_and_fail_on(planted):
    fleet, spec_path, _ = planted
    chat = _run(spec_path, "--as-of", _at(fleet, 0).isoformat(), "--class", "chat", "--output", "json")
    assert chat.exit_code == 0, chat.output  # a met target, an opportunity and the look back are info
    assert {f["kind"] for f in json.loads(chat.stdout)["findings"]} == {"target_met", "opportunity", "lesson_missing", "prediction_accuracy",
                                                                        "saturation_unknown"}
    strict = _run(spec_path, "--as-of", _at(fleet, 0).isoformat(), "--class", "chat", "--fail-on", "info")
    assert strict.exit_code == 10 and "opportunity chat" in strict.output


def test_review_write_leaves_an_escaped_dated_document(planted):
    fleet, spec_path, _ = planted
    result = _run(spec_path, "--as-of", _at(fleet, 0).isoformat(), "--class", "embed", "--write")
    assert result.exit_code == 10, result.output
    doc = spec_path.parent / "reviews" / f"review-{_at(fleet, 0).date().isoformat()}.md"
    text = doc.read_text()
    assert "baseline\\_drifted" in text or "baseline_drifted" in text
    assert "team-embed" in text and "<" not in text.replace("\\<", "")  # untrusted text Markdown-escaped: no raw HTML


def test_review_unreachable_prometheus_is_exit_3(planted, tmp_path):
    _, spec_path, _ = planted
    data = yaml.safe_load(spec_path.read_text())
    data["prometheus"] = {"url": "http://127.0.0.1:9", "timeout_seconds": 1}
    data["store"] = str(spec_path.parent / "store")
    bad = tmp_path / "obsctl.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(cli, ["review", "--spec", str(bad)])
    assert result.exit_code == 3 and result.output.count("\n") <= 1, result.output
