"""Prometheus text format 0.0.4 rendering with cached label strings (the scrape hot path).

Why this exists (measured, bench/bench_gpu_exporter.py, 2 vCPU shared machine, 2026-11-30):
prometheus_client 0.26's ``generate_latest`` took 4.7-5.4 ms for the 8-GPU scrape (~420 samples,
~12 us a sample, most of it sorting, validating and escaping every label on every scrape), which alone
breaks the exporter's scrape-latency goal (docs/benchmarks-gpu.md). The sample lines' ``name{labels} `` prefixes repeat from scrape to
scrape, so this renderer builds each prefix once with prometheus_client's own escaping functions and
reuses it; a value is formatted (as prometheus_client's ``floatToGoString`` does) only when it changed
since the last render of that series. Measured for the 8-GPU scrape (bench, reference loop 76 ms):
0.38 ms (the stand-in's unchanging values), 0.78 ms with every value changed, against 5.9 ms for
generate_latest; for 64 GPUs 4.6 / 9.0 ms against 37.5 ms.

prometheus_client stays the data model: input is its ``Metric`` families, and the output is byte for
byte what ``generate_latest(registry)`` gives for them (tested in tests/unit/test_exporter_exposition.py).

OpenMetrics 1.0 (what Prometheus asks for first in its default ``Accept``) is rendered the same way by
:class:`OpenMetricsRenderer`, byte for byte what prometheus_client's
``openmetrics.exposition.generate_latest(registry, escaping, version)`` gives for the escaping and version
``choose_encoder`` negotiated. A family with exemplars or native-histogram samples is handed to that
library function whole (the exporter publishes neither). Only the escaping-negotiated *text* formats
(``text/plain; version=1.0.0``) stay with prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from math import copysign

from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.exposition import generate_latest as _library_generate_latest
from prometheus_client.openmetrics import exposition as _om
from prometheus_client.utils import floatToGoString

_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
_TYPE_MAP = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
             "unknown": "untyped"}
_NAME_SUFFIX = {"counter": "_total", "info": "_info"}
_UNSET = object()
#: Rendered prefixes kept at most; a label churn (processes coming and going) cannot grow it forever.
MAX_CACHED_PREFIXES = 50_000


class TextRenderer:
    """Renders families as text format 0.0.4, caching each ``(sample name, label set)`` prefix.

    One instance per exporter (the cache is its state); safe to call from one thread at a time
    per instance, and the server serialises scrapes anyway (a race could only render a prefix twice).
    """

    def __init__(self, max_cached: int = MAX_CACHED_PREFIXES) -> None:
        self._prefixes: dict[tuple, str] = {}  # (name, *label items) -> prefix
        # (name, id(labels)) -> [labels, prefix, last value, last line] for the label dicts of the last
        # render. Sources that reuse their label dicts (the NVML source does) hit here without building
        # the content key;
        # the entry holds the dict, so its id cannot be reused while cached, and the entry is dropped
        # after a render that did not use it, so per-scrape dicts are not kept alive.
        self._by_id: dict[tuple, tuple] = {}
        self._headers: dict[tuple, str] = {}
        self._families: dict[tuple, _FamilyText] = {}  # (name, help, type) -> its last rendering
        self._max = max_cached
        #: The OpenMetrics renderer :func:`encoder_for` uses with this one (its own caches).
        self.openmetrics = OpenMetricsRenderer(max_cached)

    def _prefix(self, key: tuple, name: str, labels: dict[str, str]) -> str:
        """``name{k="v",...} `` built with prometheus_client's escaping (cache miss path)."""
        if not _om._is_valid_legacy_metric_name(name):  # generate_latest underscores-escapes such names
            name = _om.escape_metric_name(name, _om.UNDERSCORES)
        if labels:
            body = ",".join(f'{_om.escape_label_name(k, _om.UNDERSCORES)}="{_om._escape(v, _om.ALLOWUTF8, False)}"'
                            for k, v in sorted(labels.items()))
            text = f"{name}{{{body}}} "
        else:
            text = f"{name} "
        if len(self._prefixes) >= self._max:
            self._prefixes.clear()
        self._prefixes[key] = text
        return text

    def _header(self, name: str, doc: str, typ: str) -> str:
        key = (name, doc, typ)
        text = self._headers.get(key)
        if text is None:
            esc = _om.escape_metric_name(name, _om.UNDERSCORES)
            doc_esc = doc.replace("\\", r"\\").replace("\n", r"\n")
            text = f"# HELP {esc} {doc_esc}\n# TYPE {esc} {typ}\n"
            if len(self._headers) >= self._max:
                self._headers.clear()
            self._headers[key] = text
        return text

    def render(self, families: Iterable[Metric]) -> bytes:
        """UTF-8 text exposition of ``families``, equal to prometheus_client's ``generate_latest``."""
        out: list[str] = []
        append = out.append
        prefixes, old, new = self._prefixes, self._by_id, {}
        old_families, new_families = self._families, {}
        for metric in families:
            samples = metric.samples
            fkey = (metric.name, metric.documentation, metric.type)
            cached = old_families.get(fkey)
            if cached is not None and cached.matches(samples):
                append(cached.text)  # every sample as last time: the family's text as last time
                new.update(cached.entries)
                new_families[fkey] = cached
                continue
            start, entries = len(out), {}
            mtype = metric.type
            mname = metric.name + _NAME_SUFFIX.get(mtype, "")
            append(self._header(mname, metric.documentation, _TYPE_MAP.get(mtype, mtype)))
            om: dict[str, list[str]] = {}
            om_names = {metric.name + s: s for s in _OM_SUFFIXES}
            for name, labels, value, ts, _exemplar, _native in samples:
                ikey = (name, id(labels))
                entry = old.get(ikey)
                if entry is None or entry[0] is not labels:
                    key = (name, *labels.items())
                    prefix = prefixes.get(key)
                    if prefix is None:
                        prefix = self._prefix(key, name, labels)
                    entry = [labels, prefix, None, ""]  # + the last value and its rendered line
                new[ikey] = entry
                entries[ikey] = entry
                last = entry[2]
                # An unchanged value reuses last scrape's line: the same object, or an equal non-zero
                # number (equal numbers format alike, except 0.0 and -0.0, hence the zero test).
                if ts is None and (value is last or (value == last and value != 0)):
                    line = entry[3]
                else:
                    v = _go_float(value)
                    if ts is None:
                        line = entry[3] = f"{entry[1]}{v}\n"
                        entry[2] = value
                    else:
                        line = f"{entry[1]}{v} {int(float(ts) * 1000):d}\n"
                suffix = om_names.get(name)
                if suffix is None:
                    append(line)
                else:  # OpenMetrics-only samples go into their own gauge after the family
                    om.setdefault(suffix, []).append(line)
            for suffix, lines in sorted(om.items()):
                append(self._header(metric.name + suffix, metric.documentation, "gauge"))
                out.extend(lines)
            text = "".join(out[start:])
            del out[start:]
            append(text)
            new_families[fkey] = _FamilyText(samples, text, entries)
        self._by_id = new
        self._families = new_families
        return "".join(out).encode("utf-8")


