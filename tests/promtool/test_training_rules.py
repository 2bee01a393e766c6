"""MFU rules checked by ``promtool test rules`` on synthetic series: per-class model FLOP/s
over the dense peak of the attributed GPUs. Expected values are computed here from the
vendor datasheet figures written out in this file (not read from the peak table), so a
wrong table entry fails too; absent cases (a GPU without a table entry, a dtype the GPU
lacks) expect no series."""

from __future__ import annotations

import pytest
import yaml

from obsctl.exporters.training.peaks import DENSE_PEAK_FLOPS, DTYPES, dense_peak_flops
from obsctl.rules import canonical as C
from obsctl.rules import promtool
from obsctl.rules.render import dump_rule_file
from obsctl.rules.training import MODEL_FLOPS, PEAK_FLOPS, training_groups
from support.rules_fixtures import write_spec

H100 = "NVIDIA H100 80GB HBM3"
H100_BF16 = 1979e12 / 2  # datasheet: 1,979 TFLOPS BF16 with sparsity -> dense half
L4_FP8 = 485e12 / 2  # datasheet: 485 TFLOPS FP8 with sparsity
FPT = 6 * 1.3e9  # a 1.3 B-parameter dense model, training
FPS = 2.5e12


def cls(name, mfu, kind="training"):
    return {"name": name, "kind": kind, "selector": {"job": "t", "workload": name}, "node_selector": {"job": "x"}, "mfu": mfu}


SPEC = {
    "store": "store",
    "workload_classes": [
        cls("llm", {"flops_per_token": FPT, "dtype": "bf16"}),
        cls("mixed", {"flops_per_token": FPT, "dtype": "bf16"}),
        cls("vision", {"flops_per_sample": FPS, "dtype": "fp8"}),
        cls("custom", {"flops_per_sample": FPS, "peak_flops_per_second": 70e12}),
        cls("t4bf16", {"flops_per_token": FPT, "dtype": "bf16"}),
        {"name": "plain", "kind": "inference", "selector": {"job": "t", "workload": "plain"}},
    ],
    "signals": [{"name": "tps", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                 "unit": "tokens/s", "direction": "higher_is_better"}],
}

# (uuid, model, class, extra attribution labels): llm has 2 H100 (+ a MIG slice, not counted),
# mixed an H100 and an A10G (not in the table), vision 3 L4, custom 2 A10G, t4bf16 a T4.
GPUS = [
    ("GPU-0", H100, "llm", {}), ("GPU-1", H100, "llm", {}), ("GPU-2", H100, "llm", {"gpu_instance": "1"}),
    ("GPU-3", H100, "mixed", {}), ("GPU-4", "NVIDIA A10G", "mixed", {}),
    ("GPU-5", "NVIDIA L4", "vision", {}), ("GPU-6", "NVIDIA L4", "vision", {}), ("GPU-7", "NVIDIA L4", "vision", {}),
    ("GPU-8", "NVIDIA A10G", "custom", {}), ("GPU-9", "NVIDIA A10G", "custom", {}),
    ("GPU-10", "Tesla T4", "t4bf16", {}),
]
TOKENS = {"llm": 40_000.0, "mixed": 10_000.0, "t4bf16": 500.0}
SAMPLES = {"vision": 300.0, "custom": 12.0}


def labels(d: dict) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def input_series() -> list[dict]:
    series = []
    for uuid, model, wc, extra in GPUS:
        if not extra:  # one info per GPU (a MIG GPU's info has no gpu_instance)
            series.append({"series": "obsctl_gpu_info" + labels({"job": "x", "uuid": uuid, "model": model}), "values": "1x10"})
        series.append({"series": "obsctl_gpu_attribution_info" + labels({"job": "x", "uuid": uuid, "workload_class": wc, **extra}),
                       "values": "1x10"})
    series.append({"series": "obsctl_gpu_info" + labels({"job": "x", "uuid": "GPU-2", "model": H100}), "values": "1x10"})
    # Another exporter job's GPU attributed to llm: outside the class's node_selector.
    series.append({"series": "obsctl_gpu_attribution_info" + labels({"job": "other", "uuid": "GPU-X", "workload_class": "llm"}),
                   "values": "1x10"})
    series.append({"series": "obsctl_gpu_info" + labels({"job": "other", "uuid": "GPU-X", "model": H100}), "values": "1x10"})
    for wc, v in TOKENS.items():
        series.append({"series": C.TOKENS + labels({"workload_class": wc}), "values": f"{v}x10"})
    for wc, v in SAMPLES.items():
        series.append({"series": C.SAMPLES + labels({"workload_class": wc}), "values": f"{v}x10"})
    return series


def expect(record: str, values: dict[str, float]) -> dict:
    return {"expr": record, "eval_time": "5m",
            "exp_samples": [{"labels": record + labels({"workload_class": wc}), "value": v} for wc, v in sorted(values.items())]}


