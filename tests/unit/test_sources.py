"""The source catalogue's declarations and the spec fields that use them: ``source``,
``queue`` and catalogue signals; what ``obsctl check`` lists per class."""

from __future__ import annotations

import json
import textwrap
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner

from obsctl import spec as spec_module
from obsctl.cli import cli
from obsctl.errors import SpecError
from obsctl.rules import canonical
from obsctl.rules.sources import QUEUE_SOURCES, SOURCES, class_mappings, source_groups
from obsctl.spec import load_spec

CANONICAL = {v for k, v in vars(canonical).items() if k.isupper() and isinstance(v, str)}

BASE = textwrap.dedent(
    """\
    workload_classes:
      - name: chat
        kind: inference
        selector: {job: vllm}
    {extra_class}
    signals:
      - name: tokens_per_second
        category: throughput
        query: sum(rate(obsctl_tokens_total{$selector}[1m]))
        unit: tokens/s
        direction: higher_is_better
    {extra_signal}
    """
)


def spec_text(extra_class: str = "", extra_signal: str = "") -> str:
    return BASE.replace("{extra_class}", textwrap.indent(extra_class, "  ")).replace("{extra_signal}", extra_signal)


def load(tmp_path, text: str):
    path = tmp_path / "obsctl.yaml"
    path.write_text(text)
    return load_spec(path)


def error_of(tmp_path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        load(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_spec_source_names_are_the_registry():
    assert set(typing.get_args(spec_module.SourceName)) == set(SOURCES)
    assert set(typing.get_args(spec_module.QueueSourceName)) == set(QUEUE_SOURCES)


@pytest.mark.parametrize("source", [*SOURCES.values(), *QUEUE_SOURCES.values()], ids=lambda s: f"{s.kind}-{s.name}")
def test_every_source_documents_canonical_series_names_and_versions(source):
    assert source.versions and source.lacks
    assert source.mappings
    for mapping in source.mappings:
        assert mapping.record in CANONICAL, mapping.record
        assert mapping.reads, mapping.record
    assert len(set(source.records)) == len(source.records), "one rule per canonical series"


def test_an_existing_spec_stays_valid_and_gets_the_sdk_source(tmp_path):
    spec = load(tmp_path, spec_text())
    assert spec.workload_classes[0].source == "sdk"
    assert spec.workload_classes[0].queue is None
    assert [m.record for _, m in class_mappings(spec.workload_classes[0])] == list(SOURCES["sdk"].records)


def test_a_class_with_only_source_and_selector_gets_its_rules(tmp_path):
    spec = load(tmp_path, spec_text("- {name: tgi, kind: inference, source: tgi, selector: {job: tgi}}\n"))
    (group,) = [g for g in source_groups(spec) if g["name"] == "obsctl.sources.tgi"]
    assert {r["record"] for r in group["rules"]} == set(SOURCES["tgi"].records)
    assert all(r["labels"] == {"workload_class": "tgi"} for r in group["rules"])
    assert all('job="tgi"' in r["expr"] for r in group["rules"])


def test_queue_series_replace_the_serving_sources(tmp_path):
    spec = load(tmp_path, spec_text(
        "- name: train\n  kind: training\n  source: vllm\n  selector: {job: v}\n"
        "  queue: {source: kueue, selector: {job: kueue}, cluster_queue: 'gpu \"q\"'}\n"))
    wc = spec.workload_class("train")
    pairs = [(s.name, m.record) for s, m in class_mappings(wc)]
    assert ("kueue", canonical.REQUESTS_WAITING) in pairs and ("vllm", canonical.REQUESTS_WAITING) not in pairs
    assert ("vllm", canonical.TTFT_P95) in pairs
    (rule,) = [r for g in source_groups(spec) if g["name"] == "obsctl.sources.train"
               for r in g["rules"] if r["record"] == canonical.REQUESTS_WAITING]
    assert 'cluster_queue="gpu \\"q\\""' in rule["expr"] and 'job="kueue"' in rule["expr"]


@pytest.mark.parametrize("klass, expected", [
    ("- {name: x, kind: inference, source: vlm, selector: {job: v}}\n",
     ":5: workload_classes[1].source: Input should be 'sdk', 'vllm'"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: kueue}}\n",
     ":5: workload_classes[1].queue: kueue needs exactly one of cluster_queue or local_queue"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: kueue, cluster_queue: a, local_queue: b/c}}\n",
     "kueue needs exactly one of cluster_queue or local_queue"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: kueue, local_queue: nons}}\n",
     "workload_classes[1].queue.local_queue: String should match pattern"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: slurm}}\n",
     "slurm takes partition; got none"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: ray-serve, partition: p}}\n",
     "ray-serve takes no queue name"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: ray-serve}}\n",
     "ray-serve needs a selector naming the application or deployment"),
    ("- {name: x, kind: training, selector: {job: v}, queue: {source: slurm, partition: p, selector: {__name__: x}}}\n",
     "'__name__' is not a usable Prometheus label name"),
])
def test_bad_source_options_give_one_line_naming_the_field(tmp_path, klass, expected):
    assert expected in error_of(tmp_path, spec_text(klass))


