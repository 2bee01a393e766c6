"""``--web.config.file``: TLS, client certificates, basic auth and response headers for the exporter.

The file is the exporter-toolkit format every Prometheus exporter shares
(https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)::

    tls_server_config:
      cert_file: server.crt            # relative paths: from the web config file's folder
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
      client_ca_file: clients-ca.crt
      min_version: TLS12               # TLS10 | TLS11 | TLS12 (default) | TLS13
      max_version: TLS13
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go names, TLS 1.2 and below
      prefer_server_cipher_suites: true
    http_server_config:
      headers: {X-Frame-Options: deny}
    basic_auth_users:
      alice: $2b$10$...                # bcrypt hash (htpasswd -nBC 10 alice)

Validation follows exporter-toolkit 0.8 as Prometheus 2.42's ``promtool check web-config`` does
(unknown keys, missing key_file/cert_file, unloadable certificate or key, unknown client auth
type / TLS version / cipher, a client CA without a client auth type, headers other than the five
security headers, non-bcrypt hashes or a cost outside 4-31), so every file accepted here passes
promtool. A few things Python's ``ssl`` module cannot do are refused with a reason instead of
being silently weakened: ``RequestClientCert`` / ``RequireAnyClientCert`` (Python verifies every
client certificate it asks for), ``curve_preferences`` (no curve-list API), a verifying client
auth type without ``client_ca_file``, and ``min_version`` above ``max_version``.
``http_server_config.http2`` is accepted and ignored (the exporter speaks HTTP/1.1).

Every error is one line ``<file>:<line>: <field>: <problem>`` (exit 2 at start-up).
:class:`WebConfigWatch` re-reads the file, the certificates, the key and the client CA when one
of them changes (checked at each new connection, as exporter-toolkit builds its TLS config per
connection), so certificate rotation and new users need no restart; a broken new version is
logged once and the last good one stays in force.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from obsctl import yamlio
from obsctl.errors import UsageError
from obsctl.exporters.basicauth import BasicAuth

log = logging.getLogger("obsctl.exporter")

WHAT = "--web.config.file"
TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
#: Go crypto/tls suite names (what exporter-toolkit accepts) -> OpenSSL names. TLS 1.3 suites are
#: accepted (Go accepts them) but not configurable in either library: they map to None.
CIPHER_SUITES: dict[str, str | None] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}
#: exporter-toolkit's configurable response headers -> allowed values (None: any).
HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
_BCRYPT = re.compile(r"^\$2[abxy]?\$(\d\d)\$[./A-Za-z0-9]{53}$")
_VERIFYING = ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TLSServerConfig(_Model):
    """``tls_server_config`` (exporter-toolkit field names; see the module docstring).

    Attributes:
        cert_file, key_file: server certificate chain and key (PEM); both or neither
            (neither: plain HTTP).
        client_auth_type: ``NoClientCert`` (default), ``VerifyClientCertIfGiven``,
            ``RequireAndVerifyClientCert``.
        client_ca_file: CA bundle client certificates are verified against.
        min_version, max_version: ``TLS10`` .. ``TLS13`` (min default ``TLS12``).
        cipher_suites: Go suite names (TLS <= 1.2); empty: OpenSSL's defaults.
        prefer_server_cipher_suites: the server's suite order wins.
    """

    cert_file: str = ""
    key_file: str = ""
    client_auth_type: Literal["", "NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                              "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] = ""
    client_ca_file: str = ""
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] | None = None
    cipher_suites: list[str] = Field(default_factory=list)
    curve_preferences: list[str] = Field(default_factory=list)
    prefer_server_cipher_suites: bool = True

    @field_validator("client_auth_type")
    @classmethod
    def _auth_type(cls, value: str) -> str:
        if value in ("RequestClientCert", "RequireAnyClientCert"):
            raise ValueError(f"{value} is not supported by obsctl-exporter (Python's ssl module verifies every "
                             "client certificate it asks for); use VerifyClientCertIfGiven or RequireAndVerifyClientCert "
                             "with client_ca_file")
        return value

    @field_validator("cipher_suites")
    @classmethod
    def _ciphers(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in CIPHER_SUITES:
                raise ValueError(f"unknown cipher {name!r}; known: {', '.join(CIPHER_SUITES)}")
        return names

    @field_validator("curve_preferences")
    @classmethod
    def _curves(cls, names: list[str]) -> list[str]:
        if names:
            raise ValueError("not supported by obsctl-exporter (Python's ssl module cannot set a curve list); "
                             "remove it to use OpenSSL's default curves")
        return names

    @model_validator(mode="after")
    def _consistent(self) -> TLSServerConfig:
        if self.cert_file and not self.key_file:
            raise ValueError("missing key_file (cert_file and key_file go together)")
        if self.key_file and not self.cert_file:
            raise ValueError("missing cert_file (cert_file and key_file go together)")
        auth = self.client_auth_type or "NoClientCert"
        if self.client_ca_file and auth == "NoClientCert":
            raise ValueError("client_ca_file is set without a client_auth_type (e.g. RequireAndVerifyClientCert)")
        if auth in _VERIFYING and not self.client_ca_file:
            raise ValueError(f"client_auth_type {auth} needs client_ca_file (the CA client certificates are checked against)")
        if self.max_version is not None and TLS_VERSIONS[self.max_version] < TLS_VERSIONS[self.min_version]:
            raise ValueError(f"min_version {self.min_version} is above max_version {self.max_version}")
        return self


class HTTPServerConfig(_Model):
    """``http_server_config``: extra response headers (``http2`` accepted, ignored: HTTP/1.1)."""

    http2: bool = True
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if name not in HEADERS:
                raise ValueError(f"HTTP header {name!r} can not be configured; allowed: {', '.join(HEADERS)}")
            allowed = HEADERS[name]
            if allowed is not None and value not in allowed:
                raise ValueError(f"invalid value for {name}: expected one of {', '.join(allowed)}")
            if not value.isprintable():
                raise ValueError(f"value of {name} must be printable, without line breaks")
            if not value.isascii():  # http.server writes headers as Latin-1; ASCII is what every client reads alike
                raise ValueError(f"value of {name} must be ASCII text (found {next(c for c in value if not c.isascii())!r})")
        return headers


class WebConfig(_Model):
    """The whole ``--web.config.file`` (every section optional; empty file: plain HTTP, no auth)."""

    tls_server_config: TLSServerConfig = Field(default_factory=TLSServerConfig)
    http_server_config: HTTPServerConfig = Field(default_factory=HTTPServerConfig)
    basic_auth_users: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: object) -> object:
        # ``basic_auth_users:`` with nothing under it is YAML null; exporter-toolkit reads it as empty.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @field_validator("basic_auth_users")
    @classmethod
    def _hashes(cls, users: dict[str, str]) -> dict[str, str]:
        for user, hashed in users.items():
            match = _BCRYPT.match(hashed or "")
            if not match:
                # never echo the value: a user may have pasted a password instead of its hash
                raise ValueError(f"user {user!r}: not a bcrypt hash (make one with `htpasswd -nBC 10 {user}`)")
            if not 4 <= int(match.group(1)) <= 31:
                raise ValueError(f"user {user!r}: bcrypt cost {int(match.group(1))} is outside 4-31")
        return users


@dataclass
class ActiveWebConfig:
    """A loaded, checked web config, ready to serve with.

    Attributes:
        path: the file. config: the validated model. auth: its ``basic_auth_users`` checker.
        ssl_context: server context with the certificate, key and client CA loaded; None: plain HTTP.
        files: the files read, with their (mtime_ns, size, inode) when loaded (for change detection).
    """

    path: Path
    config: WebConfig
    ssl_context: ssl.SSLContext | None
    files: dict[Path, tuple[int, int, int]]
    auth: BasicAuth

    @property
    def headers(self) -> dict[str, str]:
        """Extra headers for every response."""
        return self.config.http_server_config.headers

    @property
    def auth_required(self) -> bool:
        """True when ``basic_auth_users`` is not empty."""
        return bool(self.config.basic_auth_users)

    def check_basic_auth(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value names a user with the right password
        (:class:`obsctl.exporters.basicauth.BasicAuth`: cached, and a failure takes as long
        for an unknown user as for a known one)."""
        return self.auth.check(header)


