"""How snapshot reads and summarizes history, checked against the plain validating code
that gives the same answers:

- promapi's msgspec decoder of range answers against json.loads + the validating
  ``_pair`` path: the same floats for Prometheus-formatted values, and "no fast answer"
  (so the validating path decides, with its own error message) for everything else;
"""

from __future__ import annotations

import json
import math
import random
import struct

import numpy as np
import pytest

from obsctl import promapi


def _bits(pairs):
    # Bit patterns, so NaN == NaN and -0.0 != 0.0.
    return [struct.pack("<dd", t, v) for t, v in pairs]


def _slow(raw: bytes) -> list[tuple[dict, list]]:
    body = json.loads(raw)
    return [(item["metric"], [promapi._pair(v, "v") for v in item.get("values", [])]) for item in body["data"]["result"]]


def _answer(values, metric=None, extra="") -> bytes:
    pairs = ",".join(f"[{t},{json.dumps(v)}]" for t, v in values)
    metric = metric if metric is not None else {"job": "bench", "workload": "c0"}
    return (f'{{"status":"success"{extra},"data":{{"resultType":"matrix","result":'
            f'[{{"metric":{json.dumps(metric)},"values":[{pairs}]}}]}}}}').encode()


def _go_float(v: float) -> str:
    # Prometheus formats values with strconv.FormatFloat(v, 'f', -1, 64): the shortest
    # digits that round-trip, never an exponent; NaN and +-Inf as "NaN", "+Inf", "-Inf".
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return np.format_float_positional(v, unique=True, trim="-")


def test_range_decoder_equals_validating_path_on_prometheus_values():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.normal(1000, 20, 3000), rng.normal(0.95, 0.002, 1000), rng.lognormal(0, 30, 1000),
                             -rng.lognormal(0, 30, 500), [0.0, 1e-300, 5e-324, 1.7976931348623157e308, -2.5e-7, 123456789012345.67]])
    texts = [_go_float(float(v)) for v in values] + ["NaN", "-Inf", "Inf", "1e3", "1E-5", "0.1e+2", "12"]
    times = [1_700_000_000 + 15 * i for i in range(len(texts))]
    times[5], times[9], times[11] = 1_700_000_075.5, 1_700_000_135.123, 1_700_000_165.001
    raw = _answer(zip(times, texts, strict=True), extra=',"warnings":["remote store failed"],"infos":["PromQL info: x"]')
    fast = promapi._fast_range_body(raw)
    assert fast is not None
    assert fast["warnings"] == ["remote store failed"] and fast["infos"] == ["PromQL info: x"]
    (metric, expected), = _slow(raw)
    got = fast["data"]["result"][0]
    assert got["metric"] == metric
    assert _bits(promapi._pairs(got["values"], "v")) == _bits(expected)


def test_range_decoder_strings_it_accepts_parse_as_float_does():
    # Random strings over the characters a number may hold: whenever the fast decoder
    # accepts one (as a value or as a time), float() accepts it and gives the same bits.
    rng = random.Random(11)
    alphabet = "0123456789.eE+-_ naifINFtyx"
    accepted = 0
    for n in range(4000):
        text = "".join(rng.choice(alphabet[:14] if n % 2 else alphabet) for _ in range(rng.randint(1, 8 if n % 4 else 30)))
        for raw in (_answer([(1_700_000_000, text)]), _answer([(json.dumps(text), "1")])):
            fast = promapi._fast_range_body(raw)
            if fast is None:
                continue
            accepted += 1
            assert _bits(fast["data"]["result"][0]["values"]) == _bits(_slow(raw)[0][1])
    assert accepted > 100  # the comparison did happen


