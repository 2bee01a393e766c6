"""Docs name only what exists: every repository path and every ``module.symbol`` in
backticks in README.md and docs/*.md resolves.

A path counts when its first part is a top-level folder of the repository (``baselining/
verdict.py``, ``tests/unit/``); placeholders (``<class>``, ``$VAR``, ``*``) are not paths.
A dotted name counts when its first part is a module of the package (``obsctl.x.y``, or a
module of ``obsctl``, ``obsctl.baselining``, ``obsctl.rules``, ``obsctl.exporters`` or
``obsctl.dashboards`` named without its package, e.g. ``verdict.before_start``): it must
import and its attributes resolve, or name a spec key (``verification.min_samples``: the
fields of :class:`obsctl.spec.Spec`) or a generated rule group (``obsctl.alerts.signals``).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import obsctl
from obsctl.spec import Spec

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"build", "obsctl.egg-info"}
PACKAGES = ("obsctl", "obsctl.baselining", "obsctl.baselining.commands", "obsctl.baselining.text", "obsctl.baselining.practice",
            "obsctl.baselining.decide", "obsctl.rules", "obsctl.exporters", "obsctl.dashboards")
FILE_SUFFIXES = {"md", "py", "yaml", "yml", "json", "jsonl", "png", "txt", "toml", "c", "sh", "csv", "prom", "html", "ini"}
PLACEHOLDER = re.compile(r"[<>$*{}\[\] ]|\.\.\.")
TICKED = re.compile(r"`([^`\n]+)`")
#: Spec keys the docs name as removed (the spec refuses them with a message saying so).
REMOVED_KEYS = {"verification.batches"}


@cache
def modules_of(package: str) -> frozenset[str]:
    pkg = importlib.import_module(package)
    return frozenset(m.name for m in pkgutil.iter_modules(pkg.__path__))


def tokens(path: Path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for t in TICKED.findall(line):
            yield n, t.strip().rstrip(",;:")


def repo_path(token: str) -> str | None:
    """The repository path a token names, or None when it names none."""
    t = re.sub(r"(::\w+|:\d+(-\d+)?|#[\w-]+)$", "", token)
    if "/" not in t or PLACEHOLDER.search(t) or t.startswith(("/", "http", "./", "../")) or "=" in t:
        return None
    return t if t.split("/", 1)[0] in TOP else None


def dotted(token: str) -> tuple[str, list[str]] | None:
    """``(module, attributes)`` a dotted token names, or None when it names no module of the package."""
    t = token.removesuffix("()")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", t) or t.rsplit(".", 1)[1] in FILE_SUFFIXES:
        return None
    parts = t.split(".")
    if parts[0] == "obsctl":
        candidates = ["obsctl"]
        rest = parts[1:]
    else:
        candidates = [p for p in PACKAGES if parts[0] in modules_of(p)]
        rest = parts
        if not candidates:
            return None
    base = candidates[0]
    # The longest importable module prefix, then attributes.
    for k in range(len(rest), 0, -1):
        name = ".".join([base, *rest[:k]])
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name, rest[k:]
    return base, rest


def spec_key(parts: list[str]) -> bool:
    """True when ``parts`` walk the spec's fields (``verification.min_samples``, ``pricing.node_hour_usd``)."""
    model: type[BaseModel] | None = Spec
    for p in parts:
        if model is None or p not in model.model_fields:
            return False
        ann = model.model_fields[p].annotation
        model = next((a for a in (ann, *getattr(ann, "__args__", ())) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return True


@cache
def rule_groups() -> frozenset[str]:
    return frozenset(g["name"] for f in (ROOT / "rules" / "generated").glob("*.yaml") for g in yaml.safe_load(f.read_text())["groups"])


def references():
    for doc in DOCS:
        for n, t in tokens(doc):
            if (p := repo_path(t)) is not None:
                yield pytest.param("path", p, id=f"{doc.name}:{n}:{p}")
            elif dotted(t) is not None:
                yield pytest.param("symbol", t, id=f"{doc.name}:{n}:{t}")


@pytest.mark.parametrize("kind, name", list(references()))
def test_reference_resolves(kind, name):
    if kind == "path":
        assert (ROOT / name).exists(), f"{name} does not exist in the repository"
        return
    if spec_key(name.split(".")) or name in rule_groups():
        return
    if name in REMOVED_KEYS:
        with pytest.raises(ValueError, match="was removed"):
            Spec.model_validate({name.split(".")[0]: {name.split(".")[1]: 10}})
        return
    module, attrs = dotted(name)
    obj = importlib.import_module(module)
    for a in attrs:
        assert hasattr(obj, a), f"{name}: {getattr(obj, '__name__', obj)!r} has no {a} (and it is no spec key or rule group)"
        obj = getattr(obj, a)


def test_the_check_finds_references():
    """The parser sees the documented modules at all (a regex that matched nothing would pass)."""
    found = list(references())
    assert len(found) > 50
    assert obsctl.__name__ == "obsctl"
