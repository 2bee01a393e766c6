"""obsctl.httpfetch and obsctl.httpconfig on their own, against raw-socket servers on
127.0.0.1 that misbehave below HTTP (headers trickled byte by byte, a gzip bomb, a
connection that never answers): the deadline covers every phase, the cap the decoded
body; the config helpers never print a secret."""

from __future__ import annotations

import gzip

import pytest
import requests

from obsctl.httpconfig import HTTPClientConfig, SecretFileError, check_files, read_secret, redact_url, session_for
from obsctl.httpfetch import BodyTooLarge, DeadlineExceeded, bounded_get
from support.rawserver import answer


def trickled_headers(conn, _head, stop):
    for byte in answer(b"{}"):
        conn.send(bytes([byte]))
        if stop.wait(0.1):
            return


def silent(conn, _head, stop):
    stop.wait(30)


def gzip_bomb(conn, _head, _stop):
    body = gzip.compress(b"0" * (8 * 1024 * 1024))  # 8 MiB that compress to a few KiB
    conn.sendall(answer(body, content_type="text/plain", headers=b"Content-Encoding: gzip\r\n"))


def test_deadline_covers_trickled_headers_and_silence(raw_server):
    session = session_for(HTTPClientConfig())
    for script in (trickled_headers, silent):
        server = raw_server(script)
        # The trickled answer is complete after about 9 s, each byte inside the read timeout: only a
        # deadline over the whole exchange raises here (no wall-clock bound is asserted).
        with pytest.raises(DeadlineExceeded, match="no complete answer within 0.5s") as info:
            bounded_get(session, server.url + "/", timeout_seconds=0.5)
        assert info.value.__context__ is None  # keeps no frames (and no body) of the failed attempt alive


def test_cap_applies_to_the_decoded_body(raw_server):
    server = raw_server(gzip_bomb)
    session = session_for(HTTPClientConfig())
    with pytest.raises(BodyTooLarge):
        bounded_get(session, server.url + "/", timeout_seconds=5, max_body_bytes=1024 * 1024)
    assert len(bounded_get(session, server.url + "/", timeout_seconds=5, max_body_bytes=16 * 1024 * 1024).body) == 8 * 1024 * 1024


def test_bounded_get_needs_a_configured_session():
    with pytest.raises(ValueError, match="session_for"):
        bounded_get(requests.Session(), "http://127.0.0.1:9/", timeout_seconds=1)


def test_redact_url():
    assert redact_url("https://user:pa55@prom.example:9090/prefix?token=abc#x") == "https://prom.example:9090/prefix?..."
    assert redact_url("http://127.0.0.1:9090") == "http://127.0.0.1:9090"
    assert "pa55" not in redact_url("http://u:pa55@[::1]:9/")


@pytest.mark.parametrize(("content", "message"), [
    (None, "file not found"),
    (b"", "file is empty"),
    (b"  \n", "file is empty"),
    (b"two\nlines-s3kr1t", "holds a line break or control character"),
    (b"\xff\xfe-s3kr1t", "not UTF-8 text"),
])
def test_secret_file_errors_never_show_content(tmp_path, content, message):
    path = tmp_path / "token"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SecretFileError) as info:
        read_secret(path, "prometheus.authorization.credentials_file")
    assert str(info.value).startswith(f"prometheus.authorization.credentials_file: {path}: {message}")
    assert "s3kr1t" not in str(info.value) and "lines" not in str(info.value)


def test_secret_file_is_stripped_and_read_per_request(tmp_path):
    seen = []
    token = tmp_path / "token"
    token.write_text("  first-token \n")
    assert read_secret(token, "x") == "first-token"
    cfg = HTTPClientConfig.model_validate({"authorization": {"credentials_file": "token"},
                                           "http_headers": {"X-Scope-OrgID": ["a", "b"], "X-Key": {"files": ["token"]}}})
    session = session_for(cfg, base_dir=tmp_path)
    for expected in ("first-token", "second-token"):
        token.write_text(expected)
        prepared = session.prepare_request(requests.Request("GET", "http://127.0.0.1:9/"))
        seen.append((prepared.headers["Authorization"], prepared.headers["X-Scope-OrgID"], prepared.headers["X-Key"]))
    assert seen == [("Bearer first-token", "a, b", "first-token"), ("Bearer second-token", "a, b", "second-token")]
    assert session.scrub("said Bearer second-token and first-token") == "said Bearer <secret> and <secret>"


