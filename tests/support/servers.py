"""Start the real Prometheus stack as plain local processes (tests, the demo, the benchmarks).

Prometheus, promtool, Alertmanager and Pushgateway are Debian's packages (``prometheus``,
``prometheus-alertmanager``, ``prometheus-pushgateway``). Each process gets a generated config, a free port on
127.0.0.1 and its own data directory; ``stop()`` terminates it (SIGTERM, then SIGKILL
after a grace period) so nothing is left running. Waits are deadlines on progress
(:class:`obsctl.processes.Progress`).

Test and demo tooling, not part of the installed package: tests import it as
``support.servers`` (``tests/`` is on pytest's pythonpath); the benchmarks, the demo and
``scripts/cli_golden.py`` put ``tests/`` on ``sys.path`` first.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
import yaml

from obsctl.errors import ObsctlError
from obsctl.processes import PROMTOOL_BIN, Progress, require_binary

PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"
PUSHGATEWAY_BIN = "prometheus-pushgateway"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, timeout: float = 30.0, process: subprocess.Popen | None = None,
               ceiling: float | None = None) -> None:
    """Poll ``url`` until it answers 200; raises ObsctlError when the process exits, or when
    ``timeout`` seconds pass without progress: with ``process``, without it using CPU (a
    start-up slowed down by a busy machine is waited for, up to ``ceiling``, default
    :data:`obsctl.processes.CEILING_FACTOR` x ``timeout``); without, ``timeout`` seconds in all."""
    progress = Progress(process.pid if process is not None else None, timeout, ceiling)
    while not progress.expired():
        if process is not None and process.poll() is not None:
            raise ObsctlError(f"process exited with code {process.returncode} before {url} was ready")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise ObsctlError(f"{url} not ready: {progress.why()}")


@dataclass
class ManagedProcess:
    """A child process with its log file; ``stop()`` is idempotent."""

    name: str
    process: subprocess.Popen
    log_path: Path

    def stop(self, grace: float = 10.0) -> None:
        """Terminate, wait up to ``grace`` seconds, then kill."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 20) -> str:
        """Last lines of the process log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


#: The flags by which each server keeps its state where it is told, not in its package's
#: default (Debian's Pushgateway persists to /var/lib/prometheus/pushgateway.data, its
#: Prometheus to /var/lib/prometheus/metrics2, a host's running service's own files), and
#: ``--cluster.listen-address=`` (empty) so an Alertmanager gossips with no one.
#: vmalert keeps no state on disk (it restores alert state through remote read).
STATE_FLAGS: dict[str, tuple[str, ...]] = {
    "prometheus": ("--storage.tsdb.path",),
    "prometheus-alertmanager": ("--storage.path", "--cluster.listen-address"),
    "alertmanager": ("--storage.path", "--cluster.listen-address"),
    "prometheus-pushgateway": ("--persistence.file",),
    "pushgateway": ("--persistence.file",),
    "victoria-metrics": ("-storageDataPath",),
    "victoria-metrics-prod": ("-storageDataPath",),
    "vmagent": ("-remoteWrite.tmpDataPath",),
    "vmalert": (),
}


def state_problem(argv: list[str]) -> str:
    """Why ``argv`` would start a server of :data:`STATE_FLAGS` keeping state outside the
    folder it is given (a state flag missing or empty, an Alertmanager cluster listener),
    or ``""``: another program, or every state path set."""
    server = Path(argv[0]).name if argv else ""
    values: dict[str, str] = {}
    for arg in argv[1:]:
        flag, sep, value = arg.partition("=")
        if sep:
            values[flag] = value
    missing = []
    for flag in STATE_FLAGS.get(server, ()):
        if flag == "--cluster.listen-address":
            if values.get(flag, None) != "":
                missing.append(f"{flag}= (empty: no cluster listener)")
        elif not values.get(flag):
            missing.append(f"{flag}=<folder of this run>")
    return f"{server} would keep state outside its folder: set {', '.join(missing)}" if missing else ""


def spawn(name: str, argv: list[str], workdir: Path) -> ManagedProcess:
    """Start ``argv`` with stdout/stderr to ``workdir/<name>.log``.

    Raises:
        ObsctlError: ``argv`` starts a server without its state path (:func:`state_problem`);
            nothing is started.
    """
    problem = state_problem(argv)
    if problem:
        raise ObsctlError(f"{name} not started: {problem}")
    log_path = workdir / f"{name}.log"
    log = log_path.open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir)
    log.close()
    return ManagedProcess(name, process, log_path)


def spawn_ready(name: str, label: str, argv: list[str], workdir: Path, url: str, timeout: float,
                ready_path: str = "/-/ready") -> ManagedProcess:
    """Start ``argv`` (see :func:`spawn`) and wait until ``<url><ready_path>`` answers 200
    (``/-/ready`` for Prometheus' servers, ``/health`` for VictoriaMetrics').

    Raises:
        ObsctlError: ``"<label> did not start: ..."`` with the log tail; the process is stopped.
    """
    proc = spawn(name, argv, workdir)
    try:
        wait_ready(f"{url}{ready_path}", timeout, proc.process)
    except ObsctlError as exc:
        proc.stop()
        raise ObsctlError(f"{label} did not start: {exc}\n{proc.log_tail()}") from None
    return proc


class _LoopbackServer:
    """What every server started here shares: it listens on ``127.0.0.1:<port>`` and runs
    as ``proc``. Subclasses are dataclasses with ``port`` and ``proc`` fields."""

    port: int
    proc: ManagedProcess | None

    @property
    def url(self) -> str:
        """Base URL of the HTTP API (Pushgateway: push to ``<url>/metrics/job/<job>/...``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """``host:port`` for a scrape config, Prometheus' alerting config or ``push_to_gateway``."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self.proc:
            self.proc.stop()


@dataclass
class Prometheus(_LoopbackServer):
    """A real Prometheus server on 127.0.0.1.

    Args:
        workdir: directory for config, rules and TSDB data.
        scrape_targets: ``{job: ["host:port", ...]}`` scraped every ``scrape_interval``.
        rule_files: rule files (copied path list, loaded by Prometheus).
        alertmanager: ``host:port`` of an Alertmanager to send alerts to.
        scrape_interval / evaluation_interval: PromQL durations.
        data_dir: an existing TSDB directory (e.g. blocks made by promtool) to serve.
        scrape_options: ``{job: {scrape_config key: value}}`` added to that job's scrape
            config, e.g. ``{"pushgateway": {"honor_labels": True}}``.
    """

    workdir: Path
    scrape_targets: dict[str, list[str]] = field(default_factory=dict)
    rule_files: list[Path] = field(default_factory=list)
    alertmanager: str | None = None
    scrape_interval: str = "5s"
    evaluation_interval: str = "5s"
    data_dir: Path | None = None
    extra_flags: list[str] = field(default_factory=list)
    scrape_options: dict[str, dict] = field(default_factory=dict)
    port: int = 0
    proc: ManagedProcess | None = None

    def config(self) -> dict:
        """The generated prometheus.yml as a dict."""
        cfg: dict = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.evaluation_interval},
            "scrape_configs": [
                {"job_name": job, **self.scrape_options.get(job, {}), "static_configs": [{"targets": targets}]}
                for job, targets in self.scrape_targets.items()
            ],
            "rule_files": [str(p) for p in self.rule_files],
        }
        if self.alertmanager:
            cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        return cfg

    def start(self, timeout: float = 60.0) -> Prometheus:
        """Write the config, start the server and wait for /-/ready."""
        binary = require_binary(PROMETHEUS_BIN)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        config_path = self.workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        data_dir = self.data_dir or self.workdir / "data"
        argv = [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=3650d",
            "--query.lookback-delta=5m",
            *self.extra_flags,
        ]
        self.proc = spawn_ready("prometheus", "Prometheus", argv, self.workdir, self.url, timeout)
        return self

    def reload(self) -> None:
        """Rewrite the config and ask Prometheus to reload it (rules included)."""
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False))
        requests.post(f"{self.url}/-/reload", timeout=10).raise_for_status()



@dataclass
class Alertmanager(_LoopbackServer):
    """A real Alertmanager on 127.0.0.1 routing every alert to one webhook receiver.

    Args:
        workdir: directory for config and data.
        webhook_url: where notifications are POSTed (``None``: a receiver with no target).
        group_wait / group_interval / repeat_interval: routing timers (short for tests).
        config: a whole alertmanager.yml as a dict instead (e.g. a route tree per owner,
            :func:`obsctl.rules.routes.merged_config`); ``webhook_url`` and the timers are
            then unused.
    """

    workdir: Path
    webhook_url: str | None = None
    group_wait: str = "1s"
    group_interval: str = "1s"
    repeat_interval: str = "1h"
    config: dict | None = None
    port: int = 0
    proc: ManagedProcess | None = None

    def start(self, timeout: float = 60.0) -> Alertmanager:
        """Write the config, start the server and wait for /-/ready."""
        binary = require_binary(ALERTMANAGER_BIN)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        receiver: dict = {"name": "default"}
        if self.webhook_url:
            receiver["webhook_configs"] = [{"url": self.webhook_url, "send_resolved": True}]
        config = {
            "route": {
                "receiver": "default",
                "group_by": ["alertname", "workload_class", "signal"],
                "group_wait": self.group_wait,
                "group_interval": self.group_interval,
                "repeat_interval": self.repeat_interval,
            },
            "receivers": [receiver],
        } if self.config is None else self.config
        config_path = self.workdir / "alertmanager.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            binary,
            f"--config.file={config_path}",
            f"--storage.path={self.workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            # No gossip: a single local instance; port 0 disables the cluster listener.
            "--cluster.listen-address=",
        ]
        self.proc = spawn_ready("alertmanager", "Alertmanager", argv, self.workdir, self.url, timeout)
        return self



@dataclass
class Pushgateway(_LoopbackServer):
    """A real Pushgateway (Debian ``prometheus-pushgateway``) on 127.0.0.1, persisting its
    groups to ``workdir/pushgateway.data`` so they survive its restart.

    Scrape it with ``honor_labels: true`` (``Prometheus(scrape_options=...)``) so the
    pushed ``job`` / ``instance`` labels are kept.
    """

    workdir: Path
    port: int = 0
    proc: ManagedProcess | None = None

    def start(self, timeout: float = 60.0) -> Pushgateway:
        """Start the server and wait for /-/ready."""
        binary = require_binary(PUSHGATEWAY_BIN)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        argv = [binary, f"--web.listen-address=127.0.0.1:{self.port}",
                f"--persistence.file={self.workdir / 'pushgateway.data'}", "--persistence.interval=1s"]
        self.proc = spawn_ready("pushgateway", "Pushgateway", argv, self.workdir, self.url, timeout)
        return self



def create_blocks_from_openmetrics(openmetrics_path: Path, data_dir: Path) -> None:
    """Backfill a TSDB from an OpenMetrics file with ``promtool tsdb create-blocks-from openmetrics``.

    Raises:
        ObsctlError: promtool missing or refusing the input (its message is included).
    """
    binary = require_binary(PROMTOOL_BIN)
    data_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [binary, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics_path), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise ObsctlError(f"promtool create-blocks-from openmetrics failed: {result.stderr.strip() or result.stdout.strip()}")
