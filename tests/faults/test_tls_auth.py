"""obsctl behind an authenticating TLS gateway in front of a real Prometheus: private CA,
server name override, client certificate, bearer token file, tenant header, basic auth;
certificates made with openssl at test time (tests/support/openssl_certs.py). The gateway (faultproxy.FaultProxy)
checks the client certificate, the credentials and the tenant header itself."""

from __future__ import annotations

import base64
import shutil

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import snapshot_baseline
from obsctl.baselining.store import Store
from support.faultkit import write_fault_spec
from support.faultproxy import FaultProxy
from support.openssl_certs import SERVER_NAME

TOKEN = "tls-test-token-0e8a51"
TENANT = "team-inference"


def snap(spec, history):
    return CliRunner().invoke(snapshot_baseline, ["--spec", str(spec), "--class", "steady", "--window", "1h", "--end", history.iso(1)])


def tls_config(pki, **changes):
    cfg = {"ca_file": str(pki.ca[0]), "cert_file": str(pki.client[0]), "key_file": str(pki.client[1]), "server_name": SERVER_NAME}
    cfg.update(changes)
    return {k: v for k, v in cfg.items() if v is not None}


@pytest.fixture
def gateway(history, pki):
    """HTTPS gateway: client certificate from the test CA, ``Bearer TOKEN``, ``X-Scope-OrgID: TENANT``."""
    with FaultProxy(history.prometheus_url, tls=(pki.server[0], pki.server[1], pki.ca[0]),
                    required_headers={"Authorization": f"Bearer {TOKEN}", "X-Scope-OrgID": TENANT}) as proxy:
        yield proxy


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "secrets" / "token"
    path.parent.mkdir()
    path.write_text(TOKEN + "\n")
    return path


def bearer_spec(tmp_path, gateway, pki, token_file, **prometheus):
    fields = {"tls_config": tls_config(pki), "authorization": {"credentials_file": "secrets/token"},
              "http_headers": {"X-Scope-OrgID": {"values": [TENANT]}}}
    fields.update(prometheus)
    return write_fault_spec(tmp_path / "obsctl.yaml", gateway.url, tmp_path / "store", **{k: v for k, v in fields.items() if v is not None})


def test_bearer_client_cert_tenant_through_tls(tmp_path, gateway, pki, token_file, history):
    spec = bearer_spec(tmp_path, gateway, pki, token_file)  # credentials_file relative to the spec's folder
    result = snap(spec, history)
    assert result.exit_code == 0, result.output
    assert Store(tmp_path / "store").current_baseline("steady", "tokens_per_second") is not None
    assert gateway.seen, "no request reached the gateway"
    for path, headers, client_cn in gateway.seen:
        assert path.startswith("/api/v1/")
        assert headers["Authorization"] == f"Bearer {TOKEN}" and headers["X-Scope-OrgID"] == TENANT
        assert client_cn == "prometheus"  # make_pki's client certificate CN


def test_rotated_token_is_read_at_use_time(tmp_path, gateway, pki, token_file, history):
    spec = bearer_spec(tmp_path, gateway, pki, token_file)
    assert snap(spec, history).exit_code == 0
    gateway.required_headers["Authorization"] = "Bearer rotated-token-77"
    refused = snap(spec, history)
    assert refused.exit_code == 3 and "HTTP 401 from /api/v1/query_range: the credentials were refused: check prometheus.authorization" in refused.stderr
    token_file.write_text("rotated-token-77\n")
    assert snap(spec, history).exit_code == 0


def test_basic_auth_variant(tmp_path, history, pki):
    password = tmp_path / "password"
    password.write_text("basic-pw-5c1d\n")
    expected = "Basic " + base64.b64encode(b"obsctl:basic-pw-5c1d").decode()
    with FaultProxy(history.prometheus_url, tls=(pki.server[0], pki.server[1], pki.ca[0]),
                    required_headers={"Authorization": expected, "X-Scope-OrgID": TENANT}) as proxy:
        spec = write_fault_spec(tmp_path / "obsctl.yaml", proxy.url, tmp_path / "store", tls_config=tls_config(pki),
                                basic_auth={"username": "obsctl", "password_file": str(password)},
                                http_headers={"X-Scope-OrgID": TENANT})  # the simple header form
        result = snap(spec, history)
        assert result.exit_code == 0, result.output
        assert {headers["Authorization"] for _, headers, _ in proxy.seen} == {expected}


@pytest.mark.parametrize(("change", "message"), [
    ({"tls_config": "other_ca"}, r"TLS failed: certificate verify failed: self.signed certificate in certificate chain \(check prometheus.tls_config"),
    ({"tls_config": "no_server_name"}, r"TLS failed: certificate verify failed: IP address mismatch, certificate is not valid for '127.0.0.1'"),
    ({"http_headers": None}, r"HTTP 403 from /api/v1/query_range: the credentials were refused for this request \(forbidden\)"),
    ({"token": "wrong-token"}, r"HTTP 401 from /api/v1/query_range: the credentials were refused: check prometheus.authorization"),
    ({"token": None}, r"prometheus.authorization.credentials_file: .*/secrets/token: file not found"),
])
def test_refusals_are_one_line(change, message, tmp_path, gateway, pki, token_file, history):
    import re

    fields = {}
    if change.get("tls_config") == "other_ca":
        fields["tls_config"] = tls_config(pki, ca_file=str(pki.other_ca[0]))
    if change.get("tls_config") == "no_server_name":
        fields["tls_config"] = tls_config(pki, server_name=None)
    if "http_headers" in change:
        fields["http_headers"] = {}
    spec = bearer_spec(tmp_path, gateway, pki, token_file, **fields)
    if "token" in change:
        if change["token"] is None:
            token_file.unlink()
        else:
            token_file.write_text(change["token"])
    result = snap(spec, history)
    assert result.exit_code == (2 if change.get("token", "") is None else 3), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), result.stderr
    assert not (tmp_path / "store" / "baselines").exists()


