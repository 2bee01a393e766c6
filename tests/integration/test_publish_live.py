"""Review state through a real Pushgateway into a real Prometheus: ``obsctl publish``
(a subprocess) pushes the store's state, Prometheus scrapes the gateway, and the
dashboards' queries read it back — the class dashboards' initiative annotations (run as
Grafana runs them: a range query whose values are event times, each distinct value one
point) and the loop dashboard's review and ledger panels.

The store is support.ledger_store's history (two promoted initiatives, one closed) plus
an open initiative whose planned end has passed. Every query reads the instant of the first
scrape of the gateway after the push (:func:`support.prometheus.scraped`).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time

import pytest
import yaml

from obsctl.baselining.practice.publish import collect, initiative_events, push
from obsctl.baselining.practice.review import Finding, ReviewResult
from obsctl.baselining.store import Store
from obsctl.dashboards import inference, loop_overview
from obsctl.records import Initiative
from obsctl.rules.loop_series import INITIATIVE_EVENT, REVIEW_INITIATIVE_DUE
from obsctl.spec import load_spec
from support import ledger_store as L
from support.prometheus import Served, scraped
from support.servers import Prometheus, Pushgateway, free_port
from support.store_records import T0


def _grafana_events(series: list[dict]) -> set[tuple]:
    """Grafana's Prometheus annotations with "series value as timestamp": every sample's
    value (ms) is an event time; equal times of one series merge into one point."""
    out = set()
    for s in series:
        labels = s["metric"]
        for ms in {float(v) for _, v in s["values"]}:
            out.add((labels["initiative"], labels["event"], labels.get("look", ""), labels.get("verdict", ""), ms))
    return out


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    work = tmp_path_factory.mktemp("publish-live")
    gateway = Pushgateway(work / "pgw")
    prom = Prometheus(work / "prom", scrape_interval="1s", port=free_port())
    spec_path = work / "obsctl.yaml"
    spec_path.write_text(yaml.safe_dump({
        "prometheus": {"url": prom.url}, "store": "store",
        "workload_classes": [{"name": L.CLASS, "kind": "inference", "selector": {"workload": L.CLASS}, "owner": "team-search"}],
        "signals": [{"name": L.SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"}]}))
    spec = load_spec(spec_path)
    store = Store(spec.store_path())
    L.build(store, spec)
    store.add_initiative(Initiative(id="late-change", name="late change", lever="scheduling", workload_class=L.CLASS,
                                    primary_signal=L.SIGNAL, baseline_id=store.current_baseline(L.CLASS, L.SIGNAL).id,
                                    started_at=T0 + dt.timedelta(hours=7), planned_window_seconds=3600))
    try:
        gateway.start()
        prom.scrape_targets = {"pushgateway": [gateway.address]}
        prom.scrape_options = {"pushgateway": {"honor_labels": True}}
        prom.start()
        result = subprocess.run([sys.executable, "-m", "obsctl", "publish", "--spec", str(spec_path), "--no-review",
                                 "--pushgateway", gateway.url], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "published" in result.stdout
        pushed = time.time()  # publish has returned: a lower bound for the scrape that carries the push
        served = Served(prom.url, instant=scraped(prom.url, after=pushed))
        assert served.query(INITIATIVE_EVENT), "the pushed events in Prometheus"
        yield {"spec": spec, "store": store, "served": served, "gateway": gateway}
    finally:
        prom.stop()
        gateway.stop()


def test_annotations_show_every_initiative_event(published):
    store, served = published["store"], published["served"]
    (annotation,) = inference.build(published["spec"])["annotations"]["list"]
    assert annotation["useValueForTime"] is True
    expr = annotation["expr"].replace("$workload_class", L.CLASS)
    got = _grafana_events(served.query_range(expr, served.instant - 30, served.instant, 1))
    expected = {(i.id, e["event"], e["look"], e["verdict"], e["at"].timestamp() * 1000)
                for i in store.initiatives() for e in initiative_events(i)}
    assert got == expected
    kinds = sorted(k for _, k, *_ in expected)
    assert kinds.count("start") == 4 and kinds.count("promote") == 2 and kinds.count("close") == 1 and kinds.count("look") == 3


def test_overdue_initiative_and_review_panels(published):
    spec, store, served = published["spec"], published["store"], published["served"]
    due = served.query(REVIEW_INITIATIVE_DUE)
    assert [(s["metric"]["initiative"], float(s["value"][1])) for s in due] == [("late-change", (T0 + dt.timedelta(hours=8)).timestamp())]
    # The review's part, pushed through the Python API to the same group.
    findings = [Finding("target_behind", L.CLASS, L.SIGNAL, "warning", 1200.0, "behind", "act", "finance",
                        {"progress": 0.2, "elapsed": 0.6}),
                Finding("opportunity", L.CLASS, None, "info", 845.5, "idle GPUs", "right-size", "team-search", {"lever": "right-sizing"})]
    result = ReviewResult(as_of=T0 + dt.timedelta(hours=9), classes=[L.CLASS], cadences={L.CLASS: "weekly"}, findings=findings)
    push(spec, collect(spec, store, result), published["gateway"].url)
    at = scraped(served.url, after=time.time())  # the first scrape after the push has returned
    assert served.query("obsctl_review_opportunity_usd_per_month", at=at), "the review series"
    dash = loop_overview.build(spec)
    review_row = [p for p in dash["panels"] if p["type"] != "row"][:4]
    answers = {p["title"]: served.query(p["targets"][0]["expr"], at=at) for p in review_row}
    assert all(answers.values()), answers
    opp = answers["Review: opportunities (USD/month)"]
    assert [(s["metric"]["lever"], float(s["value"][1])) for s in opp] == [("right-sizing", 845.5)]
    ledger = {s["metric"]["initiative"]: float(s["value"][1]) for s in answers["Ledger: verified initiatives (last look's change)"]}
    assert ledger == {"batch-size-32": 0.5, "scheduler-tweak": 0.2, "int8-weights": -0.01}


def test_two_specs_never_overwrite_each_others_group(published, tmp_path):
    # A second team's spec, also called obsctl.yaml (as the default and the CronJob's are),
    # with its own class and store, publishing to the same Pushgateway.
    import requests

    gateway = published["gateway"]

    def groups() -> dict[str, set[str]]:
        data = requests.get(f"{gateway.url}/api/v1/metrics", timeout=10).json()["data"]
        return {g["labels"].get("instance"): {k for k in g if k.startswith("obsctl_")} for g in data
                if g["labels"].get("job") == "obsctl-publish"}

    first = groups()["obsctl"]
    other = tmp_path / "team-b" / "obsctl.yaml"
    other.parent.mkdir()
    doc = {"prometheus": {"url": published["served"].url}, "store": "store",
           "workload_classes": [{"name": "rerank", "kind": "inference", "selector": {"workload": "rerank"}}],
           "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                        "unit": "tokens/s", "direction": "higher_is_better"}]}
    other.write_text(yaml.safe_dump(doc))

    def publish(*extra):
        return subprocess.run([sys.executable, "-m", "obsctl", "publish", "--spec", str(other), "--no-review", "--pushgateway",
                               gateway.url, *extra], capture_output=True, text=True, timeout=120)

    refused = publish()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "instance=obsctl holds another spec's state" in refused.stderr and "Traceback" not in refused.stderr
    assert groups()["obsctl"] == first  # the first team's series are still there

    doc["name"] = "team-b"
    other.write_text(yaml.safe_dump(doc))
    named = publish()
    assert named.returncode == 0, named.stderr
    assert "instance=team-b" in named.stdout
    overridden = publish("--instance", "team-b-canary")
    assert overridden.returncode == 0, overridden.stderr
    after = groups()
    assert after["obsctl"] == first and "obsctl_publish_info" in after["team-b"]
    assert "team-b-canary" in after
    assert publish("--instance", "bad/name").returncode == 2
