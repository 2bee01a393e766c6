"""The saturation rules against Python: for each scenario of :mod:`support.saturation_scenarios`,
the generated recording rules evaluated by ``promtool test rules`` give the state the
pure-Python :func:`classify` computes from the same series, 1 for it and 0 for the other
three; the busy ratio of a CPU class and of MIG instances have known answers."""

from __future__ import annotations

import yaml

from obsctl.rules import canonical as C
from obsctl.rules import promtool
from obsctl.rules import saturation as S
from obsctl.rules.generate import generate
from support.saturation_scenarios import EVAL, SCENARIOS, STEP, N, input_series, python_state, scenario_spec


def test_rules_agree_with_python(tmp_path):
    spec = scenario_spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    for fname, text in files.items():
        (tmp_path / "rules" / fname).write_text(text)
    tests = []
    for name in SCENARIOS:
        state = python_state(spec, name)
        exp = [{"labels": f'{C.SATURATION_STATE}{{state="{s}",workload_class="{name}"}}', "value": 1 if s == state else 0}
               for s in S.STATES]
        tests.append({"interval": f"{STEP}s", "input_series": input_series(name), "promql_expr_test": [
            {"expr": f'{C.SATURATION_STATE}{{workload_class="{name}"}}', "eval_time": EVAL, "exp_samples": exp}]})
    suite = tmp_path / "sat_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted((tmp_path / "rules").iterdir())],
                                     "evaluation_interval": f"{STEP}s", "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr

def test_busy_ratio_rule_known_answer(tmp_path):
    """BUSY_RATIO for a CPU class with cpu_cores 4: 2 x 0.9 cores/s / 4 = 0.45; the harness fails on 0.9."""
    spec = scenario_spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    for fname, text in files.items():
        (tmp_path / "rules" / fname).write_text(text)

    def run(value: float):
        test = {"interval": f"{STEP}s", "input_series": input_series("con-cpu"), "promql_expr_test": [
            {"expr": f'{C.BUSY_RATIO}{{workload_class="con-cpu"}}', "eval_time": EVAL,
             "exp_samples": [{"labels": f'{C.BUSY_RATIO}{{workload_class="con-cpu"}}', "value": value}]}]}
        suite = tmp_path / "busy_test.yaml"
        suite.write_text(yaml.safe_dump({"rule_files": [str(p) for p in sorted((tmp_path / "rules").iterdir())],
                                         "evaluation_interval": f"{STEP}s", "tests": [test]}))
        return promtool.test_rules([suite]).returncode

    assert run(2 * 0.9 / 4) == 0
    assert run(0.9) != 0

def test_mig_instances_join_their_own_utilization(tmp_path):
    """A class attributed two MIG instances: busy = mean of those instances' utilization; the
    whole GPU's series (no gpu_instance) must not join."""
    spec = scenario_spec(tmp_path)
    files = generate(spec, [])[0]
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "sat.yaml").write_text(files["obsctl-saturation.rules.yaml"])
    mig = {"1": 0.75, "2": 0.5}
    base = 'job="x",instance="n1",gpu="0",uuid="GPU-M"'
    series = [{"series": f"obsctl_gpu_utilization_ratio{{{base}}}", "values": f"0.0625x{N}"}]
    for gi, util in mig.items():
        series.append({"series": f'obsctl_gpu_utilization_ratio{{{base},gpu_instance="{gi}"}}', "values": f"{util}x{N}"})
        series.append({"series": f'obsctl_gpu_attribution_info{{{base},gpu_instance="{gi}",workload_class="ok-gpu",owner="o"}}',
                       "values": f"1x{N}"})
    own = 'workload_class="ok-gpu"'
    checks = {C.GPU_BUSY: sum(mig.values()), C.GPUS_ALLOCATED: len(mig), C.BUSY_RATIO: sum(mig.values()) / len(mig)}
    tests = [{"interval": f"{STEP}s", "input_series": series, "promql_expr_test": [
        {"expr": f"{name}{{{own}}}", "eval_time": EVAL, "exp_samples": [{"labels": f"{name}{{{own}}}", "value": v}]}
        for name, v in checks.items()]}]
    suite = tmp_path / "mig_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(tmp_path / "rules" / "sat.yaml")], "evaluation_interval": f"{STEP}s",
                                     "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr


