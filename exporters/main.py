"""``obsctl-exporter``: GPU, price and attribution series for Prometheus (node_exporter-style flags).

Run with no flags to serve ``:9847/metrics`` with zero config: GPU metrics through NVML
when a driver and GPU are present (else a failing-GPU-collector meta series and one log
line), no prices, the exporter's own meta and process series. The collectors run every
``--collector.interval`` (5 s) on a background thread and scrapes serve the last collection
(:mod:`obsctl.exporters.collection`); ``--collector.interval=0s`` collects on every scrape instead. SIGTERM or SIGINT stops it
cleanly with exit code 0. Bad flags, a bad ``--config.file`` or ``--web.config.file``: one message, exit 2.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import sys
import threading
import time

from obsctl import __version__
from obsctl.durations import parse_duration
from obsctl.errors import EXIT_FAILURE, ObsctlError, UsageError
from obsctl.escape import logfmt_value

DEFAULT_LISTEN = ":9847"
DEFAULT_SCRAPE_TIMEOUT = "8s"  # below Prometheus' default 10 s scrape_timeout
DEFAULT_DCGM_TIMEOUT = "5s"
DEFAULT_COLLECTOR_INTERVAL = "5s"
COLLECTORS = {  # name -> (enabled by default, what it publishes)
    "gpu": (True, "GPU utilization, memory, power, energy, clocks, errors (NVML or dcgm-exporter)"),
    "pricing": (True, "obsctl_node_price_usd_per_hour, obsctl_accelerator_price_usd_per_hour{gpu_model}"),
    "attribution": (True, "obsctl_gpu_attribution_info / _status: GPU -> workload class and owner"),
}
log = logging.getLogger("obsctl.exporter")


def build_parser() -> argparse.ArgumentParser:
    """The flag set (node_exporter conventions)."""
    p = argparse.ArgumentParser(
        prog="obsctl-exporter",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Publish GPU telemetry (NVML or dcgm-exporter), configured prices and GPU -> workload\n"
                    "attribution as Prometheus metrics, with per-collector scrape meta series.",
        epilog="Collectors (enable/disable with --collector.NAME / --no-collector.NAME):\n"
               + "\n".join(f"  {n:<12} {'on ' if on else 'off'}  {d}" for n, (on, d) in COLLECTORS.items())
               + "\n\nExamples:\n"
               "  obsctl-exporter                                   # zero config, :9847/metrics\n"
               "  obsctl-exporter --web.listen-address=127.0.0.1:9847 --config.file=obsctl.yaml\n"
               "  obsctl-exporter --gpu.source=dcgm --dcgm.url=http://127.0.0.1:9400/metrics\n"
               "Docs: docs/exporter.md",
    )
    p.add_argument("--web.listen-address", dest="listen", default=DEFAULT_LISTEN, metavar="[HOST]:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}; e.g. 127.0.0.1:9847)")
    p.add_argument("--web.config.file", dest="web_config_file", default=None, metavar="FILE",
                   help="exporter-toolkit web config: TLS (tls_server_config), client certificates, basic auth "
                        "(basic_auth_users, bcrypt), response headers; re-read when it or its certificates change "
                        "(docs/exporter.md)")
    p.add_argument("--web.telemetry-path", dest="telemetry_path", default="/metrics", metavar="PATH",
                   help="path of the metrics endpoint (default /metrics)")
    p.add_argument("--web.max-connections", dest="max_connections", type=int, default=None, metavar="N",
                   help="most connections served at once (default 128, lowered to fit the file descriptor limit); "
                        "at the cap the connection that has waited longest for a request is closed")
    p.add_argument("--config.file", dest="config_file", default=None, metavar="FILE",
                   help="obsctl spec (only its pricing section is read) or an exporter config with pricing and "
                        "attribution; optional")
    for name, (on, desc) in COLLECTORS.items():
        p.add_argument(f"--collector.{name}", dest=f"collector_{name}", action=argparse.BooleanOptionalAction,
                       default=on, help=f"{desc} (default {'on' if on else 'off'})")
    p.add_argument("--gpu.source", dest="gpu_source", choices=("auto", "nvml", "dcgm", "none"), default="auto",
                   help="auto: NVML if it initialises, else --dcgm.url if given; nvml; dcgm; none (default auto)")
    p.add_argument("--dcgm.url", dest="dcgm_url", default=None, metavar="URL",
                   help="dcgm-exporter metrics URL (dcgm default http://127.0.0.1:9400/metrics; overrides dcgm.url "
                        "of --config.file, whose dcgm: block also takes tls_config, basic_auth, authorization)")
    p.add_argument("--dcgm.timeout", dest="dcgm_timeout", default=DEFAULT_DCGM_TIMEOUT, metavar="DURATION",
                   help=f"time allowed for one dcgm-exporter fetch (default {DEFAULT_DCGM_TIMEOUT}; "
                        "must be below --scrape.timeout)")
    p.add_argument("--collector.interval", dest="collector_interval", default=DEFAULT_COLLECTOR_INTERVAL,
                   metavar="DURATION",
                   help=f"how often the collectors run, on a background thread (default {DEFAULT_COLLECTOR_INTERVAL}); "
                        "every scrape serves the last finished collection, whose age is "
                        "obsctl_exporter_collection_age_seconds, and /health answers 503 once no collection has "
                        "finished for three intervals (at least --scrape.timeout plus one interval); a GPU whose "
                        "driver call hangs is reported by obsctl_gpu_collection_stuck. 0s: collect on every scrape "
                        "instead (no background thread)")
    p.add_argument("--collector.gpu.energy-interval", dest="energy_interval", default=None, metavar="DURATION",
                   help="NVML source: read each GPU's energy counter (nvmlDeviceGetTotalEnergyConsumption, 4-5 ms a "
                        "call on an H200) at most this often and serve its last value in between (default: every "
                        "collection); rate() over minutes loses nothing at 30s")
    p.add_argument("--scrape.timeout", dest="scrape_timeout", default=DEFAULT_SCRAPE_TIMEOUT, metavar="DURATION",
                   help=f"deadline of one collection (default {DEFAULT_SCRAPE_TIMEOUT}); with --collector.interval=0s "
                        "that is one scrape, and Prometheus' X-Prometheus-Scrape-Timeout-Seconds minus 0.5s shortens it")
    p.add_argument("--attribution.pod-resources-socket", dest="pod_resources_socket", default=None, metavar="PATH",
                   help="the kubelet's pod-resources socket (e.g. /var/lib/kubelet/pod-resources/kubelet.sock): "
                        "GPU -> pod for attribution on Kubernetes; the class from the pod's namespace "
                        "(attribution.kubernetes.namespace_classes, or the spec's classes selecting one namespace)")
    p.add_argument("--log.level", dest="log_level", choices=("debug", "info", "warn", "error"), default="info",
                   help="log level (default info)")
    p.add_argument("--version", action="version", version=f"obsctl-exporter {__version__}")
    return p


class LogfmtFormatter(logging.Formatter):
    """``ts=<RFC 3339 UTC> level=<debug|info|warn|error> logger=... msg="..."``, as the
    Prometheus exporters (go-kit log) write it, the message escaped by
    :func:`obsctl.escape.logfmt_value` (quotes, backslashes, line breaks and terminal control
    bytes from client or server text cannot forge or garble a log line)."""

    _LEVELS = {"WARNING": "warn", "CRITICAL": "error"}

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        level = self._LEVELS.get(record.levelname, record.levelname.lower())
        message = record.getMessage()
        if record.exc_info:
            message += " " + self.formatException(record.exc_info)
        return f'ts={ts} level={level} logger={record.name} msg="{logfmt_value(message)}"'


def setup_logging(level: str) -> None:
    """logfmt lines on stderr (see :class:`LogfmtFormatter`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel({"warn": logging.WARNING}.get(level, getattr(logging, level.upper())))


def build(args: argparse.Namespace):
    """Build the exporter and server from parsed flags. Raises ObsctlError subclasses."""
    from obsctl.exporters.app import Exporter
    from obsctl.exporters.config import load_exporter_config
    from obsctl.exporters.gpu.attribution import AttributionCollector
    from obsctl.exporters.gpu.collector import GpuCollector, default_nvml_factory, make_source
    from obsctl.exporters.pricing import PricingCollector
    from obsctl.exporters.server import ExporterServer, landing_page
    from obsctl.httpconfig import check_files, session_for, validate_url

    scrape_timeout = parse_duration(args.scrape_timeout, "--scrape.timeout")
    interval = 0.0 if str(args.collector_interval).strip() in ("0", "0s") \
        else parse_duration(args.collector_interval, "--collector.interval")
    nvml_options = {}
    if args.energy_interval is not None:
        nvml_options["field_intervals"] = {"energy": parse_duration(args.energy_interval,
                                                                    "--collector.gpu.energy-interval")}
    dcgm_timeout = parse_duration(args.dcgm_timeout, "--dcgm.timeout")
    if dcgm_timeout >= scrape_timeout:
        raise UsageError(f"--dcgm.timeout {args.dcgm_timeout} must be below --scrape.timeout {args.scrape_timeout}")
    if args.dcgm_url is not None:
        try:
            validate_url(args.dcgm_url)
        except ValueError as exc:  # the message never repeats the URL (it may hold a password)
            raise UsageError(f"--dcgm.url: {exc} (in the dcgm: block of --config.file)") from None
    config = load_exporter_config(args.config_file)
    dcgm_url = args.dcgm_url or config.dcgm.url
    dcgm_session = None
    if args.collector_gpu and (args.gpu_source == "dcgm" or (args.gpu_source == "auto" and dcgm_url)):
        base = config.path.parent if config.path else None
        check_files(config.dcgm, base, label="dcgm")  # a missing CA or password file: exit 2 now
        dcgm_session = session_for(config.dcgm, base, label="dcgm")
    web = None
    if args.web_config_file:
        from obsctl.exporters.webconfig import WebConfigWatch  # bcrypt and ssl only when asked for

        web = WebConfigWatch(args.web_config_file)

    collectors = []
    gpu = None
    if args.collector_pricing:
        collectors.append(PricingCollector(config.pricing))
    if args.collector_gpu:
        nvml_factory = functools.partial(default_nvml_factory, **nvml_options)
        gpu = GpuCollector(make_source(args.gpu_source, dcgm_url, dcgm_timeout, dcgm_session=dcgm_session,
                                       nvml_factory=nvml_factory), args.gpu_source)
        collectors.append(gpu)
    if args.collector_attribution:
        pod_resources = None
        if args.pod_resources_socket:
            from obsctl.exporters.gpu.podresources import PodResourcesClient  # grpcio only when asked for

            pod_resources = PodResourcesClient(args.pod_resources_socket,
                                               ttl_seconds=config.attribution.refresh_interval_seconds)
        collectors.append(AttributionCollector(config.attribution, pod_resources=pod_resources))
    exporter = Exporter(collectors, scrape_timeout=scrape_timeout)
    for coll in collectors:
        if isinstance(coll, AttributionCollector):
            coll.start()  # the refresher thread; exporter.close() (SIGTERM) stops it
    if gpu is not None:
        exporter.extra_meta.append(gpu.source_info)
    page = landing_page(__version__, args.telemetry_path,
                        [(n, getattr(args, f"collector_{n}"), d) for n, (_, d) in COLLECTORS.items()],
                        args.gpu_source if args.collector_gpu else "off")
    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError(f"--web.max-connections {args.max_connections}: must be at least 1")
    snapshots = None
    if interval:
        from obsctl.exporters.collection import CollectionLoop

        snapshots = CollectionLoop(exporter.scrape, interval, scrape_timeout)
    server = ExporterServer(exporter.scrape, args.listen, args.telemetry_path, scrape_timeout, page, web,
                            args.max_connections, snapshots)
    return exporter, server, config


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: parse flags, serve until SIGTERM/SIGINT, exit 0."""
    args = build_parser().parse_args(argv)  # bad flags: argparse prints usage, exit 2
    setup_logging(args.log_level)
    try:
        exporter, server, config = build(args)
    except ObsctlError as exc:
        print(f"obsctl-exporter: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    try:
        server.start()
    except OSError as exc:
        exporter.close()
        print(f"obsctl-exporter: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(EXIT_FAILURE)

    if server.snapshots is not None:
        server.snapshots.start()  # scrapes before the first collection finishes wait for it (their budget)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    enabled = [c.name for c in exporter.collectors]
    log.info("listening on %s://%s:%d%s (collectors: %s, every %s; gpu source: %s; config: %s; web config: %s)",
             server.scheme, server.host, server.port, args.telemetry_path, ",".join(enabled) or "none",
             args.collector_interval if server.snapshots is not None else "scrape", args.gpu_source,
             config.path or "none", args.web_config_file or "none")
    while not stop.wait(1.0):  # wake up regularly so signals are handled promptly
        pass
    log.info("shutting down")
    server.stop()
    if server.snapshots is not None:
        server.snapshots.stop()
    exporter.close()
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = ["main", "build_parser"]
