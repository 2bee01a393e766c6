"""Every dashboard query runs against a real Prometheus holding fixture data and the rules.

The fixture (:mod:`support.dashboard_history`: examples/obsctl.yaml's classes and the
canonical GPU metrics) is backfilled from 30 minutes before start-up to three hours after
it, so raw data never runs out under a query; the rules generated from the spec and one
baseline per class x signal are loaded, so the recording-rule based panels have data.
Every query runs at the barrier's pinned instant (:mod:`support.prometheus`), where every
chain of rules has settled. The panels' known answers are checked through promtool in
tests/promtool/test_dashboard_known_answers.py; here the subject is that every panel
query parses, joins and returns data on a live server.
"""

from __future__ import annotations

import json
import time

import pytest

from obsctl.dashboards import build as builder
from support import dashboard_history as D
from support.prometheus import served_history

#: Panels whose query is correctly empty on healthy fixture data (a healthy GPU has no XID
#: series at all), and the review row's
#: panels, which read what obsctl publish pushes (run against a real Prometheus scraping a
#: real Pushgateway in tests/integration/test_publish_live.py).
MAY_BE_EMPTY = {"Failing exporter collectors", "Firing obsctl alerts", "Review: findings", "Review: opportunities (USD/month)",
                "Ledger: verified initiatives (last look's change)", "Baseline age (days)", "XID errors"}
BEFORE, AFTER = 1800, 3 * 3600  # seconds of history before and after start-up
#: $__interval here (Grafana's for a narrow panel): the subquery step of the range panels over
#: recorded series; the barrier waits that long past settling so one step lands on settled samples.
INTERVAL = {"__interval": "1s", "__interval_ms": "1000"}
SUBQUERY_STEP = 1


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashq")
    spec = D.example_spec()
    rules = D.write_rules(tmp / "rules", spec)
    # Where the data lie, not a query time: the rules evaluate live at the server's clock,
    # so the history must cover it; every query reads the barrier's instant inside it.
    start = time.time() - BEFORE
    with served_history(tmp, D.openmetrics(start, (BEFORE + AFTER) // D.STEP + 1), rule_files=rules,
                        evaluation_interval="500ms", settled_for=SUBQUERY_STEP) as served:
        yield served, spec


def _run(served, expr: str, instant: bool) -> list[dict]:
    if instant:
        return served.query(expr)
    return served.query_range(expr, served.instant - 1800, served.instant, D.STEP)


@pytest.mark.parametrize("name", ["obsctl-loop-overview.json", "obsctl-gpu-fleet.json", "obsctl-inference.json",
                                  "obsctl-training.json", "obsctl-cost.json", "obsctl-verification.json"])
def test_every_panel_query_runs_and_returns_data(prometheus, name):
    served, spec = prometheus
    dash = json.loads(builder.build(spec)[name])
    empty = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            if not _run(served, D.substitute(target["expr"], **INTERVAL), target["instant"]) and panel["title"] not in MAY_BE_EMPTY:
                empty.append(f"{panel['title']} / {target['refId']}: {target['expr']}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


@pytest.mark.parametrize("signal", ["tokens_per_second", "usd_per_million_tokens", "gpu_utilization",
                                    "queue_wait_p95_seconds", "request_error_ratio"])
def test_verification_dashboard_queries_return_data(prometheus, signal):
    """Every panel of the verification dashboard, for each primary signal, with a canary row (embed-online) and
    finetune-batch as $control_class."""
    served, spec = prometheus
    dash = json.loads(builder.build(D.verification_spec(spec))["obsctl-verification.json"])
    assert any(p["title"].startswith("embed-online: canary track=canary") for p in dash["panels"])
    empty = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            expr = D.substitute(target["expr"].replace("$signal", signal), **INTERVAL)
            if not _run(served, expr, target["instant"]):
                empty.append(f"{panel['title']} / {target['refId']}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_saturation_and_cost_rules_evaluate_without_errors(prometheus):
    """On real data every saturation, cost, training and signal rule evaluates (no many-to-many join across
    the classes one rule serves, no parse error)."""
    served, _ = prometheus
    mine = [g for g in served.rule_groups() if g["name"].startswith(("obsctl.saturation", "obsctl.cost", "obsctl.training", "obsctl.signals"))]
    assert mine
    bad = [f"{g['name']} {r['name']}: {r.get('lastError')}" for g in mine for r in g["rules"] if r["health"] != "ok"]
    assert not bad, bad
