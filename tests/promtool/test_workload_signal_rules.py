"""Known answers of the rules generated for one SDK-instrumented class over 10 s windows
(:mod:`support.workload_spec`), through ``promtool test rules``: the input series grow at
the rates a steady load would give (one sample a second, as a 1 s scrape records them),
and the expected values follow from those rates, not from the rules: tokens/s is the
counter's slope, USD per million tokens follows from the node price, the p95 queue wait
from histogram_quantile's linear interpolation inside the one bucket every observation
falls in, the error ratio from the two request counters.
"""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from obsctl.exporters.sdk import LATENCY_BUCKETS
from obsctl.rules import generate as gen
from obsctl.spec import load_spec
from support import promtool
from support.promtool import evaluate, one
from support.workload_spec import BASELINE_TOKENS_PER_SECOND, NODE_PRICE_USD_PER_HOUR, SELECTOR, TOLERANCE, baseline, spec_dict

POINTS, EVAL = 121, "1m"
QUEUE_WAIT_SECONDS = 0.3
REQUESTS_PER_SECOND, ERRORS_PER_SECOND = 80.0, 20.0


def _inputs(tokens_per_second: float) -> list[tuple[str, str]]:
    per_second = lambda rate: (lambda i: rate * i)  # a counter sampled every second
    out = [(promtool.series("obsctl_tokens_total", SELECTOR), promtool.values(per_second(tokens_per_second), POINTS)),
           (promtool.series("obsctl_requests_total", {**SELECTOR, "outcome": "error"}), promtool.values(per_second(ERRORS_PER_SECOND), POINTS)),
           (promtool.series("obsctl_requests_total", {**SELECTOR, "outcome": "success"}),
            promtool.values(per_second(REQUESTS_PER_SECOND - ERRORS_PER_SECOND), POINTS)),
           (promtool.series("obsctl_node_price_usd_per_hour", {"job": "obsctl-exporter", "instance": "n1"}),
            promtool.values(NODE_PRICE_USD_PER_HOUR, POINTS))]
    for le in [*LATENCY_BUCKETS, float("inf")]:  # every observation waits QUEUE_WAIT_SECONDS
        rate = REQUESTS_PER_SECOND if le >= QUEUE_WAIT_SECONDS else 0.0
        out.append((promtool.series("obsctl_queue_wait_seconds_bucket", {**SELECTOR, "le": "+Inf" if le == float("inf") else repr(le)}),
                    promtool.values(per_second(rate), POINTS)))
    return out


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workload-rules")
    (tmp / "obsctl.yaml").write_text(yaml.safe_dump(spec_dict("http://127.0.0.1:9090", str(tmp / "store"))))
    spec = load_spec(tmp / "obsctl.yaml")
    created = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    files, _ = gen.generate(spec, [baseline("tokens_per_second", BASELINE_TOKENS_PER_SECOND, created)])
    return tmp, gen.write(tmp / "rules", files)


def _record(name: str, signal: str) -> str:
    return f'{name}{{workload_class="synthetic",signal="{signal}"}}'


def test_recording_rules_give_independently_computed_values(rules):
    tmp, paths = rules
    exprs = {"rate": _record("workload_class:obsctl_tokens:rate10s", "tokens_per_second"),
             "cost": _record("workload_class:obsctl_cost_usd_per_million_tokens:ratio_rate10s", "usd_per_million_tokens"),
             "p95": _record("workload_class:obsctl_queue_wait_seconds:p95_rate10s", "queue_wait_p95_seconds"),
             "errors": _record("workload_class:obsctl_requests_error:ratio_rate10s", "request_error_ratio"),
             "baseline": _record("workload_class:obsctl_signal_baseline:value", "tokens_per_second"),
             "regression": 'ALERTS{alertname="ObsctlSignalRegression"}'}
    got = evaluate(tmp, paths, _inputs(BASELINE_TOKENS_PER_SECOND), exprs, EVAL, interval="1s")
    assert one(got["rate"], "rate") == pytest.approx(BASELINE_TOKENS_PER_SECOND)
    assert one(got["cost"], "cost") == pytest.approx(NODE_PRICE_USD_PER_HOUR / 3600 / BASELINE_TOKENS_PER_SECOND * 1e6)
    upper = min(b for b in LATENCY_BUCKETS if b >= QUEUE_WAIT_SECONDS)
    lower = max(b for b in LATENCY_BUCKETS if b < QUEUE_WAIT_SECONDS)
    assert one(got["p95"], "p95") == pytest.approx(lower + (upper - lower) * 0.95)
    assert one(got["errors"], "errors") == pytest.approx(ERRORS_PER_SECOND / REQUESTS_PER_SECOND)
    assert one(got["baseline"], "baseline") == BASELINE_TOKENS_PER_SECOND
    assert got["regression"] == []  # at the baseline rate, within tolerance


def test_a_slowdown_beyond_the_tolerance_fires_the_regression_alert(rules):
    tmp, paths = rules
    slow = BASELINE_TOKENS_PER_SECOND * (1 - TOLERANCE) * 0.5
    got = evaluate(tmp, paths, _inputs(slow), {"firing": 'ALERTS{alertname="ObsctlSignalRegression",alertstate="firing"}'},
                   EVAL, interval="1s")["firing"]
    assert [(lbl["workload_class"], lbl["signal"]) for lbl, _ in got] == [("synthetic", "tokens_per_second")]
