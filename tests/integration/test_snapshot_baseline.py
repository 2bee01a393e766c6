"""snapshot-baseline and the Prometheus API client against a real Prometheus serving
backfilled history (tests/integration/conftest.py); expected statistics are computed
here from the values that were written."""

from __future__ import annotations

import datetime as dt
import json
import statistics

import pytest
from click.testing import CliRunner

from obsctl.baselining.commands.cli import snapshot_baseline
from obsctl.baselining.measure.history import history_step, read_history_at
from obsctl.baselining.store import Store
from obsctl.errors import PrometheusUnavailable, UsageError
from obsctl.promapi import PrometheusClient
from support.servers import free_port


def run(cmd, args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


def test_snapshot_gives_known_statistics(history, loop_spec, tmp_path):
    result = run(snapshot_baseline, ["--spec", loop_spec, "--class", "steady", "--signal", "tokens_per_second",
                                     "--window", "1h", "--end", history.iso(1), "--output", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["stored"] == 1

    expected = history.window("steady", history.at(0), history.at(1))
    assert len(expected) == 240
    b = Store(tmp_path / "store").current_baseline("steady", "tokens_per_second")
    assert b is not None
    assert b.stats.sample_count == 240
    assert b.stats.mean == pytest.approx(sum(expected) / len(expected), rel=1e-12)
    assert b.stats.median == pytest.approx(statistics.median(expected), rel=1e-12)
    cuts = statistics.quantiles(expected, n=20, method="inclusive")  # type-7 percentiles
    assert b.stats.p5 == pytest.approx(cuts[0], rel=1e-12)
    assert b.stats.p95 == pytest.approx(cuts[18], rel=1e-12)
    assert b.stats.stddev == pytest.approx(statistics.stdev(expected), rel=1e-9)
    by_hand = [sum(expected[j * 24:(j + 1) * 24]) / 24 for j in range(10)]
    assert b.stats.batch_means == pytest.approx(by_hand, rel=1e-12)
    assert [v for _, v in b.samples] == pytest.approx(expected, rel=1e-12)
    assert b.window.start.timestamp() == history.at(0) and b.window.end.timestamp() == history.at(1)
    assert b.query == 'sum(obsctl_synthetic_tokens_per_second{job="synthetic",workload="steady"})'
    assert b.population.series_count == 1
    assert b.population.label_sets == [{"__name__": "obsctl_synthetic_tokens_per_second", "job": "synthetic", "workload": "steady"}]
    assert "[1/1] steady/tokens_per_second ... 240 samples" in result.stderr
    # The window's own stationarity test, stored and shown: the statistics' answer on the same samples and model.
    import numpy as np

    from obsctl.baselining.statistics import stationarity
    from obsctl.baselining.statistics.memory import MemoryModel

    want = stationarity.check_baseline(np.array([t for t, _ in b.samples]), np.array(expected), 15.0,
                                       MemoryModel.from_dict(b.memory.model_dump()))
    assert b.stationarity is not None and b.stationarity.moved == want.moved
    assert b.stationarity.step_p_value == want.step_p and b.stationarity.trend_p_value == want.trend_p
    shown = payload["outcomes"][0]["stationarity"]
    assert shown["moved"] == want.moved and shown["summary"].startswith("stationarity: ")


def test_snapshot_reports_no_data_and_exit_codes(history, loop_spec, tmp_path):
    result = run(snapshot_baseline, ["--spec", loop_spec, "--window", "1h", "--end", history.iso(1)])
    assert result.exit_code == 0, result.output
    assert "missing/tokens_per_second: NO DATA" in result.stdout
    stored = {b.workload_class for b in Store(tmp_path / "store").current_baselines()}
    assert stored == {"steady", "noisy", "vanishing"}

    only_missing = run(snapshot_baseline, ["--spec", loop_spec, "--class", "missing", "--end", history.iso(1)])
    assert only_missing.exit_code == 1
    assert "no baseline stored" in only_missing.stderr
    assert Store(tmp_path / "store").current_baseline("missing", "tokens_per_second") is None


def test_snapshot_bad_flag_and_unknown_class(history, loop_spec):
    bad = run(snapshot_baseline, ["--spec", loop_spec, "--window", "an hour"])
    assert bad.exit_code == 2 and "not a Prometheus duration" in bad.output
    unknown = run(snapshot_baseline, ["--spec", loop_spec, "--class", "nope"])
    assert unknown.exit_code == 2 and "no workload class 'nope'" in unknown.output


def test_query_range_chunks_past_11000_points(history):
    client = PrometheusClient(history.prometheus_url)
    query = 'sum(obsctl_synthetic_tokens_per_second{workload="noisy"})'
    series = client.query_range(query, history.at(0), history.at(2), 0.5)  # 14,401 points: two requests
    assert len(series) == 1
    stamps = [t for t, _ in series[0].values]
    assert len(stamps) == 2 * 3600 * 2 + 1
    assert stamps == sorted(set(stamps))
    values = dict(series[0].values)
    assert values[float(history.at(1))] == history.values["noisy"][history.at(1)]


def test_history_prometheus_holds_less_of_is_read_again_at_the_finest_step(history):
    # Four days asked at 15 s would be read at 30 s (20,000 points at most); Prometheus holds
    # four hours before hour 1, which are read again at 15 s: every sample written, no other.
    client = PrometheusClient(history.prometheus_url)
    query = 'sum(obsctl_synthetic_tokens_per_second{workload="noisy"})'
    window_start = dt.datetime.fromtimestamp(history.at(1), dt.UTC)
    assert history_step(4 * 86400.0, 15.0) == 30.0
    points, step = read_history_at(client, query, window_start, 15.0, 4 * 86400.0)
    written = sorted((float(ts), value) for ts, value in history.values["noisy"].items() if ts < history.at(1))
    assert step == 15.0
    assert points == written
    # Two hours asked at 0.25 s: Prometheus holds all of them, so the one read at 0.5 s stands.
    points, step = read_history_at(client, query, window_start, 0.25, 7200.0)
    assert step == 0.5 and len(points) == 7200 / 0.5 - 1  # the window's own first instant is not history


def test_bad_promql_and_unreachable(history):
    client = PrometheusClient(history.prometheus_url)
    with pytest.raises(UsageError, match="Prometheus rejected the query") as info:
        client.query("sum(rate(x[5m])")
    assert "parse error" in str(info.value)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusUnavailable, match=f"cannot reach Prometheus at {url}"):
        PrometheusClient(url, timeout_seconds=1, attempts=2).query("up")


def test_all_non_finite_query_is_no_data_with_reason(history, loop_spec):
    # sum(x)/0 is +Inf at every instant on a real Prometheus.
    import yaml

    spec = yaml.safe_load(loop_spec.read_text())
    spec["signals"][0]["query"] = "sum(obsctl_synthetic_tokens_per_second{$selector}) / 0"
    loop_spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run(snapshot_baseline, ["--spec", loop_spec, "--class", "steady", "--window", "1h", "--end", history.iso(1), "--output", "json"])
    assert result.exit_code == 1
    outcome = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))["outcomes"][0]
    assert outcome["status"] == "no_data"
    assert outcome["reason"] == "240 samples, all NaN/Inf" and outcome["dropped_non_finite"] == 240


