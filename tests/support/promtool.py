"""Known answers through ``promtool test rules``: promtool loads the rule files, writes the
input series on a fixed grid and evaluates every group at every step in order, so any
chain of rules has converged at a known ``eval_time`` and nothing races the test.

:func:`evaluate` returns what chosen expressions (a recorded series, a dashboard query)
give at ``eval_time``, for the test to compare with values it computed itself; promtool
compares floats exactly, which sums in another order would fail. It asks promtool with
no expected samples, so every non-empty answer is printed as a failure and parsed back;
an expression absent from that output answered nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import yaml

from obsctl.rules import promtool

_BLOCK = re.compile(r'^\s*expr: (".*"), time: (\S+),\n\s*exp: .*\n\s*got: (.*)$', re.M)
_SAMPLE = re.compile(r'(\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})\s+([^,\s]+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def values(value: float | Callable[[int], float], points: int) -> str:
    """promtool's notation for ``points`` samples: a constant, or ``value(i)`` for sample i."""
    if callable(value):
        return " ".join(repr(float(value(i))) for i in range(points))
    return f"{float(value)!r}x{points - 1}"


def series(name: str, labels: Mapping[str, str]) -> str:
    """``name{k="v",...}`` with the label values escaped."""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _unescape(value: str) -> str:
    return json.loads(f'"{value}"')


def parse_samples(text: str) -> list[tuple[dict[str, str], float]]:
    """``{labels} value, ...`` as promtool prints a vector: [(labels, value)]."""
    return [({k: _unescape(v) for k, v in _LABEL.findall(lbl)}, float(val)) for lbl, val in _SAMPLE.findall(text)]


def evaluate(workdir: Path, rule_files: Iterable[Path], input_series: Iterable[tuple[str, str]],
             exprs: Mapping[str, str], eval_time: str, interval: str = "15s") -> dict[str, list[tuple[dict[str, str], float]]]:
    """``{key: [(labels, value)]}`` of each expression of ``exprs`` at ``eval_time``.

    Args:
        workdir: where the test file goes.
        rule_files: rule files promtool loads (evaluated every ``interval``).
        input_series: ``(series selector, promtool values)`` pairs, one sample per ``interval``.
        exprs: ``{key: PromQL}``.
        eval_time: a duration from the first sample, e.g. ``"30m"``.

    Raises:
        AssertionError: promtool failed for another reason than the printed answers
            (a rule or expression it could not parse, a bad series).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    test = {"interval": interval, "input_series": [{"series": s, "values": v} for s, v in input_series],
            "promql_expr_test": [{"expr": e, "eval_time": eval_time} for e in exprs.values()]}
    path = workdir / "evaluate_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(p) for p in rule_files], "evaluation_interval": interval,
                                    "tests": [test]}, sort_keys=False))
    result = promtool.test_rules([path])
    output = result.stdout + result.stderr
    got: dict[str, list[tuple[dict[str, str], float]]] = {}
    for quoted, _, samples in _BLOCK.findall(output):
        got[json.loads(quoted)] = parse_samples(samples)
    printed = sum(1 for line in output.splitlines() if line.strip().startswith("expr: "))
    if result.returncode != 0 and (printed != len(got) or not got):
        raise AssertionError(f"promtool test rules failed:\n{output[-4000:]}")
    return {key: got.get(expr, []) for key, expr in exprs.items()}


def one(answer: list[tuple[dict[str, str], float]], what: str = "") -> float:
    """The value of an answer that must hold exactly one sample."""
    assert len(answer) == 1, f"{what}: expected one sample, got {answer}"
    return answer[0][1]
