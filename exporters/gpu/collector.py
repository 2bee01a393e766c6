"""The ``gpu`` collector and the ``--gpu.source`` choice (auto | nvml | dcgm | none).

* ``nvml``: :class:`obsctl.exporters.gpu.nvml.NvmlSource` (imported when first used).
* ``dcgm``: :class:`obsctl.exporters.gpu.dcgm.DcgmSource` on ``--dcgm.url``.
* ``auto``: NVML if it initialises; otherwise the dcgm-exporter at ``--dcgm.url`` when one
  is given (NVML is tried again every ``nvml_retry_seconds``, so a driver loaded later is
  picked up); otherwise the collector fails with NVML's reason.
* ``none``: no GPU series; the collector succeeds with nothing.

A source that is wholly unavailable raises :class:`GpuSourceError`; the exporter core turns
that into ``obsctl_exporter_scrape_collector_success{collector="gpu"} 0`` plus
``obsctl_exporter_scrape_collector_error_info{collector="gpu",reason=...}`` and one log line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

from obsctl.exporters import meta
from obsctl.exporters.gpu.errors import REASON_DRIVER_NOT_LOADED, REASON_LIBRARY_NOT_FOUND, GpuSourceError
from obsctl.exporters.gpu.inventory import GpuInventory

if TYPE_CHECKING:  # the DCGM source (requests, urllib3) is imported only when a mode needs it: RSS
    from obsctl.exporters.gpu.dcgm import DcgmSource

log = logging.getLogger(__name__)

MODES = ("auto", "nvml", "dcgm", "none")
_NO_GPU_REASONS = {REASON_LIBRARY_NOT_FOUND, REASON_DRIVER_NOT_LOADED}


def default_nvml_factory(**options: Any) -> Any:
    """A new NvmlSource with ``options`` (its keyword arguments; import deferred so the exporter
    starts without the NVML module)."""
    try:
        from obsctl.exporters.gpu.nvml import NvmlSource
    except ImportError as exc:  # pynvml (nvidia-ml-py) or the module itself missing
        raise GpuSourceError(REASON_LIBRARY_NOT_FOUND, f"cannot import the NVML source: {exc}") from None
    return NvmlSource(**options)


class _LazyNvml:
    """Builds the NVML source on first use; a failed build is retried on the next call."""

    name = "nvml"

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._source: Any = None

    def collect(self, deadline: float) -> list[Metric]:
        if self._source is None:
            self._source = self._factory()
        return self._source.collect(deadline)

    def processes(self) -> dict[str, list[int]]:
        return self._source.processes() if self._source is not None and hasattr(self._source, "processes") else {}

    def close(self) -> None:
        if self._source is not None:
            self._source.close()


class NoneSource:
    """``--gpu.source=none``: no GPU series."""

    name = "none"

    def collect(self, deadline: float) -> list[Metric]:
        return []

    def close(self) -> None:
        pass


class AutoSource:
    """NVML when it initialises, else dcgm-exporter (if configured), else NVML's failure.

    Args:
        nvml: the NVML source (or a lazy wrapper).
        dcgm: the DCGM source, or None when no ``--dcgm.url`` was given.
        nvml_retry_seconds: while on DCGM, how often NVML is tried again.
        clock: monotonic clock (injected by tests).

    Attributes:
        active: the source used by the last collect: ``nvml`` | ``dcgm`` | ``none``.
    """

    name = "auto"

    def __init__(self, nvml: Any, dcgm: DcgmSource | None, nvml_retry_seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.nvml = nvml
        self.dcgm = dcgm
        self.nvml_retry_seconds = nvml_retry_seconds
        self._clock = clock
        self._skip_nvml_until = 0.0
        self.active = "none"

    def collect(self, deadline: float) -> list[Metric]:
        """Collect from the preferred available source (see class docstring)."""
        if self.dcgm is not None and self._clock() < self._skip_nvml_until:
            return self._from_dcgm(deadline)
        try:
            metrics = self.nvml.collect(deadline)
        except GpuSourceError as exc:
            if self.dcgm is None:
                self.active = "none"
                raise
            if self._skip_nvml_until == 0.0 or self.active == "nvml":
                log.info("gpu source auto: NVML unavailable (%s); using dcgm-exporter at %s", exc.reason,
                         getattr(self.dcgm, "display_url", "--dcgm.url"))
            self._skip_nvml_until = self._clock() + self.nvml_retry_seconds
            return self._from_dcgm(deadline)
        self.active = "nvml"
        return metrics

    def _from_dcgm(self, deadline: float) -> list[Metric]:
        self.active = "dcgm"
        return self.dcgm.collect(deadline)

    @property
    def pod_bindings(self) -> dict:
        return self.dcgm.pod_bindings if self.active == "dcgm" and self.dcgm is not None else {}

    def processes(self) -> dict[str, list[int]]:
        return self.nvml.processes() if self.active == "nvml" else {}

    def close(self) -> None:
        self.nvml.close()
        if self.dcgm is not None:
            self.dcgm.close()


def make_source(mode: str, dcgm_url: str | None = None, dcgm_timeout: float | None = None,
                nvml_factory: Callable[[], Any] = default_nvml_factory, dcgm_session: Any = None) -> Any:
    """Build the source for ``--gpu.source``.

    Args:
        mode: auto | nvml | dcgm | none.
        dcgm_url: dcgm-exporter metrics URL (``dcgm`` mode defaults to 127.0.0.1:9400).
        dcgm_timeout: seconds per dcgm-exporter fetch (None: the DCGM source's default).
        nvml_factory: builds the NVML source (tests inject a stand-in).
        dcgm_session: requests session for dcgm-exporter (TLS, auth: the ``dcgm:`` block of
            ``--config.file`` through :func:`obsctl.httpconfig.session_for`); None: a plain one.

    Raises:
        ValueError: unknown mode.
    """
    if mode == "none":
        return NoneSource()
    if mode == "nvml":
        return _LazyNvml(nvml_factory)
    if mode == "dcgm" or (mode == "auto" and dcgm_url):
        from obsctl.exporters.gpu import dcgm as _dcgm  # deferred: requests costs ~10 MiB RSS

        timeout = _dcgm.DEFAULT_TIMEOUT_SECONDS if dcgm_timeout is None else dcgm_timeout
        if mode == "dcgm":
            return _dcgm.DcgmSource(dcgm_url or _dcgm.DEFAULT_URL, timeout=timeout, session=dcgm_session)
        return AutoSource(_LazyNvml(nvml_factory), _dcgm.DcgmSource(dcgm_url, timeout=timeout, session=dcgm_session))
    if mode == "auto":
        return AutoSource(_LazyNvml(nvml_factory), None)
    raise ValueError(f"unknown GPU source {mode!r}; choose one of {', '.join(MODES)}")


def active_source_name(source: Any) -> str:
    """nvml | dcgm | none: what the source used most recently."""
    return getattr(source, "active", None) or source.name


class GpuCollector:
    """The ``gpu`` collector: canonical GPU series from the chosen source.

    Args:
        source: an object with ``name``, ``collect(deadline)``, ``close()`` (see make_source).
        mode: the ``--gpu.source`` setting, for ``obsctl_gpu_source_info``.
    """

    name = "gpu"
    description = "GPU utilization, memory, power, energy, clocks, errors (NVML or dcgm-exporter)"
    isolate = True

    def __init__(self, source: Any, mode: str) -> None:
        self.source = source
        self.mode = mode

    def collect(self, ctx: Any) -> list[Metric]:
        """Source families for this scrape, within ``ctx.deadline``; raises GpuSourceError."""
        try:
            return self.source.collect(ctx.deadline)
        except GpuSourceError as exc:
            if exc.reason in _NO_GPU_REASONS and self.mode in ("auto", "nvml"):
                raise GpuSourceError(exc.reason, f"{exc.detail or exc.reason}; no usable NVIDIA driver/GPU, serving "
                                                 "without GPU series (--dcgm.url reads a dcgm-exporter instead, "
                                                 "--gpu.source=none turns this off)") from None
            raise

    def after(self, ctx: Any, metrics: list[Metric]) -> None:
        """Publish this scrape's GPU inventory (and DCGM pod bindings) for attribution."""
        ctx.inventory = GpuInventory.from_metrics(metrics, getattr(self.source, "pod_bindings", None))
        ctx.gpu_source = self.source

    def source_info(self) -> list[Metric]:
        """``obsctl_gpu_source_info{mode,source}`` for this scrape."""
        return [meta.gpu_source_info(self.mode, active_source_name(self.source))]

    def close(self) -> None:
        """Close the source (stops NVML's event thread, the HTTP session)."""
        self.source.close()
