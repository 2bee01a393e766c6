"""The exporter's text and OpenMetrics renderers equal prometheus_client's output byte for byte.

obsctl.exporters.exposition.TextRenderer replaces generate_latest on the default (text 0.0.4) path for
speed; these tests hold it to the library's exact output on the NVML scenarios, the exporter's own
families and the awkward cases (escaping, special floats, timestamps, _created, non-legacy names).
"""

from __future__ import annotations

import math
import time

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Histogram,
    Info,
    Summary,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics.exposition import (
    CONTENT_TYPE_LATEST as OPENMETRICS_TYPE,
)
from prometheus_client.openmetrics.exposition import (
    generate_latest as om_generate_latest,
)

from obsctl.exporters.app import Exporter
from obsctl.exporters.exposition import OpenMetricsRenderer, TextRenderer, encoder_for
from obsctl.exporters.gpu.collector import GpuCollector
from support import stubnvml


class _Fams:
    def __init__(self, families):
        self.families = list(families)

    def collect(self):
        return self.families


def _library(families) -> bytes:
    return generate_latest(_Fams(families))


@pytest.mark.parametrize("scenario", [stubnvml.h100_8x, stubnvml.a100_mig, stubnvml.rtx4090])
def test_nvml_scenarios_equal_generate_latest(nvml_env, scenario):
    nvml_env.write(scenario())
    src = nvml_env.source()
    renderer = TextRenderer()
    for _ in range(3):  # cold cache, then the cached label strings
        families = src.collect(time.monotonic() + 5)
        assert renderer.render(families) == _library(families)


def test_exporter_families_equal_generate_latest(nvml_env):
    """The full exporter output (meta, build info, process series) through the same renderer."""
    nvml_env.write(stubnvml.h100_8x())
    src = nvml_env.source()
    exporter = Exporter([GpuCollector(_Direct(src), "nvml")], process_metrics=True)
    renderer = TextRenderer()
    try:
        for _ in range(3):
            families = exporter.scrape(5.0)
            assert renderer.render(families) == _library(families)
    finally:
        exporter.close()


class _Direct:
    name = "nvml"

    def __init__(self, src):
        self.src = src

    def collect(self, deadline):
        return self.src.collect(deadline)

    def close(self):
        pass


def _awkward_families() -> list[Metric]:
    g = GaugeMetricFamily("odd_gauge", 'help with \\ backslash\nand newline and "quotes"', labels=["a", "b"])
    g.add_metric(['va"l\\ue\nx', "ünïcødé"], 1.5)
    g.add_metric(["x", "y"], math.inf)
    g.add_metric(["x", "z"], -math.inf)
    g.add_metric(["n", "n"], math.nan)
    for i, v in enumerate((0.0, -0.0, 1e-7, 123456.0, 1234567.0, 12345678.9, 1e16, 1.5e300, -2e9, 7)):
        g.add_metric(["v", str(i)], v)
    g.add_metric(["t", "t"], 2.0, timestamp=1700000000.123)
    c = CounterMetricFamily("odd_requests", "a counter", labels=["code"], created=1600000000.5)
    c.add_metric(["200"], 10, created=1600000000.5)
    c.add_metric(["500"], 0, created=1600000001.0)
    i = InfoMetricFamily("odd_build", "info", value={"version": "1.2", "commit": "abc"})
    s = StateSetMetricFamily("odd_state", "stateset", value={"on": True, "off": False})
    weird = GaugeMetricFamily("my.dotted:name", "non-legacy name", labels=["label.with.dots"])
    weird.add_metric(["v"], 3)
    empty = GaugeMetricFamily("odd_empty", "no samples")
    untyped = Metric("odd_untyped", "untyped", "unknown")
    untyped.add_sample("odd_untyped", {}, 4.0)
    return [g, c, i, s, weird, empty, untyped]


def test_awkward_families_equal_generate_latest():
    renderer = TextRenderer()
    for _ in range(2):
        families = _awkward_families()  # fresh label dicts: the content-keyed cache path
        assert renderer.render(families) == _library(families)


def test_client_library_metrics_equal_generate_latest():
    """Histogram, summary, counter _created and enum families as prometheus_client builds them."""
    reg = CollectorRegistry()
    Counter("lib_events", "events", ["kind"], registry=reg).labels("a").inc(3)
    h = Histogram("lib_latency_seconds", "latency", registry=reg)
    h.observe(0.2)
    h.observe(3.0)
    Summary("lib_size_bytes", "size", registry=reg).observe(512)
    Gauge("lib_gauge", "gauge", registry=reg).set(2.5)
    Info("lib", "info", registry=reg).info({"a": "b"})
    Enum("lib_state", "state", states=["up", "down"], registry=reg).state("down")
    families = list(reg.collect())
    assert TextRenderer().render(families) == generate_latest(reg)