@pytest.mark.parametrize("raw", [
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"+Inf"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"],[2,"-0"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["-0","1"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["NaN","1"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["Inf","1"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[true,"1"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"abc"]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1",2]]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":null}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":1},"values":[]}]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"histograms":[[1,{}]]}]}}',
    b'{"status":"success","data":{"resultType":"vector","result":[]}}',
    b'{"status":"success","data":{"resultType":"matrix"}}',
    b'{"status":"success","data":null}',
    b'{"status":"error","errorType":"bad_data","error":"parse error"}',
    b'{"status":"success","warnings":"x","data":{"resultType":"matrix","result":[]}}',
    b'{"status":"success","data":{"resultType":"matrix","result":[]}',
    b'\xef\xbb\xbf{"status":"success","data":{"resultType":"matrix","result":[]}}',
    b'<html><title>login</title></html>',
    b'',
])
def test_range_decoder_leaves_everything_else_to_the_validating_path(raw):
    assert promapi._fast_range_body(raw) is None


def test_fit_history_columns_equal_the_lists_fit_memory_had():
    # history.fit_history hands fit_memory float64 columns (fromiter) instead of Python
    # lists; the model must be the same to the last bit (with holes and with history).
    from obsctl.baselining.measure.history import MIN_HISTORY_SAMPLES, fit_history
    from obsctl.baselining.statistics.memory import fit_memory
    from obsctl.records import Memory

    rng = np.random.default_rng(3)
    x = np.zeros(6000)
    for i in range(1, x.size):
        x[i] = 0.9 * x[i - 1] + rng.normal()
    t = 1_700_000_000 + 60.0 * np.arange(x.size)
    keep = rng.random(x.size) > 0.05  # 5 % holes
    samples = list(zip(t[keep].tolist(), (1000 + x[keep]).tolist(), strict=True))
    history, window = samples[:1500], samples[1500:]
    assert len(history) >= MIN_HISTORY_SAMPLES
    for hist, step in ((history, 60.0), ([], 60.0), (history[::2], 120.0)):
        points = hist + window if step == 60.0 and hist else (hist or window)
        source = "history" if hist else "windows"
        old = fit_memory([p for p, _ in points], [v for _, v in points], step, source=source)
        assert fit_history(hist, step, 60.0, window) == Memory(**old.as_dict())


# --- snapshot's reader thread (the requests overlap the judging and storing) -------------


def test_reader_runs_jobs_one_at_a_time_in_order_and_at_most_read_ahead():
    import threading
    import time

    from obsctl.baselining.snapshot import READ_AHEAD, _Reader

    log, running, lock = [], [], threading.Lock()

    def job(n):
        with lock:
            running.append(n)
            assert len(running) == 1  # never two requests at once
        time.sleep(0.005)
        with lock:
            running.remove(n)
            log.append(n)
        return n * 10

    reader = _Reader([(job, (n,)) for n in range(6)])
    time.sleep(0.1)
    assert log == list(range(READ_AHEAD))  # nothing taken yet: only READ_AHEAD read
    got = []
    for n in range(6):
        got.append(reader.take(n))
        got.append(reader.ask(job, 100 + n))
    reader.close()
    assert got == [v for n in range(6) for v in (n * 10, (100 + n) * 10)]
    assert sorted(log) == sorted(list(range(6)) + [100 + n for n in range(6)])
    assert [x for x in log if x < 100] == list(range(6))


def test_reader_failure_is_raised_at_its_pair_and_stops_later_jobs():
    from obsctl.baselining.snapshot import _Reader
    from obsctl.errors import PrometheusUnavailable

    started = []

    def job(n):
        started.append(n)
        if n == 1:
            raise PrometheusUnavailable("cannot reach Prometheus at http://127.0.0.1:1: connection refused")
        return n

    reader = _Reader([(job, (n,)) for n in range(5)])
    assert reader.take(0) == 0
    assert reader.ask(lambda: "history of 0") == "history of 0"  # still served after job 1 failed
    with pytest.raises(PrometheusUnavailable, match="connection refused"):
        reader.take(1)
    reader.close()
    assert started == [0, 1]  # the pairs after the failure are never asked for


def test_reader_ask_failure_is_raised_to_the_caller():
    from obsctl.baselining.snapshot import _Reader

    def boom():
        raise ValueError("history request failed")

    reader = _Reader([(lambda: 1, ())])
    assert reader.take(0) == 1
    with pytest.raises(ValueError, match="history request failed"):
        reader.ask(boom)
    reader.close()
    assert not reader._thread.is_alive()