def _resolve(base: Path, name: str) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else base / path


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        info = path.stat()
        return info.st_mtime_ns, info.st_size, info.st_ino
    except OSError:
        return (-1, -1, -1)


def load_web_config(path: str | os.PathLike[str], **auth_options: Any) -> ActiveWebConfig:
    """Read, validate and load ``--web.config.file``.

    Args:
        path: the file. auth_options: passed to :class:`~obsctl.exporters.basicauth.BasicAuth`
            (``hasher``, ``clock``, ``sleep``: for tests).

    Raises:
        UsageError: one line naming the file, the line and the field: YAML problems, unknown
            keys, bad values, certificate / key / CA files that cannot be read or loaded.
    """
    cfg_path = Path(path)
    data, lines = yamlio.load_file(cfg_path, UsageError, WHAT)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{cfg_path}:1: {WHAT} must be a YAML mapping (tls_server_config, http_server_config, "
                         f"basic_auth_users), got a {type(data).__name__}")
    try:
        config = WebConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(yamlio.validation_message(cfg_path, exc, lines, WebConfig)) from None
    base = cfg_path.resolve().parent
    files = {cfg_path.resolve(): _stamp(cfg_path.resolve())}
    tls = config.tls_server_config
    context = None
    if tls.cert_file:
        def where(key: str) -> str:
            line = lines.get(("tls_server_config", key)) or lines.get(("tls_server_config",)) or 1
            return f"{cfg_path}:{line}: tls_server_config.{key}"

        cert, key = _resolve(base, tls.cert_file), _resolve(base, tls.key_file)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = TLS_VERSIONS[tls.min_version]
        if tls.max_version is not None:
            context.maximum_version = TLS_VERSIONS[tls.max_version]
        for name, file in (("cert_file", cert), ("key_file", key)):
            if not file.is_file():
                raise UsageError(f"{where(name)}: {file}: no such file")
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise UsageError(f"{where('cert_file')}: cannot load the certificate {cert} with the key {key}: "
                             f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None
        files[cert] = _stamp(cert)
        files[key] = _stamp(key)
        auth = tls.client_auth_type or "NoClientCert"
        if auth in _VERIFYING:
            ca = _resolve(base, tls.client_ca_file)
            try:
                context.load_verify_locations(cafile=str(ca))
            except (ssl.SSLError, OSError) as exc:
                raise UsageError(f"{where('client_ca_file')}: cannot load the client CA {ca}: "
                                 f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None
            files[ca] = _stamp(ca)
            context.verify_mode = ssl.CERT_REQUIRED if auth == "RequireAndVerifyClientCert" else ssl.CERT_OPTIONAL
        suites = [CIPHER_SUITES[s] for s in tls.cipher_suites if CIPHER_SUITES[s]]
        if suites:
            try:
                context.set_ciphers(":".join(suites))
            except ssl.SSLError:
                raise UsageError(f"{where('cipher_suites')}: none of these suites is available in this OpenSSL") from None
        if tls.prefer_server_cipher_suites:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return ActiveWebConfig(cfg_path, config, context, files, BasicAuth(config.basic_auth_users, **auth_options))


class WebConfigWatch:
    """The web config in force, re-loaded when the file or a file it names changes.

    Args:
        path: the ``--web.config.file`` path; loaded (and validated) at once.

    Raises:
        UsageError: from :func:`load_web_config` at construction (start-up: exit 2).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._active = load_web_config(self.path)
        self._lock = threading.Lock()
        self._last_error = ""

    def current(self) -> ActiveWebConfig:
        """The config to use for a new connection or request: re-loaded first when one of its
        files changed (mtime, size or inode); a config that fails to load is logged once and
        the last good one is returned."""
        active = self._active
        if all(_stamp(p) == s for p, s in active.files.items()):
            return active
        with self._lock:
            if self._active is not active:
                return self._active
            try:
                fresh = load_web_config(self.path)
            except UsageError as exc:
                if str(exc) != self._last_error:
                    self._last_error = str(exc)
                    log.error("web config not reloaded, keeping the previous one: %s", exc)
                return active
            self._active, self._last_error = fresh, ""
            log.info("web config reloaded from %s (tls: %s, basic auth users: %d)", self.path,
                     "on" if fresh.ssl_context else "off", len(fresh.config.basic_auth_users))
            return fresh