def test_value_cache_keeps_changes_and_signed_zero():
    """Reused lines only for unchanged values: 0.0 after -0.0, int after float, NaN, timestamps."""
    labels = {"gpu": "0"}
    renderer = TextRenderer()
    for value, ts in [(-0.0, None), (0.0, None), (0, None), (1, None), (1.0, None), (True, None), (2.5, None),
                      (2.5, 1700000000.0), (2.5, None), (math.nan, None), (math.nan, None), (-0.0, None),
                      (1e16, None), (10000000000000001, None), (12345678.0, None), (12345678.0, 5.0)]:
        g = Metric("vals", "h", "gauge")
        g.add_sample("vals", labels, value, ts)  # the same label dict every render: the id-cache path
        assert renderer.render([g]) == _library([g]), (value, ts)


def test_label_cache_is_bounded():
    renderer = TextRenderer(max_cached=10)
    for n in range(50):  # 50 distinct label sets, like process churn
        g = GaugeMetricFamily("churn", "h", labels=["pid"])
        g.add_metric([str(n)], 1)
        assert renderer.render([g]) == _library([g])
    assert len(renderer._prefixes) <= 10
    assert len(renderer._by_id) == 1  # only the last render's label dicts are held


def test_negotiation_uses_renderer_only_for_plain_text():
    renderer = TextRenderer()
    families = _awkward_families()
    for accept in ("", "text/plain;version=0.0.4", "*/*", "text/plain"):
        encode, ctype = encoder_for(accept, renderer)
        assert ctype == CONTENT_TYPE_PLAIN_0_0_4
        assert encode == renderer.render
        assert encode(families) == _library(families)
    prom = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
            "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
    encode, ctype = encoder_for(prom, renderer)
    assert ctype.startswith("application/openmetrics-text")
    assert encode(families) == om_generate_latest(_Fams(families), version="1.0.0")
    encode, ctype = encoder_for("application/openmetrics-text", renderer)
    assert ctype == OPENMETRICS_TYPE
    assert encode(families).endswith(b"# EOF\n")


# OpenMetrics: the renderer Prometheus' default Accept reaches, held to the library's bytes.

#: Prometheus 3.x's default scrape Accept (OpenMetrics first, UTF-8 names allowed).
PROMETHEUS3_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                      "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;"
                      "escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
ESCAPINGS = ["underscores", "allow-utf-8", "dots", "values"]


def _library_om(families, escaping="underscores", version="1.0.0") -> bytes:
    return om_generate_latest(_Fams(families), escaping=escaping, version=version)


@pytest.mark.parametrize("scenario", [stubnvml.h100_8x, stubnvml.a100_mig, stubnvml.rtx4090])
def test_nvml_scenarios_equal_openmetrics_generate_latest(nvml_env, scenario):
    nvml_env.write(scenario())
    src = nvml_env.source()
    renderer = OpenMetricsRenderer()
    for _ in range(3):
        families = src.collect(time.monotonic() + 5)
        assert renderer.render(families) == _library_om(families)


def test_exporter_families_equal_openmetrics_generate_latest(nvml_env):
    nvml_env.write(stubnvml.h100_8x())
    exporter = Exporter([GpuCollector(_Direct(nvml_env.source()), "nvml")], process_metrics=True)
    renderer = TextRenderer()
    try:
        for _ in range(3):  # text and OpenMetrics alternating, as different scrapers would
            families = exporter.scrape(5.0)
            assert renderer.render(families) == _library(families)
            for escaping in ("underscores", "allow-utf-8"):
                assert renderer.openmetrics.render(families, escaping) == _library_om(families, escaping)
    finally:
        exporter.close()


@pytest.mark.parametrize("escaping", ESCAPINGS)
def test_awkward_families_equal_openmetrics_generate_latest(escaping):
    renderer = OpenMetricsRenderer()
    for _ in range(2):
        families = _awkward_families()
        assert renderer.render(families, escaping) == _library_om(families, escaping)


@pytest.mark.parametrize("escaping", ESCAPINGS)
def test_client_library_metrics_equal_openmetrics_generate_latest(escaping):
    """_created in place, histogram buckets, summaries, units, info, enum, as the library builds them."""
    reg = CollectorRegistry()
    Counter("lib_events", "events", ["kind"], registry=reg).labels("a").inc(3)
    h = Histogram("lib_latency_seconds", "latency", unit="seconds", registry=reg)
    h.observe(0.2)
    Summary("lib_size_bytes", "size", unit="bytes", registry=reg).observe(512)
    Gauge("lib_gauge", "gauge", registry=reg).set(2.5)
    Info("lib", "info", registry=reg).info({"a": "b"})
    Enum("lib_state", "state", states=["up", "down"], registry=reg).state("down")
    renderer = OpenMetricsRenderer()
    for _ in range(2):
        assert renderer.render(list(reg.collect()), escaping) == om_generate_latest(reg, escaping=escaping)


