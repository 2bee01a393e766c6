"""The rollout gates of deploy/rollouts against real parts: a canary verified by a real
``obsctl verify`` (the AnalysisTemplate Job's own command, a subprocess) on a backfilled
Prometheus, its verdict published by ``obsctl publish`` through a real Pushgateway into a
second real Prometheus, and the gates' queries and conditions read there.

History (15 s step, 26 h ending 10 minutes before a fixed instant; the change at ``t_c``, one
hour before the end), metric ``obsctl_synthetic_rollout_tokens_per_second`` with two tracks
per class (``track="stable"`` / ``track="canary"``) sharing a +-30 % daily cycle, each with
its own AR(1) noise (0.5 %): class ``canary-up``'s canary track +15 % from ``t_c``,
``canary-down``'s -15 %. Both are judged with the ``canary`` design over the initiative's
planned window (1 h from ``t_c``): IMPROVED and REGRESSED, their exit codes 0 and 12.

The other verdicts (NO_CHANGE, INCONCLUSIVE, NO_DATA) are store records, one class
each (support.ledger_store's way: a VerificationResult on an initiative), as what
the gates read is the published state set, not how the verdict was reached.

Controllers do not run here: their evaluation is support.rollouts (Argo's EvaluateResult and
Prometheus result, Flagger's value and threshold check, a Job's end under its podFailurePolicy).
Flagger's webhook command runs as the load tester runs it (``bash -c``), with curl and jq.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from obsctl.baselining.store import Store
from obsctl.baselining.verify import VERDICT_EXIT_CODES
from obsctl.records import Initiative, Statistics, VerificationResult, Window
from support import rollouts as R
from support.prometheus import Served, scraped, served_history
from support.servers import Prometheus, Pushgateway, free_port
from support.store_records import T0, make_baseline

ROLLOUTS = R.CRD_DIR.parents[2] / "deploy" / "rollouts"
STEP, HOUR, DAY = 15, 3600, 86400
METRIC = "obsctl_synthetic_rollout_tokens_per_second"
#: The history ends 10 minutes before this instant (2026-12-01T06:40:00Z).
HISTORY_NOW = 1_796_107_200
GAIN = {"canary-up": 0.15, "canary-down": -0.15}
SYNTHETIC = {"synthetic-no-change": "NO_CHANGE", "synthetic-inconclusive": "INCONCLUSIVE", "synthetic-no-data": "NO_DATA"}


def _ar1(rng, n, sd=0.005, phi=0.8):
    out, e = np.empty(n), 0.0
    for i in range(n):
        e = phi * e + rng.normal(0.0, sd * math.sqrt(1 - phi * phi))
        out[i] = e
    return out


class History:
    def __init__(self, now: float):
        self.end = int((now - 600) // STEP * STEP)
        self.t_c = self.end - HOUR
        stamps = np.arange(self.end - 26 * HOUR, self.end + 1, STEP)
        rng = np.random.default_rng(20261205)
        cyc = 1 + 0.3 * np.sin(2 * np.pi * stamps / DAY)
        after = stamps > self.t_c
        self.series = {}
        for cls, gain in GAIN.items():
            for track, g in (("stable", 0.0), ("canary", gain)):
                y = 500.0 * cyc * np.exp(_ar1(rng, stamps.size)) * np.where(after, 1 + g, 1.0)
                self.series[(cls, track)] = dict(zip(stamps.tolist(), np.round(y, 6).tolist(), strict=True))

    def iso(self, ts: float) -> str:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def openmetrics(self) -> str:
        lines = [f"# TYPE {METRIC} gauge", f"# HELP {METRIC} Synthetic throughput for the rollout gate tests."]
        for (cls, track), values in self.series.items():
            lines += [f'{METRIC}{{job="rollout",workload="{cls}",track="{track}"}} {v!r} {t}' for t, v in sorted(values.items())]
        return "\n".join(lines + ["# EOF"]) + "\n"

    def expected_change(self, cls: str) -> float:
        """The canary design's effect over [t_c, end]: exp(mean log(T/C)) - 1."""
        t = np.array([v for s, v in sorted(self.series[(cls, "canary")].items()) if self.t_c < s <= self.end])
        c = np.array([v for s, v in sorted(self.series[(cls, "stable")].items()) if self.t_c < s <= self.end])
        return math.exp(np.mean(np.log(t) - np.log(c))) - 1


