"""--web.config.file validation against Prometheus' own checker, ``promtool check web-config``.

Every file the exporter accepts must pass promtool, and the files it refuses for a reason
promtool also has must fail promtool too; the few refusals promtool does not share (things
Python's ssl module cannot do) are listed and checked to be refused with their reason.
Certificates are made with openssl per test session. Errors are one line naming file:line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import bcrypt
import pytest

from obsctl.errors import UsageError
from obsctl.exporters.webconfig import load_web_config
from obsctl.processes import require_binary
from support.openssl_certs import Pki, make_pki

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
MTLS = TLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"

# (case, file text, promtool accepts it) for files BOTH must accept / refuse alike
SHARED = [
    ("empty", "", True),
    ("tls", TLS, True),
    ("mtls", MTLS, True),
    ("verify-if-given", TLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n", True),
    ("versions-ciphers", TLS + "  min_version: TLS13\n  max_version: TLS13\n  prefer_server_cipher_suites: false\n"
     "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n", True),
    ("users", f"basic_auth_users:\n  alice: '{HASH}'\n", True),
    ("users-null", "basic_auth_users:\n", True),
    ("headers", "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
     "    Strict-Transport-Security: max-age=31536000\n", True),
    ("all", MTLS + f"http_server_config:\n  headers: {{X-Content-Type-Options: nosniff}}\nbasic_auth_users:\n  a: '{HASH}'\n", True),
    ("unknown-top-key", TLS + "tls_config: {}\n", False),
    ("unknown-tls-key", TLS + "  client_allowed_sans: [a]\n", False),
    ("no-key", "tls_server_config:\n  cert_file: server.crt\n", False),
    ("no-cert", "tls_server_config:\n  key_file: server.key\n", False),
    ("missing-cert-file", "tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n", False),
    ("key-is-a-cert", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n", False),
    ("wrong-key", "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n", False),
    ("ca-without-auth-type", TLS + "  client_ca_file: ca.crt\n", False),
    ("missing-ca-file", TLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nope.crt\n", False),
    ("bad-auth-type", TLS + "  client_auth_type: Bogus\n", False),
    ("bad-version", TLS + "  min_version: TLS14\n", False),
    ("bad-cipher", TLS + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", False),
    ("bad-header", "http_server_config:\n  headers: {X-Foo: bar}\n", False),
    ("bad-header-value", "http_server_config:\n  headers: {X-Frame-Options: allow}\n", False),
    ("plain-password", "basic_auth_users:\n  alice: s3cret\n", False),
    ("low-cost", "basic_auth_users:\n  alice: '$2b$03$" + HASH[7:] + "'\n", False),
]
# refused here with a reason although promtool 2.42 accepts them (Python's ssl cannot, or they cannot work)
OURS_ONLY = [
    ("request-client-cert", TLS + "  client_auth_type: RequestClientCert\n", "Python's ssl module verifies"),
    ("require-any", TLS + "  client_auth_type: RequireAnyClientCert\n", "Python's ssl module verifies"),
    ("curves", TLS + "  curve_preferences: [X25519]\n", "curve list"),
    ("verify-without-ca", TLS + "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
    ("min-above-max", TLS + "  min_version: TLS13\n  max_version: TLS12\n", "above max_version"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def promtool_accepts(path: Path) -> bool:
    result = subprocess.run([require_binary("promtool"), "check", "web-config", str(path)],
                            capture_output=True, text=True, timeout=60)
    return result.returncode == 0


def _write(pki: Pki, case: str, text: str) -> Path:
    path = pki.folder / f"web-{case}.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case, text, accepted", SHARED, ids=[c[0] for c in SHARED])
def test_same_verdict_as_promtool(pki: Pki, case: str, text: str, accepted: bool) -> None:
    path = _write(pki, case, text)
    assert promtool_accepts(path) is accepted, f"promtool's verdict on {case} changed"
    if accepted:
        active = load_web_config(path)
        assert (active.ssl_context is not None) == ("cert_file" in text)
    else:
        with pytest.raises(UsageError) as err:
            load_web_config(path)
        message = str(err.value)
        assert message.startswith(f"{path}:") and "\n" not in message, message
        assert "s3cret" not in message and HASH not in message


@pytest.mark.parametrize("case, text, reason", OURS_ONLY, ids=[c[0] for c in OURS_ONLY])
def test_refused_with_a_reason_where_python_ssl_cannot(pki: Pki, case: str, text: str, reason: str) -> None:
    path = _write(pki, case, text)
    assert promtool_accepts(path)  # the deviation is ours: stricter, never looser
    with pytest.raises(UsageError, match=reason):
        load_web_config(path)


def test_unknown_key_names_file_line_and_allowed_keys(pki: Pki) -> None:
    path = _write(pki, "unknown-line", TLS + "  client_allowed_sans: [a]\n")
    with pytest.raises(UsageError) as err:
        load_web_config(path)
    assert str(err.value).startswith(f"{path}:4: tls_server_config.client_allowed_sans: unknown key; allowed here: cert_file")


def test_basic_auth_check(pki: Pki) -> None:
    import base64

    active = load_web_config(_write(pki, "auth", f"basic_auth_users:\n  alice: '{HASH}'\n"))

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert active.check_basic_auth(header("alice", "s3cret"))
    assert active.check_basic_auth(header("alice", "s3cret"))  # cached answer, same verdict
    assert not active.check_basic_auth(header("alice", "wrong"))
    assert not active.check_basic_auth(header("bob", "s3cret"))
    assert not active.check_basic_auth(None)
    assert not active.check_basic_auth("Bearer abc")
    assert not active.check_basic_auth("Basic !!!")
