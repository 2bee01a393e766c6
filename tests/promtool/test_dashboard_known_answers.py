"""Known answers of the dashboards' expressions and of the rules behind them, evaluated by
``promtool test rules`` over the dashboard fixture (:mod:`support.dashboard_history`) at a
fixed ``eval_time``: promtool evaluates every rule group at every step in order, so the
chains (sources -> saturation, gpu -> cost -> class cost, signals -> target gaps) have
converged long before it. Expected values are computed here from the fixture's values.
"""

from __future__ import annotations

import json

import pytest

from obsctl.dashboards import build as builder
from obsctl.rules import canonical as C
from obsctl.rules import saturation as S
from support import dashboard_history as D
from support.promtool import evaluate, one

POINTS, EVAL = 121, "30m"  # 30 minutes of samples; every window the panels use fits inside


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dash-promtool")
    spec = D.example_spec()
    rules = D.write_rules(tmp / "rules", spec)

    def ask(exprs: dict[str, str]) -> dict:
        return evaluate(tmp, rules, D.input_series(POINTS), exprs, EVAL)

    return spec, ask


def _token_rates() -> dict[tuple[str, str | None], float]:
    """tokens/s per (workload, track) of the fixture's counters (the increase of one step over the step)."""
    return {(lbl["workload"], lbl.get("track")): (v(1) - v(0)) / D.STEP for lbl, v in D.families()["obsctl_tokens"][1]}


def test_verification_dashboard_effects(setup):
    """The canary's T/C - 1 is the tracks' token rates' ratio - 1; the control-adjusted change
    (T/T_b)/(C/C_b) - 1 the classes' token rates' ratio (baselines are 1.0)."""
    spec, ask = setup
    dash = json.loads(builder.build(D.verification_spec(spec))["obsctl-verification.json"])
    canary = next(p for p in dash["panels"] if p["title"] == "tokens_per_second: treatment / control - 1")
    adjusted = next(p for p in dash["panels"] if p["title"] == "Control's own movement and control-adjusted change")
    exprs = {"canary": canary["targets"][0]["expr"],
             "adjusted": adjusted["targets"][1]["expr"].replace('workload_class=~"$workload_class"', 'workload_class="embed-online"'),
             "control": adjusted["targets"][0]["expr"]}
    got = {k: one(v, k) for k, v in ask({k: D.substitute(e) for k, e in exprs.items()}).items()}
    rate = _token_rates()
    treated = rate["embed-online", "canary"] + rate["embed-online", "stable"]
    assert got["canary"] == pytest.approx(rate["embed-online", "canary"] / rate["embed-online", "stable"] - 1)
    assert got["adjusted"] == pytest.approx(treated / rate["finetune-batch", None] - 1)
    assert got["control"] == pytest.approx(rate["finetune-batch", None] - 1)


def test_signal_values(setup):
    """embed-online's signals: tokens/s from its counters, USD per 1M tokens from the node price,
    the error share of its requests, its GPU's utilization, the p95 of its queue-wait buckets."""
    _, ask = setup
    answer = ask({"signals": '{__name__=~"workload_class:obsctl_.*",workload_class="embed-online",signal!=""}'})["signals"]
    got = {lbl["signal"]: v for lbl, v in answer if ":obsctl_signal_" not in lbl["__name__"]}
    fam = D.families()
    tokens = sum(_token_rates()[k] for k in _token_rates() if k[0] == "embed-online")
    price = fam["obsctl_node_price_usd_per_hour"][1][0][1]
    per_step = {lbl["outcome"]: 0.0 for lbl, _ in fam["obsctl_requests"][1]}
    for lbl, v in fam["obsctl_requests"][1]:
        if lbl["workload"] == "embed-online":
            per_step[lbl["outcome"]] += v(1) - v(0)
    util = next(v for lbl, v in fam["obsctl_gpu_utilization_ratio"][1] if lbl["uuid"] == "GPU-a")
    assert got["tokens_per_second"] == pytest.approx(tokens)
    assert got["usd_per_million_tokens"] == pytest.approx(price / 3600 / tokens * 1e6)
    assert got["request_error_ratio"] == pytest.approx(per_step["error"] / sum(per_step.values()))
    assert got["gpu_utilization"] == pytest.approx(util)
    # buckets per step: 20 <= 0.1, 60 <= 0.5, 80 <= 1; rank 0.95 * 80 = 76 in (0.5, 1] holding 20
    assert got["queue_wait_p95_seconds"] == pytest.approx(0.5 + (0.95 * 80 - 60) / 20 * 0.5)


@pytest.mark.parametrize("raw", [False, True], ids=["recorded-queue", "raw-queue"])
def test_saturation_from_raw_inputs_matches_recorded_state(setup, raw):
    """verify's path: the Python classify over the inputs (saturation.inputs; with raw=True the
    queue inputs too come from the server's own metrics) gives the state the rules recorded,
    and both are the fixture's design: embed-online queues (3 waiting) on a 0.6-busy GPU,
    finetune-batch does not queue."""
    spec, ask = setup
    exprs = {}
    for wc in spec.workload_classes:
        exprs[(wc.name, "state")] = f'{C.SATURATION_STATE}{{workload_class="{wc.name}"}} == 1'
        exprs |= {(wc.name, name): expr for name, expr in S.inputs(spec, wc, raw=raw).items()}
    got = ask(exprs)
    states = {}
    for wc in spec.workload_classes:
        values = {name: [one(got[(wc.name, name)], name)] if got[(wc.name, name)] else [None]
                  for (cls, name) in exprs if cls == wc.name and name != "state"}
        want = S.classify_inputs(values, S.Thresholds.for_class(spec, wc.name))[0]
        assert [lbl["state"] for lbl, _ in got[(wc.name, "state")]] == [want], (wc.name, values)
        states[wc.name] = want
    assert states == {"embed-online": "constrained", "finetune-batch": "healthy"}


def test_cost_series(setup):
    """Each attributed GPU costs its model's price (H100 4.10 USD/h); idle (< 0.1 busy) and
    unattributed GPUs are waste; cost per 1M tokens is the class's cost over its token rate."""
    _, ask = setup
    fam = D.families()
    attributed = [lbl["workload_class"] for lbl, _ in fam["obsctl_gpu_attribution_info"][1]]
    utils = {lbl["uuid"]: v for lbl, v in fam["obsctl_gpu_utilization_ratio"][1]}
    price = fam["obsctl_accelerator_price_usd_per_hour"][1][0][1]
    exprs = {wc: f'{C.COST_USD_PER_HOUR}{{workload_class="{wc}"}}' for wc in ("embed-online", "finetune-batch")}
    exprs |= {"idle": f'{C.IDLE_WASTE_USD_PER_HOUR}{{workload_class="finetune-batch"}}',
              "unattributed": C.UNATTRIBUTED_WASTE_USD_PER_HOUR,
              "per_million": f'{C.COST_PER_MILLION_TOKENS}{{workload_class="embed-online"}}'}
    got = {k: one(v, k) for k, v in ask(exprs).items()}
    for wc in ("embed-online", "finetune-batch"):
        assert got[wc] == pytest.approx(price * attributed.count(wc))
    idle = [lbl for lbl, _ in fam["obsctl_gpu_attribution_info"][1] if utils[lbl["uuid"]] < 0.1]
    assert got["idle"] == pytest.approx(price * len(idle))
    assert got["unattributed"] == pytest.approx(price * (len(utils) - len(attributed)))
    tokens = sum(r for (w, _), r in _token_rates().items() if w == "embed-online")
    assert got["per_million"] == pytest.approx(price / 3600 / tokens * 1e6)
