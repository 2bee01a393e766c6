"""Pure helpers of the loop: durations and instants, range-query chunking, selector
extraction, verification windows and the verdict line."""

from __future__ import annotations

import datetime as dt

import pytest

from obsctl.baselining.measure.window import selectors_of
from obsctl.baselining.store import Store
from obsctl.baselining.text.present import verdict_line
from obsctl.baselining.verify import VERDICT_EXIT_CODES, resolve_initiative, verification_window
from obsctl.durations import parse_duration
from obsctl.errors import StoreError, UsageError
from obsctl.promapi import plan_chunks
from obsctl.records import Initiative, VerificationResult, Window
from obsctl.timeutil import align_down, parse_instant

UTC = dt.UTC


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15), ("1h30m", 5400), ("7d", 604800), ("500ms", 0.5), ("1w", 604800)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1 h", "h", "10", "0s", "-5m"])
def test_parse_duration_rejects(text):
    with pytest.raises(UsageError, match="--window"):
        parse_duration(text, "--window")


def test_parse_instant():
    now = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_instant("now", now=now) == now
    assert parse_instant("2026-01-31T12:00:00Z") == dt.datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_instant("2026-01-31T13:00:00+01:00") == dt.datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_instant("1769860800") == dt.datetime(2026, 1, 31, 12, tzinfo=UTC)
    with pytest.raises(UsageError, match="--end"):
        parse_instant("yesterday", "--end")
    assert align_down(dt.datetime(2026, 1, 1, 0, 0, 29, tzinfo=UTC), 15) == dt.datetime(2026, 1, 1, 0, 0, 15, tzinfo=UTC)


def test_plan_chunks_cover_every_point_once():
    chunks = plan_chunks(0, 30000, 1, max_points=11000)
    assert chunks == [(0, 10999), (11000, 21999), (22000, 30000)]
    points = [t for a, b in chunks for t in range(int(a), int(b) + 1)]
    assert points == list(range(30001))
    assert plan_chunks(0, 100, 15) == [(0, 90)]
    assert plan_chunks(10, 5, 1) == []


def test_selectors_of():
    q = 'histogram_quantile(0.95, sum by (le) (rate(obsctl_queue_wait_seconds_bucket{job="a",x="}{"}[5m])))'
    assert selectors_of(q) == ['obsctl_queue_wait_seconds_bucket{job="a",x="}{"}']
    q2 = 'sum(a{j="1"} * on(uuid) group_left() b_info{c="2"}) / count(b_info{c="2"})'
    assert selectors_of(q2) == ['a{j="1"}', 'b_info{c="2"}']


def _initiative(started):
    return Initiative(id="i", name="i", lever="batch-size", workload_class="c", primary_signal="s", baseline_id="b", started_at=started)


def test_verification_window_defaults_and_cap():
    now = dt.datetime(2026, 1, 1, 12, 0, 7, tzinfo=UTC)
    end = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    recent = _initiative(now - dt.timedelta(minutes=20))
    assert verification_window(recent, 15, "1h", None, None, now) == (recent.started_at, end)
    old = _initiative(now - dt.timedelta(days=2))
    assert verification_window(old, 15, "3d", None, None, now) == (old.started_at, end)  # longer than since the start: cumulative
    # A window starting after the change is not a look on its sequence (baselining/looks.py).
    with pytest.raises(UsageError, match=r"^--window 1h starts the window at 2026-01-01T11:00:00Z, after the initiative's start"):
        verification_window(old, 15, "1h", None, None, now)
    with pytest.raises(UsageError, match=r"^--start 2026-01-01T09:00:00Z starts the window .* Drop --start"):
        verification_window(old, 15, "1h", dt.datetime(2026, 1, 1, 9, tzinfo=UTC), None, now)
    with pytest.raises(UsageError, match="empty"):
        verification_window(_initiative(now + dt.timedelta(hours=1)), 15, "1h", None, None, now, allow_before_start=True)
    with pytest.raises(UsageError, match="--end .* is not after the initiative's start"):
        verification_window(_initiative(now + dt.timedelta(hours=1)), 15, "1h", None, None, now)


def test_verification_window_before_initiative_start_refused():
    # A window starting before started_at measures the old state as the effect.
    now = dt.datetime(2026, 1, 1, 12, 0, 7, tzinfo=UTC)
    started = dt.datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    early = dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    with pytest.raises(UsageError, match=r"--start 2026-01-01T10:00:00Z is before the initiative's start 2026-01-01T11:00:00Z"):
        verification_window(_initiative(started), 15, "1h", early, None, now)
    with pytest.raises(UsageError, match="--end 2026-01-01T10:30:00Z is not after"):
        verification_window(_initiative(started), 15, "1h", early, dt.datetime(2026, 1, 1, 10, 30, tzinfo=UTC), now)
    assert verification_window(_initiative(started), 15, "1h", early, None, now, allow_before_start=True)[0] == early
    # Starting exactly at started_at is fine.
    assert verification_window(_initiative(started), 15, "1h", started, None, now)[0] == started