def test_check_files_names_the_field(tmp_path):
    cfg = HTTPClientConfig.model_validate({"tls_config": {"ca_file": "missing-ca.pem"}})
    with pytest.raises(SecretFileError, match=r"^dcgm\.tls_config\.ca_file: .*missing-ca\.pem: file not found$"):
        check_files(cfg, tmp_path, "dcgm")
    (tmp_path / "missing-ca.pem").mkdir()
    with pytest.raises(SecretFileError, match="not a regular file"):
        check_files(cfg, tmp_path, "dcgm")


def test_session_ignores_environment_unless_asked(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert session_for(HTTPClientConfig()).trust_env is False
    assert session_for(HTTPClientConfig(proxy_from_environment=True)).trust_env is True
    proxied = session_for(HTTPClientConfig(proxy_url="http://proxy.example:3128"))
    assert proxied.proxies == {"http": "http://proxy.example:3128", "https": "http://proxy.example:3128"}


def test_secret_file_gone_at_request_time_is_the_file_error(tmp_path, raw_server):
    server = raw_server(trickled_headers)
    cfg = HTTPClientConfig.model_validate({"authorization": {"credentials_file": str(tmp_path / "gone")}})
    with pytest.raises(SecretFileError, match="authorization.credentials_file: .*gone: file not found"):
        bounded_get(session_for(cfg, label="prometheus"), server.url + "/", timeout_seconds=2)


SPEC_WITH_FILES = """\
version: 1
prometheus:
  url: http://127.0.0.1:9
  tls_config:
    ca_file: {ca}
  http_headers:
    X-Scope-OrgID:
      files: [tenant, {header}]
  authorization:
    credentials_file: {token}
workload_classes:
  - {{name: a, kind: inference, selector: {{job: x}}}}
signals:
  - {{name: s, category: throughput, query: 'sum(rate(x_total{{$selector}}[1m]))', unit: x, direction: higher_is_better}}
"""


@pytest.mark.parametrize("broken, field", [
    ("token", "prometheus.authorization.credentials_file"),
    ("ca", "prometheus.tls_config.ca_file"),
    ("header", "prometheus.http_headers.X-Scope-OrgID.files[1]"),
])
def test_unusable_secret_file_names_the_spec_line(tmp_path, broken, field):
    """At use (exit 2) and at check (a warning): '<spec>:<line of the option>: <field>: <path>: why'."""
    from click.testing import CliRunner

    from obsctl.cli import cli
    from obsctl.promapi import PrometheusClient
    from obsctl.spec import load_spec

    (tmp_path / "tenant").write_text("team-a\n")
    files = {"token": "token", "ca": "ca.pem", "header": "header"}
    for name, path in files.items():
        if name != broken:
            (tmp_path / path).write_text("-----BEGIN CERTIFICATE-----\n" if name == "ca" else "value-1\n")
    (tmp_path / files[broken]).mkdir()  # a directory where a file is expected
    text = SPEC_WITH_FILES.format(**files)
    spec_path = tmp_path / "obsctl.yaml"
    spec_path.write_text(text)
    key = {"token": "credentials_file:", "ca": "ca_file:", "header": "files:"}[broken]
    line = next(i for i, row in enumerate(text.splitlines(), 1) if key in row)
    expected = f"{spec_path.resolve()}:{line}: {field}: {tmp_path / files[broken]}: not a regular file"
    with pytest.raises(SecretFileError) as info:
        PrometheusClient.from_spec(load_spec(spec_path))
    assert str(info.value) == expected and info.value.exit_code == 2
    result = CliRunner().invoke(cli, ["check", "--spec", str(spec_path)])
    assert result.exit_code == 0 and f"obsctl: warning: {expected}\n" in result.stderr


def test_non_ascii_token_is_a_file_error_and_a_non_ascii_password_is_sent(tmp_path):
    """A token or header file is sent as it is: non-ASCII was a UnicodeEncodeError
    traceback from http.client. A basic-auth password goes base64-encoded (UTF-8), so
    it may hold any character."""
    import base64

    (tmp_path / "token").write_text("tok\u20acn-s3kr1t\n")
    (tmp_path / "password").write_text("p\u00e4ss-\u20ac\n")
    for cfg, field in ((HTTPClientConfig.model_validate({"authorization": {"credentials_file": "token"}}), "authorization.credentials_file"),
                       (HTTPClientConfig.model_validate({"http_headers": {"X-Key": {"files": ["token"]}}}), "http_headers.X-Key.files[0]")):
        with pytest.raises(SecretFileError, match="holds non-ASCII characters") as info:
            check_files(cfg, tmp_path, "prometheus")
        assert f"prometheus.{field}: {tmp_path / 'token'}" in str(info.value) and "s3kr1t" not in str(info.value)
        session = session_for(cfg, base_dir=tmp_path, label="prometheus")
        with pytest.raises(SecretFileError, match="holds non-ASCII characters"):  # at request time too, not a traceback
            session.prepare_request(requests.Request("GET", "http://127.0.0.1:9/"))
    cfg = HTTPClientConfig.model_validate({"basic_auth": {"username": "bob", "password_file": "password"}})
    check_files(cfg, tmp_path, "prometheus")
    sent = session_for(cfg, base_dir=tmp_path).prepare_request(requests.Request("GET", "http://127.0.0.1:9/")).headers["Authorization"]
    assert sent == "Basic " + base64.b64encode("bob:p\u00e4ss-\u20ac".encode()).decode()
    with pytest.raises(ValueError, match="printable ASCII"):
        HTTPClientConfig.model_validate({"http_headers": {"X-Scope-OrgID": "t\u20acnant"}})


def _answer(body: bytes):
    def script(conn, _head, _stop):
        conn.sendall(answer(body))
    return script


# The API's documented shapes of native histogram samples (querying/api.md, "Native histograms").
NATIVE_INSTANT = (b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"w"},'
                  b'"histogram":[1700000000,{"count":"4","sum":"5","buckets":[[0,"-1","1","4"]]}]}]}}')
