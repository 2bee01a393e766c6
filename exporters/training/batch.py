"""Short and batch jobs (evaluations, fine-tunes) that push their SDK series to a Pushgateway.

A job that ends before Prometheus scrapes it cannot be scraped: it pushes instead, and
Prometheus scrapes the Pushgateway with ``honor_labels: true`` (so the pushed ``job`` and
``instance`` labels are kept). Semantics, following the Pushgateway's own advice:

* **grouping key** ``{job, instance, ...}``: a *stable* identity of the job (its name and
  where it runs, plus anything that tells parallel copies apart), never a run id. A push
  *replaces* the whole group (HTTP PUT), so each run's values replace the previous run's;
  a run id in the grouping key would leave one group per run behind forever. Put the run
  id in the workload's labels (``labels={"run": ...}``, the spec's ``pricing.run_label``).
* **nothing is deleted at job end**: a short job's last values (samples, steps, tokens,
  quality scores) stay in the gateway until the next run replaces them; deleting at the
  end would lose an evaluation's score before Prometheus scrapes it.
* **fresh or stale**: the Pushgateway adds ``push_time_seconds`` (Unix time of the group's
  last successful push) to every group; ``time() - push_time_seconds`` is the age of the
  values. The job also pushes ``obsctl_batch_job_last_success_timestamp_seconds``.
* **a failed run** (the ``with`` block raises) pushes only ``obsctl_batch_job_success 0``
  and its duration (HTTP POST: replaces those two metrics, keeps the rest), so the last
  good run's scores and its success timestamp stay.

Series pushed besides the workload's (same grouping key):

================================================ ===== =======================================
obsctl_batch_job_success                         gauge 1 if the last run finished, 0 if it raised
obsctl_batch_job_duration_seconds                gauge wall time of the last run, seconds
obsctl_batch_job_last_success_timestamp_seconds  gauge Unix time the last successful run ended
================================================ ===== =======================================

Example::

    with BatchJob("mmlu-eval", gateway="pushgateway:9091", labels={"run": run_id}) as job:
        for batch in loader:
            job.workload.count_samples(len(batch))
        job.workload.set_quality_score("mmlu_accuracy", accuracy)
"""

from __future__ import annotations

import base64
import logging
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, pushadd_to_gateway

from obsctl.errors import ObsctlError
from obsctl.exporters.sdk import LABEL_NAME, Workload
from obsctl.httpconfig import SECRET_PLACEHOLDER, redact_url

log = logging.getLogger(__name__)


class PushError(ObsctlError):
    """A push to the Pushgateway failed; the message names the gateway (no credentials) and why."""


class _NotPushgateway(OSError):
    """A 2xx answer that is not the Pushgateway's (an HTML login page of a proxy in front of it)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirected push is not stored (urllib would turn the POST into a GET of a login
    # page and report success): the 3xx surfaces as an HTTPError instead.
    def redirect_request(self, *args, **kwargs):
        return None


def _handler(authorization: str | None, scrub: Callable[[str], str]) -> Callable:
    """prometheus_client push handler: optional ``Authorization``, no redirects, and a 2xx
    answer must be the Pushgateway's (it answers a push with an empty body, never HTML)."""

    def handler(url, method, timeout, headers, data):
        def handle() -> None:
            request = urllib.request.Request(url, data=data, method=method)
            for key, value in headers:
                request.add_header(key, value)
            if authorization:
                request.add_header("Authorization", authorization)
            with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout) as resp:
                body = resp.read(4096)
                kind = resp.headers.get("Content-Type", "") or ""
                # Judged by the body: a proxy may label the gateway's empty answer text/html.
                if body.strip() and ("html" in kind.lower() or body.lstrip()[:1] == b"<"):
                    raise _NotPushgateway(f"HTTP {resp.status} but not a Pushgateway answer: {_excerpt(scrub(_text(body)))}")
        return handle
    return handler


def _gateway_parts(url: str) -> urllib.parse.SplitResult:
    """The gateway URL split, or ValueError naming what is wrong (never the password)."""
    shown = redact_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # an unclosed [IPv6 literal, a port out of range
        raise ValueError(f"Pushgateway address {shown!r} has no valid host and port, e.g. pushgateway:9091") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"Pushgateway address {shown!r} must be host:port or an http:// or https:// URL")
    if not parts.hostname or port == 0 or any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError(f"Pushgateway address {shown!r} has no valid host and port (no spaces), e.g. pushgateway:9091")
    return parts


def _text(body: bytes) -> str:
    return body[:4096].decode("utf-8", errors="replace")


def _excerpt(text: str) -> str:
    """An answer body as a few words: an HTML page's title, else its first 200 characters."""
    title = re.search(r"<title[^>]*>(.*?)</title", text, re.I | re.S)
    if title:
        return f"an HTML page titled '{' '.join(title.group(1).split())[:80]}'"
    return " ".join(text.split())[:200] or "(empty body)"


class _Both:
    """A collector yielding the metrics of several registries (push one body, one PUT)."""

    def __init__(self, *registries: CollectorRegistry):
        self._registries = registries

    def collect(self):
        for registry in self._registries:
            yield from registry.collect()


