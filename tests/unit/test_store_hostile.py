"""A damaged or planted store is one corrupt-store line, fast and bounded: YAML aliases,
deep nesting, an oversized sidecar header, ids that leave the store, and record names
that would reach PromQL unvalidated."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import yaml

from obsctl.baselining.report import write_report
from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from support.store_records import make_baseline, make_initiative

BOMB = "".join(f"{c}: &{c} [{','.join(['*' + p] * 9) if p else ','.join(['lol'] * 9)}]\n"
               for p, c in zip(["", "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=True))


def _saved(tmp_path):
    store = Store(tmp_path)
    b = store.save_baseline(make_baseline())
    return store, b, store.baseline_file(b.workload_class, b.signal, b.id)


def test_alias_bomb_is_one_line_at_once(tmp_path):
    store, b, path = _saved(tmp_path)
    path.write_text(BOMB)
    with pytest.raises(StoreError) as info:  # refused at the first alias, before anything expands (no timing asserted)
        store.baseline(b.id)
    assert str(info.value) == f"{path}:1: corrupt store file (YAML error: YAML aliases are not allowed in store files); restore it from history or remove it"


def test_deep_nesting_in_a_record_and_the_index(tmp_path):
    store, b, path = _saved(tmp_path)
    store.add_initiative(make_initiative(store))
    path.write_text("id: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(StoreError, match="corrupt store file"):
        store.baseline(b.id)
    store.initiative_index_file.write_text("[" * 200000 + "]" * 200000)  # a cache: rebuilt, no RecursionError
    assert [i.id for i in store.initiatives()] == ["batch-size-tuning-20260105"]


def _sidecar(path):
    data = yaml.safe_load(path.read_text())
    return data, path.parent / data["samples_sidecar"]["file"]


def test_sidecar_declaring_a_huge_array_is_refused_before_allocation(tmp_path):
    store = Store(tmp_path)
    b = store.save_baseline(make_baseline().model_copy(update={"samples": [(1.7e9 + 15 * i, float(i)) for i in range(200)]}))
    path = store.baseline_file(b.workload_class, b.signal, b.id)
    data, side = _sidecar(path)
    # A member whose .npy header declares 2**28 float64 (2 GiB) but holds a few bytes.
    buf = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (2**28,)}
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(side, "w") as archive:
        archive.writestr("e0_values.npy", buf.getvalue() + b"\0" * 64)
    import hashlib

    data["samples_sidecar"]["sha256"] = hashlib.sha256(side.read_bytes()).hexdigest()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(StoreError) as info:
        store.baseline(b.id)
    assert "corrupt sample sidecar" in str(info.value) and "268,435,456 elements" in str(info.value)


@pytest.mark.parametrize("field, value", [("id", "../../escaped"), ("id", "/abs"), ("workload_class", "a}or{x"),
                                          ("variant", {"label": 'x"}) or vector(1) or {y="', "control": "a", "treatment": "b"}),
                                          ("variant", {"label": "track", "control": "a\nb", "treatment": "b"})])
def test_tampered_initiative_names_are_corrupt_store_lines(tmp_path, field, value):
    store = Store(tmp_path)
    store.save_baseline(make_baseline())
    saved = store.add_initiative(make_initiative(store))
    path = store.initiative_file(saved.id)
    data = yaml.safe_load(path.read_text())
    data[field] = value
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(StoreError) as info:
        store.initiative(saved.id)
    assert str(info.value).startswith(f"{path}: corrupt store file: Initiative.{field}")
    out = tmp_path / "out"
    with pytest.raises(StoreError):
        write_report(store, saved.id, out)
    assert not (tmp_path.parent / "escaped.md").exists() and not out.exists()


def test_record_ids_in_reports_stay_in_out(tmp_path):
    from obsctl.records import Initiative

    with pytest.raises(ValueError):
        Initiative.model_validate(json.loads(make_initiative(Store(tmp_path)).model_dump_json()) | {"id": "../x"})
