"""prometheus.backend adapts what the client sends, seen by a real HTTP server: VictoriaMetrics'
nocache=1 and 30,000 points per range request, Thanos' partial_response=false, Mimir's tenant
header; Prometheus gets nothing extra. Spec errors for the tenant are one line."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from obsctl.errors import SpecError
from obsctl.promapi import PrometheusClient
from obsctl.spec import load_spec


def _answer(kind: str) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": kind, "result": []}}).encode()


@pytest.fixture
def server():
    seen: list[tuple[dict, dict]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(({k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}, dict(self.headers)))
            body = _answer("matrix" if urlsplit(self.path).path.endswith("query_range") else "vector")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()


def _spec(tmp_path: Path, url: str, **prometheus) -> Path:
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump({
        "version": 1, "prometheus": {"url": url, **prometheus},
        "workload_classes": [{"name": "chat", "kind": "inference", "selector": {"job": "w"}}],
        "signals": [{"name": "tps", "category": "throughput", "query": "sum(rate(x{$selector}[1m]))", "unit": "1/s",
                     "direction": "higher_is_better"}]}))
    return path


@pytest.mark.parametrize("backend, extra, points", [
    ("prometheus", {}, 11_000),
    ("victoriametrics", {"nocache": "1"}, 30_000),
    ("thanos", {"partial_response": "false"}, 11_000),
])
def test_backend_parameters_and_points_per_request(server, tmp_path, backend, extra, points):
    url, seen = server
    client = PrometheusClient.from_spec(load_spec(_spec(tmp_path, url, backend=backend)))
    step = 10.0
    client.query_range("up", 0, step * 60_000, step)  # 60,001 points
    assert len(seen) == -(-60_001 // points)  # requests of at most `points` points each
    for params, _headers in seen:
        assert {k: params[k] for k in extra} == extra and not ({"nocache", "partial_response"} - set(extra)) & set(params)
        assert (float(params["end"]) - float(params["start"])) / step + 1 <= points
    client.query("up")
    assert {k: seen[-1][0].get(k) for k in extra} == extra


def test_mimir_sends_the_tenant_header(server, tmp_path):
    url, seen = server
    client = PrometheusClient.from_spec(load_spec(_spec(tmp_path, url, backend="mimir", tenant="team-a")))
    client.query("up")
    assert seen[0][1]["X-Scope-OrgID"] == "team-a"


@pytest.mark.parametrize("prometheus, message", [
    ({"backend": "mimir"}, "backend mimir needs tenant"),
    ({"backend": "prometheus", "tenant": "a"}, "tenant is for backend mimir"),
    ({"backend": "mimir", "tenant": "a b"}, "tenant"),
    ({"backend": "cortex"}, "backend"),
])
def test_backend_spec_errors(tmp_path, prometheus, message):
    with pytest.raises(SpecError, match=message) as exc:
        load_spec(_spec(tmp_path, "http://127.0.0.1:9", **prometheus))
    assert "\n" not in str(exc.value).strip() or str(exc.value).count("\n") < 3