class BatchJob:
    """One run of a short or batch job; a context manager that pushes when the block ends.

    Args:
        workload: the ``workload`` label (the spec class's selector usually matches it).
        gateway: Pushgateway address, ``host:port`` or a URL (``http://host:9091``); a URL's
            ``user:password@`` is sent as HTTP basic auth and never printed.
        job: the ``job`` grouping key; defaults to ``workload``.
        instance: the ``instance`` grouping key; defaults to this host's name.
        grouping_key: further grouping labels (stable across runs, never a run id).
        labels: constant labels of the workload's series (e.g. ``{"run": run_id}``).
        timeout: seconds per push.
        handler: prometheus_client push handler (e.g. ``basic_auth_handler`` with credentials).

    Raises:
        ValueError: ``gateway`` is not ``host:port`` or an http(s) URL with a host, or a
            grouping key name is not a Prometheus label name (or is ``job`` or ``__*``).

    Raises (from :meth:`push`, :meth:`finish` and leaving the block):
        PushError: the gateway is unreachable or refused the push (the message names the
            gateway's answer, e.g. a 400 for metrics inconsistent with another group's),
            redirected it (3xx: not followed), or answered 2xx with an HTML page (a login
            proxy in front of it); the URL's password never appears in the message.
            When the block itself raised, a failed push is logged instead, so the job's
            own exception is the one that propagates.
    """

    def __init__(self, workload: str, gateway: str, job: str | None = None, instance: str | None = None,
                 grouping_key: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                 timeout: float = 10.0, handler: Callable | None = None):
        url = gateway if "://" in gateway else f"http://{gateway}"
        parts = _gateway_parts(url)
        self._secrets: list[str] = []  # scrubbed from every message (a gateway may echo them)
        if handler is None:
            authorization = None
            if parts.username is not None:
                user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
                encoded = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
                authorization = f"Basic {encoded}"
                self._secrets = [s for s in (encoded, password, parts.password or "") if len(s) >= 3]
            handler = _handler(authorization, self._scrub)

        self.gateway = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))
        self.job = job or workload
        self.grouping_key = {"instance": instance or socket.gethostname(), **(grouping_key or {})}
        for name in self.grouping_key:
            # prometheus_client puts names into the push URL unescaped (/metrics/job/<job>/<name>/<value>):
            # a name with '/' would push into another group.
            if not isinstance(name, str) or not LABEL_NAME.match(name) or name.startswith("__") or name == "job":
                raise ValueError(f"grouping key name {name!r} must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, "
                                 "not starting with '__', not 'job': pass job=...)")
        self.workload = Workload(workload, labels=labels)
        self._timeout = timeout
        self._handler = handler
        const = self.workload.const_labels
        names = list(const)
        self._status = CollectorRegistry()
        self._success = Gauge("obsctl_batch_job_success", "1 if the job's last run finished, 0 if it failed.",
                              names, registry=self._status).labels(**const)
        self._duration = Gauge("obsctl_batch_job_duration_seconds", "Wall time of the job's last run, seconds.",
                               names, registry=self._status).labels(**const)
        self._last_ok = CollectorRegistry()
        self._last_success = Gauge("obsctl_batch_job_last_success_timestamp_seconds",
                                   "Unix time the job's last successful run ended.", names,
                                   registry=self._last_ok).labels(**const)
        self._start = time.monotonic()

    def _kwargs(self) -> dict:
        kwargs = {"job": self.job, "grouping_key": self.grouping_key, "timeout": self._timeout}
        if self._handler is not None:
            kwargs["handler"] = self._handler
        return kwargs

    def _send(self, send: Callable, registry) -> None:
        try:
            send(self.gateway, registry=registry, **self._kwargs())
        except OSError as exc:  # URLError, HTTPError, and prometheus_client's own OSError
            reason = str(getattr(exc, "reason", None) or exc)
            if isinstance(exc, urllib.error.HTTPError):  # the gateway's answer says why
                detail = _excerpt(self._scrub(_text(exc.read(4096)))) if exc.fp is not None else ""
                reason = f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail != "(empty body)" else "")
            reason = " ".join(self._scrub(reason).split())
            raise PushError(f"push of job {self.job!r} to Pushgateway {redact_url(self.gateway)} failed: {reason}") from None

    def _scrub(self, text: str) -> str:
        # Before any cut: a cut secret would no longer be recognised.
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, SECRET_PLACEHOLDER)
        return text

    def push(self) -> None:
        """Push everything now (PUT: replaces the group), e.g. periodically during a long job;
        the ``success`` gauge reads 1 and the duration is the time so far."""
        self._duration.set(time.monotonic() - self._start)
        self._success.set(1)
        self._send(push_to_gateway, _Both(self.workload.registry, self._status))

    def finish(self, succeeded: bool = True) -> None:
        """End the run: on success push everything plus the success timestamp (PUT); on
        failure push only the status and duration (POST), keeping the last good values."""
        self._duration.set(time.monotonic() - self._start)
        self._success.set(1 if succeeded else 0)
        if succeeded:
            self._last_success.set(time.time())
            self._send(push_to_gateway, _Both(self.workload.registry, self._status, self._last_ok))
        else:
            self._send(pushadd_to_gateway, self._status)

    def __enter__(self) -> BatchJob:
        self._start = time.monotonic()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish(succeeded=True)
            return
        try:
            self.finish(succeeded=False)
        except PushError as err:
            log.warning("%s", err)  # the job's own exception propagates
