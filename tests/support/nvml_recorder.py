"""pynvml with every answer recorded: which functions a source calls and what the library answers.

Used by ``bench/bench_real_gpu.py`` on a real driver, and by the tests to hold the stand-in NVML
to that record (``tests/fixtures/nvml-real/``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any


def example(value: Any) -> Any:
    """A JSON-able, short picture of a pynvml return value."""
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if hasattr(value, "_fields_"):
        return {f[0]: example(getattr(value, f[0])) for f in value._fields_[:12]}
    if isinstance(value, (list, tuple)):
        return [example(v) for v in value[:4]] + (["..."] if len(value) > 4 else [])
    return repr(value)[:120]


class RecordingNvml:
    """pynvml with every ``nvml*`` function (and every C pointer it hands out) recording its answers.

    ``calls``: ``{name: {"calls": n, "seconds": s, "returns": {code: n}, "example": value}}``
    (``name`` is the pynvml function, or ``C:<symbol>`` for a C function the source calls
    through ``_nvmlGetFunctionPointer``); code 0 is success and any other the ``NVMLError``
    value (``nvml.h``); ``fields``: ``{field_id: {nvmlReturn: n}}`` of ``nvmlDeviceGetFieldValues``.
    """

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.calls: dict[str, dict] = defaultdict(
            lambda: {"calls": 0, "seconds": 0.0, "returns": defaultdict(int), "example": None})
        self.fields: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._nvml, name)
        if name == "_nvmlGetFunctionPointer":
            return lambda sym: self._wrap_c(sym, attr(sym))
        if name.startswith("nvml") and callable(attr) and not isinstance(attr, type):
            return self._wrap(name, attr)
        return attr

    def _wrap(self, name: str, fn: Any) -> Any:
        def recorded(*args: Any) -> Any:
            rec = self.calls[name]
            rec["calls"] += 1
            t0 = time.perf_counter()
            try:
                out = fn(*args)
            except self._nvml.NVMLError as exc:
                rec["returns"][int(exc.value)] += 1
                raise
            finally:
                rec["seconds"] += time.perf_counter() - t0
            rec["returns"][0] += 1
            if rec["example"] is None:
                rec["example"] = example(out)
            return out
        return recorded

    def _wrap_c(self, sym: str, fn: Any) -> Any:
        def recorded(*args: Any) -> int:
            t0 = time.perf_counter()
            ret = fn(*args)
            rec = self.calls["C:" + sym]
            rec["seconds"] += time.perf_counter() - t0
            rec["calls"] += 1
            rec["returns"][int(ret)] += 1
            if sym == "nvmlDeviceGetFieldValues" and ret == 0:
                for v in args[2]._obj:
                    self.fields[int(v.fieldId)][int(v.nvmlReturn)] += 1
            return ret
        return recorded

    def report(self) -> dict:
        """Everything recorded, JSON-able: ``{"calls": {name: {...}}, "fields": {field_id: {code: n}}}``."""
        return {"calls": {k: {**v, "returns": dict(v["returns"])} for k, v in sorted(self.calls.items())},
                "fields": {str(k): dict(v) for k, v in sorted(self.fields.items())}}

    def codes(self) -> dict:
        """The return codes alone, as kept in tests/fixtures/nvml-real/: ``{"returns": {name: [code, ...]},
        "field_returns": {field_id: [nvmlReturn, ...]}}`` (sorted, without counts: how often a call is
        made depends on timing, e.g. the XID thread's waits)."""
        return {"returns": {name: sorted(int(c) for c in r["returns"]) for name, r in sorted(self.calls.items())},
                "field_returns": {str(fid): sorted(int(c) for c in codes) for fid, codes in sorted(self.fields.items())}}
