"""The YAML store: round trips, current pointers and history, initiative rules,
atomic writes under a simulated crash, and corrupt files reported by name."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pytest

from obsctl.atomicio import atomic_write_yaml
from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from support.store_records import T0, make_baseline, make_initiative


def test_empty_store(tmp_path):
    store = Store(tmp_path / "none")
    assert store.current_baselines() == []
    assert store.current_baseline("a", "b") is None
    assert store.history("a", "b") == []
    assert store.initiatives() == []


def test_round_trip_current_and_history(tmp_path):
    store = Store(tmp_path / "store")
    first = store.save_baseline(make_baseline())
    assert store.current_baseline("embed-online", "tokens_per_second") == first
    second = store.save_baseline(make_baseline(mean=7700.0, created=T0 + dt.timedelta(hours=2)))
    other = store.save_baseline(make_baseline(sig="gpu_utilization", mean=0.5))
    assert [b.id for b in store.current_baselines()] == [other.id, second.id]
    assert [b.id for b in store.history("embed-online", "tokens_per_second")] == [first.id, second.id]
    assert store.baseline(first.id) == first
    assert store.baseline(first.id).samples == first.samples
    # Plain YAML files in the documented layout.
    assert (tmp_path / "store" / "baselines" / "embed-online" / "tokens_per_second" / f"{first.id}.yaml").is_file()
    assert "embed-online" in (tmp_path / "store" / "current.yaml").read_text()


def test_same_id_gets_suffix_and_not_current(tmp_path):
    store = Store(tmp_path)
    a = store.save_baseline(make_baseline())
    b = store.save_baseline(make_baseline(mean=1.0), make_current=False)
    assert b.id == f"{a.id}-2"
    assert store.current_baseline("embed-online", "tokens_per_second").id == a.id


def test_second_active_initiative_refused(tmp_path):
    store = Store(tmp_path)
    first = store.add_initiative(make_initiative(store))
    with pytest.raises(StoreError, match="already has an open initiative"):
        store.add_initiative(make_initiative(store, iid="other-20260105"))
    # Another class is fine; a closed initiative frees the class.
    store.add_initiative(make_initiative(store, cls="finetune-batch", iid="other-20260105"))
    store.save_initiative(first.model_copy(update={"status": "closed"}))
    again = store.add_initiative(make_initiative(store))
    assert again.id == f"{first.id}-2"
    assert store.open_initiative("embed-online").id == again.id


def test_unknown_and_unsafe_ids(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(StoreError, match="no initiative"):
        store.initiative("nope")
    with pytest.raises(StoreError, match="not a valid store name"):
        store.initiative("../../etc/passwd")
    with pytest.raises(StoreError, match="no baseline"):
        store.baseline("a.b.c")


class Unserializable:
    """An object yaml.safe_dump cannot represent: the dump fails midway."""


def test_crash_mid_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    store = Store(tmp_path)
    saved = store.save_baseline(make_baseline())
    path = store.baseline_file(saved.workload_class, saved.signal, saved.id)
    before = path.read_bytes()
    # Many keys first so the emitter has already written part of the temp file.
    payload = {f"key{i}": "x" * 100 for i in range(500)} | {"boom": Unserializable()}
    with pytest.raises(StoreError, match=str(path.name)):
        atomic_write_yaml(path, payload)
    assert path.read_bytes() == before
    assert store.baseline(saved.id) == saved
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_crash_in_current_pointer_write_keeps_pointer(tmp_path):
    store = Store(tmp_path)
    saved = store.save_baseline(make_baseline())
    before = store.current_file.read_bytes()
    with pytest.raises(StoreError):
        atomic_write_yaml(store.current_file, {"baselines": {"x": Unserializable()}})
    assert store.current_file.read_bytes() == before
    assert store.current_baselines()[0].id == saved.id
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"id: [unclosed\n", "YAML error"),
        (b"- just\n- a list\n", "expected a Baseline mapping"),
        (b"id: x\n", "Baseline"),
        (b"\xff\xfe\x00garbage", "not valid UTF-8"),
    ],
)
def test_corrupt_baseline_file_names_file(tmp_path, content, message):
    store = Store(tmp_path)
    saved = store.save_baseline(make_baseline())
    path = store.baseline_file(saved.workload_class, saved.signal, saved.id)
    path.write_bytes(content)
    with pytest.raises(StoreError, match=message) as info:
        store.current_baselines()
    assert str(path) in str(info.value)


def test_corrupt_current_and_dangling_pointer(tmp_path):
    store = Store(tmp_path)
    store.current_file.parent.mkdir(parents=True, exist_ok=True)
    store.current_file.write_text("baselines: [1, 2]\n")
    with pytest.raises(StoreError, match="current.yaml"):
        store.current_baselines()
    store.current_file.write_text("baselines: {embed-online: {tokens_per_second: embed-online.tokens_per_second.gone}}\n")
    with pytest.raises(StoreError, match="does not exist"):
        store.current_baselines()


def test_corrupt_initiative_file(tmp_path):
    store = Store(tmp_path)
    store.add_initiative(make_initiative(store))
    path = store.initiative_file("batch-size-tuning-20260105")
    path.write_text("status: [\n")
    with pytest.raises(StoreError, match=str(path)):
        store.initiatives()


def test_records_carry_a_schema_version_and_another_is_one_line(tmp_path):
    import yaml

    store = Store(tmp_path)
    saved = store.save_baseline(make_baseline())
    store.add_initiative(make_initiative(store))
    path = store.baseline_file(saved.workload_class, saved.signal, saved.id)
    ipath = store.initiative_file("batch-size-tuning-20260105")
    for record, _hint in ((path, "re-snapshot the baseline"), (ipath, "start the initiative again")):
        data = yaml.safe_load(record.read_text())
        assert data["schema_version"] == 1
        data["schema_version"] = 2
        record.write_text(yaml.safe_dump(data))
    with pytest.raises(StoreError) as info:
        store.current_baselines()
    assert str(info.value) == f"{path}: a Baseline record of schema version 2; this obsctl reads version 1: re-snapshot the baseline"
    with pytest.raises(StoreError) as info:
        store.initiatives()
    assert str(info.value).endswith("start the initiative again") and "\n" not in str(info.value)


def _save_many(path: str, worker: int) -> None:
    store = Store(Path(path))
    for j in range(5):
        store.save_baseline(make_baseline(sig=f"s{worker}_{j}"))


def test_concurrent_writers_lose_no_pointer(tmp_path):
    # Each process adds pointers to current.yaml (read-modify-write); the lock keeps all.
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert len(Store(tmp_path).current_baselines()) == 15
