"""Run ``promtool check rules`` / ``promtool test rules`` (Debian package ``prometheus``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from obsctl.errors import SpecError
from obsctl.processes import PROMTOOL_BIN, require_binary, run_progressing
from obsctl.spec import Spec


def promtool(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run promtool with ``args``; returns the completed process (never raises on exit code).

    ``timeout`` is a deadline on progress: promtool is stopped after ``timeout`` seconds
    without using CPU, or at the latest after ten times that (a busy machine slows it, it
    does not stop it) (:func:`obsctl.processes.run_progressing`).

    Raises:
        ObsctlError: promtool is not installed.
        subprocess.TimeoutExpired: promtool stalled or ran past the ceiling.
    """
    return run_progressing([require_binary(PROMTOOL_BIN), *map(str, args)], stall=timeout)


def check_rules(paths: list[Path]) -> subprocess.CompletedProcess:
    """``promtool check rules PATHS...`` (exit code 0 when every file is valid)."""
    return promtool("check", "rules", *paths)


def test_rules(paths: list[Path]) -> subprocess.CompletedProcess:
    """``promtool test rules PATHS...`` (exit code 0 when every unit test passes)."""
    return promtool("test", "rules", *paths)


def validate_rule_files(files: dict[str, str], spec: Spec) -> str | None:
    """Check rendered rule files with promtool before anything is written.

    A spec can hold PromQL that only Prometheus can parse; writing such rules over good
    ones would make Prometheus' next reload fail and drop every obsctl rule and alert.

    Args:
        files: ``{file name: YAML text}`` as :func:`obsctl.rules.generate.generate` renders.
        spec: the spec they came from; errors name its file, the signal and its line.

    Returns:
        None when promtool accepted every file, or a warning line when promtool is not
        installed (the files could not be checked).

    Raises:
        SpecError: promtool rejected a file; the message holds promtool's first errors.
    """
    if shutil.which(PROMTOOL_BIN) is None:
        return "promtool not found (apt-get install prometheus): the rule files were not validated"
    with tempfile.TemporaryDirectory(prefix="obsctl-rules-") as tmp:
        paths = []
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
            paths.append(Path(tmp) / name)
        result = check_rules(paths)
    if result.returncode == 0:
        return None
    problems = [
        line.strip().replace(f"{tmp}/", "")
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and not line.strip().startswith(("Checking", "SUCCESS", "FAILED"))
    ]
    raise SpecError(_explain(problems, spec))


def _explain(problems: list[str], spec: Spec) -> str:
    """Name the signal (and its spec line) behind the first rule promtool rejected."""
    for problem in problems:
        rule = re.search(r'"(workload_class:[^"]+)"', problem)
        for i, sig in enumerate(spec.signals):
            if rule and sig.record_name == rule.group(1):
                reason = problem.split("could not parse expression: ", 1)[-1]
                line = spec.line_of("signals", i, "query")
                where = f"{spec.path}:{line}" if line else str(spec.path)
                return f"{where}: signals[{i}].query ({sig.name}): Prometheus would reject it: {reason}"
    return f"{spec.path}: the rules generated from this spec fail promtool check rules: {'; '.join(problems[:3])}"
