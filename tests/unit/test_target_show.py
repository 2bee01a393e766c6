"""``obsctl target show`` on a store without Prometheus: the anchored baseline, the current
value (the current baseline), progress from the anchor and the overdue flag.

Known answers by hand: a relative target of +20 % set against a 1000 tokens/s baseline is
1200 tokens/s whatever is promoted later; a promoted 1100 is (1100 - 1000) / (1200 - 1000)
= 50 % of the way. An absolute 2000 target first seen at 1000 and now at 1500 is 50 % too.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import target
from obsctl.baselining.store import Store
from support.store_records import make_baseline

CLASS, SIGNAL = "embed-online", "tokens_per_second"
# The instant every command here runs at: a fixed clock, so a run that crosses midnight
# reads the same days left as one that does not.
NOW = dt.datetime(2026, 12, 5, 23, 59, 30, tzinfo=dt.UTC)
TODAY = NOW.date()


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch):
    import obsctl.timeutil

    monkeypatch.setattr(obsctl.timeutil, "utcnow", lambda: NOW)


def _spec(tmp_path, targets) -> str:
    data = {"store": "store",
            "workload_classes": [{"name": CLASS, "kind": "inference", "selector": {"workload": CLASS}}],
            "signals": [{"name": SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                         "unit": "tokens/s", "direction": "higher_is_better"}],
            "targets": [{"workload_class": CLASS, "signal": SIGNAL, "driver": "capacity plan", **t} for t in targets]}
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _show(spec, output="json"):
    r = CliRunner().invoke(target, ["show", "--spec", spec, "--output", output])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if output == "json" else r.stdout


def _promote(store, mean, days):
    created = NOW - dt.timedelta(days=days)
    return store.save_baseline(make_baseline(cls=CLASS, sig=SIGNAL, mean=mean, created=created))


def test_a_relative_target_stays_anchored_and_progress_counts_from_the_anchor(tmp_path):
    deadline = TODAY + dt.timedelta(days=90)
    spec = _spec(tmp_path, [{"relative": 0.2, "deadline": deadline.isoformat()}])
    store = Store(tmp_path / "store")
    first = _promote(store, 1000.0, days=2)
    [row] = _show(spec)
    assert (row["anchor_baseline_id"], row["anchor_value"], row["target"]) == (first.id, 1000.0, pytest.approx(1200.0))
    assert row["progress"] == 0 and row["met"] is False and row["overdue"] is False

    _promote(store, 1100.0, days=1)
    [row] = _show(spec)
    assert row["anchor_baseline_id"] == first.id and row["target"] == pytest.approx(1200.0)  # not 1100 x 1.2
    assert row["current"] == row["baseline"] == 1100.0
    assert row["progress"] == pytest.approx(0.5) and row["gap"] == pytest.approx(100.0)
    assert 89 < row["days_left"] <= 90 and not row["overdue"]
    text = _show(spec, "text")
    assert f"{CLASS}/{SIGNAL}: baseline 1100 -> target 1200 tokens/s (gap +100, +9.1 %) by {deadline}: capacity plan\n" in text
    assert f"  anchored to {first.id} (1000 tokens/s) since " in text and "current 1100 tokens/s; progress 50 %" in text

    _promote(store, 1250.0, days=0)
    [row] = _show(spec)
    assert row["met"] is True and row["progress"] == pytest.approx(1.25) and " MET\n" in _show(spec, "text")


def test_an_absolute_target_past_its_deadline_is_overdue(tmp_path):
    deadline = TODAY - dt.timedelta(days=3)
    spec = _spec(tmp_path, [{"absolute": 2000, "deadline": deadline.isoformat()}])
    store = Store(tmp_path / "store")
    _promote(store, 1000.0, days=5)
    _show(spec)  # first seen at 1000
    _promote(store, 1500.0, days=1)
    [row] = _show(spec)
    assert (row["target"], row["anchor_value"], row["current"]) == (2000, 1000.0, 1500.0)
    assert row["progress"] == pytest.approx(0.5) and row["overdue"] is True and row["days_left"] < -2
    text = _show(spec, "text")
    assert f"by {deadline}: capacity plan OVERDUE\n" in text and "deadline passed 3 day(s) ago" in text


def test_a_met_target_past_its_deadline_is_not_overdue_and_no_baseline_is_said(tmp_path):
    spec = _spec(tmp_path, [{"absolute": 900, "deadline": (TODAY - dt.timedelta(days=1)).isoformat()}])
    assert _show(spec, "text").startswith(f"{CLASS}/{SIGNAL}: no current baseline (target 900), by ")
    [row] = _show(spec)
    assert row["anchor_baseline_id"] is None and row["progress"] is None and row["overdue"] is True
    _promote(Store(tmp_path / "store"), 1000.0, days=0)
    [row] = _show(spec)
    assert row["met"] is True and row["overdue"] is False and row["anchor_value"] == 1000.0
