"""Installed, obsctl is one import package: nothing generic (rules, dashboards, ...)
lands at the top of site-packages, and the generated rules and dashboards ship with it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _clean_copy(dest: Path) -> Path:
    """The tree's files (tracked and untracked, not ignored) copied to ``dest``: a stale
    ``build/`` folder in the work tree would otherwise put modules into the wheel that a
    fresh clone would miss."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True)
    for rel in listed.stdout.splitlines():
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_wheel_holds_only_the_obsctl_package(tmp_path):
    source = _clean_copy(tmp_path / "src")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("obsctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"obsctl", next(t for t in tops if t.endswith(".dist-info"))}
    for module in _source_modules():
        assert module in names, f"{module} is not in the wheel: add its package to pyproject's packages list"
    assert any(n.startswith("obsctl/rules/generated/") and n.endswith(".yaml") for n in names)
    assert any(n.startswith("obsctl/dashboards/generated/") and n.endswith(".json") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "obsctl = obsctl.cli:main" in text and "obsctl-exporter = obsctl.exporters.main:main" in text


#: Source folder -> the import package it installs as (pyproject's package-dir).
ROOTS = {"obsctl": "obsctl", "exporters": "obsctl/exporters", "rules": "obsctl/rules",
         "dashboards": "obsctl/dashboards", "baselining": "obsctl/baselining"}


def _source_modules() -> list[str]:
    """Every .py file of every package folder in the tree, as its path inside the wheel:
    computed from the tree, so a new subpackage missing from pyproject fails here."""
    out = []
    for folder, package in ROOTS.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder)
            if "__pycache__" in rel.parts or not (path.parent / "__init__.py").exists():
                continue
            out.append(f"{package}/{rel.as_posix()}")
    return sorted(out)