def test_mfu_known_answers(tmp_path):
    spec = write_spec(tmp_path, SPEC)
    rules = tmp_path / "training.rules.yaml"
    rules.write_text(dump_rule_file(training_groups(spec), "test"))
    model_flops = {"llm": FPT * 40_000, "mixed": FPT * 10_000, "t4bf16": FPT * 500, "vision": FPS * 300, "custom": FPS * 12}
    peaks = {"llm": 2 * H100_BF16, "vision": 3 * L4_FP8, "custom": 2 * 70e12}
    tests = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": input_series(),
        "promql_expr_test": [
            expect(MODEL_FLOPS, model_flops),
            expect(PEAK_FLOPS, peaks),  # mixed (A10G unknown) and t4bf16 (no bf16 on a T4): absent
            expect(C.MFU, {wc: model_flops[wc] / peaks[wc] for wc in peaks}),
        ],
    }]}
    path = tmp_path / "training_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool.test_rules([path])
    assert result.returncode == 0, result.stdout + result.stderr
    assert 0 < model_flops["llm"] / peaks["llm"] < 1  # a plausible MFU (15.8 %)


def test_no_mfu_block_no_rules(tmp_path):
    spec = write_spec(tmp_path, {**SPEC, "workload_classes": SPEC["workload_classes"][-1:]})
    assert training_groups(spec) == []


def test_peak_table_shape():
    assert set().union(*DENSE_PEAK_FLOPS.values()) <= set(DTYPES)
    for model, peaks in DENSE_PEAK_FLOPS.items():
        # Tensor paths are never slower than plain FP32; fp8 doubles bf16 where both exist.
        assert all(v >= peaks["fp32"] for v in peaks.values()), model
        if "fp8" in peaks and "bf16" in peaks:
            assert peaks["fp8"] == pytest.approx(2 * peaks["bf16"], rel=0.02), model
    assert dense_peak_flops(H100, "bf16") == H100_BF16
    assert dense_peak_flops("Tesla T4", "bf16") is None
    with pytest.raises(ValueError, match="dtype must be one of"):
        dense_peak_flops(H100, "int4")


def test_docs_table_matches_code(repo_root):
    from obsctl.exporters.training.peaks import table_markdown

    assert table_markdown() in (repo_root / "docs" / "training.md").read_text()


def test_mfu_from_raw_sdk_counters_through_the_source_rules(tmp_path):
    """The contract with the source catalogue: raw SDK token counters -> the sdk source's
    canonical TOKENS -> MFU, in one promtool run over both rule files."""
    from obsctl.rules.sources import source_groups

    spec = write_spec(tmp_path, {**SPEC, "workload_classes": [
        {**cls("llm", {"flops_per_token": FPT, "dtype": "bf16"}), "selector": {"job": "trainer", "workload": "llm"}}]})
    files = {"sources.rules.yaml": source_groups(spec), "training.rules.yaml": training_groups(spec)}
    for name, groups in files.items():
        (tmp_path / name).write_text(dump_rule_file(groups, "test"))
    per_minute = {"a": 45_000, "b": 15_000}  # two processes of the job: 750 + 250 tokens/s
    series = [{"series": f'obsctl_tokens_total{{job="trainer",workload="llm",instance="{i}"}}', "values": f"0+{v}x30"}
              for i, v in per_minute.items()]
    series += [{"series": "obsctl_gpu_info" + labels({"job": "x", "uuid": u, "model": H100}), "values": "1x30"}
               for u in ("GPU-0", "GPU-1")]
    series += [{"series": "obsctl_gpu_attribution_info" + labels({"job": "x", "uuid": u, "workload_class": "llm"}),
                "values": "1x30"} for u in ("GPU-0", "GPU-1")]
    tokens_per_second = sum(per_minute.values()) / 60
    tests = {"rule_files": [str(tmp_path / n) for n in files], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [
            expect(C.TOKENS, {"llm": tokens_per_second}),
            expect(C.MFU, {"llm": FPT * tokens_per_second / (2 * H100_BF16)}),
        ],
    }]}
    for t in tests["tests"][0]["promql_expr_test"]:
        t["eval_time"] = "20m"
    path = tmp_path / "chain_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool.test_rules([path])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("mfu, message", [
    ("{flops_per_token: 7.8e9, flops_per_sample: 1e12}", "mfu: give exactly one of 'flops_per_token' or 'flops_per_sample'"),
    ("{dtype: bf16}", "mfu: give exactly one of"),
    ("{flops_per_token: 7.8e9, dtype: int4}", "mfu.dtype: Input should be 'fp32', 'tf32', 'bf16', 'fp16' or 'fp8'"),
    ("{flops_per_token: -1}", "mfu.flops_per_token"),
])
def test_bad_mfu_block_is_one_line_with_file_and_line(tmp_path, example_spec_path, mfu, message):
    from obsctl.errors import SpecError
    from obsctl.spec import load_spec

    text = example_spec_path.read_text()
    line = "    mfu: {flops_per_token: 7.8e9, dtype: bf16}"
    assert line in text
    path = tmp_path / "obsctl.yaml"
    path.write_text(text.replace(line, f"    mfu: {mfu}"))
    lineno = text.splitlines().index(line) + 1
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert f"{path}:{lineno}: workload_classes[" in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)
