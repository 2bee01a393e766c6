"""The CLI's Prometheus client against hostile answers from a real local socket server: a
body that trickles past the deadline, a peer that echoes the request (bearer token included)
as its first line, and JSON nested too deeply. Each is one line naming what happened,
without the secret and without a traceback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from obsctl.errors import PrometheusUnavailable
from obsctl.httpconfig import HTTPClientConfig, session_for
from obsctl.httpfetch import DeadlineExceeded, bounded_get
from obsctl.promapi import PrometheusClient
from support.rawserver import answer

TOKEN = "s3cr3t-bearer-token-0123456789abcdefghijklmnop"


def client(tmp_path, url: str, timeout: float = 1.0) -> PrometheusClient:
    (tmp_path / "token").write_text(TOKEN)
    cfg = HTTPClientConfig.model_validate({"authorization": {"credentials_file": str(tmp_path / "token")}})
    return PrometheusClient(url, timeout_seconds=timeout, attempts=1, session=session_for(cfg), config=cfg)


def trickle(conn: socket.socket, _request: bytes, stop: threading.Event) -> None:
    # Headers at once, a body without Content-Length (it ends when the connection does), 1 byte / 0.5 s.
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    for byte in b'{"status":"success","data":{"resultType":"vector","result":[]}}':
        conn.sendall(bytes([byte]))
        if stop.wait(0.5):
            return


def test_body_trickling_past_the_deadline_is_no_complete_answer(tmp_path, raw_server) -> None:
    srv = raw_server(trickle)
    with pytest.raises(DeadlineExceeded, match="no complete answer within 1s"):
        bounded_get(session_for(HTTPClientConfig()), srv.url + "/api/v1/query", timeout_seconds=1.0)
    with pytest.raises(PrometheusUnavailable) as err:
        client(tmp_path, srv.url).query("up")
    message = str(err.value)
    assert "no complete answer within 1s" in message and "not JSON" not in message, message
    assert "\n" not in message


def echo_authorization(conn: socket.socket, request: bytes, _stop: threading.Event) -> None:
    # Not HTTP: the first line sent back is the request's Authorization header.
    line = next(ln for ln in request.split(b"\r\n") if ln.lower().startswith(b"authorization"))
    conn.sendall(line + b"\r\n\r\n")


def test_non_http_first_line_is_scrubbed_before_it_is_cut(tmp_path, raw_server) -> None:
    srv = raw_server(echo_authorization)
    with pytest.raises(PrometheusUnavailable) as err:
        client(tmp_path, srv.url).query("up")
    message = str(err.value)
    assert "not an HTTP answer" in message and "<secret>" in message, message
    for start in range(len(TOKEN) - 6):  # no 6-character piece of the token
        assert TOKEN[start:start + 6] not in message, message


def deep_json(conn: socket.socket, _request: bytes, _stop: threading.Event) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    body = ('{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]],'
            f'"x":{nested}}}]}}}}').encode()
    conn.sendall(answer(body))


def test_deeply_nested_range_answer_is_one_line_not_a_recursion_error(tmp_path, raw_server) -> None:
    srv = raw_server(deep_json)
    with pytest.raises(PrometheusUnavailable, match="JSON nested too deeply") as err:
        client(tmp_path, srv.url, timeout=5.0).query_range("up", 0, 60, 15)
    assert "\n" not in str(err.value)


def matrix_answer(conn: socket.socket, _request: bytes, _stop: threading.Event) -> None:
    body = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}'
    conn.sendall(answer(body))


def test_a_matrix_for_an_instant_query_is_the_servers_fault_with_the_query_cut(tmp_path, raw_server) -> None:
    """obsctl's instant queries always give a vector: a matrix was exit 2 (a spec error)
    and quoted the whole query (some are over a thousand characters)."""
    long_query = "sum(" + " + ".join(f'x{{job="j{i}"}}' for i in range(150)) + ")"
    with pytest.raises(PrometheusUnavailable) as err:
        client(tmp_path, raw_server(matrix_answer).url).query(long_query)
    message = str(err.value)
    assert err.value.exit_code == 3
    assert f"/api/v1/query answered a matrix to the instant query '{long_query[:200]}...', expected a vector or scalar" in message
    assert len(long_query) > 1500 and len(message) < 400 and "\n" not in message


def matrix_of(*series: list) -> Callable:
    """A server answering every range query with these ``values`` lists, one series each,
    all with the labels ``{"job": "x"}`` (so two of them are the same series twice)."""
    import json

    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"job": "x"}, "values": values} for values in series]}}).encode()

    def reply(conn: socket.socket, _request: bytes, _stop: threading.Event) -> None:
        conn.sendall(answer(body))
    return reply


GRID = [[t, str(t / 15)] for t in range(0, 61, 15)]  # start 0, end 60, step 15: five points


def test_a_series_answered_twice_counts_each_point_once(tmp_path, raw_server) -> None:
    srv = raw_server(matrix_of(GRID, GRID))
    (series,) = client(tmp_path, srv.url).query_range("up", 0, 60, 15).series
    assert series.values == [(float(t), t / 15) for t in range(0, 61, 15)]


def test_a_series_answered_twice_with_other_values_is_the_servers_fault(tmp_path, raw_server) -> None:
    srv = raw_server(matrix_of(GRID, [[15, "99"]]))
    with pytest.raises(PrometheusUnavailable, match=r"data.result\[1\] repeats the labels of an earlier series "
                                                    r"with another value at 15.0") as err:
        client(tmp_path, srv.url).query_range("up", 0, 60, 15)
    assert err.value.exit_code == 3


def test_more_points_than_the_step_grid_holds_is_the_servers_fault(tmp_path, raw_server) -> None:
    off_grid = [[i / 1000, "1"] for i in range(100_000)]  # 100k points between 0 s and 100 s
    srv = raw_server(matrix_of(off_grid))
    with pytest.raises(PrometheusUnavailable) as err:
        client(tmp_path, srv.url, timeout=10.0).query_range("up", 0, 60, 15)
    message = str(err.value)
    assert err.value.exit_code == 3 and "\n" not in message
    assert message.endswith("data.result[0] has 100,000 points, more than the step grid holds "
                            "(5 from 0.000 to 60.000 every 15s)"), message


@pytest.mark.parametrize(("values", "why"), [
    ([[60, "1"], [45, "1"], [30, "1"]], r"data.result\[0\].values\[1\] at 45.0 is before data.result\[0\].values\[0\] at 60.0"),
    ([[0, "1"], [15, "1"], [15, "2"]], r"data.result\[0\].values\[2\] at 15.0 repeats the time of data.result\[0\].values\[1\]"),
])
def test_points_out_of_time_order_are_one_line_not_an_index_error(tmp_path, raw_server, values, why) -> None:
    srv = raw_server(matrix_of(values))
    with pytest.raises(PrometheusUnavailable, match=why + ".*: points out of time order$") as err:
        client(tmp_path, srv.url).query_range("up", 0, 60, 15)
    assert err.value.exit_code == 3 and "\n" not in str(err.value)


def test_a_backend_aligning_the_window_to_the_step_answers_one_more_point(tmp_path, raw_server) -> None:
    aligned = [[t, "1"] for t in range(0, 76, 15)]  # VictoriaMetrics: start rounded down, end up
    srv = raw_server(matrix_of(aligned))
    (series,) = client(tmp_path, srv.url).query_range("up", 5, 65, 15).series
    assert len(series.values) == 6
