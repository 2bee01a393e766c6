"""The owner label on firing alerts, through ``promtool test rules`` at a fixed time:
class ``svc`` (owner with a quote and a backslash) runs at half its tokens baseline, so
both its signals regress; class ``other`` has no baseline at all. Expected: the two
regressions of svc labelled with svc's owner, one info ObsctlBaselineMissing for other
(value 2, its two signals) labelled with other's owner, and nothing else."""

from __future__ import annotations

import yaml

from obsctl.rules import generate as gen
from support.promtool import evaluate
from support.rules_fixtures import SPEC, TRICKY, baseline, write_spec

OWNER_SVC, OWNER_OTHER = 'ops "x"\\y', "team-other"
SVC = 'obsctl_tokens_total{job="w",workload="' + TRICKY.replace("\\", "\\\\").replace('"', '\\"') + '"}'


def test_firing_alerts_carry_their_class_owner(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][0]["owner"] = OWNER_SVC
    data["workload_classes"][1]["owner"] = OWNER_OTHER
    data["targets"] = []
    spec = write_spec(tmp_path, data)
    # svc: 750 tokens per 15 s = 50 tokens/s against a baseline of 100 (tolerance 10 %);
    # cost 0.36 USD/h / 3600 / 50 * 1e6 = 2.0 USD/1M tokens against 1.0.
    files, _ = gen.generate(spec, [baseline("svc", "tokens_per_second", 100.0), baseline("svc", "usd_per_million_tokens", 1.0)])
    paths = gen.write(tmp_path / "rules", files)
    inputs = [(SVC, "0+750x80"), ('obsctl_tokens_total{job="w",workload="other"}', "0+1500x80"),
              ('obsctl_node_price_usd_per_hour{job="x"}', "0.36x80"),
              ('up{job="obsctl-exporter",instance="n1"}', "1x80")]  # the exporter is scraped: no ObsctlExporterAbsent
    got = evaluate(tmp_path / "t", paths, inputs, {"alerts": 'ALERTS{alertstate="firing"}'}, "20m")["alerts"]
    fired = sorted((s["alertname"], s["workload_class"], s.get("signal", ""), s["severity"], s.get("owner")) for s, _ in got)
    assert fired == [
        ("ObsctlBaselineMissing", "other", "", "info", OWNER_OTHER),
        ("ObsctlSignalRegression", "svc", "tokens_per_second", "warning", OWNER_SVC),
        ("ObsctlSignalRegression", "svc", "usd_per_million_tokens", "warning", OWNER_SVC),
    ]
    missing = evaluate(tmp_path / "m", paths, inputs, {"m": 'ALERTS_FOR_STATE{alertname="ObsctlBaselineMissing"}'}, "20m")
    assert len(missing["m"]) == 1
    count = evaluate(tmp_path / "c", paths, inputs, {"c": 'count by (workload_class) (obsctl_workload_class_signal_info '
                                                          'unless on(workload_class, signal) workload_class:obsctl_signal_baseline:value)'}, "20m")
    assert sorted((s["workload_class"], v) for s, v in count["c"]) == [("other", 2.0)]
