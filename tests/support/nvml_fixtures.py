"""pytest fixtures for the stand-in NVML (a plugin of tests/conftest.py: ``nvml_env``, ``stub_so``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from obsctl.exporters.gpu.nvml import NvmlSource
from support import stubnvml

__all__ = ["stub_so", "nvml_env", "NvmlEnv", "Scrape"]


@pytest.fixture(scope="session")
def stub_so(tmp_path_factory) -> Path:
    """The stub built once per session: ``.../libnvidia-ml.so.1``."""
    return stubnvml.build(tmp_path_factory.mktemp("nvml_stub"))


class Scrape:
    """One collect rendered into a fresh registry: ``.value(name, **labels)``, ``.text``."""

    def __init__(self, metrics):
        self.metrics = metrics

        class _C:
            def collect(_self):
                return metrics

        self.registry = CollectorRegistry()
        self.registry.register(_C())
        self.text = generate_latest(self.registry).decode()

    def value(self, name: str, **labels) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def names(self) -> set[str]:
        return {s.name for m in self.metrics for s in m.samples}

    def samples(self, name: str) -> list:
        return [s for m in self.metrics for s in m.samples if s.name == name]


@dataclass
class NvmlEnv:
    """A scenario file, the stub's controls, and sources bound to fresh pynvml copies."""

    so: Path
    scenario: Path
    sources: list = field(default_factory=list)

    def write(self, text: str, reload: bool = True) -> None:
        stubnvml.write_scenario(self.scenario, text)
        if reload:
            stubnvml.controls(self.so).nvmlStub_Reload()

    @property
    def lib(self):
        return stubnvml.controls(self.so)

    def source(self, so: Path | None = None, **kwargs) -> NvmlSource:
        kwargs.setdefault("reinit_interval", 0.0)
        kwargs.setdefault("xid_events", False)
        src = NvmlSource(stubnvml.load_pynvml(so or self.so), **kwargs)
        self.sources.append(src)
        return src

    @staticmethod
    def scrape(src: NvmlSource, timeout: float = 5.0) -> Scrape:
        return Scrape(src.collect(time.monotonic() + timeout))


@pytest.fixture
def nvml_env(stub_so, tmp_path, monkeypatch):
    monkeypatch.setenv(stubnvml.ENV, str(tmp_path / "scenario.txt"))
    env = NvmlEnv(so=stub_so, scenario=tmp_path / "scenario.txt")
    try:
        yield env
    finally:
        for src in env.sources:
            src.close()
