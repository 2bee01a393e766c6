"""The change's transition: the look-back of PromQL through recording rules, the population
events of raw series, and the judged window's start (known answers, computed by hand)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from obsctl.baselining.measure import transition as T
from obsctl.rules.lookback import Lookback, Rule, lookback, metric_selectors, own_lookback, raw_selectors, recording_rules
from obsctl.spec import load_spec


@pytest.mark.parametrize("query, seconds", [
    ("sum(x)", 0.0),
    ("sum(rate(a_total[5m])) / sum(rate(b_total[1m]))", 300.0),
    ("histogram_quantile(0.95, sum by (le) (rate(h_bucket{job=\"j\"}[2m])))", 120.0),
    ("max_over_time(rate(x_total[5m])[1h:1m])", 3600.0 + 300.0),
    ("max_over_time(deriv(g[10m])[30m:])", 1800.0 + 600.0),
    ("sum(rate(a_total[5m] offset 10m))", 300.0 + 600.0),
    ("x offset -10m", 0.0),
    ('sum(a{path="/x[1h]"})', 0.0),  # a range in a label value is text
    ("avg_over_time(g[90s])", 90.0),
])
def test_own_lookback(query, seconds):
    assert own_lookback(query).seconds == seconds


def test_recording_chain_inherits_the_look_back_of_the_rule_that_records_it():
    rules = [
        Rule("job:tokens:rate5m", 'sum(rate(vllm:generation_tokens_total{model_name="m"}[5m]))', {"workload_class": "a"}),
        Rule("job:tokens:rate5m", "sum(rate(other_total[30m]))", {"workload_class": "b"}),
        Rule("job:tokens:avg1h", "avg_over_time(job:tokens:rate5m[1h])", {}),
    ]
    got = lookback('sum(job:tokens:rate5m{workload_class="a"})', rules)
    assert got.seconds == 300.0  # class a's rule only: class b's 30m range is another series
    assert got.source == "the 5m range of vllm:generation_tokens_total, recorded as job:tokens:rate5m"
    assert lookback("sum(job:tokens:rate5m)", rules).seconds == 1800.0  # no matcher: either rule may feed it
    # two levels: 1h over a series that itself reads 5m (class a) or 30m (class b)
    assert lookback("job:tokens:avg1h", rules).seconds == 3600.0 + 1800.0
    assert lookback('rate(job:tokens:rate5m{workload_class="a"}[1m])', rules).seconds == 60.0 + 300.0
    assert raw_selectors('sum(job:tokens:rate5m{workload_class="a"})', rules) == ['vllm:generation_tokens_total{model_name="m"}']


def test_a_cycle_of_rules_ends():
    rules = [Rule("a:x", "rate(b:x[1m])", {}), Rule("b:x", "rate(a:x[2m])", {})]
    assert lookback("a:x", rules).seconds == 60.0 + 120.0  # a:x reads b:x over 1m, which reads a:x over 2m: each rule once


def test_metric_selectors_skip_functions_grouping_labels_and_numbers():
    q = 'sum by (le, pod) (rate(a_bucket{job="x",path="{y}"}[5m])) / on(instance) group_left(pod) b offset 5m * 1e6 + count({__name__="z"})'
    assert metric_selectors(q) == ['a_bucket{job="x",path="{y}"}', "b", '{__name__="z"}']


def test_catalogue_rules_give_the_sources_five_minute_rate():
    spec = load_spec("examples/obsctl.yaml")
    rules = recording_rules(spec)
    q = 'sum(workload_class:obsctl_tokens:rate5m{workload_class="embed-online"})'
    assert lookback(q, rules).seconds == 300.0
    assert raw_selectors(q, rules) == ['obsctl_tokens_total{job="obsctl-workload",workload="embed-online"}']


STEP = 15.0


def _series(points):
    return [(t * STEP, v) for t, v in points]


def test_detect_events_known_answers():
    # replica a: its counter falls at step 4 (a restart); b appears at step 3; c is gone after step 2; g (a gauge) falls: no event
    series = [('{pod="a"}', _series([(0, 10), (1, 20), (2, 30), (3, 40), (4, 2), (5, 9)])),
              ('{pod="b"}', _series([(3, 1), (4, 2), (5, 3)])),
              ('{pod="c"}', _series([(0, 5), (1, 6), (2, 7)]))]
    events = T.detect_events(series, True, 0.0, 5 * STEP, STEP)
    assert [(e.at, e.kind, e.series) for e in events] == [(2 * STEP, "disappeared", '{pod="c"}'), (3 * STEP, "appeared", '{pod="b"}'),
                                                          (4 * STEP, "restart", '{pod="a"}')]
    assert T.detect_events([('{pod="g"}', _series([(0, 5), (1, 1), (2, 5)]))], False, 0.0, 2 * STEP, STEP) == []


def test_trim_starts_after_the_last_rollout_event_plus_the_look_back():
    lb = Lookback(300.0, "the 5m range of x")
    events = [T.Event(100.0, "restart", "a"), T.Event(172.0, "restart", "b"), T.Event(5000.0, "restart", "c")]  # c: after the rollout
    tr = T.trim(0.0, 3600.0, lb, events, STEP, 10)
    assert tr.start == 480.0  # 172 + 300 = 472, aligned up to the 15 s step
    assert [e.series for e in tr.events] == ["a", "b"] and tr.judged_start == 480.0 and not tr.too_short
    assert tr.text() == ("excluded 00:00:00–00:08:00 (8m): the 5m range of x and 2 replica restarts (00:01:40, 00:02:52)")
    # without events: the look-back alone
    assert T.trim(0.0, 3600.0, lb, [], STEP, 10).start == 300.0
    # no look-back, no events: nothing excluded
    none = T.trim(0.0, 3600.0, Lookback(0.0), [], STEP, 10)
    assert (none.start, none.judged_start, none.text()) == (0.0, 0.0, "")


def test_too_short_after_trimming_says_when_it_will_be_long_enough():
    tr = T.trim(0.0, 600.0, Lookback(300.0, "the 5m range of x"), [T.Event(195.0, "restart", "a")], STEP, 40)
    # judged from 495 s; needs max(300, 40 x 15 = 600) s: ready at 1095 s; until then the whole window is measured, capped
    assert tr.too_short and tr.ready_at == 1095.0 and tr.judged_start == 0.0
    assert "verify again at 1970-01-01T00:18:15Z or later" in tr.text()
    rec = T.record_of(tr)
    assert rec.too_short and rec.ready_at == dt.datetime(1970, 1, 1, 0, 18, 15, tzinfo=dt.UTC)
    assert rec.judged_start == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) and rec.excluded_until == dt.datetime(1970, 1, 1, 0, 8, 15, tzinfo=dt.UTC)


def test_no_trim_is_recorded_and_judges_the_whole_window():
    tr = T.trim(0.0, 3600.0, Lookback(300.0, "the 5m range of x"), [], STEP, 10, trimmed=False)
    assert tr.judged_start == 0.0 and not tr.too_short
    assert tr.text().startswith("not trimmed (--no-trim): the transition 00:00:00–00:05:00")
    assert T.record_of(dataclasses.replace(tr)).trimmed is False


def test_a_process_start_is_the_restart_its_counter_reset_shows():
    reset = T.Event(75.0, "restart", '{pod="a"}')
    same = T.Event(62.5, "restart", '{instance="a:8000",job="vllm"}')  # the process started 12.5 s before its counter's reset was scraped
    other = T.Event(300.0, "restart", '{instance="b:8000",job="vllm"}')  # no counter of b fell: its own event
    assert T.merge_process_starts([reset], [same, other], STEP) == [reset, other]
    assert T.merge_process_starts([], [same], STEP) == [same]


def test_every_series_gone_is_the_signal_stopping_not_a_rollout():
    series = [('{pod="a"}', _series([(0, 1), (1, 2)])), ('{pod="b"}', _series([(0, 1), (1, 2)]))]
    assert T.detect_events(series, True, 0.0, 10 * STEP, STEP) == []
    # one of two gone: a replica removed in the rollout
    series[1] = ('{pod="b"}', _series([(k, k) for k in range(11)]))
    assert [(e.kind, e.series) for e in T.detect_events(series, True, 0.0, 10 * STEP, STEP)] == [("disappeared", '{pod="a"}')]
