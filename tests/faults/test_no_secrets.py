"""No secret anywhere: the loop (check, snapshot-baseline, initiative start, verify -o json,
report) through an authenticating TLS gateway with known secrets in the secret files,
plus the failure paths (refused token, a gateway that echoes the credentials in its
error, URL userinfo in the spec); every stdout and stderr, every file of the store and
the report are searched for the secrets.

The commands run in one child Python process through ``obsctl.cli:main`` (the console
script's entry point), so whatever reaches the real file descriptors (warnings, logging,
tracebacks) is searched too.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.faultkit import write_fault_spec
from support.faultproxy import FaultProxy
from support.openssl_certs import SERVER_NAME

TOKEN = "tok-SECRET-a1b2c3d4e5"
PASSWORD = "pw-SECRET-f6a7b8c9"
HEADER_SECRET = "hdr-SECRET-0d1e2f3a"
URL_PASSWORD = "url-SECRET-4b5c6d7e"
TENANT = "team-inference"
SECRETS = [TOKEN, PASSWORD, HEADER_SECRET, URL_PASSWORD, base64.b64encode(f"obsctl:{PASSWORD}".encode()).decode()]

DRIVER = """
import json, sys
from obsctl.cli import main
for argv in json.loads(sys.argv[1]):
    for stream in (sys.stdout, sys.stderr):
        print("=== " + " ".join(argv[:1]), file=stream, flush=True)
    try:
        main(argv)
        rc = 0
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    print(f"=== rc {rc}", file=sys.stdout, flush=True)
"""


def run_commands(commands: list[list[str]]) -> tuple[str, str, list[int]]:
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    codes = [int(line.split()[-1]) for line in done.stdout.splitlines() if line.startswith("=== rc ")]
    assert len(codes) == len(commands), done.stdout + done.stderr
    return done.stdout, done.stderr, codes


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def files_holding_secrets(*roots: Path) -> list[str]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            if path.is_file() and any(s.encode() in path.read_bytes() for s in SECRETS):
                found.append(str(path))
    return found


@pytest.fixture
def secret_files(tmp_path):
    folder = tmp_path / "secrets"
    folder.mkdir()
    for name, value in (("token", TOKEN), ("password", PASSWORD), ("api-key", HEADER_SECRET)):
        (folder / name).write_text(value + "\n")
    return folder


def test_no_secret_in_any_output_store_or_report(tmp_path, history, pki, secret_files):
    tls = {"ca_file": str(pki.ca[0]), "cert_file": str(pki.client[0]), "key_file": str(pki.client[1]), "server_name": SERVER_NAME}
    headers = {"X-Scope-OrgID": {"values": [TENANT]}, "X-Api-Key": {"files": [str(secret_files / "api-key")]}}
    required = {"Authorization": f"Bearer {TOKEN}", "X-Scope-OrgID": TENANT, "X-Api-Key": HEADER_SECRET}
    store, reports = tmp_path / "store", tmp_path / "reports"
    with FaultProxy(history.prometheus_url, tls=(pki.server[0], pki.server[1], pki.ca[0]), required_headers=required) as gw:
        bearer = write_fault_spec(tmp_path / "bearer.yaml", gw.url, store, tls_config=tls, http_headers=headers,
                                  authorization={"credentials_file": str(secret_files / "token")})
        spec = str(bearer)
        # 1. the loop, every command with a secret on the wire
        out, err, codes = run_commands([
            ["check", "--spec", spec], ["check", "--spec", spec, "-o", "json"],
            ["snapshot-baseline", "--spec", spec, "--class", "steady", "--window", "1h", "--end", history.iso(1), "-o", "json"],
            ["initiative", "start", "--spec", spec, "--name", "tune", "--lever", "batch-size", "--class", "steady",
             "--signal", "tokens_per_second", "--started-at", history.iso(1), "-o", "json"],
            ["verify", "--spec", spec, "--class", "steady", "--end", history.iso(2), "-o", "json"],
        ])
        assert codes[:4] == [0, 0, 0, 0], out + err
        assert codes[4] in (0, 10, 11, 12, 13, 14), out + err  # a verdict, whichever
        verified = json.loads(out.split("=== verify\n", 1)[1].rsplit("=== rc", 1)[0])
        initiative_id = verified["initiative"] if isinstance(verified.get("initiative"), str) else verified["initiative"]["id"]
        assert all(h.get("Authorization") == f"Bearer {TOKEN}" and h.get("X-Api-Key") == HEADER_SECRET for _, h, _ in gw.seen)
        # 2. the report, then the failure paths: a refused token, a gateway echoing the credentials
        (secret_files / "token").write_text("tok-SECRET-not-the-right-one\n")
        SECRETS.append("tok-SECRET-not-the-right-one")
        out2, err2, codes2 = run_commands([
            ["report", "--spec", spec, "--initiative", initiative_id, "--out", str(reports)],
            ["snapshot-baseline", "--spec", spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)],
        ])
        assert codes2 == [0, 3], out2 + err2
        assert "the credentials were refused: check prometheus.authorization" in err2
        (secret_files / "token").write_text(TOKEN + "\n")
        gw.required_headers.clear()
        gw.mode = "echo_credentials500"
        basic = write_fault_spec(tmp_path / "basic.yaml", gw.url, store, tls_config=tls, http_headers=headers,
                                 basic_auth={"username": "obsctl", "password_file": str(secret_files / "password")})
        userinfo = yaml.safe_load(bearer.read_text())
        userinfo["prometheus"] = {"url": f"https://obsctl:{URL_PASSWORD}@{SERVER_NAME}:9090"}
        (tmp_path / "userinfo.yaml").write_text(yaml.safe_dump(userinfo, sort_keys=False))
        out3, err3, codes3 = run_commands([
            ["snapshot-baseline", "--spec", spec, "--class", "steady", "--window", "1h", "--end", history.iso(1)],
            ["verify", "--spec", str(basic), "--class", "steady", "--end", history.iso(2), "-o", "json"],
            ["check", "--spec", str(tmp_path / "userinfo.yaml")], ["check", "--spec", str(tmp_path / "userinfo.yaml"), "-o", "json"],
            ["snapshot-baseline", "--spec", str(tmp_path / "userinfo.yaml")],
        ])
        assert codes3 == [3, 3, 2, 2, 2], out3 + err3
        assert "rejected request with" in err3 and "<secret>" in err3  # the echo arrived, scrubbed
        assert "must not hold a user or password" in err3
    everything = "\n".join([out, err, out2, err2, out3, err3])
    assert leaks(everything) == [], everything
    assert files_holding_secrets(store, reports) == []
    assert list(reports.glob("*.md")), "report not written"