class _FamilyText:
    """One family's last rendering, reused while its samples compare equal (the scrape's hot path).

    ``samples == last`` runs in C (names, label dicts, values, timestamps, exemplars compared with
    an identity shortcut), a fraction of rendering the family sample by sample; on a real GPU most
    families (limits, totals, clock reasons, ECC, remapped rows, NVLink) keep their values from
    scrape to scrape. Equal samples render alike with one exception, a zero whose sign changed
    (``0.0 == -0.0``, rendered ``0.0`` and ``-0.0``), so the zero values' signs are compared too.
    The samples are copied (a caller may reuse its list).

    Attributes:
        text: the family's rendered lines, headers included.
        entries: the renderer's per-series entries of this family, kept alive while it is reused.
    """

    __slots__ = ("entries", "samples", "text", "zeros")

    def __init__(self, samples: list, text: str, entries: dict) -> None:
        self.samples = list(samples)
        self.zeros = tuple((i, _sign(s[2])) for i, s in enumerate(self.samples) if s[2] == 0)
        self.text = text
        self.entries = entries

    def matches(self, samples: list) -> bool:
        """True when ``samples`` renders exactly as the cached family did."""
        if samples != self.samples:
            return False
        return all(_sign(samples[i][2]) == sign for i, sign in self.zeros)