def test_cpu_fallback_reads_a_vllm_replicas_process_without_its_model_label(tmp_path):
    """A vLLM class selected by ``model_name``: the server's process collector writes
    ``process_cpu_seconds_total`` with the target's labels only, so the CPU fallback drops the
    ``model_name`` matcher (busy = 9 CPU-seconds per 15 s step on one process = 0.6); the
    engine's own account is absent here (no ``vllm:`` gauges), and the other job's process
    must not count."""
    from support.rules_fixtures import write_spec

    spec = write_spec(tmp_path, {"store": "s", "workload_classes": [
        {"name": "chat", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "tiny-llama"}}],
        "signals": [{"name": "tokens", "catalogue": "tokens_per_second"}]})
    rules = tmp_path / "sat.yaml"
    rules.write_text(generate(spec, [])[0]["obsctl-saturation.rules.yaml"])
    series = [{"series": 'process_cpu_seconds_total{job="vllm",instance="127.0.0.1:8000"}', "values": f"0+9x{N}"},
              {"series": 'process_cpu_seconds_total{job="other",instance="127.0.0.1:9000"}', "values": f"0+15x{N}"}]
    own = 'workload_class="chat"'
    tests = [{"interval": f"{STEP}s", "input_series": series, "promql_expr_test": [
        {"expr": f"abs({C.BUSY_RATIO}{{{own}}} - 0.6) < bool 1e-9", "eval_time": EVAL,
         "exp_samples": [{"labels": f"{{{own}}}", "value": 1}]}]}]
    suite = tmp_path / "cpu_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": f"{STEP}s", "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_period_before_the_rules_reads_the_servers_own_queue(tmp_path):
    """verify's period inputs (``period_inputs``, ``demand_query``) over a vLLM closed loop
    whose history predates the rules (raw ``vllm:`` series only): the engine's queue gives
    busy 1 and 5 waiting, and the offered load is the finished + refused requests per
    second (gauges flat: no change held); where the rules recorded a series, the recorded
    one is read (the second case: a recorded busy 0.25 wins over the raw 1)."""
    from obsctl.baselining.evidence import demand_query
    from support.rules_fixtures import write_spec

    spec = write_spec(tmp_path, {"store": "s", "workload_classes": [
        {"name": "chat", "kind": "inference", "source": "vllm", "selector": {"job": "vllm", "model_name": "tiny-llama"}}],
        "signals": [{"name": "tokens", "catalogue": "tokens_per_second"}]})
    wc = spec.workload_classes[0]
    v = 'job="vllm",instance="127.0.0.1:8000",model_name="tiny-llama",engine="0"'
    raw = [{"series": f"vllm:num_requests_running{{{v}}}", "values": f"4x{N}"},
           {"series": f"vllm:num_requests_waiting{{{v}}}", "values": f"5x{N}"},
           {"series": f'vllm:num_requests_waiting_by_reason{{{v},reason="capacity"}}', "values": f"5x{N}"},
           {"series": f"vllm:kv_cache_usage_perc{{{v}}}", "values": f"0.5x{N}"},
           {"series": f'vllm:request_success_total{{{v},finished_reason="stop"}}', "values": f"0+30x{N}"},
           {"series": 'vllm:admission_rejections_total{job="vllm",instance="127.0.0.1:8000",model_name="tiny-llama",reason="max_num_queued_reqs"}',
            "values": f"0+3x{N}"}]
    exprs = S.period_inputs(spec, wc)
    demand = demand_query(spec, wc)

    def close(expr: str, value: float) -> dict:
        return {"expr": f"count(abs(({expr}) - {value!r}) <= {1e-9 * max(1.0, value)!r})", "eval_time": EVAL,
                "exp_samples": [{"labels": "{}", "value": 1}]}

    recorded = [{"series": f'{C.ENGINE_BUSY}{{workload_class="chat",signal=""}}', "values": f"0.25x{N}"}]
    tests = [{"interval": f"{STEP}s", "input_series": raw, "promql_expr_test": [
                 close(exprs["engine_busy"], 1.0), close(exprs["waiting"], 5.0), close(demand, (30 + 3) / STEP)]},
             {"interval": f"{STEP}s", "input_series": raw + recorded, "promql_expr_test": [close(exprs["engine_busy"], 0.25)]}]
    (tmp_path / "empty.yaml").write_text("groups: []\n")
    suite = tmp_path / "period_test.yaml"
    suite.write_text(yaml.safe_dump({"rule_files": [str(tmp_path / "empty.yaml")], "evaluation_interval": f"{STEP}s", "tests": tests}))
    result = promtool.test_rules([suite])
    assert result.returncode == 0, result.stdout + result.stderr
    states = S.classify_inputs({"engine_busy": [1.0], "waiting": [5.0]})
    assert states == ["saturated"]
