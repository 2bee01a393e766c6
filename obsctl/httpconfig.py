"""HTTP client settings spelled as Prometheus spells them, and the session they make.

The subset of Prometheus' own HTTP client configuration (``authorization``,
``basic_auth``, ``tls_config``, ``http_headers``, ``proxy_url``,
``proxy_from_environment``; https://prometheus.io/docs/prometheus/latest/configuration/configuration/#http_config)
that a client of a Prometheus-style API needs. Secrets come only from files
(``credentials_file``, ``password_file``, header ``files``), read each time a request is
sent, so a config can be committed and a rotated token needs no restart; inline secrets
(``credentials``, ``password``, header ``secrets``) are refused.

API (small on purpose; the spec's ``prometheus:`` block and the exporter's DCGM source use it):

- :class:`HTTPClientConfig`: the pydantic model (unknown keys refused); embed it or subclass it.
- :func:`session_for` ``(cfg, base_dir=None, label="http client") -> ConfiguredSession``:
  a ``requests.Session`` with TLS, proxy, auth and headers applied; relative file paths
  are resolved against ``base_dir`` (the config file's folder, as Prometheus does).
- :meth:`ConfiguredSession.scrub` ``(text) -> str``: ``text`` with every secret the
  session has sent, raw or in an encoded form a server may echo (URL-encoded,
  JSON-escaped, base64), replaced by ``<secret>`` (for messages that echo a server's words).
- :func:`check_files` ``(cfg, base_dir=None, label=...)``: every configured file usable
  (raises :class:`SecretFileError`); call it at start-up for an early, clear error.
- :func:`redact_url` ``(url) -> str``: the URL without userinfo and query, safe to print.
- :func:`validate_url` ``(value, what="server") -> str``: for a pydantic validator of a
  URL field; refuses spaces, userinfo, query, bad host/port without echoing the value.
- :func:`read_secret` ``(path, field) -> str``: one secret file's stripped content.
- :class:`SecretFileError` (a :class:`obsctl.errors.UsageError`, exit 2): a secret file
  is missing, unreadable, empty or holds a line break; the message names the field and
  the path, never the content.

Requests made with :func:`obsctl.httpfetch.bounded_get` on such a session get a total
deadline (connect + headers + body) and a body cap.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import stat
import urllib.parse
from pathlib import Path
from typing import Any, Literal

import requests
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from obsctl.errors import UsageError
from obsctl.httpfetch import TransportAdapter

# RFC 9110 field-name token.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$")
#: Headers Prometheus refuses in ``http_headers`` (common/config/headers.go): set by
#: the client itself or by the dedicated options (``authorization``, ``basic_auth``).
RESERVED_HEADERS = frozenset(h.lower() for h in (
    "Authorization", "Host", "Content-Encoding", "Content-Length", "Content-Type", "User-Agent", "Connection",
    "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Www-Authenticate", "Accept-Encoding",
    "X-Prometheus-Remote-Write-Version", "X-Prometheus-Remote-Read-Version", "X-Prometheus-Scrape-Timeout-Seconds",
    "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256",
))
#: Largest secret file read (a token or password is bytes to a few KiB).
MAX_SECRET_BYTES = 64 * 1024
#: Connections kept per host by a session (requests' default is 10).
POOL_MAXSIZE = 16
SECRET_PLACEHOLDER = "<secret>"


class SecretFileError(UsageError):
    """A secret file cannot be used; the message names the field and path, never the content (exit 2).

    Attributes:
        field: the option's dotted name, e.g. ``prometheus.authorization.credentials_file``
            (``http_headers.<name>.files[<i>]`` for header files), so a caller can add
            where in its config file that option is.
    """

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _inline_refused(data: Any, keys: tuple[str, ...], use: str) -> Any:
    if isinstance(data, dict):
        for key in keys:
            if key in data:
                raise ValueError(f"inline secret {key!r} is not accepted (it would be committed with the file); use {use}")
    return data


def _file_path(value: str) -> str:
    if not value.strip() or "\x00" in value:
        raise ValueError("must be a file path")
    return value


class Authorization(_Strict):
    """``Authorization: <type> <credentials>`` with the credentials read from a file.

    Attributes:
        type: the scheme, default ``Bearer`` (``Basic`` is refused: use ``basic_auth``).
        credentials_file: file holding the token (surrounding whitespace stripped).
    """

    type: str = "Bearer"
    credentials_file: str

    @model_validator(mode="before")
    @classmethod
    def _no_inline(cls, data: Any) -> Any:
        return _inline_refused(data, ("credentials",), "credentials_file")

    @field_validator("type")
    @classmethod
    def _scheme(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$", value):
            raise ValueError("must be one word such as Bearer")
        if value.lower() == "basic":
            raise ValueError("'Basic' is set with basic_auth (username, password_file), not authorization")
        return value

    @field_validator("credentials_file")
    @classmethod
    def _path(cls, value: str) -> str:
        return _file_path(value)


class BasicAuth(_Strict):
    """HTTP basic authentication; the password is read from a file.

    Attributes:
        username: the user name (not a secret; no ``:``).
        password_file: file holding the password (surrounding whitespace stripped).
    """

    username: str = Field(min_length=1)
    password_file: str

    @model_validator(mode="before")
    @classmethod
    def _no_inline(cls, data: Any) -> Any:
        return _inline_refused(data, ("password",), "password_file")

    @field_validator("username")
    @classmethod
    def _user(cls, value: str) -> str:
        if ":" in value or not value.isprintable():
            raise ValueError("must be printable and hold no ':'")
        return value

    @field_validator("password_file")
    @classmethod
    def _path(cls, value: str) -> str:
        return _file_path(value)


class TLSConfig(_Strict):
    """TLS settings of the client (Prometheus' ``tls_config``).

    Attributes:
        ca_file: CA certificates (PEM) to verify the server with, instead of the system ones.
        cert_file, key_file: client certificate and its key (PEM), for servers that
            require one; both or neither.
        server_name: name sent as SNI and that the server certificate must match
            (default: the URL's host).
        insecure_skip_verify: do not verify the server certificate at all.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False

    @model_validator(mode="before")
    @classmethod
    def _no_inline(cls, data: Any) -> Any:
        return _inline_refused(data, ("key", "ca", "cert"), "ca_file, cert_file and key_file")

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _paths(cls, value: str | None) -> str | None:
        return None if value is None else _file_path(value)

    @field_validator("server_name")
    @classmethod
    def _server_name(cls, value: str | None) -> str | None:
        if value is not None and not _HOSTNAME.match(value):
            raise ValueError("must be a DNS host name such as prometheus.example.com")
        return value

    @model_validator(mode="after")
    def _pair(self) -> TLSConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: set both or neither")
        return self


class Header(_Strict):
    """Values of one extra request header (Prometheus' ``http_headers`` entry).

    Attributes:
        values: plain values (not secret: they may be printed).
        files: files whose content (whitespace stripped) is a value: for secret values.

    Several values are sent as one comma-separated header (the same thing in HTTP).
    """

    values: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _simple_form(cls, data: Any) -> Any:
        # ``X-Scope-OrgID: tenant-a`` and ``X-Scope-OrgID: [a, b]`` are short for {values: [...]}.
        if isinstance(data, str):
            return {"values": [data]}
        if isinstance(data, list):
            return {"values": data}
        return _inline_refused(data, ("secrets",), "files")

    @field_validator("values")
    @classmethod
    def _printable(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or not value.isprintable() or not value.isascii() or value != value.strip():
                raise ValueError("header values must be non-empty printable ASCII, without line breaks or surrounding spaces")
        return values

    @field_validator("files")
    @classmethod
    def _paths(cls, values: list[str]) -> list[str]:
        return [_file_path(v) for v in values]

    @model_validator(mode="after")
    def _some(self) -> Header:
        if not self.values and not self.files:
            raise ValueError("needs at least one of values or files")
        return self


def _check_url(value: str, what: str) -> str:
    """Validate an http(s) URL: no spaces, a host, a port in range, no userinfo."""
    example = "http://127.0.0.1:9090" if what == "server" else "http://proxy.example:3128"
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"must be an http:// or https:// URL without spaces or control characters, e.g. {example}")
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:  # an unclosed [IPv6 literal
        raise ValueError(f"has no valid host name or address (an IPv6 address goes in brackets: http://[::1]:9090), e.g. {example}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"must be an http:// or https:// URL, e.g. {example}")
    if "@" in parts.netloc:
        # Never echo the value: it holds the password.
        hint = "use basic_auth with password_file" if what == "server" else "proxy credentials are not supported"
        raise ValueError(f"must not hold a user or password (user:password@): it would be printed in errors; {hint}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"has an invalid port (1-65535), e.g. {example}")
    host = parts.hostname or ""
    if not host or (not _HOSTNAME.match(host) and not _is_ip(host)):
        raise ValueError(f"has no valid host name or address, e.g. {example}")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise ValueError("must not have a query (?...) or fragment (#...)")
    return value


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def validate_url(value: str, what: str = "server") -> str:
    """``value`` if it is a usable http(s) URL (see :class:`HTTPClientConfig`), else ValueError.

    Refuses spaces and control characters, other schemes, a missing or invalid host or
    port, a query or fragment, and userinfo (``user:pass@``, which would be printed in
    errors). The ValueError never repeats the URL. For pydantic field validators.
    """
    return _check_url(value, what)


class HTTPClientConfig(_Strict):
    """Prometheus' HTTP client options (the subset above); every field optional.

    Attributes:
        authorization: ``Authorization`` header from a credentials file (bearer token).
        basic_auth: user name and password file (exclusive with ``authorization``).
        tls_config: CA, client certificate, server name, verification.
        http_headers: extra headers, ``{name: {values: [...], files: [...]}}`` or
            ``{name: value}``; reserved headers (Authorization, Host, ...) refused.
        proxy_url: HTTP(S) proxy for every request (no userinfo).
        proxy_from_environment: use ``HTTP(S)_PROXY``/``NO_PROXY`` (default off, as in
            Prometheus; also keeps ``~/.netrc`` and ``REQUESTS_CA_BUNDLE`` out).
    """

    authorization: Authorization | None = None
    basic_auth: BasicAuth | None = None
    tls_config: TLSConfig = Field(default_factory=TLSConfig)
    http_headers: dict[str, Header] = Field(default_factory=dict)
    proxy_url: str | None = None
    proxy_from_environment: bool = False

    @field_validator("http_headers")
    @classmethod
    def _header_names(cls, headers: dict[str, Header]) -> dict[str, Header]:
        for name in headers:
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid header name")
            if name.lower() in RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is reserved; use authorization or basic_auth for credentials")
        return headers

    @field_validator("proxy_url")
    @classmethod
    def _proxy(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value, "proxy")

    @model_validator(mode="after")
    def _one_auth(self) -> HTTPClientConfig:
        if self.authorization is not None and self.basic_auth is not None:
            raise ValueError("at most one of authorization and basic_auth may be set")
        if self.proxy_url is not None and self.proxy_from_environment:
            raise ValueError("proxy_url and proxy_from_environment are mutually exclusive")
        return self


# --- the session ---------------------------------------------------------------------


def read_secret(path: str | os.PathLike[str], field: str, header_value: bool = False) -> str:
    """The content of a secret file, surrounding whitespace stripped.

    ``header_value``: the content is sent as an HTTP header value as it is (a bearer
    token, a header file), so it must be ASCII (http.client would fail on anything else).

    Raises:
        SecretFileError: missing, not a regular file, over :data:`MAX_SECRET_BYTES`, not
            UTF-8, empty, or holding a line break / control character inside; the
            message names ``field`` and ``path``, never the content.
    """
    where = f"{field}: {path}"
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError(f"{where}: not a regular file", field)
        if info.st_size > MAX_SECRET_BYTES:
            raise SecretFileError(f"{where}: {info.st_size} bytes is too large for a secret (at most {MAX_SECRET_BYTES})", field)
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SECRET_BYTES + 1)
    except FileNotFoundError:
        raise SecretFileError(f"{where}: file not found", field) from None
    except OSError as exc:
        raise SecretFileError(f"{where}: cannot read: {exc.strerror or type(exc).__name__}", field) from None
    try:
        text = raw.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise SecretFileError(f"{where}: not UTF-8 text", field) from None
    if not text:
        raise SecretFileError(f"{where}: file is empty", field)
    if not text.isprintable():
        raise SecretFileError(f"{where}: holds a line break or control character (one value per file)", field)
    if header_value and not text.isascii():
        raise SecretFileError(f"{where}: holds non-ASCII characters, which an HTTP header cannot carry", field)
    return text


def _resolver(base_dir: str | os.PathLike[str] | None):
    def resolve(path: str) -> str:
        p = Path(path).expanduser()
        return str(p if p.is_absolute() or base_dir is None else Path(base_dir) / p)
    return resolve


def check_files(cfg: HTTPClientConfig, base_dir: str | os.PathLike[str] | None = None, label: str = "http client") -> None:
    """Fail early, with the field and path, when a file ``cfg`` names cannot be used.

    Secret files are read and checked as :func:`read_secret` does (their content is
    dropped); TLS files must be readable regular files (their PEM is checked by the
    TLS library when connecting). For a command's start or a ``check``.

    Raises:
        SecretFileError: the first unusable file (field, path, reason; never content).
    """
    resolve = _resolver(base_dir)
    if cfg.authorization is not None:
        read_secret(resolve(cfg.authorization.credentials_file), f"{label}.authorization.credentials_file", header_value=True)
    if cfg.basic_auth is not None:
        read_secret(resolve(cfg.basic_auth.password_file), f"{label}.basic_auth.password_file")
    for name, header in cfg.http_headers.items():
        for i, path in enumerate(header.files):
            read_secret(resolve(path), f"{label}.http_headers.{name}.files[{i}]", header_value=True)
    tls = cfg.tls_config
    for field, path in (("ca_file", tls.ca_file), ("cert_file", tls.cert_file), ("key_file", tls.key_file)):
        if path is None:
            continue
        name = f"{label}.tls_config.{field}"
        where = f"{name}: {resolve(path)}"
        try:
            if not stat.S_ISREG(os.stat(resolve(path)).st_mode):
                raise SecretFileError(f"{where}: not a regular file", name)
            with open(resolve(path), "rb") as handle:
                handle.read(1)
        except FileNotFoundError:
            raise SecretFileError(f"{where}: file not found", name) from None
        except OSError as exc:
            raise SecretFileError(f"{where}: cannot read: {exc.strerror or type(exc).__name__}", name) from None


class _FileAuth(requests.auth.AuthBase):
    """Sets Authorization and the extra headers on each request, reading secret files then."""

    def __init__(self, session: ConfiguredSession, cfg: HTTPClientConfig, resolve: Any, label: str):
        self.session, self.cfg, self.resolve, self.label = session, cfg, resolve, label

    def _secret(self, path: str, field: str, header_value: bool = True) -> str:
        value = read_secret(self.resolve(path), f"{self.label}.{field}", header_value)
        self.session._remember(value)
        return value

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        cfg = self.cfg
        if cfg.authorization is not None:
            token = self._secret(cfg.authorization.credentials_file, "authorization.credentials_file")
            request.headers["Authorization"] = f"{cfg.authorization.type} {token}"
        elif cfg.basic_auth is not None:
            password = self._secret(cfg.basic_auth.password_file, "basic_auth.password_file", header_value=False)  # sent base64-encoded
            userpass = f"{cfg.basic_auth.username}:{password}".encode()
            self.session._remember(base64.b64encode(userpass).decode())
            request.headers["Authorization"] = "Basic " + base64.b64encode(userpass).decode("ascii")
        for name, header in cfg.http_headers.items():
            values = list(header.values)
            values += [self._secret(f, f"http_headers.{name}.files[{i}]") for i, f in enumerate(header.files)]
            request.headers[name] = ", ".join(values)
        return request


class ConfiguredSession(requests.Session):
    """A ``requests.Session`` made by :func:`session_for`; see :meth:`scrub`."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()

    def _remember(self, secret: str) -> None:
        """Add ``secret`` and its :func:`_encoded_forms` to what :meth:`scrub` replaces."""
        self._secrets.update(_encoded_forms(secret))

    def scrub(self, text: str) -> str:
        """``text`` with each secret this session has sent (tokens, passwords, secret
        header values, the basic-auth ``user:password`` encoding) replaced by ``<secret>``,
        raw or in any of its :func:`_encoded_forms`.

        Exact matches only: a secret echoed with its case changed, cut short, or base64
        encoded inside a longer string (other than the basic-auth ``user:password``) is
        not recognised.
        """
        for secret in sorted(self._secrets, key=len, reverse=True):  # longest first: a form may contain another
            if len(secret) >= 3:  # a 1-2 character "secret" would shred ordinary text
                text = text.replace(secret, SECRET_PLACEHOLDER)
        return text


def _encoded_forms(secret: str) -> set[str]:
    """``secret`` and the forms a server or gateway may echo it in (a set of str).

    The raw value; URL-encoded (``quote`` with no safe characters, ``quote`` keeping
    ``/``, and ``quote_plus``); JSON-escaped (``json.dumps`` with ASCII escapes and
    without, and with ``/`` written ``\\/``); standard base64 of its UTF-8 bytes.
    Case changes and truncated prefixes are out of scope.
    """
    quoted = {urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret), urllib.parse.quote_plus(secret)}
    escaped = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    escaped |= {e.replace("/", "\\/") for e in escaped}
    return {secret, base64.b64encode(secret.encode()).decode("ascii")} | quoted | escaped


def session_for(cfg: HTTPClientConfig, base_dir: str | os.PathLike[str] | None = None, label: str = "http client") -> ConfiguredSession:
    """A session that applies ``cfg`` to every request.

    Args:
        cfg: the settings.
        base_dir: folder relative file paths are taken from (the config file's folder);
            ``None``: the working directory.
        label: prefix of the field names in :class:`SecretFileError` messages, e.g.
            ``prometheus`` gives ``prometheus.authorization.credentials_file: ...``.

    Returns:
        A :class:`ConfiguredSession`: environment proxies, ``~/.netrc`` and
        ``REQUESTS_CA_BUNDLE`` ignored unless ``proxy_from_environment``; TLS verified
        against ``tls_config.ca_file`` (or the system CAs); client certificate from
        ``cert_file``/``key_file`` (re-read by urllib3 for each new connection); secrets
        read per request. Nothing is read here, so building a session never fails on files.
    """
    resolve = _resolver(base_dir)
    session = ConfiguredSession()
    session.trust_env = cfg.proxy_from_environment
    # verify runs up to ~10 queries at once (the load context and the guards); a larger
    # pool keeps their connections instead of urllib3 discarding them with a warning.
    adapter = TransportAdapter(server_name=cfg.tls_config.server_name, pool_maxsize=POOL_MAXSIZE)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    tls = cfg.tls_config
    session.verify = False if tls.insecure_skip_verify else (resolve(tls.ca_file) if tls.ca_file else True)
    if tls.cert_file and tls.key_file:
        session.cert = (resolve(tls.cert_file), resolve(tls.key_file))
    if cfg.proxy_url:
        session.proxies = {"http": cfg.proxy_url, "https": cfg.proxy_url}
    if cfg.authorization or cfg.basic_auth or cfg.http_headers:
        session.auth = _FileAuth(session, cfg, resolve, label)
    return session


def redact_url(url: str) -> str:
    """``url`` safe to print: userinfo (``user:pass@``) removed, a query replaced by ``?...``.

    Never raises: an unparseable URL gives ``<unprintable URL>``.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        query = "..." if parts.query else ""
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unprintable URL>"


def auth_kind(cfg: HTTPClientConfig) -> Literal["authorization", "basic_auth", "none"]:
    """Which credentials ``cfg`` sends (for messages such as "credentials refused")."""
    return "authorization" if cfg.authorization else "basic_auth" if cfg.basic_auth else "none"
