"""Sample sidecars and the initiative index (baselining/sidecar.py, baselining/store.py):
bit-exact round trips, the size of a 30-day baseline, listings that do not read samples,
stores written by the previous (inline YAML) format, tampered or missing sidecars, and
crash safety of the sidecar + YAML pair."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from obsctl.atomicio import atomic_write_yaml
from obsctl.baselining import sidecar
from obsctl.baselining import store as store_module
from obsctl.baselining.store import Store
from obsctl.errors import StoreError
from obsctl.records import (
    Baseline,
    Initiative,
    Population,
    Statistics,
    VerificationResult,
    Window,
)

T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
STEP = 60.0
MONTH = 30 * 86400


def month_samples(seed: int = 1, holes: bool = True) -> list[tuple[float, float]]:
    """30 days at 60 s (43,200 points) of noisy values, with two holes when ``holes``."""
    rng = np.random.default_rng(seed)
    start = T0.timestamp() - MONTH
    times = start + STEP * np.arange(1, MONTH // int(STEP) + 1)
    values = 2400.0 + rng.normal(0, 50, times.size)
    keep = np.ones(times.size, dtype=bool)
    if holes:
        keep[1000:1300] = False
        keep[40000:40010] = False
    return list(zip(times[keep].tolist(), values[keep].tolist(), strict=True))


def baseline_of(samples, cls="c", sig="s", created=T0) -> Baseline:
    vals = [v for _, v in samples]
    return Baseline(
        id=f"{cls}.{sig}.{created.strftime('%Y%m%dT%H%M%SZ')}", workload_class=cls, signal=sig, unit="tokens/s",
        direction="higher_is_better", query="sum(x)", window=Window(start=created - dt.timedelta(days=30), end=created, step_seconds=STEP),
        population=Population(series_count=1),
        stats=Statistics(sample_count=len(vals), mean=float(np.mean(vals)), median=float(np.median(vals)), p5=0, p95=0, stddev=1,
                         batch_means=[1.0, 2.0]),
        created_at=created, samples=samples,
    )


def initiative_of(iid: str, cls: str, status="open", samples=None) -> Initiative:
    verifications = []
    if samples is not None:
        verifications.append(VerificationResult(
            verdict="INCONCLUSIVE", primary_verdict="INCONCLUSIVE", baseline_id="c.s.x", signal="s", window=Window(start=T0, end=T0 + dt.timedelta(days=7), step_seconds=STEP),
            baseline_mean=1.0, window_mean=1.0, change_ratio=0.0, ci_low=-1, ci_high=1, confidence=0.95, verified_at=T0, samples=samples))
    return Initiative(id=iid, name=iid, lever="batch-size", workload_class=cls, primary_signal="s", baseline_id="c.s.x",
                      started_at=T0, status=status, verifications=verifications)


def test_encode_decode_is_bit_exact_on_and_off_grid():
    on_grid = month_samples()
    assert sidecar.decode(sidecar.encode(on_grid)) == on_grid
    assert "gaps" in sidecar.encode(on_grid)
    jittered = [(t + 0.001 * (i % 7), v) for i, (t, v) in enumerate(on_grid[:500])]
    arrays = sidecar.encode(jittered)
    assert "times" in arrays and sidecar.decode(arrays) == jittered
    assert sidecar.decode(sidecar.encode([(1.5, 2.0)])) == [(1.5, 2.0)]


def test_thirty_day_baseline_is_small_and_round_trips(tmp_path):
    store = Store(tmp_path)
    samples = month_samples()
    saved = store.save_baseline(baseline_of(samples))
    record = store.baseline_file("c", "s", saved.id)
    sides = list(record.parent.glob("*.samples.npz"))
    assert len(sides) == 1
    total = record.stat().st_size + sides[0].stat().st_size
    assert total < 0.5 * 1024 * 1024, total
    assert record.stat().st_size < 4096  # metadata only: plain YAML
    assert "samples_sidecar" in record.read_text() and "samples: []" in record.read_text()
    loaded = store.baseline(saved.id)
    assert loaded.samples == samples and loaded == saved
    # Listings leave the samples out; single lookups bring them.
    assert store.current_baselines()[0].samples == []
    assert store.history("c", "s")[0].samples == []
    assert store.current_baseline("c", "s").samples == samples


def test_store_written_by_the_previous_format_still_loads(tmp_path):
    # The previous format: every record one YAML file with inline samples (model_dump).
    samples = month_samples(holes=False)[:5000]
    old = baseline_of(samples)
    path = tmp_path / "baselines" / "c" / "s" / f"{old.id}.yaml"
    atomic_write_yaml(path, old.model_dump(mode="json"))
    atomic_write_yaml(tmp_path / "current.yaml", {"baselines": {"c": {"s": old.id}}})
    legacy = initiative_of("legacy-1", "c", samples=samples)
    atomic_write_yaml(tmp_path / "initiatives" / "legacy-1.yaml", legacy.model_dump(mode="json"))
    store = Store(tmp_path)
    assert store.baseline(old.id) == old
    assert [b.id for b in store.current_baselines()] == [old.id]
    assert store.open_initiative("c") == legacy
    # Rewriting the old record moves its samples into a sidecar and keeps them.
    store.save_initiative(store.initiatives("c")[0].model_copy(update={"notes": "touched"}))
    again = store.initiative("legacy-1")
    assert again.notes == "touched" and again.verifications[0].samples == samples
    assert len(list((tmp_path / "initiatives").glob("legacy-1.*.samples.npz"))) == 1


def test_saving_a_record_loaded_without_samples_keeps_them(tmp_path):
    store = Store(tmp_path)
    samples = month_samples()[:2000]
    store.add_initiative(initiative_of("i-1", "c", samples=samples))
    light = store.initiatives("c")[0]
    assert light.verifications[0].samples == []
    store.save_initiative(light.model_copy(update={"status": "verified"}))
    full = store.initiative("i-1")
    assert full.status == "verified" and full.verifications[0].samples == samples
    # One sidecar only: the replaced one is removed once the new YAML is in place.
    assert len(list((tmp_path / "initiatives").glob("*.samples.npz"))) == 1


def test_tampered_or_missing_sidecar_is_one_line_naming_the_file(tmp_path):
    store = Store(tmp_path)
    saved = store.save_baseline(baseline_of(month_samples()[:1000]))
    side = next(store.baseline_file("c", "s", saved.id).parent.glob("*.samples.npz"))
    side.write_bytes(side.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(StoreError, match=r"sample sidecar does not match the sha256") as exc:
        store.baseline(saved.id)
    assert str(side) in str(exc.value) and "\n" not in str(exc.value)
    assert store.current_baselines()[0].id == saved.id  # listings do not read it
    side.unlink()
    with pytest.raises(StoreError, match="sample sidecar of .* is missing"):
        store.baseline(saved.id)


def test_failed_yaml_write_leaves_no_sidecar_and_the_old_pair_intact(tmp_path, monkeypatch):
    store = Store(tmp_path)
    first = month_samples()[:1000]
    store.add_initiative(initiative_of("i-1", "c", samples=first))
    before = sorted(p.name for p in (tmp_path / "initiatives").iterdir())

    def fail(path, data):
        raise StoreError(f"cannot write {path}: disk full")

    monkeypatch.setattr(store_module, "atomic_write_yaml", fail)
    with pytest.raises(StoreError, match="disk full"):
        store.save_initiative(initiative_of("i-1", "c", samples=month_samples(seed=2)[:1000]))
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "initiatives").iterdir()) == before
    assert store.initiative("i-1").verifications[0].samples == first


def test_class_lookup_parses_only_that_class(tmp_path, monkeypatch):
    store = Store(tmp_path)
    for n in range(40):
        store.add_initiative(initiative_of(f"i-{n}", f"c{n % 8}", status="closed" if n < 32 else "open"))
    parsed = []
    real = store_module._load_model
    monkeypatch.setattr(store_module, "_load_model", lambda path, model, samples=True: parsed.append(path.name) or real(path, model, samples))
    active = store.open_initiative("c3")
    assert active is not None and active.id == "i-35"
    # Only the active record, chosen from the index: not the class's 4 closed ones, no other class's.
    assert parsed == ["i-35.yaml"]
    # A record rewritten behind the index (another tool): its stat changed, so it is re-read.
    monkeypatch.undo()
    atomic_write_yaml(store.initiative_file("i-35"), initiative_of("i-35", "c3", status="closed").model_dump(mode="json"))
    assert store.open_initiative("c3") is None
    assert [i.id for i in store.initiatives("c3", "closed")] == sorted(f"i-{n}" for n in (3, 11, 19, 27, 35))
