"""Certificates made with the ``openssl`` command at test time (no committed keys).

:func:`make_pki` writes a private CA, a server certificate and a client certificate signed
by it, and a second CA that signs nothing served (for "unknown CA" tests); :func:`issue`
signs more (a rotated server certificate, a client from another CA). The server's
subjectAltName defaults to IP:127.0.0.1 and DNS:localhost; the fault tests ask for
``DNS:`` :data:`SERVER_NAME` only, so a client reaching 127.0.0.1 needs
``tls_config.server_name``. EC P-256 keys: fast to generate (tens of milliseconds each).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from obsctl.processes import run_progressing

#: The DNS name of the fault tests' server certificate (not resolvable; sent as SNI).
SERVER_NAME = "prometheus.obsctl.test"
#: Default subjectAltName of server certificates.
LOCAL_SANS = "IP:127.0.0.1,DNS:localhost"


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        pytest.fail("openssl not found (install it: scripts/install-system-deps.sh)")
    result = run_progressing([exe, *args], stall=60, cwd=cwd)  # stopped when stalled, not when slowed down
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])}: {result.stderr.strip()}")


def make_ca(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: ``(<name>.crt, <name>.key)`` in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=folder)
    return folder / f"{name}.crt", folder / f"{name}.key"


def issue(folder: Path, ca: tuple[Path, Path], name: str, cn: str, server: bool,
          sans: str = LOCAL_SANS) -> tuple[Path, Path]:
    """A certificate signed by ``ca``: ``(<name>.crt, <name>.key)``; server ones carry
    subjectAltName ``sans`` (openssl syntax) and serverAuth, client ones clientAuth."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=folder)
    ext = folder / f"{name}.ext"
    ext.write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n" if server
                   else "extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", "-extfile", ext.name, cwd=folder)
    return folder / f"{name}.crt", folder / f"{name}.key"


@dataclass
class Pki:
    """``ca``: (crt, key); ``server`` and ``client``: (crt, key) signed by it; ``other_ca``:
    (crt, key) of a CA that signed nothing here; ``folder``."""

    folder: Path
    ca: tuple[Path, Path]
    server: tuple[Path, Path]
    client: tuple[Path, Path]
    other_ca: tuple[Path, Path]


def make_pki(folder: Path, server_sans: str = LOCAL_SANS) -> Pki:
    """A CA (``ca.crt``), a server certificate (subjectAltName ``server_sans``), a client
    certificate and a second CA (``other-ca.crt``), all in ``folder``."""
    ca = make_ca(folder, "ca")
    return Pki(folder, ca, issue(folder, ca, "server", "127.0.0.1", True, server_sans),
               issue(folder, ca, "client", "prometheus", False), make_ca(folder, "other-ca"))
