"""What a source module declares: the canonical series it fills and the raw metric names
each one reads (the README's catalogue is rendered from these declarations)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ctx:
    """Inputs of one class's rules.

    Attributes:
        sel: the class's label matchers, rendered and escaped (``job="vllm",model_name="m"``).
        w: range of the rates, a PromQL duration (``5m``; tests use seconds).
        options: the class's ``queue:`` block (:class:`obsctl.spec.QueueSource`) for queue
            sources, else None.
    """

    sel: str
    w: str
    options: object | None = None


@dataclass(frozen=True)
class Mapping:
    """One canonical series filled by a source.

    Attributes:
        record: the canonical record name (:mod:`obsctl.rules.canonical`).
        reads: the server's metric names the expression reads, every spelling.
        build: ``Ctx -> PromQL``; the result carries no labels (``outcome`` only for
            :data:`~obsctl.rules.canonical.REQUESTS`).
        note: how it is computed, when that is not a plain rate/gauge/quantile.
        outcomes: for :data:`~obsctl.rules.canonical.REQUESTS`, the ``outcome`` values
            the source can produce.
    """

    record: str
    reads: tuple[str, ...]
    build: Callable[[Ctx], str]
    note: str = ""
    outcomes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """A server or scheduler whose own metrics fill the canonical per-class series.

    Attributes:
        name: the spec's ``source:`` (or ``queue.source:``) value.
        title: the server, as people name it.
        versions: the versions the metric names come from, and where they were read.
        mappings: the canonical series it fills (absent ones are absent, never 0).
        lacks: what it cannot provide, in words, for the catalogue and ``obsctl check``.
        quirks: how the server's exposition oddities are handled.
        kind: ``serving`` (``source:``) or ``queue`` (``queue.source:``).
        series_labels: labels the server puts on its own series that its process's
            ``process_*`` series (the client library's process collector, same scrape
            target) do not carry; a class selector's matchers on them are dropped when
            the saturation state's CPU fallback reads ``process_cpu_seconds_total``.
    """

    name: str
    title: str
    versions: str
    mappings: tuple[Mapping, ...]
    lacks: str = ""
    quirks: tuple[str, ...] = field(default_factory=tuple)
    kind: str = "serving"
    series_labels: tuple[str, ...] = ()

    @property
    def records(self) -> tuple[str, ...]:
        """The canonical record names this source fills, in declaration order."""
        return tuple(m.record for m in self.mappings)

    def reads(self) -> tuple[str, ...]:
        """Every raw metric name read, sorted and deduplicated."""
        return tuple(sorted({n for m in self.mappings for n in m.reads}))