def _samples_with_holes(n=5000, seed=5):
    rng = np.random.default_rng(seed)
    t = 1_700_000_000 + 60.0 * np.arange(n)
    keep = rng.random(n) > 0.03
    return list(zip(t[keep].tolist(), rng.normal(1000, 20, n)[keep].tolist(), strict=True))


def test_columns_give_the_batch_means_memory_and_sidecar_the_tuples_give():
    from obsctl.baselining import sidecar
    from obsctl.baselining.measure import coverage
    from obsctl.baselining.measure.history import fit_history

    samples = _samples_with_holes()
    times = np.fromiter((t for t, _ in samples), dtype=np.float64)
    values = np.fromiter((v for _, v in samples), dtype=np.float64)
    start, end = samples[0][0] - 60.0, samples[-1][0]
    assert coverage.time_batch_means_of(times, values, start, end, 10) == coverage.time_batch_means(samples, start, end, 10)
    history = _samples_with_holes(1200, seed=6)
    history = [(t - 1200 * 60.0, v) for t, v in history]
    for hist, hist_step in ((history, 60.0), ([], 60.0), (history[::2], 120.0)):
        assert fit_history(hist, hist_step, 60.0, samples, (times, values)) == fit_history(hist, hist_step, 60.0, samples)
    by_columns = sidecar.encode(sidecar.Columns(samples, times, values))
    by_tuples = sidecar.encode(samples)
    assert by_columns.keys() == by_tuples.keys()
    assert all(np.array_equal(by_columns[k], by_tuples[k]) and by_columns[k].dtype == by_tuples[k].dtype for k in by_tuples)
    with pytest.raises(ValueError):
        sidecar.Columns(samples, times[:-1], values)


def test_summarize_answers_columns_are_the_samples():
    # NaN/Inf dropped and stale points left out: the columns still match the kept tuples.
    import datetime as dt

    from obsctl.baselining.measure import coverage
    from obsctl.baselining.measure.window import Answers, summarize_answers
    from obsctl.promapi import QueryResult, RangeSeries
    from obsctl.records import Population

    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    t0 = start.timestamp()
    pairs = [(t0 + 60.0 * (i + 1), float("nan") if i % 97 == 0 else 1000.0 + i % 13) for i in range(2000)]
    end = start + dt.timedelta(seconds=60 * 2000)
    legs = coverage.Legs({0: {"gap": {t0 + 60.0 * (i + 1): 1.0 for i in range(500, 540)}, "real": {0: 1960.0}}})
    answers = Answers('up{job="x"}', start, end, 60.0, False, QueryResult([RangeSeries({}, pairs)]), legs, Population(series_count=1))
    m = summarize_answers(answers, 10)
    assert m.dropped > 0 and m.stale > 0
    times, values = m.columns
    assert list(zip(times.tolist(), values.tolist(), strict=True)) == m.samples
    assert m.stats.batch_means == coverage.time_batch_means(m.samples, t0, end.timestamp(), 10)


def test_memory_fit_with_one_blas_thread_equals_the_default_to_rounding():
    # snapshot fits under threadpool_limits(1, "blas"): OpenBLAS then sums its dot
    # products in one thread instead of per-thread partial sums; the model is the same
    # up to that rounding order.
    from threadpoolctl import threadpool_limits

    from obsctl.baselining.measure.history import fit_history

    samples = _samples_with_holes(43_200, seed=8)
    default = fit_history([], 60.0, 60.0, samples)
    with threadpool_limits(limits=1, user_api="blas"):
        single = fit_history([], 60.0, 60.0, samples)
    a, b = default.model_dump(), single.model_dump()
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], (int, float, list)) and a[key] not in (None, []):
            assert np.allclose(np.asarray(a[key], dtype=float), np.asarray(b[key], dtype=float), rtol=1e-12, atol=0), key
        else:
            assert a[key] == b[key], key