NATIVE_RANGE = (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"job":"w"},'
                b'"histograms":[[1700000000,{"count":"4","sum":"5","buckets":[[0,"-1","1","4"]]}]]}]}}')


def test_native_histogram_samples_are_the_query_to_fix_not_a_broken_server(raw_server):
    """Was "not a Prometheus API answer ... is not a [time, value] pair" (exit 3)."""
    from obsctl.errors import UsageError
    from obsctl.promapi import PrometheusClient

    for body, call in ((NATIVE_INSTANT, lambda c: c.query("w")), (NATIVE_RANGE, lambda c: c.query_range("w", 0, 60, 15))):
        client = PrometheusClient(raw_server(_answer(body)).url, timeout_seconds=5, attempts=1)
        with pytest.raises(UsageError, match="returns native histogram samples, not numbers; ask for a number") as info:
            call(client)
        assert info.value.exit_code == 2


@pytest.mark.parametrize("body, expected", [
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[NaN,"1"]]}]}}',
     "data.result[0].values[0] time is nan, not a Unix time"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[Infinity,"1"]]}]}}',
     "data.result[0].values[0] time is inf, not a Unix time"),
])
def test_a_non_finite_sample_time_is_not_a_prometheus_answer(raw_server, body, expected):
    from obsctl.errors import PrometheusUnavailable
    from obsctl.promapi import PrometheusClient

    client = PrometheusClient(raw_server(_answer(body)).url, timeout_seconds=5, attempts=1)
    with pytest.raises(PrometheusUnavailable, match="not a Prometheus API answer") as info:
        client.query_range("w", 0, 60, 15)
    assert expected in str(info.value)


