"""verify on a real Prometheus excludes the change's transition: a vLLM class's raw counters
(two replicas), one replica restarted with the change (its counter reset), the signal a
``rate(...[5m])`` of them (``snapshot-baseline --from-raw``). The judged window starts at
the restart plus the 5 minute range; the output says so; ``--no-trim`` judges it all.
Expected times are computed here from the history written."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, snapshot_baseline, verify
from support.prometheus import served_history

STEP = 15
#: The change (fixed instant, no wall clock): 3 h of history before it, 70 minutes after.
CHANGE = 1_796_107_200 - 80 * 60
BEFORE, AFTER = 3 * 3600, 70 * 60
#: chat-1 restarts 60 s after the change (its counter starts again from 0) and comes back 20 % faster.
RESTART = CHANGE + 60


def _history() -> str:
    rng = np.random.default_rng(2525)
    times = np.arange(CHANGE - BEFORE, CHANGE + AFTER + 1, STEP)
    lines = []
    for name, share in (("vllm:prompt_tokens", 0.25), ("vllm:generation_tokens", 1.0)):
        lines.append(f"# TYPE {name} counter")
        for pod, rate in (("chat-0", 480.0), ("chat-1", 320.0)):
            lift = np.where((pod == "chat-1") & (times >= RESTART), 1.2, 1.0)
            increments = rng.poisson(rate * share * STEP * lift).astype(float)
            increments[0] = 0.0
            counter = np.cumsum(increments)
            if pod == "chat-1":
                counter = np.where(times >= RESTART, counter - counter[times < RESTART][-1], counter)  # 0 at the restart's sample
            labels = f'namespace="llm-chat",pod="{pod}",model_name="m"'
            lines += [f"{name}_total{{{labels}}} {v:.0f} {t}" for t, v in zip(times.tolist(), counter.tolist(), strict=True)]
    return "\n".join(lines + ["# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with served_history(tmp_path_factory.mktemp("transition"), _history()) as served:
        yield served


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(cmd, *args):
    return CliRunner().invoke(cmd, [str(a) for a in args])


@pytest.fixture
def started(prometheus, tmp_path):
    spec = tmp_path / "obsctl.yaml"
    spec.write_text(yaml.safe_dump({
        "prometheus": {"url": prometheus.url}, "store": str(tmp_path / "store"),
        "workload_classes": [{"name": "chat", "kind": "inference", "source": "vllm", "selector": {"namespace": "llm-chat"}}],
        "signals": [{"name": "tokens_per_second", "catalogue": "tokens_per_second"}]}))
    snap = _run(snapshot_baseline, "--spec", spec, "--class", "chat", "--signal", "tokens_per_second", "--from-raw", "--window", "1h",
                "--end", _iso(CHANGE))
    assert snap.exit_code == 0, snap.output
    out = _run(initiative, "start", "--spec", spec, "--name", "restart rollout", "--lever", "batch-size", "--class", "chat",
               "--signal", "tokens_per_second", "--started-at", _iso(CHANGE), "--output", "json")
    assert out.exit_code == 0, out.output
    return spec, json.loads(out.stdout)["id"]


def test_a_restart_at_the_change_is_excluded_and_said(started):
    spec, iid = started
    result = _run(verify, "--spec", spec, "--initiative", iid, "--end", _iso(CHANGE + AFTER), "--no-guards", "--output", "json")
    assert result.exit_code in (0, 10, 11), result.output
    out = json.loads(result.stdout)
    tr = out["transition"]
    # the restart is seen at the first sample after the counter fell: RESTART itself (on the 15 s grid)
    assert [(e["kind"], "chat-1" in e["series"]) for e in tr["events"]] == [("restart", True)]
    assert tr["events"][0]["at"] == _iso(RESTART)
    assert tr["lookback_seconds"] == 300.0 and tr["lookback_source"] == "the 5m range of vllm:prompt_tokens_total"  # the first of the equal ranges
    judged = RESTART + 300  # on the step grid from the change already
    assert tr["judged_start"] == _iso(judged) and tr["trimmed"] is True and tr["too_short"] is False
    assert out["window"]["start"] == _iso(judged)
    assert tr["text"] == (f"excluded {_iso(CHANGE)[11:19]}–{_iso(judged)[11:19]} (6m): the 5m range of vllm:prompt_tokens_total "
                          f"and 1 replica restart ({_iso(RESTART)[11:19]})")
    end = CHANGE + 3600 + 300  # the planned length: the default 1h window plus the 5m transition
    assert out["window"]["end"] == _iso(end) and out["coverage"]["grid_points"] == (end - judged) // STEP
    text = _run(verify, "--spec", spec, "--initiative", iid, "--end", _iso(CHANGE + AFTER), "--no-guards")
    assert f"transition: {tr['text']}" in text.output


def test_no_trim_judges_the_whole_window_and_says_so(started):
    spec, iid = started
    result = _run(verify, "--spec", spec, "--initiative", iid, "--end", _iso(CHANGE + AFTER), "--no-guards", "--no-trim", "--output", "json")
    out = json.loads(result.stdout)
    assert out["window"]["start"] == _iso(CHANGE)
    assert out["transition"]["trimmed"] is False and out["transition"]["text"].startswith("not trimmed (--no-trim)")


def test_a_window_too_short_after_the_transition_is_inconclusive_with_when(started):
    spec, iid = started
    end = RESTART + 300 + 120  # 2 minutes after the transition: shorter than the 5m range
    result = _run(verify, "--spec", spec, "--initiative", iid, "--end", _iso(end), "--no-guards", "--output", "json")
    assert result.exit_code == 11, result.output
    out = json.loads(result.stdout)
    tr = out["transition"]
    ready = RESTART + 300 + max(300, 10 * STEP)
    assert tr["too_short"] is True and tr["ready_at"] == _iso(ready)
    assert out["verdict"] == "INCONCLUSIVE" and f"verify again at {_iso(ready)} or later" in out["reason"]
