"""Golden exposition files for the NVML source, and ``promtool check metrics`` on them.

Regenerate after an intended change: ``OBSCTL_REGEN_GOLDEN=1 pytest tests/unit/test_nvml_golden.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import stubnvml

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SCENARIOS = {
    "nvml_h100_8x.prom": stubnvml.h100_8x,
    "nvml_a100_mig.prom": stubnvml.a100_mig,
    "nvml_rtx4090.prom": stubnvml.rtx4090,
}


def _exposition(nvml_env, scenario) -> str:
    nvml_env.write(scenario())
    return nvml_env.scrape(nvml_env.source()).text


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_exposition(nvml_env, name):
    text = _exposition(nvml_env, SCENARIOS[name])
    path = GOLDEN / name
    if os.environ.get("OBSCTL_REGEN_GOLDEN"):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    assert path.exists(), f"{path} missing: run with OBSCTL_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"exposition differs from {path} (OBSCTL_REGEN_GOLDEN=1 to accept)"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_promtool_check_metrics_clean(nvml_env, name):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    text = _exposition(nvml_env, SCENARIOS[name])
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "" and proc.stderr.strip() == "", \
        proc.stdout + proc.stderr
