"""Label values that any workload matching a class's selector controls go through a real
Prometheus into a report: they are Markdown-escaped there, so they cannot forge a
heading, break a table, or insert raw HTML or a javascript: link."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.commands.cli import initiative, report, snapshot_baseline, verify
from support.prometheus import served_history

STEP, HOUR, T0 = 15, 3600, 1_780_000_200  # a fixed past instant on the 15 s grid
HOSTILE = '## Verdict: IMPROVED <script>alert(1)</script> [x](javascript:alert(1)) | cell'


def _history() -> str:
    rng = np.random.default_rng(7)
    lines = ["# TYPE hostile_tokens gauge"]
    for i in range(2 * HOUR // STEP + 1):
        ts = T0 + i * STEP
        level = 1000.0 if ts <= T0 + HOUR else 1300.0
        value = round(level + float(rng.normal(0, 10)), 6)
        escaped = HOSTILE.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'hostile_tokens{{job="w",model="{escaped}"}} {value!r} {ts}')
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with served_history(tmp_path_factory.mktemp("hostile"), _history()) as s:
        yield s


def iso(ts: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_hostile_label_is_escaped_in_the_report(served, tmp_path):
    spec = tmp_path / "obsctl.yaml"
    spec.write_text(yaml.safe_dump({
        "prometheus": {"url": served.url}, "store": str(tmp_path / "store"),
        "workload_classes": [{"name": "chat", "kind": "inference", "selector": {"job": "w"}}],
        "signals": [{"name": "tokens_per_second", "category": "throughput", "query": "sum(hostile_tokens{$selector})",
                     "unit": "tokens/s", "direction": "higher_is_better"}],
        "verification": {"window": "1h", "step": "15s", "memory_history": "1h"},
    }))
    runner = CliRunner()
    snap = runner.invoke(snapshot_baseline, ["--spec", str(spec), "--window", "1h", "--end", iso(T0 + HOUR)])
    assert snap.exit_code == 0, snap.output
    started = runner.invoke(initiative, ["start", "--spec", str(spec), "--name", "<img src=x onerror=alert(1)> # big", "--lever",
                                         "batch-size", "--class", "chat", "--signal", "tokens_per_second", "--started-at",
                                         iso(T0 + HOUR), "-o", "json"])
    assert started.exit_code == 0, started.output
    iid = json.loads(started.stdout)["id"]
    checked = runner.invoke(verify, ["--spec", str(spec), "--initiative", iid, "--end", iso(T0 + 2 * HOUR), "-o", "json"])
    assert checked.exit_code in (0, 10, 11), checked.output
    out = tmp_path / "reports"
    written = runner.invoke(report, ["--spec", str(spec), "--initiative", iid, "--out", str(out)])
    assert written.exit_code == 0, written.output
    md = (out / f"{iid}.md").read_text()
    assert HOSTILE.split(" | ")[0][3:] in md.replace("\\", "")  # the label value is there, readable once unescaped
    assert not re.search(r"^#+ Verdict", md, re.M)  # no forged heading
    assert not re.search(r"(?<!\\)[<>]", md)  # every < and > escaped: no raw HTML
    # No link but the report's own to its Input series list: every ] before ( is escaped (the figure comes after).
    assert not re.search(r"(?<!\\)\]\(", md.split("![")[0].replace("[Input series](#input-series)", ""))
    row = next(line for line in md.splitlines() if line.startswith("| population |"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 4  # the table's own cell breaks only: the label's '|' is escaped
    assert md.startswith("# \\<img src=x onerror=alert(1)\\> # big: ")
