"""How the generated rules and dashboards grow with the fleet: counts for N classes x 6 signals.

``python bench/bench_rules_scaling.py [N ...]`` prints, for a spec of N workload classes (default
5, 40 and 200) and six signals, the number of recording rules (all, and those that run a
query rather than publish a constant), alerting rules, and the dashboards' bytes (largest
file and all together). The spec is the one a fleet would write: classes of three serving
sources (vLLM, TGI, the SDK) and SDK training classes with an ``mfu`` block, one node
selector, four catalogue signals and two PromQL signals over the class's ``$selector``,
and one target per class. It uses only :func:`obsctl.rules.generate.generate` and
:func:`obsctl.dashboards.build.build`, so the same file run against an older checkout
measures that one (docs/rules.md#how-the-rules-grow-with-the-fleet).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

SIGNALS = [
    {"name": "tokens_per_second", "catalogue": "tokens_per_second"},
    {"name": "usd_per_million_tokens", "catalogue": "usd_per_million_tokens"},
    {"name": "e2e_p95_seconds", "catalogue": "e2e_p95_seconds"},
    {"name": "requests_waiting", "catalogue": "requests_waiting"},
    {"name": "error_ratio", "category": "quality", "unit": "ratio", "direction": "lower_is_better",
     "query": 'sum(rate(http_requests_total{$selector,code=~"5.."}[5m])) / sum(rate(http_requests_total{$selector}[5m]))'},
    {"name": "cpu_seconds", "category": "utilization", "unit": "seconds/s", "direction": "lower_is_better",
     "query": "sum(rate(process_cpu_seconds_total{$selector}[5m]))"},
]
SOURCES = ("vllm", "tgi", "sdk", "training")


def fleet(n: int) -> dict:
    """The spec data of ``n`` classes x :data:`SIGNALS` (one target per class)."""
    classes = []
    for i in range(n):
        source = SOURCES[i % len(SOURCES)]
        wc = {"name": f"class-{i:03d}", "kind": "training" if source == "training" else "inference",
              "source": "sdk" if source == "training" else source, "owner": f"team-{i % 7}",
              "selector": {"job": source, "model_name": f"model-{i:03d}"}}
        if source == "training":
            wc["mfu"] = {"flops_per_token": 7.8e9, "dtype": "bf16"}
        classes.append(wc)
    targets = [{"workload_class": c["name"], "signal": "usd_per_million_tokens", "relative": -0.1, "driver": "budget",
                "deadline": "2027-03-31"} for c in classes]
    return {"store": "store", "workload_classes": classes, "signals": SIGNALS, "targets": targets}


def measure(n: int) -> dict[str, int]:
    """``{recording, queries, alerts, dashboard_max_bytes, dashboard_bytes}`` for ``n`` classes."""
    from obsctl.dashboards.build import build
    from obsctl.rules.generate import generate
    from obsctl.spec import load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "obsctl.yaml"
        path.write_text(yaml.safe_dump(fleet(n)))
        spec = load_spec(path)
        files, _ = generate(spec, [])
        dashboards = build(spec)
    rules = [r for text in files.values() for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    recording = [r for r in rules if "record" in r]
    sizes = [len(text.encode()) for text in dashboards.values()]
    return {"recording": len(recording), "queries": sum(not r["expr"].startswith("vector(") for r in recording),
            "alerts": len(rules) - len(recording), "dashboard_max_bytes": max(sizes), "dashboard_bytes": sum(sizes)}


def main(argv: list[str] | None = None) -> int:
    """Print the table for the class counts in ``argv`` (default 5, 40, 200)."""
    counts = [int(a) for a in (argv if argv is not None else sys.argv[1:])] or [5, 40, 200]
    print("| classes x signals | recording rules | of them queries | alerts | largest dashboard (bytes) | all dashboards (bytes) |")
    print("|---|---|---|---|---|---|")
    for n in counts:
        m = measure(n)
        print(f"| {n} x {len(SIGNALS)} | {m['recording']:,} | {m['queries']:,} | {m['alerts']:,} | "
              f"{m['dashboard_max_bytes']:,} | {m['dashboard_bytes']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