def test_catalogue_signal_needs_no_promql(tmp_path):
    spec = load(tmp_path, spec_text(extra_signal="  - {name: ttft_p95, catalogue: ttft_p95_seconds}\n"))
    sig = spec.signal("ttft_p95")
    assert (sig.category, sig.unit, sig.direction) == ("quality", "seconds", "lower_is_better")
    assert spec.query_for(sig, "chat") == f'sum({canonical.TTFT_P95}{{workload_class="chat",signal=""}})'
    errors = load(tmp_path, spec_text(extra_signal="  - {name: errs, catalogue: error_requests_per_second, tolerance_ratio: 0.3}\n"))
    assert errors.query_for("errs", "chat") == f'sum({canonical.REQUESTS}{{workload_class="chat",outcome="error",signal=""}})'
    assert errors.signal("errs").tolerance_ratio == 0.3


@pytest.mark.parametrize("signal, expected", [
    ("  - {name: t, catalogue: nope}\n", "catalogue 'nope' is not one of: cached_input_tokens_per_second"),
    ("  - {name: t, catalogue: ttft_p95_seconds, query: 'sum(x{$selector})'}\n", "give either query or catalogue, not both"),
    # not a string: a mapping or list was a TypeError traceback (unhashable) before
    ("  - {name: t, catalogue: {ttft_p95_seconds: 1}}\n", "obsctl.yaml:12: signals[1]: catalogue {'ttft_p95_seconds': 1} is not one of"),
    ("  - {name: t, catalogue: [ttft_p95_seconds]}\n", "signals[1]: catalogue ['ttft_p95_seconds'] is not one of"),
])
def test_bad_catalogue_signals_are_refused(tmp_path, signal, expected):
    assert expected in error_of(tmp_path, spec_text(extra_signal=signal))


def test_check_lists_the_catalogue_signals_of_each_class(tmp_path):
    path = tmp_path / "obsctl.yaml"
    path.write_text(spec_text("- {name: llama, kind: inference, source: llamacpp, selector: {job: l}}\n"))
    result = CliRunner().invoke(cli, ["check", "--spec", str(path), "--output", "json"])
    assert result.exit_code == 0, result.output
    about = json.loads(result.output)["catalogue"]
    assert about["llama"]["source"] == "llamacpp"
    assert "input_tokens_per_second" in about["llama"]["signals"]
    assert "ttft_p95_seconds" not in about["llama"]["signals"]  # llama.cpp has no latency histograms
    assert "ttft_p95_seconds" not in about["chat"]["signals"] and "requests_per_second" in about["chat"]["signals"]
    text = CliRunner().invoke(cli, ["check", "--spec", str(path)]).output
    assert "  llama: source llamacpp: catalogue signals " in text


