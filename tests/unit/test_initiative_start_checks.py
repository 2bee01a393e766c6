"""``initiative start`` refuses what would make its verdicts dishonest, through the CLI on a
store without Prometheus: a start before its baseline (or a guard's baseline) ends, and an
expected impact the planner cannot plan for; each is one line, exit 2, nothing stored."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative
from obsctl.baselining.store import Store
from support.store_records import T0, make_baseline

CLASS, SIGNAL, GUARD = "embed-online", "tokens_per_second", "request_error_ratio"
SPEC = {"store": "store",
        "workload_classes": [{"name": CLASS, "kind": "inference", "selector": {"workload": CLASS}}],
        "signals": [{"name": SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"},
                    {"name": GUARD, "category": "quality", "query": "sum(rate(obsctl_errors_total{$selector}[1m]))",
                     "unit": "1", "direction": "lower_is_better"}]}


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec(tmp_path, guard_end: dt.datetime | None = None) -> tuple[str, Store]:
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    store = Store(tmp_path / "store")
    store.save_baseline(make_baseline(cls=CLASS, sig=SIGNAL, created=T0))
    if guard_end is not None:
        store.save_baseline(make_baseline(cls=CLASS, sig=GUARD, created=guard_end))
    return str(path), store


def _start(spec: str, started: dt.datetime, *extra: str):
    return CliRunner().invoke(initiative, ["start", "--spec", spec, "--name", "kv offload", "--class", CLASS, "--signal", SIGNAL,
                                           "--lever", "batch-size", "--started-at", _iso(started), "--output", "json", *extra])


@pytest.mark.parametrize("before", [dt.timedelta(minutes=30), dt.timedelta(days=20000)])
def test_a_start_before_the_baseline_ends_is_refused(tmp_path, before):
    spec, store = _spec(tmp_path)
    r = _start(spec, T0 - before)
    assert r.exit_code == 2, r.output
    error = json.loads(r.stdout)["error"]
    assert f"ends at {_iso(T0)}, after the start {_iso(T0 - before)}" in error and "--end" in error
    assert store.initiatives() == []
    assert _start(spec, T0).exit_code == 0  # a start at the baseline's end is after it


def test_a_guard_baseline_that_ends_after_the_start_is_refused(tmp_path):
    spec, store = _spec(tmp_path, guard_end=T0 + dt.timedelta(hours=2))
    r = _start(spec, T0 + dt.timedelta(hours=1))
    assert r.exit_code == 2 and f"{CLASS}.{GUARD}." in json.loads(r.stdout)["error"], r.output
    assert store.initiatives() == []


@pytest.mark.parametrize("impact", ["1e200", "-1", "-1e308", "101"])
def test_an_expected_impact_out_of_range_is_one_line(tmp_path, impact):
    spec, store = _spec(tmp_path)
    r = _start(spec, T0 + dt.timedelta(hours=1), "--expected-impact", impact)
    assert r.exit_code == 2, r.output
    assert json.loads(r.stdout)["error"].startswith(f"--expected-impact {float(impact)!r}: give a relative effect other than 0, above -1")
    assert store.initiatives() == []