def test_openmetrics_exemplar_family_is_rendered_by_the_library():
    reg = CollectorRegistry()
    c = Counter("ex_events", "events", registry=reg)
    c.inc(2, exemplar={"trace_id": "abc"})
    Gauge("ex_plain", "plain", registry=reg).set(1)
    families = list(reg.collect())
    assert b"# {trace_id=\"abc\"}" in OpenMetricsRenderer().render(families)
    assert OpenMetricsRenderer().render(families) == om_generate_latest(reg)


def test_openmetrics_value_cache_keeps_changes_none_and_timestamps():
    labels = {"gpu": "0"}
    renderer = OpenMetricsRenderer()
    for value, ts in [(None, None), (None, None), (-0.0, None), (0.0, None), (1, None), (1.0, None), (True, None),
                      (2.5, None), (2.5, 1700000000.25), (2.5, None), (math.nan, None), (1e16, None),
                      (12345678.0, 5.0), (None, 7.0)]:
        g = Metric("vals", "h", "gauge")
        g.add_sample("vals", labels, value, ts)
        assert renderer.render([g]) == _library_om([g]), (value, ts)


def test_openmetrics_cache_is_bounded():
    renderer = OpenMetricsRenderer(max_cached=10)
    for n in range(50):
        g = GaugeMetricFamily("churn", "h", labels=["pid"])
        g.add_metric([str(n)], 1)
        assert renderer.render([g]) == _library_om([g])
    assert len(renderer._prefixes) <= 10
    assert len(renderer._by_id) == 1


@pytest.mark.parametrize("accept, escaping", [
    ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "underscores"),  # Prometheus 2.x
    (PROMETHEUS3_ACCEPT, "allow-utf-8"),
    ("application/openmetrics-text", "underscores"),
])
def test_negotiated_openmetrics_is_the_own_renderer(accept, escaping):
    renderer = TextRenderer()
    families = _awkward_families()
    encode, ctype = encoder_for(accept, renderer)
    assert ctype.startswith("application/openmetrics-text")
    assert encode.func == renderer.openmetrics.render  # not prometheus_client's encoder
    assert encode(families) == _library_om(families, escaping)


def test_text_1_0_0_with_escaping_stays_with_the_library():
    encode, ctype = encoder_for("text/plain;version=1.0.0;escaping=allow-utf-8", TextRenderer())
    assert "escaping=allow-utf-8" in ctype
    assert not hasattr(encode, "func")


def _gpu_like_families(values: dict[str, float], labels: list[dict[str, str]]) -> list[Metric]:
    """Two families over the same label dicts, one value per (family, GPU): what the NVML source builds."""
    out = []
    for name, value in values.items():
        fam = Metric(name, f"{name} help", "gauge")
        for i, lab in enumerate(labels):
            fam.add_sample(name, lab, value if i != 1 else -value)
        out.append(fam)
    return out


@pytest.mark.parametrize("make, library", [(TextRenderer, _library), (OpenMetricsRenderer, lambda f: _library_om(f))])
def test_unchanged_family_is_reused_and_a_changed_one_rendered(monkeypatch, make, library):
    """An unchanged family costs no value formatting; a changed one (also a zero changing sign) is rendered."""
    from obsctl.exporters import exposition

    labels = [{"gpu": str(i)} for i in range(4)]
    renderer = make()
    formatted = []
    real = exposition._go_float
    monkeypatch.setattr(exposition, "_go_float", lambda v: formatted.append(v) or real(v))
    renders = [
        {"a": 1.5, "b": 0.0},
        {"a": 1.5, "b": 0.0},   # nothing changed: both families reused
        {"a": 2.5, "b": 0.0},   # only "a" changed
        {"a": 2.5, "b": -0.0},  # equal values, but the zeros changed sign: "b" rendered again
        {"a": 2.5, "b": -0.0},
    ]
    counts = []
    for values in renders:
        formatted.clear()
        families = _gpu_like_families(values, labels)  # fresh families and Samples, same label dicts
        assert renderer.render(families) == library(families), values
        counts.append(len(formatted))
    # first render: 8 values; reused families format nothing; a changed family formats its changed values
    assert counts[0] == 8 and counts[1] == 0 and counts[4] == 0
    assert counts[2] == 4 and counts[3] == 4


def test_openmetrics_equal_timestamps_of_other_types_are_not_reused():
    """OpenMetrics writes a timestamp as given: 5 and 5.0 are equal samples but different text."""
    labels = {"gpu": "0"}
    renderer = OpenMetricsRenderer()
    for ts in (5, 5.0, 5, 5):
        g = Metric("stamped", "h", "gauge")
        g.add_sample("stamped", labels, 1.0, ts)
        assert renderer.render([g]) == _library_om([g]), ts
