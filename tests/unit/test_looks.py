"""The look log (baselining/looks.py, Store.append_looks/looks): append-only, one sequence
per change, no fresh error budget from a moved start, and no look outside the sequence."""

from __future__ import annotations

import datetime as dt

import pytest

from obsctl.baselining import looks
from obsctl.baselining.store import Store
from obsctl.baselining.verify import verification_window
from obsctl.errors import StoreError, UsageError
from obsctl.records import Initiative, Look

UTC = dt.UTC
T0 = dt.datetime(2026, 11, 2, 10, tzinfo=UTC)


def look(number: int, start: dt.datetime = T0, end_hours: float = 1.0, confidence: float = 0.95, initiative: str = "a-20261102",
         t_min: float | None = 0.4, baseline_id: str | None = "b1", signal: str = "tps") -> Look:
    return Look(workload_class="chat", signal=signal, sequence_start=start, number=number, initiative=initiative, window_start=start,
                window_end=start + dt.timedelta(hours=end_hours), confidence=confidence, min_fraction=t_min, verdict="INCONCLUSIVE",
                looked_at=start + dt.timedelta(hours=end_hours, minutes=1), baseline_id=baseline_id)


def initiative(started: dt.datetime = T0, iid: str = "a-20261102") -> Initiative:
    return Initiative(id=iid, name="a", lever="batch-size", workload_class="chat", primary_signal="tps", baseline_id="b1", started_at=started)


def test_the_log_keeps_every_look_in_order(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1)])
    store.append_looks([look(2, end_hours=2)])
    assert [(x.number, x.window_end) for x in store.looks("chat", "tps")] == [(1, T0 + dt.timedelta(hours=1)), (2, T0 + dt.timedelta(hours=2))]
    assert store.looks("chat", "other") == []
    text = store.looks_file("chat", "tps").read_text()
    assert text.count("\n") == 2 and text.endswith("\n")


def test_a_damaged_log_is_named_and_never_appended_to(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1)])
    path = store.looks_file("chat", "tps")
    path.write_bytes(path.read_bytes() + b'{"schema_version": 1, "workload')  # a half line
    with pytest.raises(StoreError, match=r"tps\.jsonl:2: corrupt look log line"):
        store.looks("chat", "tps")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="last line is incomplete"):
        store.append_looks([look(2)])
    assert path.read_bytes() == before


def test_the_next_look_continues_the_sequence_with_its_first_level(tmp_path):
    store = Store(tmp_path)
    ctx, note = looks.context(store, initiative(), "tps", 0.95, 3600.0)
    assert (ctx.number, ctx.confidence, ctx.min_fraction, note) == (1, 0.95, None, "")
    store.append_looks([look(1, t_min=0.4)])
    ctx, note = looks.context(store, initiative(), "tps", 0.90, 3600.0)
    assert (ctx.number, ctx.confidence, ctx.min_fraction) == (2, 0.95, 0.4)
    assert "is kept; verification.confidence is now 90 %" in note
    # Another change (a later start) is another sequence.
    later = T0 + dt.timedelta(days=2)
    ctx, _ = looks.context(store, initiative(later, "b-20261104"), "tps", 0.90, 3600.0)
    assert (ctx.number, ctx.confidence) == (1, 0.90)


def test_a_start_on_data_already_looked_at_buys_no_fresh_budget(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1, end_hours=1), look(2, end_hours=3)])
    for moved in (T0 + dt.timedelta(seconds=1), T0 + dt.timedelta(hours=2, minutes=59), T0 - dt.timedelta(hours=1)):
        with pytest.raises(StoreError, match=r"already looked at from 2026-11-02T10:00:00Z to 2026-11-02T13:00:00Z \(2 look\(s\)"):
            looks.check_start(store, "chat", "tps", moved)
    looks.check_start(store, "chat", "tps", T0)  # the same start continues that change's sequence
    looks.check_start(store, "chat", "tps", T0 + dt.timedelta(hours=3))  # new data only
    looks.check_start(store, "chat", "other", T0 + dt.timedelta(seconds=1))  # another signal


def test_a_removed_or_cut_log_is_refused_not_a_fresh_sequence(tmp_path):
    # The initiative recorded two verifications; each logged its look first. A log holding
    # fewer (deleted, cut, or a dangling link) would start the sequence over.
    store = Store(tmp_path)
    verified = initiative().model_copy(update={"verifications": [object(), object()]})
    with pytest.raises(StoreError, match=r"holds 0 look\(s\) of initiative a-20261102, which recorded 2 verification\(s\)"):
        looks.context(store, verified, "tps", 0.95, 3600.0)
    store.append_looks([look(1)])
    with pytest.raises(StoreError, match=r"holds 1 look\(s\)"):
        looks.context(store, verified, "tps", 0.95, 3600.0)
    store.append_looks([look(2, end_hours=2)])
    assert looks.context(store, verified, "tps", 0.95, 3600.0)[0].number == 3
    path = store.looks_file("chat", "tps")
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(StoreError, match="is a symbolic link"):
        looks.context(store, initiative(), "tps", 0.95, 3600.0)


def test_a_line_of_another_class_or_signal_is_refused(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1, signal="other")])
    store.looks_file("chat", "tps").write_bytes(store.looks_file("chat", "other").read_bytes())
    with pytest.raises(StoreError, match=r"tps\.jsonl:1: a look at chat/other in the log of chat/tps"):
        store.looks("chat", "tps")


