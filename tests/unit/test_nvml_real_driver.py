"""The stand-in NVML held to a real driver's record (tests/fixtures/nvml-real/: the ``returns`` and
``field_returns`` of ``calls-busy.json`` and ``busy.prom`` that ``bench/bench_real_gpu.py`` wrote on an
H200 with driver 580.159.04, the GPU busy).

The stand-in given the raw values that driver answered must make the source call the same
functions with the same return codes (NOT_SUPPORTED for NVLink, TIMEOUT from the event wait) and
render the same scrape byte for byte: where the two differ, the stand-in no longer reproduces
the real thing and every test built on it tests something else.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from obsctl.exporters.exposition import TextRenderer
from obsctl.exporters.gpu.nvml import NvmlSource
from support import stubnvml
from support.nvml_recorder import RecordingNvml

RECORD = Path(__file__).resolve().parents[1] / "fixtures" / "nvml-real"


def _run_stand_in(nvml_env) -> tuple[RecordingNvml, bytes]:
    """Two collects with every reader on and the XID thread running, as the bench ran them."""
    nvml_env.write(stubnvml.h200_vm())
    rec = RecordingNvml(stubnvml.load_pynvml(nvml_env.so))
    src = NvmlSource(rec, pcie_throughput=True, xid_events=True, event_wait_ms=10)
    nvml_env.sources.append(src)
    src.collect(time.monotonic() + 5.0)
    deadline = time.monotonic() + 5.0
    # The XID thread's first wait has returned (its code is recorded on return).
    while not (rec.calls.get("nvmlEventSetWait") or {}).get("returns") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (rec.calls.get("nvmlEventSetWait") or {}).get("returns"), "the XID thread never returned from nvmlEventSetWait"
    body = TextRenderer().render(src.collect(time.monotonic() + 5.0))
    src.close()
    return rec, body


def test_stand_in_answers_as_the_real_driver_did(nvml_env):
    real = json.loads((RECORD / "h200-580.159.04-calls.json").read_text())
    rec, _ = _run_stand_in(nvml_env)
    got = rec.codes()
    assert got["returns"] == real["returns"]
    assert got["field_returns"] == real["field_returns"]


def test_stand_in_scrape_equals_the_real_scrape(nvml_env):
    _, body = _run_stand_in(nvml_env)
    assert body.decode() == (RECORD / "h200-580.159.04-busy.prom").read_text()