def _sign(value: float) -> float:
    return copysign(1.0, value)


def _go_float(value: float) -> str:
    """prometheus_client's ``floatToGoString``, with the finite-float case inlined (same output)."""
    if type(value) is float and -1e300 < value < 1e300:
        v = repr(value)
        if value >= 1e6:  # Go switches to exponent form for more than 6 integer digits
            dot = v.find(".")
            if dot > 6:
                v = f"{v[0]}.{v[1:dot]}{v[dot + 1:]}".rstrip("0.") + f"e+{dot - 1:02d}"
        return v
    return floatToGoString(value)


class OpenMetricsRenderer:
    """Renders families as OpenMetrics text, caching each ``(escaping, sample name, label set)`` prefix
    and the last line of each series, as :class:`TextRenderer` does for text 0.0.4.

    Output equals ``prometheus_client.openmetrics.exposition.generate_latest(registry, escaping,
    version)`` for every escaping scheme and version >= 1.0.0. Samples are written in the family's
    order (``_created`` in place), timestamps in seconds as given, and ``# EOF`` last. One instance per
    exporter; one thread at a time.
    """

    def __init__(self, max_cached: int = MAX_CACHED_PREFIXES) -> None:
        self._prefixes: dict[tuple, str] = {}  # (escaping, name, *label items) -> prefix
        self._by_id: dict[tuple, list] = {}  # (escaping, name, id(labels)) -> [labels, prefix, value, line]
        self._headers: dict[tuple, str] = {}
        self._families: dict[tuple, _FamilyText] = {}  # (escaping, name, help, type, unit) -> last rendering
        self._max = max_cached

    def _prefix(self, key: tuple, name: str, labels: dict[str, str], escaping: str) -> str:
        """``name{k="v",...} `` exactly as the library composes it (cache miss path)."""
        legacy = _om._is_valid_legacy_metric_name(name)
        body = _om.escape_metric_name(name, escaping) + ("," if labels else "") if escaping == _om.ALLOWUTF8 and not legacy else ""
        if labels:
            body += ",".join(f'{_om.escape_label_name(k, escaping)}="{_om._escape(v, _om.ALLOWUTF8, _om._is_legacy_labelname_rune)}"'
                             for k, v in sorted(labels.items()))
        braces = f"{{{body}}}" if body else ""
        if escaping != _om.ALLOWUTF8 or legacy:
            text = f"{_om._escape(name, escaping, _om._is_legacy_labelname_rune)}{braces} "
        else:
            text = f"{braces} "
        if len(self._prefixes) >= self._max:
            self._prefixes.clear()
        self._prefixes[key] = text
        return text

    def _header(self, metric: Metric, escaping: str) -> str:
        key = (escaping, metric.name, metric.documentation, metric.type, metric.unit)
        text = self._headers.get(key)
        if text is None:
            esc = _om.escape_metric_name(metric.name, escaping)
            doc = _om._escape(metric.documentation, _om.ALLOWUTF8, _om._is_legacy_labelname_rune)
            text = f"# HELP {esc} {doc}\n# TYPE {esc} {metric.type}\n"
            if metric.unit:
                text += f"# UNIT {esc} {metric.unit}\n"
            if len(self._headers) >= self._max:
                self._headers.clear()
            self._headers[key] = text
        return text

    def render(self, families: Iterable[Metric], escaping: str = _om.UNDERSCORES, version: str = "1.0.0") -> bytes:
        """UTF-8 OpenMetrics exposition of ``families``, ending in ``# EOF``.

        Args:
            families: prometheus_client ``Metric`` families (as a collector's ``collect()`` yields them).
            escaping: name escaping negotiated from ``Accept`` (``underscores``, ``allow-utf-8``, ...).
            version: the negotiated OpenMetrics version; only the library path (native histograms) reads it.
        """
        out: list[str] = []
        append = out.append
        prefixes, old, new = self._prefixes, self._by_id, {}
        old_families, new_families = self._families, {}
        for metric in families:
            samples = metric.samples
            fkey = (escaping, metric.name, metric.documentation, metric.type, metric.unit)
            cached = old_families.get(fkey)
            if cached is not None and cached.matches(samples):  # as last time (no exemplars: compared)
                append(cached.text)
                new.update(cached.entries)
                new_families[fkey] = cached
                continue
            if any(s.exemplar or s.native_histogram for s in samples):
                body = _om.generate_latest(_Families([metric]), escaping=escaping, version=version)
                append(body.decode("utf-8")[: -len("# EOF\n")])
                continue
            start, entries, timestamps = len(out), {}, False
            append(self._header(metric, escaping))
            for name, labels, value, ts, _exemplar, _native in samples:
                ikey = (escaping, name, id(labels))
                entry = old.get(ikey)
                if entry is None or entry[0] is not labels:
                    key = (escaping, name, *labels.items())
                    prefix = prefixes.get(key)
                    if prefix is None:
                        prefix = self._prefix(key, name, labels, escaping)
                    entry = [labels, prefix, _UNSET, ""]  # a None value must not match "no value yet"
                new[ikey] = entry
                entries[ikey] = entry
                last = entry[2]
                if ts is None and (value is last or (value == last and value != 0)):
                    append(entry[3])
                    continue
                v = "" if value is None else _go_float(value)
                if ts is None:
                    entry[2] = value
                    entry[3] = line = f"{entry[1]}{v}\n"
                else:
                    timestamps = True
                    line = f"{entry[1]}{v} {ts}\n"
                append(line)
            if not timestamps:  # a timestamp is written as given: equal ones (1 and 1.0) can differ
                text = "".join(out[start:])
                del out[start:]
                append(text)
                new_families[fkey] = _FamilyText(samples, text, entries)
        append("# EOF\n")
        self._by_id = new
        self._families = new_families
        return "".join(out).encode("utf-8")


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def encoder_for(accept: str, renderer: TextRenderer,
                om_renderer: OpenMetricsRenderer | None = None) -> tuple[Callable[[list[Metric]], bytes], str]:
    """``(render(families) -> bytes, content type)`` for an Accept header.

    Negotiation is prometheus_client's ``choose_encoder``; when it picks plain text 0.0.4 (the
    default) ``renderer`` renders it, when it picks OpenMetrics (Prometheus' default ``Accept`` puts
    it first) ``om_renderer`` does with the negotiated escaping and version (``renderer``'s companion
    :class:`OpenMetricsRenderer` when not given); the escaping-negotiated text 1.0.0 format stays with
    prometheus_client's encoder. The content type is always the library's.
    """
    encoder, content_type = choose_encoder(accept)
    if encoder is _library_generate_latest and content_type == CONTENT_TYPE_PLAIN_0_0_4:
        return renderer.render, content_type
    if isinstance(encoder, partial) and encoder.func is _om.generate_latest and not encoder.args:
        om = om_renderer if om_renderer is not None else renderer.openmetrics
        return partial(om.render, **encoder.keywords), content_type
    return (lambda families: encoder(_Families(families))), content_type