def test_verification_window_point_cap_and_overflow():
    # --start 0 or a huge --window must be refused, not hang or overflow.
    now = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    with pytest.raises(UsageError, match=r"--start: too long: .* more than the maximum of 1,000,000"):
        verification_window(_initiative(epoch), 15, "1h", epoch, None, now)
    with pytest.raises(UsageError, match="--window: too long"):
        verification_window(_initiative(epoch), 15, "60y", None, None, now)
    with pytest.raises(UsageError, match="--window: '99999999999999y' is too long"):
        verification_window(_initiative(epoch), 15, "99999999999999y", None, None, now)
    # 1,000,000 points is the documented maximum: exactly that many is accepted.
    start = now - dt.timedelta(seconds=15 * 1_000_000)
    assert verification_window(_initiative(start), 15, "1h", start, None, now) == (start, now)


@pytest.mark.parametrize("text", ["inf", "-inf", "1e20", "-1e15", "0001-01-01T00:30:00Z", "9999-12-31T23:59:59-05:00", "-1"])
def test_parse_instant_out_of_range(text):
    with pytest.raises(UsageError, match=r"^--end: .* is out of range"):
        parse_instant(text, "--end")


def test_parse_instant_nan_and_edges():
    with pytest.raises(UsageError, match="--end: 'nan' is not a time"):
        parse_instant("nan", "--end")
    assert parse_instant("0") == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_instant("9999-12-31T23:59:59Z").year == 9999


def test_verdict_line_and_exit_codes():
    w = Window(start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), step_seconds=15)
    r = VerificationResult(verdict="IMPROVED", primary_verdict="IMPROVED", baseline_id="b", signal="tokens_per_second", window=w, baseline_mean=2410.2,
                           window_mean=7673.4, change_ratio=2.184, ci_low=2.051, ci_high=2.319, confidence=0.95,
                           verified_at=w.end)
    assert verdict_line(r, "tokens/s") == (
        "IMPROVED: tokens_per_second +218.4 % (95 % CI +205.1 % .. +231.9 %), baseline 2,410 -> window 7,673 tokens/s; alerts fired: none"
    )
    assert VERDICT_EXIT_CODES == {"IMPROVED": 0, "NO_CHANGE": 10, "INCONCLUSIVE": 11, "REGRESSED": 12, "NO_DATA": 13}
    assert len(set(VERDICT_EXIT_CODES.values())) == 5


def _guard_store(tmp_path, categories):
    # A real store with one baseline per signal of the class (values irrelevant here).
    import yaml

    from obsctl.baselining.statistics import summary as stats
    from obsctl.baselining.store import Store
    from obsctl.records import Baseline, Population
    from obsctl.spec import load_spec

    signals = [{"name": name, "category": cat, "query": "sum(x{$selector})", "unit": "u", "direction": "higher_is_better"}
               for name, cat in categories.items()]
    path = tmp_path / "obsctl.yaml"
    path.write_text(yaml.safe_dump({"workload_classes": [{"name": "a", "kind": "inference", "selector": {"job": "a"}}], "signals": signals}))
    spec = load_spec(path)
    store = Store(tmp_path / "store")
    w = Window(start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), step_seconds=15)
    for name in categories:
        store.save_baseline(Baseline(id=f"a.{name}.1", workload_class="a", signal=name, unit="u", direction="higher_is_better", query="q",
                                     window=w, population=Population(series_count=1), stats=stats.summarize([1.0, 2.0, 3.0, 4.0], 4),
                                     created_at=w.end), make_current=True)
    initiative = Initiative(id="i", name="i", lever="batch-size", workload_class="a", primary_signal="tps", baseline_id="a.tps.1",
                            started_at=w.end)
    return spec, store, initiative


def test_guards_default_to_quality_and_cost_and_can_be_chosen(tmp_path):
    from obsctl.baselining.guards import guard_baselines

    cats = {"tps": "throughput", "q": "quality", "usd": "cost", "util": "utilization", "lat": "saturation"}
    spec, store, initiative = _guard_store(tmp_path, cats)
    assert [b.signal for b in guard_baselines(spec, store, initiative)] == ["q", "usd"]
    chosen = spec.model_copy(update={"verification": spec.verification.model_copy(update={"guards": ["saturation", "util"]})})
    assert [b.signal for b in guard_baselines(chosen, store, initiative)] == ["lat", "util"]


def test_no_open_initiative_names_a_store_that_does_not_exist(tmp_path):
    """A mistyped spec ``store`` read as "no open initiative" alone: the missing folder is named."""
    missing = tmp_path / "no-such-store"
    with pytest.raises(StoreError) as info:
        resolve_initiative(Store(missing), None, "steady")
    assert str(info.value) == ("workload class 'steady' has no open initiative (start one: obsctl initiative start); "
                               f"the store {missing} does not exist (check the spec's store)")
    assert not missing.exists()
    (tmp_path / "store").mkdir()
    with pytest.raises(StoreError) as info:
        resolve_initiative(Store(tmp_path / "store"), None, "steady")
    assert "does not exist" not in str(info.value)
