"""Test certificates made with the ``openssl`` command at test time: a private CA, a
server certificate (SAN: DNS name only, so a client reaching 127.0.0.1 needs
``tls_config.server_name``) and a client certificate, all signed by it.

``make_pki(folder)`` returns a :class:`PKI` of PEM file paths. EC P-256 keys keep it fast
(a few tens of milliseconds per key).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_NAME = "prometheus.obsctl.test"


@dataclass
class PKI:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca_cert: Path  # a second CA that signed nothing we serve (for "unknown CA" tests)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=cwd)


def _ca(name: str, cwd: Path) -> tuple[Path, Path]:
    key, cert = cwd / f"{name}.key", cwd / f"{name}.crt"
    _key(key, cwd)
    _openssl("req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=cwd)
    return cert, key


def _leaf(name: str, ca: tuple[Path, Path], extensions: str, cwd: Path) -> tuple[Path, Path]:
    key, csr, cert, ext = cwd / f"{name}.key", cwd / f"{name}.csr", cwd / f"{name}.crt", cwd / f"{name}.ext"
    _key(key, cwd)
    _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}", cwd=cwd)
    ext.write_text(extensions)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-out", str(cert), "-days", "2", "-extfile", str(ext), cwd=cwd)
    return cert, key


def make_pki(folder: Path) -> PKI:
    """CA, server and client certificates under ``folder`` (created)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is not installed (scripts/install-system-deps.sh installs it)")
    folder.mkdir(parents=True, exist_ok=True)
    ca = _ca("test-ca", folder)
    other, _ = _ca("other-ca", folder)
    server = _leaf("server", ca, f"subjectAltName=DNS:{SERVER_NAME}\nextendedKeyUsage=serverAuth\n", folder)
    client = _leaf("client", ca, "extendedKeyUsage=clientAuth\n", folder)
    return PKI(ca[0], ca[1], server[0], server[1], client[0], client[1], other)
