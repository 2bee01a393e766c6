"""Real VictoriaMetrics processes (Debian ``victoria-metrics``: single node and vmalert) and
Prometheus shards remote-writing into it, on 127.0.0.1 with free ports, for the tests that run
obsctl past one Prometheus."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from obsctl.processes import require_binary
from support.servers import ManagedProcess, Prometheus, _LoopbackServer, free_port, spawn_ready


@dataclass
class VictoriaMetrics(_LoopbackServer):
    """Single-node VictoriaMetrics: Prometheus remote write at ``<url>/api/v1/write``, the Prometheus
    query API at ``<url>/api/v1/...``. ``-search.latencyOffset`` is cut to 1 s (default 30 s hides the
    newest samples, which a test of seconds needs)."""

    workdir: Path
    port: int = 0
    proc: ManagedProcess | None = None

    def start(self, timeout: float = 60.0) -> VictoriaMetrics:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        argv = [require_binary("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{self.port}",
                f"-storageDataPath={self.workdir / 'vm-data'}", "-retentionPeriod=100y", "-search.latencyOffset=1s",
                "-loggerLevel=WARN"]
        self.proc = spawn_ready("victoria-metrics", "VictoriaMetrics", argv, self.workdir, self.url, timeout, "/health")
        return self


@dataclass
class VMAlert(_LoopbackServer):
    """vmalert evaluating ``rule_files`` against ``datasource`` (a Prometheus API), writing recorded
    series and ``ALERTS`` back through remote write, and notifying ``alertmanager``."""

    workdir: Path
    rule_files: list[Path]
    datasource: str
    remote_write: str
    alertmanager: str
    evaluation_interval: str = "2s"
    port: int = 0
    proc: ManagedProcess | None = None

    def start(self, timeout: float = 60.0) -> VMAlert:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        argv = [require_binary("vmalert"), f"-httpListenAddr=127.0.0.1:{self.port}",
                *[f"-rule={p}" for p in self.rule_files], f"-datasource.url={self.datasource}",
                f"-remoteWrite.url={self.remote_write}", f"-remoteRead.url={self.datasource}",
                f"-notifier.url={self.alertmanager}", f"-evaluationInterval={self.evaluation_interval}",
                "-remoteWrite.flushInterval=1s", "-loggerLevel=WARN"]
        self.proc = spawn_ready("vmalert", "vmalert", argv, self.workdir, self.url, timeout, "/health")
        return self


@dataclass
class PrometheusShard(Prometheus):
    """A Prometheus with ``external_labels`` that remote-writes everything it scrapes to ``remote_write``."""

    external_labels: dict[str, str] = field(default_factory=dict)
    remote_write: str = ""

    def config(self) -> dict:
        cfg = super().config()
        cfg["global"]["external_labels"] = dict(self.external_labels)
        cfg["remote_write"] = [{"url": self.remote_write, "queue_config": {"batch_send_deadline": "1s", "max_backoff": "1s"}}]
        return cfg