def test_a_sequence_keeps_the_baseline_of_its_first_look(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1, baseline_id="b1")])
    with pytest.raises(StoreError, match="compared with baseline b1, this one would compare with b2"):
        looks.context(store, initiative(), "tps", 0.95, 3600.0, "b2")
    with pytest.raises(StoreError, match="compared with baseline b1, this one would compare with b2"):
        looks.check_start(store, "chat", "tps", T0, "b2")
    assert looks.context(store, initiative(), "tps", 0.95, 3600.0, "b1")[0].number == 2
    looks.check_start(store, "chat", "tps", T0, "b1")
    looks.check_start(store, "chat", "tps", T0 + dt.timedelta(hours=1), "b2")  # a later change may use another baseline


@pytest.mark.parametrize("kwargs", [{"window": "1h"}, {"start": T0 + dt.timedelta(hours=2)}])
def test_a_window_that_starts_after_the_change_is_not_a_look(kwargs):
    now = T0 + dt.timedelta(hours=3)
    with pytest.raises(UsageError, match="a look judges the window cumulative from the start"):
        verification_window(initiative(), 15.0, kwargs.get("window", "1h"), kwargs.get("start"), None, now)
    # As long as the time since the start, or starting at it: the cumulative window.
    assert verification_window(initiative(), 15.0, "3h", None, None, now) == (T0, now)
    assert verification_window(initiative(), 15.0, "1h", T0, None, now) == (T0, now)


# --- looks keyed by what is looked at ---------------------------------------------------------

Q = 'sum(rate(vllm:generation_tokens_total{job="vllm",model_name="opt"}[1m]))'


def keyed(number, cls="chat", signal="tps", query=Q, **kw):
    return look(number, signal=signal, **kw).model_copy(update={"workload_class": cls, "query_key": looks.query_key(query)})


def test_the_query_key_is_the_input_selectors_whatever_the_arithmetic():
    same = [Q, f"{Q} * 1", 'sum(rate(vllm:generation_tokens_total{model_name="opt", job="vllm"}[5m]))']
    assert {looks.query_key(q) for q in same} == {'vllm:generation_tokens_total{job="vllm",model_name="opt"}'}
    assert looks.query_key('sum(x{job="vllm",model_name="llama"})') != looks.query_key('sum(x{job="vllm",model_name="opt"})')
    assert looks.query_key("sum(b{a=\"1\"}) / sum(a{a=\"1\"})") == 'a{a="1"} | b{a="1"}'


def test_a_renamed_class_or_signal_or_a_times_one_query_continues_the_sequence(tmp_path):
    store = Store(tmp_path)
    store.append_looks([keyed(1), keyed(2, end_hours=2)])
    # The class renamed "assistant", the signal "throughput", the query "* 1": the same data, look 3.
    renamed = Initiative(id="a-20261102", name="a", lever="batch-size", workload_class="assistant", primary_signal="throughput",
                         baseline_id="b9", started_at=T0)
    ctx, _ = looks.context(store, renamed, "throughput", 0.95, 3600.0, "b9", f"{Q} * 1")
    assert ctx.number == 3
    # A start a second later on the same data under the new names: refused, naming the old names.
    with pytest.raises(StoreError, match=r"assistant/throughput \(the same data as chat/tps\) was already looked at"):
        looks.check_start(store, "assistant", "throughput", T0 + dt.timedelta(seconds=1), "b9", Q)
    # Other data (another model) under the old names' class is another sequence.
    ctx, _ = looks.context(store, renamed, "throughput", 0.95, 3600.0, "b9", Q.replace("opt", "llama"))
    assert ctx.number == 1


def test_a_look_logged_without_a_key_still_counts_for_its_class_and_signal(tmp_path):
    store = Store(tmp_path)
    store.append_looks([look(1)])  # an older log line: no query_key
    ctx, _ = looks.context(store, initiative(), "tps", 0.95, 3600.0, "b1", Q)
    assert ctx.number == 2


@pytest.mark.parametrize("linked", ["looks", "looks/chat"])
def test_a_linked_folder_on_the_look_path_is_refused(tmp_path, linked):
    store = Store(tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = store.path / linked
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(StoreError, match=rf"{linked}: is a symbolic link on the look log's path; it must be the store's own folder"):
        store.looks("chat", "tps")
    with pytest.raises(StoreError, match="symbolic link"):
        store.append_looks([look(1)])
    with pytest.raises(StoreError, match="symbolic link"):
        looks.context(store, initiative(), "tps", 0.95, 3600.0, "b1", Q)
    assert list(elsewhere.rglob("*.jsonl")) == []


def test_concurrent_verifies_wait_for_each_others_looks(tmp_path):
    # Two processes' verifies: the second cannot take its look number while the first holds
    # the look lock, and after the first's look is logged it takes the next number.
    import subprocess
    import sys
    import textwrap

    store = Store(tmp_path)
    with store.looks_locked():
        code = textwrap.dedent(f"""
            from obsctl.baselining import store as s
            s.LOOKS_LOCK_TIMEOUT_SECONDS = 0.2
            try:
                with s.Store({str(tmp_path)!r}).looks_locked():
                    print("got it")
            except Exception as exc:
                print(exc)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert "another verify holds the look log" in out
        ctx, _ = looks.context(store, initiative(), "tps", 0.95, 3600.0, "b1", Q)
        store.append_looks([keyed(ctx.number)])
    ctx, _ = looks.context(store, initiative(), "tps", 0.95, 3600.0, "b1", Q)
    assert ctx.number == 2
