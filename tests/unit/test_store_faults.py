"""Store faults: an unusable lock or store path is one StoreError line
naming the path; a corrupt current.yaml leaves no orphan baseline record; a store path
or directory that is a file is an error, not an empty store."""

from __future__ import annotations

import os

import pytest

from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from support.store_records import make_baseline, make_initiative


def test_lock_path_is_a_directory(tmp_path):
    store = Store(tmp_path)
    (tmp_path / ".lock").mkdir()
    with pytest.raises(StoreError, match=r"\.lock: cannot take the store lock: Is a directory") as info:
        store.save_baseline(make_baseline())
    assert str(tmp_path / ".lock") in str(info.value)
    with pytest.raises(StoreError, match="cannot take the store lock"):
        store.add_initiative(make_initiative(store))
    assert not (tmp_path / "baselines").exists() and not (tmp_path / "initiatives").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_store_directory(tmp_path):
    store = Store(tmp_path / "store")
    store.save_baseline(make_baseline())
    (tmp_path / "store" / ".lock").unlink()
    os.chmod(tmp_path / "store", 0o555)
    try:
        with pytest.raises(StoreError, match="cannot take the store lock"):
            store.save_baseline(make_baseline(mean=1.0))
    finally:
        os.chmod(tmp_path / "store", 0o755)


def test_store_path_is_a_file(tmp_path):
    path = tmp_path / "store"
    path.write_text("x\n")
    store = Store(path)
    for call in (store.initiatives, store.all_baselines, lambda: store.history("a", "b"), lambda: store.initiative("x-1")):
        with pytest.raises(StoreError, match="not a directory"):
            call()
    with pytest.raises(StoreError, match="not a directory"):
        store.save_baseline(make_baseline())


def test_initiatives_is_a_file(tmp_path):
    store = Store(tmp_path)
    (tmp_path / "initiatives").write_text("hi\n")
    with pytest.raises(StoreError, match=rf"{tmp_path / 'initiatives'}: not a directory"):
        store.initiatives()
    (tmp_path / "baselines").write_text("hi\n")
    with pytest.raises(StoreError, match="baselines: not a directory"):
        store.all_baselines()


@pytest.mark.parametrize("damage", ["truncate", "directory"])
def test_corrupt_current_leaves_no_orphan_record(tmp_path, damage):
    store = Store(tmp_path)
    first = store.save_baseline(make_baseline())
    if damage == "truncate":
        store.current_file.write_text(store.current_file.read_text()[:20] + "\n  - [")
    else:
        store.current_file.unlink()
        store.current_file.mkdir()
    directory = store.baseline_file(first.workload_class, first.signal, first.id).parent
    before = sorted(p.name for p in directory.iterdir())
    with pytest.raises(StoreError, match="current.yaml"):
        store.save_baseline(make_baseline(mean=5.0, created=first.created_at.replace(hour=13)))
    assert sorted(p.name for p in directory.iterdir()) == before


def test_failed_pointer_write_removes_the_new_record(tmp_path):
    store = Store(tmp_path)
    first = store.save_baseline(make_baseline())
    directory = store.baseline_file(first.workload_class, first.signal, first.id).parent
    # current.yaml's directory entry cannot be replaced: a directory named like the temp
    # file is not enough, so make current.yaml itself a non-empty directory after reading it.
    original_read = store.current_index

    def read_then_break():
        index = original_read()
        store.current_file.unlink()
        store.current_file.mkdir()
        (store.current_file / "keep").write_text("x")
        return index

    store.current_index = read_then_break
    with pytest.raises(StoreError):
        store.save_baseline(make_baseline(mean=5.0, created=first.created_at.replace(hour=13)))
    assert [p.name for p in directory.iterdir()] == [f"{first.id}.yaml"]