def test_a_flood_of_warnings_is_capped_and_keeps_the_partial_one(raw_server):
    """A store failing per block may send a warning per block: all were kept (and stored),
    deduplicated by a list scan (quadratic). At most MAX_NOTES are kept, and a partial
    warning after the cap still marks the answer partial."""
    import json

    from obsctl.promapi import MAX_NOTES, PrometheusClient

    notes = [f"PromQL info: metric name x{i} might not be a counter" for i in range(5 * MAX_NOTES)] + ["store-gateway 7 failed"]
    body = json.dumps({"status": "success", "warnings": notes, "infos": notes,
                       "data": {"resultType": "vector", "result": []}}).encode()
    result = PrometheusClient(raw_server(_answer(body)).url, timeout_seconds=5, attempts=1).query("x")
    assert len(result.warnings) == MAX_NOTES + 1 and len(result.infos) == MAX_NOTES
    assert result.warnings[:MAX_NOTES] == notes[:MAX_NOTES]
    assert result.partial and result.partial_warnings == ["store-gateway 7 failed"]


TOKEN, PASSWORD = "S3cr3tT0kenXYZ_abc/+=", "Pa55w0rd!Q9%z"


@pytest.mark.parametrize("auth, secret, echoed", [
    ("bearer", TOKEN, "S3cr3tT0kenXYZ_abc%2F%2B%3D"),  # urllib.parse.quote(token, safe=""), also quote_plus
    ("bearer", TOKEN, "S3cr3tT0kenXYZ_abc/%2B%3D"),  # quote(token): "/" kept
    ("bearer", TOKEN, "S3cr3tT0kenXYZ_abc\\/+="),  # JSON with "/" escaped
    ("bearer", TOKEN, "UzNjcjN0VDBrZW5YWVpfYWJjLys9"),  # base64(token)
    ("basic", PASSWORD, "Pa55w0rd%21Q9%25z"),  # quote(password, safe="")
    ("basic", PASSWORD, "UGE1NXcwcmQhUTkleg=="),  # base64(password)
    ("basic", PASSWORD, "b2JzY3RsOlBhNTV3MHJkIVE5JXo="),  # base64("obsctl:" + password), as sent
    ("basic", PASSWORD, PASSWORD),  # raw
    ("basic", "pa ss+w/rd", "pa+ss%2Bw%2Frd"),  # quote_plus(password)
    ("basic", 'pa"ss\\w\u00e9rd', 'pa\\"ss\\\\w\\u00e9rd'),  # json.dumps(password)[1:-1]
])
def test_a_gateway_echoing_an_encoded_secret_is_scrubbed(tmp_path, raw_server, auth, secret, echoed):
    """A non-JSON error body quoting the credential URL-encoded, JSON-escaped or base64
    encoded (raw was already scrubbed): the message shows <secret> where the form was."""
    import base64
    import json
    import urllib.parse

    from obsctl.errors import PrometheusUnavailable
    from obsctl.promapi import PrometheusClient

    assert echoed in (urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret), urllib.parse.quote_plus(secret),
                      json.dumps(secret)[1:-1], json.dumps(secret)[1:-1].replace("/", "\\/"), secret,
                      base64.b64encode(secret.encode()).decode(), base64.b64encode(f"obsctl:{secret}".encode()).decode())
    (tmp_path / "secret").write_text(secret + "\n")
    cfg = HTTPClientConfig.model_validate({"authorization": {"credentials_file": "secret"}} if auth == "bearer" else
                                          {"basic_auth": {"username": "obsctl", "password_file": "secret"}})
    body = f"denied {echoed} at gateway".encode()

    def echo(conn, _head, _stop):
        conn.sendall(answer(body, status=b"502 Bad Gateway", content_type="text/plain"))

    client = PrometheusClient(raw_server(echo).url, timeout_seconds=5, attempts=1, session=session_for(cfg, base_dir=tmp_path))
    with pytest.raises(PrometheusUnavailable) as info:
        client.query("up")
    message = str(info.value)
    assert "starts 'denied <secret> at gateway'" in message, message
    assert echoed not in message and secret not in message