def _load(path):
    (obj,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return obj


def _obsctl(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obsctl", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _synthetic_verdicts(store: Store) -> None:
    """An initiative per verdict of SYNTHETIC, each with one look, on a class of its own name."""
    stats = Statistics(sample_count=240, mean=1000.0, median=1000.0, p5=1000.0, p95=1000.0, stddev=1.0, batch_means=[1000.0] * 4)
    for n, (iid, verdict) in enumerate(SYNTHETIC.items()):
        store.save_baseline(make_baseline(iid, "tokens_per_second", 1000.0, T0))
        base = store.current_baseline(iid, "tokens_per_second")
        start = T0 + dt.timedelta(hours=n + 1)
        result = VerificationResult(
            verdict=verdict, primary_verdict=verdict, baseline_id=base.id, signal="tokens_per_second",
            window=Window(start=start, end=start + dt.timedelta(hours=1), step_seconds=15), baseline_mean=1000.0,
            window_mean=1000.0, change_ratio=0.0, ci_low=-0.05, ci_high=0.05, confidence=0.95, window_stats=stats,
            population=base.population, query=base.query, verified_at=start + dt.timedelta(hours=1), reason="test")
        store.add_initiative(Initiative(id=iid, name=iid, lever="batch-size", workload_class=iid,
                                        primary_signal="tokens_per_second", baseline_id=base.id, started_at=start,
                                        status="verified", verifications=[result]))


@pytest.fixture(scope="module")
def gates(tmp_path_factory):
    """Verified canaries and synthetic verdicts, published: what the gates see, and the Job runs."""
    work = tmp_path_factory.mktemp("rollout-gates")
    hist = History(HISTORY_NOW)
    with served_history(work / "history", hist.openmetrics()) as history:
        spec_path = work / "obsctl.yaml"
        classes = [*GAIN, *SYNTHETIC]
        spec_path.write_text(yaml.safe_dump({
            "version": 1, "prometheus": {"url": history.url, "timeout_seconds": 20}, "store": str(work / "store"),
            "workload_classes": [{"name": c, "kind": "inference", "selector": {"job": "rollout", "workload": c}} for c in classes],
            "signals": [{"name": "tokens_per_second", "category": "throughput", "query": f"sum({METRIC}{{$selector}})",
                         "unit": "tokens/s", "direction": "higher_is_better"}],
            "verification": {"window": "1h", "step": "15s", "confidence": 0.95, "min_effect_ratio": 0.02},
            "comparison": {"classes": {c: {"design": "canary", "variant": {"label": "track", "control": "stable", "treatment": "canary"}}
                                       for c in GAIN}},
        }, sort_keys=False))
        job_template = _load(ROLLOUTS / "argo" / "analysistemplate-verify-job.yaml")
        (metric,) = job_template["spec"]["metrics"]
        job = metric["provider"]["job"]["spec"]
        (container,) = job["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        env.update(OBSCTL_SPEC=str(spec_path), HOME=str(work), MPLCONFIGDIR=str(work / "matplotlib"))
        runs = {}
        for cls in GAIN:
            started = _obsctl(["initiative", "start", "--spec", str(spec_path), "--name", f"canary {cls}", "--lever", "batch-size",
                               "--class", cls, "--signal", "tokens_per_second", "--design", "canary",
                               "--started-at", hist.iso(hist.t_c), "--output", "json"])
            assert started.returncode == 0, started.stderr
            iid = json.loads(started.stdout)["id"]
            argv = [R.render(a, args={"initiative": iid}) for a in container["command"]]
            assert argv[0] == "obsctl"
            ran = _obsctl(argv[1:], env=env)  # the Job's container, as it runs: obsctl verify --initiative ID
            runs[cls] = {"initiative": iid, "exit_code": ran.returncode, "output": ran.stdout + ran.stderr,
                         "phase": R.argo_job_phase(R.job_outcome(job, container["name"], ran.returncode))}
        _synthetic_verdicts(Store(work / "store"))

    gateway = Pushgateway(work / "pgw")
    prom = Prometheus(work / "prom", scrape_interval="1s", port=free_port())
    try:
        gateway.start()
        prom.scrape_targets = {"pushgateway": [gateway.address]}
        prom.scrape_options = {"pushgateway": {"honor_labels": True}}
        prom.start()
        published = _obsctl(["publish", "--spec", str(spec_path), "--no-review", "--pushgateway", gateway.url])
        assert published.returncode == 0, published.stderr
        pushed = time.time()  # publish has returned: a lower bound for the scrape that carries the push
        served = Served(prom.url, instant=scraped(prom.url, after=pushed))
        yield {"hist": hist, "runs": runs, "served": served, "store": Store(work / "store")}
    finally:
        prom.stop()
        gateway.stop()


def test_the_jobs_verdict_reaches_the_rollouts_condition(gates):
    """The Job's real verify: the canary's +15 % is IMPROVED (exit 0, the Job completes, Argo's
    measurement is Successful); the -15 % is REGRESSED (exit 12, the Job fails: Failed)."""
    runs, hist = gates["runs"], gates["hist"]
    assert hist.expected_change("canary-up") == pytest.approx(0.15, abs=0.01)
    assert hist.expected_change("canary-down") == pytest.approx(-0.15, abs=0.01)
    up, down = runs["canary-up"], runs["canary-down"]
    assert up["exit_code"] == VERDICT_EXIT_CODES["IMPROVED"] and up["output"].startswith("IMPROVED"), up["output"]
    assert down["exit_code"] == VERDICT_EXIT_CODES["REGRESSED"] and down["output"].startswith("REGRESSED"), down["output"]
    assert up["phase"] == "Successful" and down["phase"] == "Failed"
    for cls, run in runs.items():  # the look the Job took is the one stored, over the planned window
        (look,) = gates["store"].initiative(run["initiative"]).verifications
        assert look.design == "canary" and look.change_ratio == pytest.approx(hist.expected_change(cls), rel=1e-6)
        assert look.window.start.timestamp() == hist.t_c and look.window.end.timestamp() == hist.end


def _expected(gates) -> dict[str, str]:
    """Initiative -> its last verdict, as stored."""
    out = {run["initiative"]: gates["store"].initiative(run["initiative"]).verifications[-1].verdict for run in gates["runs"].values()}
    return {**out, **SYNTHETIC}


def test_argo_prometheus_gate_reads_the_published_verdict(gates):
    template = _load(ROLLOUTS / "argo" / "analysistemplate-verdict.yaml")
    (metric,) = template["spec"]["metrics"]
    defaults = {a["name"]: a["value"] for a in template["spec"]["args"] if "value" in a}
    want = {"IMPROVED": "Successful", "REGRESSED": "Failed", "NO_CHANGE": "Failed", "INCONCLUSIVE": "Inconclusive",
            "NO_DATA": "Inconclusive"}
    expected = _expected(gates)
    assert sorted(expected.values()) == sorted(want)  # every verdict once
    for iid, verdict in [*expected.items(), ("never-verified", None)]:
        query = R.render(metric["provider"]["prometheus"]["query"], args={**defaults, "initiative": iid})
        result = R.prometheus_result(gates["served"].query(query))
        assert R.argo_phase(metric, result) == (want[verdict] if verdict else "Inconclusive"), (iid, verdict, result)
    # A gate that lets a canary that is not worse through: NO_CHANGE is then undecided.
    query = R.render(metric["provider"]["prometheus"]["query"],
                     args={**defaults, "initiative": "synthetic-no-change", "failing-verdicts": "REGRESSED"})
    assert R.argo_phase(metric, R.prometheus_result(gates["served"].query(query))) == "Inconclusive"


def test_flagger_metric_and_promotion_webhook_read_the_published_verdict(gates):
    template = _load(ROLLOUTS / "flagger" / "metrictemplate-verdict.yaml")
    canary = _load(ROLLOUTS / "flagger" / "canary-example.yaml")
    (metric,) = canary["spec"]["analysis"]["metrics"]
    (hook,) = canary["spec"]["analysis"]["webhooks"]
    address, example = template["spec"]["provider"]["address"], metric["templateVariables"]["initiative"]
    cmd = hook["metadata"]["cmd"]
    assert cmd.count(address) == 1 and cmd.count(f'"{example}"') == 1
    have_tools = shutil.which("curl") and shutil.which("jq") and shutil.which("bash")
    values = {"IMPROVED": 1.0, "REGRESSED": -1.0, "NO_CHANGE": -1.0, "INCONCLUSIVE": 0.0, "NO_DATA": 0.0, None: 0.0}
    for iid, verdict in [*_expected(gates).items(), ("never-verified", None)]:
        query = R.render(template["spec"]["query"], variables={**metric["templateVariables"], "initiative": iid})
        value = R.flagger_value(gates["served"].query(query))
        assert value == values[verdict], (iid, verdict)
        assert R.flagger_check(value, metric["thresholdRange"]) == (verdict not in ("REGRESSED", "NO_CHANGE")), iid
        if have_tools:  # the load tester's bash task: exit 0 is HTTP 200, i.e. promote
            script = cmd.replace(address, gates["served"].url).replace(f'"{example}"', f'"{iid}"')
            ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
            assert (ran.returncode == 0) == (verdict == "IMPROVED"), (iid, verdict, ran.stdout, ran.stderr)
