"""The review's look back at initiatives: ``prediction_accuracy`` (how far ``--expected-impact``
was from the verified change) and ``lesson_missing`` (ended without a lesson), and
``obsctl initiative lesson``.

Known answers by hand: expected +30 % / verified +10 % and expected -10 % / verified -20 %
give errors +0.20 and +0.10: mean absolute error 0.15, mean error +0.15.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative
from obsctl.baselining.practice import review as rv
from obsctl.baselining.store import Store
from obsctl.records import Initiative, VerificationResult, Window
from support.rules_fixtures import write_spec
from support.store_records import make_baseline

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def _done(iid, expected, change, verdict="IMPROVED", status="promoted", lesson=""):
    v = [VerificationResult(verdict=verdict, primary_verdict=verdict, baseline_id="b", signal="s",
                            window=Window(start=NOW, end=NOW, step_seconds=15), baseline_mean=1, window_mean=1,
                            change_ratio=change, ci_low=None, ci_high=None, confidence=0.95,
                            verified_at=NOW - dt.timedelta(days=2))] if verdict else []
    return Initiative(id=iid, name=iid, lever="batch-size", workload_class="svc", primary_signal="s", baseline_id="b",
                      started_at=NOW - dt.timedelta(days=3), status=status, verifications=v, expected_impact_ratio=expected,
                      lesson=lesson, planned_window_seconds=3600)


def test_prediction_errors_known_answer_over_decisive_verdicts_only():
    out = rv.prediction_errors([
        _done("a", 0.30, 0.10), _done("b", -0.10, -0.20, verdict="REGRESSED", status="closed"),
        _done("c", 0.30, 0.02, verdict="INCONCLUSIVE", status="verified"),  # not verified: left out
        _done("d", None, 0.10),  # no prediction: left out
        _done("e", 0.2, None, verdict=None, status="closed"),  # never verified
    ])
    assert out["count"] == 2 and [p["initiative"] for p in out["initiatives"]] == ["a", "b"]
    assert out["mean_absolute_error"] == pytest.approx(0.15) and out["mean_error"] == pytest.approx(0.15)
    assert [p["error"] for p in out["initiatives"]] == [pytest.approx(0.2), pytest.approx(0.1)]
    assert rv.prediction_errors([_done("d", None, 0.1)]) is None


def test_review_initiatives_flags_missing_lessons_and_reports_accuracy(tmp_path):
    spec = write_spec(tmp_path)
    wc = spec.workload_class("svc")
    initiatives = [_done("promoted-no-lesson", 0.30, 0.10), _done("promoted-taught", None, 0.05, lesson="bigger batches pay"),
                   _done("closed-after-verdict", None, 0.0, verdict="NO_CHANGE", status="closed"),
                   _done("abandoned", None, None, verdict=None, status="closed"),
                   _done("unpromoted", 0.2, 0.2, status="verified")]
    found = {(f.kind, f.summary.split(" ")[0]): f for f in rv._review_initiatives(spec, wc, initiatives, 7 * 86400.0, NOW)}
    lessons = sorted(name for kind, name in found if kind == "lesson_missing")
    assert lessons == ["closed-after-verdict", "promoted-no-lesson"]
    missing = found[("lesson_missing", "promoted-no-lesson")]
    assert missing.severity == "info" and missing.action == "obsctl initiative lesson --initiative promoted-no-lesson --lesson '<what it taught>'"
    unpromoted = found[("initiative_unpromoted", "unpromoted")]
    assert "--lesson '<what it taught>'" in unpromoted.action
    [accuracy] = [f for f in found.values() if f.kind == "prediction_accuracy"]
    # promoted-no-lesson: +0.30 vs +0.10; unpromoted: +0.20 vs +0.20 -> |errors| 0.2 and 0: 0.1.
    assert accuracy.severity == "info" and accuracy.signal is None and accuracy.workload_class == "svc"
    assert accuracy.evidence["count"] == 2 and accuracy.evidence["mean_absolute_error"] == pytest.approx(0.1)
    assert "off by 10.0 % on average over 2 verified initiative(s)" in accuracy.summary
    json.dumps(accuracy.as_dict())  # JSON-ready evidence


def _spec_file(tmp_path):
    data = {"store": "store",
            "workload_classes": [{"name": "embed-online", "kind": "inference", "selector": {"workload": "embed-online"}}],
            "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                         "unit": "tokens/s", "direction": "higher_is_better"}]}
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(data))
    store = Store(tmp_path / "store")
    b = store.save_baseline(make_baseline())
    return str(tmp_path / "obsctl.yaml"), store, b


def test_initiative_lesson_keeps_it_on_an_ended_initiative_only(tmp_path):
    spec, store, b = _spec_file(tmp_path)
    i = store.add_initiative(Initiative(id="kv-20260105", name="kv", lever="batch-size", workload_class="embed-online",
                                        primary_signal="tokens_per_second", baseline_id=b.id, started_at=NOW))
    run = lambda *a: CliRunner().invoke(initiative, ["lesson", "--spec", spec, "--initiative", i.id, *a])  # noqa: E731
    still_open = run("--lesson", "x")
    assert still_open.exit_code == 1 and "is open: give the lesson when it ends" in still_open.stderr, still_open.output
    assert store.initiative(i.id).lesson == ""
    store.save_initiative(store.initiative(i.id).model_copy(update={"status": "closed"}))
    empty = run("--lesson", "  ")
    assert empty.exit_code == 2 and "--lesson must not be empty" in empty.stderr
    ok = run("--lesson", "  queue depth, not batch size, limits it ", "--output", "json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout) == {"initiative": i.id, "status": "closed", "lesson": "queue depth, not batch size, limits it"}
    assert store.initiative(i.id).lesson == "queue depth, not batch size, limits it"
    unknown = CliRunner().invoke(initiative, ["lesson", "--spec", spec, "--initiative", "nope", "--lesson", "x"])
    assert unknown.exit_code == 1 and unknown.stderr.count("\n") == 1