def test_instant_query_result_types_and_range_scalar(history):
    client = PrometheusClient(history.prometheus_url)
    # A range query of a scalar is still a matrix on real Prometheus (so the strict check holds).
    series = client.query_range("scalar(vector(2))", history.at(0), history.at(0) + 60, 15)
    assert [v for _, v in series[0].values] == [2.0] * 5
    assert client.query("vector(3)")[0].value == 3.0
    # obsctl's instant queries always give a vector: a matrix is the server's answer to blame (exit 3).
    with pytest.raises(PrometheusUnavailable, match="answered a matrix to the instant query"):
        client.query("obsctl_synthetic_tokens_per_second[1m]")


def test_a_baseline_whose_mean_is_zero_is_refused_and_nothing_is_written(history, loop_spec, tmp_path):
    # x * 0 is 0 at every instant on a real Prometheus: a baseline every verdict would divide by.
    import yaml

    spec = yaml.safe_load(loop_spec.read_text())
    spec["signals"][0]["query"] = "sum(obsctl_synthetic_tokens_per_second{$selector}) * 0"
    loop_spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run(snapshot_baseline, ["--spec", loop_spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)])
    assert result.exit_code == 1
    refused = [line for line in result.stdout.splitlines() if "REFUSED" in line]
    assert refused == ["steady/tokens_per_second: REFUSED (the mean over the window is 0: a change relative to it has no scale "
                       "(every verdict would read +0.0 %); snapshot a window in which the signal is not 0, or choose a signal "
                       "whose level is not 0 at rest); not stored"]
    assert "no baseline stored" in result.stderr
    store = Store(tmp_path / "store")
    assert store.current_baseline("steady", "tokens_per_second") is None and store.all_baselines() == []
