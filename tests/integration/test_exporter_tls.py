"""obsctl-exporter with --web.config.file, as a process, against real clients.

* TLS with a client certificate and TLS with basic auth, scraped by a real Prometheus whose
  scrape configs carry the matching ``tls_config`` / ``basic_auth``: ``up == 1`` and a price
  value; a wrong password and a missing client certificate give ``up == 0``.
* Rotation: a new server certificate and new users take effect without a restart; a broken
  new web config is logged once and the last good one stays.
* The dcgm source over TLS with a private CA, a client certificate and basic auth from a
  password file; the password appears in no log line and no metric.
* Clean logs: a half-sent request is not served as a scrape; a client that resets the
  connection is at most one logfmt debug line, never a traceback.

Certificates are made with openssl per test (tests/support/openssl_certs.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests

from support.dcgm_standin import DcgmStandIn
from support.openssl_certs import Pki, issue, make_pki
from support.polling import wait_until
from support.prometheus import scraped
from support.servers import Prometheus, free_port

PASSWORD = "hunter2-s3cret-pw"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


def exporter_argv() -> list[str]:
    script = shutil.which("obsctl-exporter")
    return [script] if script else [sys.executable, "-m", "obsctl.exporters.main"]


class Exporter:
    def __init__(self, tmp: Path, *args: str) -> None:
        self.port = free_port()
        self.log = tmp / f"exporter-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([*exporter_argv(), f"--web.listen-address=127.0.0.1:{self.port}",
                                          "--log.level=debug", *args], stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"exporter exited at start:\n{self.output()}")
            return "listening on" in self.output()

        wait_until(listening, 30, what=lambda: f"the exporter to listen:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


@pytest.fixture()
def start(tmp_path: Path) -> Iterator:
    running: list[Exporter] = []

    def _start(*args: str) -> Exporter:
        running.append(Exporter(tmp_path, *args))
        return running[-1]

    try:
        yield _start
    finally:
        for exp in running:
            if exp.proc.poll() is None:
                exp.proc.kill()
                exp.proc.wait()


@pytest.fixture()
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def web_config(pki: Pki, name: str, text: str) -> Path:
    path = pki.folder / name
    path.write_text(text)
    return path


def assert_clean_log(text: str) -> None:
    assert "Traceback" not in text, text
    for line in text.splitlines():
        assert re.match(r'^ts=\S+ level=(debug|info|warn|error) logger=\S+ msg=".*"$', line), line


def by_job(prom: Prometheus, promql: str, at: float) -> dict[str, str]:
    """job -> value of ``promql`` at ``at``."""
    data = requests.get(prom.url + "/api/v1/query", params={"query": promql, "time": at}, timeout=5).json()
    return {r["metric"].get("job", ""): r["value"][1] for r in data["data"]["result"]}


def test_prometheus_scrapes_over_tls_with_client_cert_and_basic_auth(
        start, pki: Pki, tmp_path: Path, example_spec_path: Path) -> None:
    tls = f"tls_server_config:\n  cert_file: {pki.server[0].name}\n  key_file: {pki.server[1].name}\n"
    mtls = web_config(pki, "mtls.yml", tls + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")
    basic = web_config(pki, "basic.yml", tls + f"basic_auth_users:\n  prometheus: '{HASH}'\n"
                                               "http_server_config:\n  headers: {X-Frame-Options: deny}\n")
    a = start("--gpu.source=none", f"--config.file={example_spec_path}", f"--web.config.file={mtls}")
    b = start("--gpu.source=none", f"--config.file={example_spec_path}", f"--web.config.file={basic}")
    (pki.folder / "password").write_text(PASSWORD + "\n")
    (pki.folder / "wrong").write_text("not-the-password\n")
    ca = str(pki.ca[0])
    client = {"cert_file": str(pki.client[0]), "key_file": str(pki.client[1])}
    jobs = {"mtls": a.port, "basic": b.port, "mtls-no-cert": a.port, "basic-wrong": b.port}
    prom = Prometheus(tmp_path / "prom", scrape_targets={j: [f"127.0.0.1:{p}"] for j, p in jobs.items()},
                      scrape_interval="1s", scrape_options={
                          "mtls": {"scheme": "https", "tls_config": {"ca_file": ca, **client}},
                          "basic": {"scheme": "https", "tls_config": {"ca_file": ca},
                                    "basic_auth": {"username": "prometheus", "password_file": str(pki.folder / "password")}},
                          "mtls-no-cert": {"scheme": "https", "tls_config": {"ca_file": ca}},
                          "basic-wrong": {"scheme": "https", "tls_config": {"ca_file": ca},
                                          "basic_auth": {"username": "prometheus", "password_file": str(pki.folder / "wrong")}},
                      })
    prom.start()
    try:
        at = scraped(prom.url)  # every target scraped once; the prices came in the same scrapes
        up = by_job(prom, "up", at)
        prices = by_job(prom, "obsctl_node_price_usd_per_hour", at)
    finally:
        prom.stop()
    assert up == {"mtls": "1", "basic": "1", "mtls-no-cert": "0", "basic-wrong": "0"}
    assert prices == {"mtls": "0.4", "basic": "0.4"}  # examples/obsctl.yaml pricing.node_hour_usd

    # the same refusals seen directly, and the configured header on answers
    url_b = f"https://127.0.0.1:{b.port}/metrics"
    assert requests.get(url_b, verify=ca, auth=("prometheus", "wrong"), timeout=10).status_code == 401
    ok = requests.get(url_b, verify=ca, auth=("prometheus", PASSWORD), timeout=10)
    assert ok.status_code == 200 and ok.headers["X-Frame-Options"] == "deny"
    with pytest.raises(requests.exceptions.SSLError):  # no client certificate: the handshake fails
        requests.get(f"https://127.0.0.1:{a.port}/metrics", verify=ca, timeout=10)
    assert requests.get(f"https://127.0.0.1:{a.port}/metrics", verify=ca, cert=(client["cert_file"], client["key_file"]),
                        timeout=10).status_code == 200
    assert a.stop() == 0 and b.stop() == 0
    for exp in (a, b):
        assert_clean_log(exp.output())
        assert PASSWORD not in exp.output() and HASH not in exp.output()


def _peer_fingerprint(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def _fingerprint(pem: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.read_text())).hexdigest()


def test_certificate_and_users_rotate_without_restart(start, pki: Pki) -> None:
    cert, key = pki.folder / "live.crt", pki.folder / "live.key"
    shutil.copy(pki.server[0], cert)
    shutil.copy(pki.server[1], key)
    cfg = web_config(pki, "web.yml", f"tls_server_config: {{cert_file: live.crt, key_file: live.key}}\n"
                                     f"basic_auth_users:\n  alice: '{HASH}'\n")
    exp = start("--gpu.source=none", f"--web.config.file={cfg}")
    url, ca = f"https://127.0.0.1:{exp.port}/metrics", str(pki.ca[0])
    assert _peer_fingerprint(exp.port, pki.ca[0]) == _fingerprint(pki.server[0])
    assert requests.get(url, verify=ca, auth=("alice", PASSWORD), timeout=10).status_code == 200

    new_cert, new_key = issue(pki.folder, pki.ca, "server2", "127.0.0.1", True)
    for src, dst in ((new_key, key), (new_cert, cert)):  # as cert-manager does: replace the files
        shutil.copy(src, dst.with_suffix(".tmp"))
        os.replace(dst.with_suffix(".tmp"), dst)
    assert _fingerprint(new_cert) != _fingerprint(pki.server[0])
    assert _peer_fingerprint(exp.port, pki.ca[0]) == _fingerprint(new_cert)

    bob = bcrypt.hashpw(b"bobs-password", bcrypt.gensalt(4)).decode()
    cfg.write_text(f"tls_server_config: {{cert_file: live.crt, key_file: live.key}}\nbasic_auth_users:\n  bob: '{bob}'\n")
    assert requests.get(url, verify=ca, auth=("bob", "bobs-password"), timeout=10).status_code == 200
    assert requests.get(url, verify=ca, auth=("alice", PASSWORD), timeout=10).status_code == 401

    cfg.write_text("tls_server_config: {cert_file: live.crt\n")  # broken: keeps the last good config
    for _ in range(3):
        assert requests.get(url, verify=ca, auth=("bob", "bobs-password"), timeout=10).status_code == 200
    assert exp.stop() == 0
    out = exp.output()
    assert out.count("web config not reloaded") == 1, out
    assert out.count("web config reloaded") >= 2
    assert_clean_log(out)


def test_dcgm_source_over_tls_with_private_ca_client_cert_and_basic_auth(start, pki: Pki, tmp_path: Path,
                                                                        fixtures_dir: Path) -> None:
    fixture = (fixtures_dir / "dcgm" / "datadog-t4.txt").read_text()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*pki.server)
    server_ctx.load_verify_locations(cafile=str(pki.ca[0]))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    expected_auth = "Basic " + base64.b64encode(f"obsctl:{PASSWORD}".encode()).decode()
    dcgm = DcgmStandIn(fixture, tls=server_ctx, authorization=expected_auth)
    try:
        (tmp_path / "dcgm-password").write_text(PASSWORD + "\n")
        cfg = tmp_path / "exporter.yml"
        cfg.write_text(f"dcgm:\n  url: {dcgm.url}\n  tls_config:\n    ca_file: {pki.ca[0]}\n"
                       f"    cert_file: {pki.client[0]}\n    key_file: {pki.client[1]}\n"
                       "  basic_auth: {username: obsctl, password_file: dcgm-password}\n")
        exp = start("--gpu.source=dcgm", f"--config.file={cfg}")
        body = requests.get(f"http://127.0.0.1:{exp.port}/metrics", timeout=15).text
        assert 'obsctl_exporter_scrape_collector_success{collector="gpu"} 1.0' in body, body[-2000:]
        # an independent reading of the fixture: the first T4's power in watts
        watts = re.search(r'^DCGM_FI_DEV_POWER_USAGE\{[^}]*UUID="(GPU-[^"]+)"[^}]*\} (\S+)', fixture, re.M)
        assert f'obsctl_gpu_power_watts{{gpu="0",uuid="{watts.group(1)}"}} {float(watts.group(2))!r}' in body
        assert dcgm.seen_authorization == expected_auth

        dcgm.authorization = "Basic " + base64.b64encode(b"obsctl:another").decode()  # the password is refused

        def refused() -> bool:  # shown once the next background collection has run
            nonlocal body
            body = requests.get(f"http://127.0.0.1:{exp.port}/metrics", timeout=15).text
            return 'reason="dcgm_bad_response"' in body

        wait_until(refused, 60, what=lambda: f"the refused password reported:\n{body[-2000:]}")
        assert exp.stop() == 0
    finally:
        dcgm.close()
    out = exp.output()
    assert "HTTP 401 (credentials refused" in out
    for secret in (PASSWORD, base64.b64encode(f"obsctl:{PASSWORD}".encode()).decode()):
        assert secret not in out and secret not in body
    assert_clean_log(out)


def test_dcgm_url_with_a_password_is_refused_without_printing_it() -> None:
    result = subprocess.run([*exporter_argv(), "--gpu.source=dcgm", "--dcgm.url=http://admin:pa55-w0rd@127.0.0.1:9400/metrics"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "pa55-w0rd" not in result.stdout + result.stderr
    assert "basic_auth" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_half_sent_request_is_not_served_and_resets_log_one_debug_line(start, fixtures_dir: Path) -> None:
    dcgm = DcgmStandIn((fixtures_dir / "dcgm" / "datadog-t4.txt").read_bytes())
    try:
        # collection on every scrape, so a request served as a scrape would show as a dcgm fetch
        exp = start("--gpu.source=dcgm", f"--dcgm.url={dcgm.url}", "--collector.interval=0s")
        served = dcgm.requests
        for partial in (b"GET /metrics HTTP/1.1\r\nHost: x\r\n", b"GET /metrics HTT"):
            with socket.create_connection(("127.0.0.1", exp.port), timeout=5) as sock:
                sock.sendall(partial)
                sock.shutdown(socket.SHUT_WR)  # the client goes away mid-request
                assert sock.recv(100) == b""  # closed without an answer
        wait_until(lambda: exp.output().count("went away mid-request") == 2, 10, what=lambda: f"both half-sent requests logged:\n{exp.output()}")
        assert dcgm.requests == served, "a half-sent request was served as a scrape"

        for _ in range(3):  # a full request, then a reset before the answer is read
            sock = socket.create_connection(("127.0.0.1", exp.port), timeout=5)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        time.sleep(1.0)
        assert requests.get(f"http://127.0.0.1:{exp.port}/metrics", timeout=15).status_code == 200
        assert exp.stop() == 0
    finally:
        dcgm.close()
    out = exp.output()
    assert_clean_log(out)
    assert out.count("went away mid-request") == 2
    # The 3 resets: at most one debug line each (the server sees a reset only when it lands
    # before the answer is written out, so some may pass unseen), each naming its own client.
    gone = [ln for ln in out.splitlines() if "went away:" in ln]
    clients = [re.search(r"client (\S+) went away:", ln).group(1) for ln in gone]
    assert 1 <= len(gone) <= 3 and all("level=debug" in ln for ln in gone), out
    assert len(set(clients)) == len(clients), out  # no reset logged twice
    assert not re.search(r"level=(warn|error).*(BrokenPipe|ConnectionReset|went away)", out), out