def test_client_certificate_required(tmp_path, gateway, pki, token_file, history):
    spec = bearer_spec(tmp_path, gateway, pki, token_file, tls_config=tls_config(pki, cert_file=None, key_file=None))
    result = snap(spec, history)
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "TLS failed: the server closed the connection during the TLS handshake (does it require a client certificate?" in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_spec_refuses_inline_secrets_and_userinfo(tmp_path):
    from obsctl.errors import SpecError
    from obsctl.spec import load_spec

    base = {"version": 1, "workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "x"}}],
            "signals": [{"name": "s", "category": "throughput", "query": "sum(x{$selector})", "unit": "1", "direction": "higher_is_better"}]}
    cases = [
        ({"url": "http://admin:hunter2-pw@127.0.0.1:9090"}, "prometheus.url: must not hold a user or password (user:password@): it would be printed in errors; use basic_auth with password_file"),
        ({"url": "http://127.0.0.1 :9"}, "prometheus.url: must be an http:// or https:// URL without spaces"),
        ({"url": "http://[::1:9090"}, "prometheus.url: has no valid host name or address (an IPv6 address goes in brackets"),
        ({"url": "http://127.0.0.1:0"}, "prometheus.url: has an invalid port (1-65535)"),
        ({"http_headers": {"X-Scope-OrgID": ""}}, "prometheus.http_headers.X-Scope-OrgID.values: header values must be non-empty"),
        ({"authorization": {"credentials": "inline-token-9"}}, "prometheus.authorization: inline secret 'credentials' is not accepted"),
        ({"basic_auth": {"username": "u", "password": "inline-pw-9"}}, "prometheus.basic_auth: inline secret 'password' is not accepted"),
        ({"http_headers": {"Authorization": "Bearer x"}}, "prometheus.http_headers: header 'Authorization' is reserved"),
        ({"tls_config": {"cert_file": "c.pem"}}, "prometheus.tls_config: cert_file and key_file go together"),
        ({"tls_config": {"ca": "PEM"}}, "prometheus.tls_config: inline secret 'ca' is not accepted"),
        ({"tls_config": {"server_nam": "x"}}, "prometheus.tls_config.server_nam: unknown key; allowed here: ca_file, cert_file, key_file, server_name, insecure_skip_verify"),
        ({"body_size_limit": "64 parsecs"}, "prometheus.body_size_limit: must be a size such as 64MiB"),
        ({"timeout_seconds": 10, "deadline_seconds": 5}, "prometheus: deadline_seconds (5) must be at least timeout_seconds (10)"),
    ]
    for prometheus, message in cases:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({**base, "prometheus": prometheus}, sort_keys=False))
        with pytest.raises(SpecError) as info:
            load_spec(path)
        text = str(info.value)
        assert message in text, (prometheus, text)
        assert "hunter2" not in text and "inline-token-9" not in text and "inline-pw-9" not in text


def test_check_refuses_userinfo_without_echo(tmp_path, example_spec_path):
    from obsctl.cli import cli

    spec = yaml.safe_load(example_spec_path.read_text())
    spec["prometheus"] = {"url": "https://admin:s3cr3t-pw-41@prom.example:9090"}
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    for args in (["check", "--spec", str(path)], ["check", "--spec", str(path), "-o", "json"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert "prometheus.url: must not hold a user or password" in result.stderr
        assert "s3cr3t-pw-41" not in result.output and "admin" not in result.output
    shutil.rmtree(tmp_path / "store", ignore_errors=True)


def test_check_warns_about_a_missing_secret_file(tmp_path, example_spec_path):
    from obsctl.cli import cli

    spec = yaml.safe_load(example_spec_path.read_text())
    spec["prometheus"] = {"url": "https://prom.example:9090", "authorization": {"credentials_file": "secrets/token"}}
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = CliRunner().invoke(cli, ["check", "--spec", str(path)])
    assert result.exit_code == 0, result.output
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "credentials_file:" in text)
    assert (f"obsctl: warning: {path.resolve()}:{line}: prometheus.authorization.credentials_file: {tmp_path}/secrets/token: "
            "file not found") in result.stderr
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text("t0ken-value\n")
    result = CliRunner().invoke(cli, ["check", "--spec", str(path)])
    assert result.exit_code == 0 and "credentials_file" not in result.stderr and "t0ken-value" not in result.output


def test_insecure_skip_verify_and_unusable_pem(tmp_path, gateway, pki, token_file, history):
    skip = bearer_spec(tmp_path, gateway, pki, token_file, tls_config=tls_config(pki, ca_file=None, server_name=None, insecure_skip_verify=True))
    result = snap(skip, history)
    assert result.exit_code == 0 and result.stderr.count("\n") == 1, result.output  # one progress line, no urllib3 warning
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    for change, message in (({"ca_file": str(bad)}, "TLS failed: ca_file holds no PEM certificate"),
                            ({"cert_file": str(bad), "key_file": str(bad)}, "TLS failed: cannot load the client certificate and key")):
        spec = bearer_spec(tmp_path, gateway, pki, token_file, tls_config=tls_config(pki, **change))
        result = snap(spec, history)
        assert result.exit_code == 3 and len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.output
