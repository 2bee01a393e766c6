"""Before a push, publish reads the Pushgateway's groups (/api/v1/metrics) to see whose state
the group holds. An answer that is not the list a Pushgateway serves refuses the push with one
line (exit 3 in the CLI), never a traceback, and never counts as a free group."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from obsctl.baselining.practice.publish import JOB, PUBLISH_INFO, group_owner
from obsctl.errors import PrometheusUnavailable


@pytest.fixture()
def gateway():
    """A local server answering GET /api/v1/metrics with ``answer["body"]`` (bytes)."""
    answer = {"body": b""}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer["body"])))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield answer, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _group(instance: str, info) -> dict:
    return {"labels": {"job": JOB, "instance": instance}, PUBLISH_INFO: info}


@pytest.mark.parametrize("body", [
    {"status": "success", "data": [1]},
    {"status": "success", "data": {"x": 1}},
    {"status": "success", "data": None},
    {"status": "success", "data": [{"labels": "x"}]},
    {"status": "error", "data": []},
    [],
    "zz",
])
def test_an_answer_that_is_not_a_group_list_refuses_the_push(gateway, body):
    answer, url = gateway
    answer["body"] = json.dumps(body).encode()
    with pytest.raises(PrometheusUnavailable, match="not the list of groups"):
        group_owner(url, "team-a", 5.0)


@pytest.mark.parametrize("info", ["zz", {"metrics": [1]}, {"metrics": [{"labels": "x"}]}, {"metrics": []}])
def test_a_group_whose_identity_cannot_be_read_refuses_the_push(gateway, info):
    answer, url = gateway
    answer["body"] = json.dumps({"status": "success", "data": [_group("team-a", info)]}).encode()
    with pytest.raises(PrometheusUnavailable, match="without a readable fingerprint"):
        group_owner(url, "team-a", 5.0)


def test_the_owner_is_read_and_other_groups_are_ignored(gateway):
    answer, url = gateway
    owned = {"metrics": [{"labels": {"spec_name": "team-a", "fingerprint": "f00d"}, "value": "1"}]}
    answer["body"] = json.dumps({"status": "success", "data": [_group("team-b", "zz"), _group("team-a", owned)]}).encode()
    assert group_owner(url, "team-a", 5.0) == "f00d"
    answer["body"] = json.dumps({"status": "success", "data": []}).encode()
    assert group_owner(url, "team-a", 5.0) is None