def test_readme_documents_every_source_and_metric_name_read():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- sources:start -->", 1)[1].split("<!-- sources:end -->", 1)[0]
    for source in [*SOURCES.values(), *QUEUE_SOURCES.values()]:
        assert f"`{source.name}` ({source.title})" in block
        for name in source.reads():
            assert f"`{name}`" in block, name


def test_outcome_signals_are_listed_only_where_the_source_has_that_outcome(tmp_path):
    from obsctl.rules.sources import describe

    spec = load(tmp_path, spec_text("- {name: serve, kind: inference, source: ray-serve, selector: {job: ray}}\n"))
    signals = describe(spec.workload_class("serve"))["signals"]
    assert "error_requests_per_second" in signals and "rejected_requests_per_second" not in signals
    for source in SOURCES.values():
        for m in source.mappings:
            assert bool(m.outcomes) == (m.record == canonical.REQUESTS), (source.name, m.record)


def test_check_notes_a_catalogue_signal_a_class_cannot_have(tmp_path):
    path = tmp_path / "obsctl.yaml"
    path.write_text(spec_text("- {name: tgi, kind: inference, source: tgi, selector: {job: t}}\n",
                              "  - {name: ttft, catalogue: ttft_p95_seconds}\n"))
    result = CliRunner().invoke(cli, ["check", "--spec", str(path), "--output", "json"])
    assert result.exit_code == 0
    gaps = json.loads(result.stdout)["catalogue_gaps"]
    assert len(gaps) == 2  # the sdk class chat and the tgi class: neither has TTFT
    assert f"{path}:13: signals[1] ttft (catalogue ttft_p95_seconds): class tgi (source tgi) does not provide it" in gaps[1]


def test_the_sources_package_ships_in_the_wheel():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "obsctl.rules.sources" in config["packages"]
    assert config["package-dir"]["obsctl.rules.sources"] == "rules/sources"


def test_mfu_is_a_catalogue_signal_of_classes_with_an_mfu_block(tmp_path):
    """A signal on MFU could not be written before: a query needs $selector, the MFU series has only workload_class."""
    text = spec_text(extra_class="- {name: train, kind: training, selector: {job: t}, mfu: {flops_per_token: 7.8e9}}\n",
                     extra_signal="  - {name: mfu, catalogue: mfu_ratio}\n")
    spec = load(tmp_path, text)
    assert spec.query_for("mfu", "train") == f'sum({canonical.MFU}{{workload_class="train",signal=""}})'
    assert spec.signal("mfu").category == "utilization"
    from obsctl.rules.sources import catalogue_gaps, describe

    assert "mfu_ratio" in describe(spec.workload_class("train"))["signals"]
    assert "mfu_ratio" not in describe(spec.workload_class("chat"))["signals"]
    assert any("class chat" in gap and "mfu_ratio" in gap for gap in catalogue_gaps(spec))


def test_derived_signals_are_offered_only_where_their_inputs_are(tmp_path):
    """A token server gets no cost per sample or samples per GPU-second; the SDK (which
    counts samples and tokens) gets both; the input/output split needs both directions."""
    from obsctl.rules.sources import describe

    spec = load(tmp_path, spec_text("- {name: llm, kind: inference, source: vllm, selector: {job: v}}\n"
                                    "- {name: tr, kind: inference, source: triton, selector: {job: t}}\n"))
    vllm = describe(spec.workload_class("llm"))["signals"]
    assert not {"usd_per_sample", "samples_per_gpu_allocated_second", "samples_per_second", "step_time_seconds"} & set(vllm)
    assert {"usd_per_million_input_tokens", "usd_per_million_output_tokens", "tokens_per_gpu_allocated_second",
            "cached_input_tokens_per_second", "prefill_p95_seconds", "decode_p95_seconds"} <= set(vllm)
    triton = describe(spec.workload_class("tr"))["signals"]  # counts requests, no tokens
    assert "usd_per_request" in triton and not {"usd_per_million_tokens", "tokens_per_joule"} & set(triton)
    sdk = describe(spec.workload_class("chat"))["signals"]
    assert {"usd_per_sample", "samples_per_gpu_allocated_second", "usd_per_million_tokens"} <= set(sdk)
