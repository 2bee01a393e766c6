"""A GPU's price split by MIG slice size and by configured time-slicing share: known answers
through ``promtool test rules`` over the generated cost rules.

The GPUs and MIG instances are those of the exporter's recorded A100 dump
(tests/golden/nvml_a100_mig.prom: GPU 0 with MIG on, instances 1 ``3g.40gb``,
5 ``2g.20gb`` and 9 ``1g.10gb``; GPU 1 with MIG off), read from the file; the attribution
entries (which class runs on which instance) and the price are composed here. Expected
values are the price times slices / 7 (an A100 has seven), divided among the classes of
one instance, and the spec's time-slicing share on the whole GPU, computed in Python.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from obsctl.rules import canonical as C
from obsctl.rules import promtool
from obsctl.rules.generate import generate
from support.rules_fixtures import write_spec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "nvml_a100_mig.prom"
STEP, N, EVAL = 15, 40, "5m"
PRICE = 2.5  # USD per A100-hour (spec price)
EXPORTER = {"job": "obsctl-exporter", "instance": "n1:9400"}
#: MIG profile -> classes running on that instance of GPU 0 (composed)
ON_INSTANCE = {"3g.40gb": ["a"], "2g.20gb": ["b", "c"], "1g.10gb": ["b"]}
#: classes on the whole GPU 1 (time-sliced) and the spec's configured shares
WHOLE = ["d", "e", "f"]
SHARES = {"d": 0.5}


def golden() -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str]]]:
    """({uuid: (gpu, model)}, [(uuid, gpu_instance, mig_profile)]) of the recorded dump."""
    text = GOLDEN.read_text()
    labels = lambda s: dict(re.findall(r'(\w+)="([^"]*)"', s))  # noqa: E731
    gpus = {}
    for m in re.finditer(r"^obsctl_gpu_info\{([^}]*)\}", text, re.M):
        lab = labels(m.group(1))
        gpus[lab["uuid"]] = (lab["gpu"], lab["model"], lab["mig_mode"])
    instances = sorted({(lab["uuid"], lab["gpu_instance"], lab["mig_profile"])
                        for m in re.finditer(r"^\w+\{([^}]*mig_profile[^}]*)\}", text, re.M) for lab in [labels(m.group(1))]})
    return gpus, instances


def _series(name: str, **labels: str) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def input_series(profiles: dict[str, str] | None = None) -> list[dict]:
    """``profiles``: recorded MIG profile -> the label the series carry instead (a profile the
    exporter could not name)."""
    gpus, instances = golden()
    out = []
    for uuid, (gpu, model, _) in gpus.items():
        out.append({"series": _series("obsctl_gpu_info", **EXPORTER, gpu=gpu, uuid=uuid, model=model), "values": f"1x{N}"})
    model = next(iter(gpus.values()))[1]
    out.append({"series": _series("obsctl_accelerator_price_usd_per_hour", **EXPORTER, gpu_model=model), "values": f"{PRICE}x{N}"})
    for uuid, gi, profile in instances:
        for wc in ON_INSTANCE[profile]:
            out.append({"series": _series("obsctl_gpu_attribution_info", **EXPORTER, gpu=gpus[uuid][0], uuid=uuid, gpu_instance=gi,
                                          mig_profile=(profiles or {}).get(profile, profile), workload_class=wc, owner="o"),
                        "values": f"1x{N}"})
    whole = next(u for u, g in gpus.items() if g[2] == "disabled")
    for wc in WHOLE:
        out.append({"series": _series("obsctl_gpu_attribution_info", **EXPORTER, gpu=gpus[whole][0], uuid=whole, workload_class=wc,
                                      owner="o"), "values": f"1x{N}"})
    return out


def expected() -> dict[str, float]:
    """USD/h per class: price x slices / 7 / classes on the instance; whole GPU by share."""
    _, instances = golden()
    want: dict[str, float] = {}
    for _, _, profile in instances:
        slices = int(profile.split("g.")[0])
        for wc in ON_INSTANCE[profile]:
            want[wc] = want.get(wc, 0.0) + PRICE * slices / 7 / len(ON_INSTANCE[profile])
    unnamed = [wc for wc in WHOLE if wc not in SHARES]
    for wc in WHOLE:
        want[wc] = PRICE * SHARES.get(wc, (1 - sum(SHARES.values())) / len(unnamed))
    return want


def _suite(tmp_path: Path, want: dict[str, float], shares: dict[str, float] = SHARES, profiles: dict[str, str] | None = None) -> Path:
    classes = sorted({wc for v in ON_INSTANCE.values() for wc in v} | set(WHOLE))
    spec = write_spec(tmp_path, {
        "store": "s", "signals": [{"name": "t", "catalogue": "tokens_per_second"}],
        "workload_classes": [{"name": wc, "kind": "inference", "selector": {"job": "w", "workload": wc}} for wc in classes],
        "pricing": {"accelerator_hour_usd": {"NVIDIA A100-SXM4-80GB": PRICE}, "time_slicing_share": shares}})
    files = generate(spec, [])[0]
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "cost.yaml").write_text(files["obsctl-cost.rules.yaml"])
    tests = [{"expr": f'count(abs({C.COST_USD_PER_HOUR}{{workload_class="{wc}"}} - {v!r}) <= 1e-12)', "eval_time": EVAL,
              "exp_samples": [{"labels": "{}", "value": 1}]} for wc, v in sorted(want.items())]
    path = tmp_path / "mig_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules / "cost.yaml")], "evaluation_interval": f"{STEP}s",
                                    "tests": [{"interval": f"{STEP}s", "input_series": input_series(profiles), "promql_expr_test": tests}]}))
    return path


def test_the_dump_has_three_mig_sizes_and_a_whole_gpu():
    gpus, instances = golden()
    assert sorted(p for _, _, p in instances) == ["1g.10gb", "2g.20gb", "3g.40gb"]
    assert sorted(g[2] for g in gpus.values()) == ["disabled", "enabled"]


def test_mig_instances_cost_their_slices_and_shared_gpus_their_share(tmp_path):
    want = expected()
    assert want["a"] == PRICE * 3 / 7 and want["d"] == PRICE / 2 and want["e"] == PRICE / 4  # the scenario's point
    result = promtool.test_rules([_suite(tmp_path, want)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_shares_a_shared_gpu_splits_equally(tmp_path):
    want = expected() | {wc: PRICE / len(WHOLE) for wc in WHOLE}
    result = promtool.test_rules([_suite(tmp_path, want, shares={})])
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_equal_split_of_the_mig_gpu_fails(tmp_path):
    """The old rule (every entry of a GPU the same share) must not pass."""
    want = expected() | {"a": PRICE / 4}
    assert promtool.test_rules([_suite(tmp_path, want)]).returncode != 0


def test_an_unnamed_profile_falls_back_to_the_equal_split_of_its_gpu(tmp_path):
    """NVML answers "unknown" for a profile it cannot name (DCGM without GPU_I_PROFILE: ""): that
    GPU's entries split it equally, none drops out of the cost."""
    for label in ("unknown", ""):
        entries = [wc for v in ON_INSTANCE.values() for wc in v]
        equal: dict[str, float] = {}
        for wc in entries:
            equal[wc] = equal.get(wc, 0.0) + PRICE / len(entries)
        want = expected() | equal
        result = promtool.test_rules([_suite(tmp_path, want, profiles={"2g.20gb": label})])
        assert result.returncode == 0, result.stdout + result.stderr
