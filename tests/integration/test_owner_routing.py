"""Owners end to end: the generated rules label each class's alerts with its owner, the
generated Alertmanager route tree sends them to that owner's receiver, and nobody else
hears of them.

Real parts: ``obsctl rules generate`` (a subprocess) writes the rule files and the route
tree; a real Prometheus scrapes a prometheus_client server holding one gauge per class
and evaluates the rules; a real Alertmanager runs the user's base config with the
generated routes merged in (every receiver a path of one webhook server run here). Class
``a`` (owner with a quote and a backslash, so the matcher escaping is on the path) drops
to half its baseline first; class ``b`` (another owner) later; class ``c`` has no owner
and stays healthy.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest
import requests
import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from obsctl.baselining.store import Store
from obsctl.rules.routes import ROUTES_FILE, UNOWNED
from support.polling import wait_until
from support.rules_fixtures import baseline
from support.servers import Alertmanager, Prometheus, free_port
from support.webhook import WebhookReceiver

OWNER_A, OWNER_B = 'team "a"\\x', "team-b"
PATHS = {OWNER_A: "/owner-a", OWNER_B: "/owner-b", UNOWNED: "/default"}
BASELINE = 100.0


def _spec(prom_url: str, store: str) -> dict:
    classes = [{"name": n, "kind": "inference", "selector": {"workload": n}, **({"owner": o} if o else {})}
               for n, o in (("a", OWNER_A), ("b", OWNER_B), ("c", None))]
    signal = {"name": "level", "category": "throughput", "query": "sum(demo_level{$selector})", "unit": "ops/s",
              "direction": "higher_is_better", "tolerance_ratio": 0.1, "alert_for": "1s"}
    return {"prometheus": {"url": prom_url}, "store": store, "workload_classes": classes, "signals": [signal]}


def _regressions(receiver: WebhookReceiver, path: str) -> list[str]:
    return sorted({a["labels"]["workload_class"] for a in receiver.alerts(path)
                   if a["labels"]["alertname"] == "ObsctlSignalRegression"})


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("owner-routing")
    registry = CollectorRegistry()
    level = Gauge("demo_level", "a class's level", ["workload"], registry=registry)
    for name in "abc":
        level.labels(name).set(BASELINE)
    level.labels("a").set(BASELINE / 2)  # class a regressed from the start
    metrics_port = free_port()
    server, thread = start_http_server(metrics_port, addr="127.0.0.1", registry=registry)
    receiver = WebhookReceiver()
    prom = Prometheus(work / "prom", scrape_targets={"demo": [f"127.0.0.1:{metrics_port}"]},
                      scrape_interval="1s", evaluation_interval="1s", port=free_port())
    spec_path = work / "obsctl.yaml"
    spec_path.write_text(yaml.safe_dump(_spec(prom.url, str(work / "store"))))
    store = Store(work / "store")
    for name in "abc":
        store.save_baseline(baseline(name, "level", BASELINE, dt.datetime.now(dt.UTC).isoformat()))
    out = work / "rules"
    result = subprocess.run([sys.executable, "-m", "obsctl", "rules", "generate", "--spec", str(spec_path), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    tree = yaml.safe_load((out / ROUTES_FILE).read_text())
    # The user's own config: a default receiver and fast timers; the generated owner routes
    # go first under its routes, the owner receivers get this test's webhooks.
    receivers = {r["name"]: {**r, "webhook_configs": [{"url": receiver.url(PATHS[r["name"]])}]} for r in tree["receivers"]}
    config = {
        "route": {"receiver": UNOWNED, "group_by": ["alertname", "workload_class", "signal"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h", "routes": tree["route"]["routes"]},
        "receivers": list(receivers.values()),
    }
    am = Alertmanager(work / "am", config=config)
    prom.rule_files = sorted(out.glob("*.yaml"))
    try:
        am.start()
        prom.alertmanager = am.address
        prom.start()
        yield {"receiver": receiver, "level": level, "tree": tree, "am": am}
    finally:
        for stop in (prom.stop, am.stop, receiver.close, server.shutdown):
            stop()


def test_route_tree_has_one_escaped_route_per_owner(stack):
    routes = stack["tree"]["route"]["routes"]
    assert [r["receiver"] for r in routes] == [OWNER_A, OWNER_B]
    assert routes[0]["matchers"] == ['owner="team \\"a\\"\\\\x"']


def test_regression_reaches_its_owner_and_nobody_else(stack):
    receiver, level = stack["receiver"], stack["level"]
    wait_until(lambda: _regressions(receiver, "/owner-a") == ["a"], 90, what=lambda: f"a's regression at /owner-a: {receiver.notifications}")
    alert = next(a for a in receiver.alerts("/owner-a") if a["labels"]["alertname"] == "ObsctlSignalRegression")
    assert alert["labels"]["owner"] == OWNER_A
    level.labels("b").set(BASELINE / 2)
    wait_until(lambda: _regressions(receiver, "/owner-b") == ["b"], 90, what=lambda: f"b's regression at /owner-b: {receiver.notifications}")
    # Alertmanager's own routing of what it holds: each class's alerts sit in groups of its
    # owner's receiver only (a misrouted copy would be a group of another receiver).
    routed: dict[str | None, set[str]] = {}
    for group in requests.get(f"{stack['am'].url}/api/v2/alerts/groups", timeout=10).json():
        for alert in group["alerts"]:
            routed.setdefault(alert["labels"].get("workload_class"), set()).add(group["receiver"]["name"])
    assert routed.get("a") == {OWNER_A} and routed.get("b") == {OWNER_B}, routed
    assert _regressions(receiver, "/owner-a") == ["a"]
    assert _regressions(receiver, "/owner-b") == ["b"]
    assert _regressions(receiver, "/default") == []
    # Nothing of class a anywhere but a's receiver (any alert name), nothing of b but b's.
    assert {x["labels"].get("workload_class") for x in receiver.alerts("/owner-b")} == {"b"}
    assert {x["labels"].get("workload_class") for x in receiver.alerts("/owner-a")} == {"a"}
    assert not [x for x in receiver.alerts("/default") if x["labels"].get("workload_class") in ("a", "b")]
