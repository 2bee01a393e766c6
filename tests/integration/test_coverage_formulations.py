"""The coverage queries (baselining/measure/coverage.py) against the previous formulation
and against answers computed here from the written sample times, on a real Prometheus
serving backfilled history (promtool create-blocks-from openmetrics).

The previous formulation (kept here as the reference, :func:`old_coverage_query` and
:func:`old_summary_query`) read the count in ``(t - step, t]`` with one window of one step
(which Prometheus 2.42 re-seeks at every step), always sent the push legs, and read the
population's minimum and maximum with two subqueries. The current one must give the same
legs (gap points, push times, real samples, population) and so the same judgement.

History (two hours, own to this module; times in seconds from ``t0``, sample times at
arbitrary milliseconds where it matters):

- ``steady``: every 15 s on the grid, with single missed scrapes and a 10-minute hole;
- ``stops``: every 15 s at a 7.5 s phase, stops at 1 h 30 m;
- ``restart``: pod ``a`` (15 s, phase 3 s) until 50 m, pod ``b`` from 52 m, pod ``c``
  from 80 m to 95 m overlapping ``b``: a population change with a 2-minute hole;
- ``slow``: every 30 s at a 1 ms phase (read at 15 s: a gap at every other point),
  with samples exactly one step apart and one millisecond off a grid point;
- ``irregular``: bursts (several samples within one step) and silences, as a
  remote-written or backfilled series may have;
- ``pushed``: a Pushgateway group scraped every 15 s, pushing every 60 s until 1 h 15 m,
  next to a scraped series of the same signal (``mixed``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from obsctl.baselining.measure import coverage as cov
from obsctl.promapi import PrometheusClient
from support.prometheus import served_history

STEP = 15.0
HOUR = 3600
METRIC = "obsctl_form_value"
#: The history ends 10 minutes before this fixed time (2026-12-01T06:40:00Z), not the wall clock.
HISTORY_NOW = 1_796_107_200
LOOKBACK = 300.0


def old_coverage_query(selectors: list[str], step: float) -> str:
    """The previous range query: one window of one step per grid point, push legs always."""
    legs = []
    for i, sel in enumerate(selectors):
        legs += [
            cov._leg(f"vector(1) unless sum(count_over_time({sel}[{cov._range(step)}]) {cov.SCRAPED})", i, "gap"),
            cov._leg(f"max(max by (job, instance) (push_time_seconds) and on(job, instance) {sel})", i, "push"),
        ]
    return " or ".join(legs)


def old_summary_query(selectors: list[str], window: float, step: float) -> str:
    """The previous instant query: the population's minimum and maximum as two subqueries."""
    w, legs = cov._range(window), []
    for i, sel in enumerate(selectors):
        legs += [
            cov._leg(f"sum(count_over_time({sel}[{w}]) {cov.SCRAPED})", i, "real"),
            cov._leg(f"count({sel} offset {cov._range(window + 0.001)})", i, "first"),
            cov._leg(f"count({sel})", i, "last"),
            cov._leg(f"min_over_time(count({sel})[{w}:{cov._range(step + 0.001)}])", i, "min"),
            cov._leg(f"max_over_time(count({sel})[{w}:{cov._range(step + 0.001)}])", i, "max"),
        ]
    return " or ".join(legs)


def old_legs(client: PrometheusClient, selectors: list[str], start: float, end: float, step: float) -> cov.Legs:
    legs = cov.Legs()
    cov.Legs.parse(client.query_range(old_coverage_query(selectors, step), start - cov.lead(step) + step, end, step), legs)
    cov.Legs.parse(client.query(old_summary_query(selectors, end - start, step), end), legs)
    return legs


class Hist:
    """Sample times (unix seconds, ms resolution) per (class, pod), and push times."""

    def __init__(self, now: float):
        self.end = int(math.floor((now - 600) / STEP) * STEP)
        self.t0 = self.end - 2 * HOUR
        self.url = ""
        rng = np.random.default_rng(11)
        t0, end = self.t0, self.end
        grid = np.arange(t0, end + 1, STEP)
        missed = {t0 + 1800 + 15 * k for k in (0, 3, 4, 9)}
        self.scraped: dict[str, dict[str, list[float]]] = {
            "steady": {"p": [float(t) for t in grid if t not in missed and not t0 + 3000 < t <= t0 + 3600]},
            "stops": {"p": [t + 7.5 for t in grid if t + 7.5 <= t0 + 5400]},
            "restart": {
                "a": [t + 3.0 for t in grid if t + 3.0 <= t0 + 3000],
                "b": [t + 3.0 for t in grid if t + 3.0 >= t0 + 3120],
                "c": [t + 9.0 for t in grid if t0 + 4800 <= t + 9.0 <= t0 + 5700],
            },
            "slow": {"p": [t + 0.001 for t in np.arange(t0, end + 1, 30.0)] + [t0 + 4500.0, t0 + 4515.0]},
        }
        bursts = []
        for centre in rng.uniform(t0, end, 120):
            bursts += list(np.round(centre + rng.uniform(0, 14, 4), 3))
        self.scraped["irregular"] = {"p": sorted({float(t) for t in bursts if t0 <= t <= end})}
        self.scraped["mixed"] = {"p": [float(t) for t in grid if not t0 + 4200 < t <= t0 + 4800]}
        self.pushes = [float(t) for t in grid if t <= t0 + 4500 and (t - t0) % 60 == 0]
        self.push_scrapes = [float(t) for t in grid]

    def openmetrics(self) -> str:
        rows = []
        for cls, pods in self.scraped.items():
            for pod, times in pods.items():
                rows += [(t, f'{METRIC}{{job="form",instance="{pod}",workload="{cls}"}} {k % 7 + 1}') for k, t in enumerate(sorted(times))]
        for t in self.push_scrapes:
            last = max(p for p in self.pushes if p <= t)
            rows.append((t, f'{METRIC}{{job="pushjob",instance="",workload="mixed"}} {last % 97}'))
            rows.append((t, f'push_time_seconds{{job="pushjob",instance=""}} {last}'))
        lines = [f"# TYPE {METRIC} gauge"] + [f"{text} {t:.3f}" for t, text in sorted(rows) if text.startswith(METRIC)]
        lines += ["# TYPE push_time_seconds gauge"] + [f"{text} {t:.3f}" for t, text in sorted(rows) if text.startswith("push_time")]
        return "\n".join(lines + ["# EOF"]) + "\n"

    def expected_gaps(self, cls: str, start: float, end: float) -> set[float]:
        """Coverage grid points with no scraped sample of ``cls`` in ``(t - step, t]``."""
        times = np.array(sorted(t for pod in self.scraped[cls].values() for t in pod))
        first = start - cov.lead(STEP) + STEP
        points = first + STEP * np.arange(0, round((end - first) / STEP) + 1)
        return {float(t) for t in points if not ((times > t - STEP) & (times <= t)).any()}

    def expected_population(self, cls: str, start: float, end: float) -> tuple[int, int]:
        """Minimum and maximum over the window's grid of the series with a sample in the
        lookback ``(t - 300 s, t]`` (no sample lies exactly 300 s before a grid point)."""
        counts = []
        for t in start + STEP * np.arange(1, round((end - start) / STEP) + 1):
            n = sum(any(t - LOOKBACK < s <= t for s in pod) for pod in self.scraped[cls].values())
            if cls == "mixed":
                n += any(t - LOOKBACK < s <= t for s in self.push_scrapes)
            if n:
                counts.append(n)
        return min(counts), max(counts)


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    h = Hist(HISTORY_NOW)
    with served_history(tmp_path_factory.mktemp("coverage-formulations"), h.openmetrics()) as served:
        h.url = served.url
        yield h


WINDOWS = [(0.5, 2.0), (1.0, 2.0), (0.25, 1.0)]


@pytest.mark.parametrize("cls", ["steady", "stops", "restart", "slow", "irregular", "mixed"])
@pytest.mark.parametrize("hours", WINDOWS, ids=lambda w: f"{w[0]}h-{w[1]}h")
def test_current_and_previous_formulations_give_the_written_gaps_and_the_same_judgement(hist, cls, hours):
    client = PrometheusClient(hist.url, timeout_seconds=30)
    selectors = [f'{METRIC}{{workload="{cls}"}}']
    start, end = hist.t0 + hours[0] * HOUR, hist.t0 + hours[1] * HOUR
    new = cov.read_legs(client, selectors, start, end, STEP)
    old = old_legs(client, selectors, start, end, STEP)
    expected = hist.expected_gaps(cls, start, end)
    assert set(new.per_selector[0].get("gap", {})) == expected
    assert set(old.per_selector[0].get("gap", {})) == expected
    assert new.per_selector == old.per_selector
    lowest, highest = hist.expected_population(cls, start, end)
    assert (new.per_selector[0]["min"], new.per_selector[0]["max"]) == ({end: float(lowest)}, {end: float(highest)})
    judged_new = cov.judge(new, 1, start, end, STEP)
    judged_old = cov.judge(old, 1, start, end, STEP)
    assert judged_new.coverage == judged_old.coverage
    assert np.array_equal(judged_new.mask, judged_old.mask)


def test_push_legs_are_asked_only_when_a_pushgateway_group_is_in_reach(hist):
    client = PrometheusClient(hist.url, timeout_seconds=30)
    sel = f'{METRIC}{{workload="mixed"}}'
    start, end = hist.t0 + HOUR, hist.t0 + 2 * HOUR
    legs = cov.read_legs(client, [sel], start, end, STEP)
    pushes = legs.per_selector[0]["push"]
    # The latest push at or before each grid point (pushes every 60 s until 1 h 15 m).
    assert pushes == {t: max(p for p in hist.pushes if p <= t) for t in pushes}
    assert max(pushes.values()) == hist.t0 + 4500
    judged = cov.judge(legs, 1, start, end, STEP).coverage
    assert judged.method == "push_time+scrape"
    # Where no push_time_seconds series is in reach the summary says so and no push leg is sent.
    summary = client.query(cov.summary_query([sel], 600, STEP), hist.t0 - 3600)
    assert "0:pushgroups" not in {s.metric.get(cov.LEG_LABEL) for s in summary}
    assert "push_time_seconds" not in cov.coverage_query([sel], STEP, pushed=False)


def test_gap_windows_overlap_from_one_step_to_the_next():
    # The property the cost rests on: both windows reach back more than two steps, so
    # every window starts before the previous step's end (module doc of coverage.py).
    expr = cov.gap_expr('x{job="a"}', 60.0, pushed=False)
    assert "[419999ms]" in expr and "[359999ms] offset 60000ms" in expr and "push_time_seconds" not in expr


# --- the per-step count from one overlapping range (no Pushgateway group in reach) ------------


class ScrapedHist(Hist):
    """The same history without the Pushgateway group: no ``push_time_seconds`` is in
    reach, so :func:`cov.read_legs` reads the per-step counts from one ``count`` range and
    its seed (the recursion), where the history above takes the two-window form."""

    def openmetrics(self) -> str:
        rows = []
        for cls, pods in self.scraped.items():
            for pod, times in pods.items():
                rows += [(t, f'{METRIC}{{job="form",instance="{pod}",workload="{cls}"}} {k % 7 + 1}') for k, t in enumerate(sorted(times))]
        return "\n".join([f"# TYPE {METRIC} gauge"] + [f"{text} {t:.3f}" for t, text in sorted(rows)] + ["# EOF"]) + "\n"

    def expected_gaps_at(self, classes: list[str], start: float, end: float, step: float) -> set[float]:
        """Coverage grid points (at ``step``) with no sample of any of ``classes`` in ``(t - step, t]``."""
        times = np.array(sorted(t for cls in classes for pod in self.scraped[cls].values() for t in pod))
        first = start - cov.lead(step) + step
        points = first + step * np.arange(0, round((end - first) / step) + 1)
        return {float(t) for t in points if not ((times > t - step) & (times <= t)).any()}


class CountingClient(PrometheusClient):
    """The real client, counting the range and instant requests it sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []

    def query(self, promql, time=None):
        self.sent.append(promql)
        return super().query(promql, time)

    def query_range(self, promql, start, end, step_seconds):
        self.sent.append(promql)
        return super().query_range(promql, start, end, step_seconds)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    h = ScrapedHist(HISTORY_NOW)
    with served_history(tmp_path_factory.mktemp("coverage-recursion"), h.openmetrics()) as served:
        h.url = served.url
        yield h


def two_window_legs(client: PrometheusClient, selectors: list[str], start: float, end: float, step: float) -> cov.Legs:
    """The two-window form (``count(t - W, t] - count(t - W, t - step]``) of the same window."""
    legs = cov.Legs()
    cov.Legs.parse(client.query_range(cov.coverage_query(selectors, step, pushed=False), start - cov.lead(step) + step, end, step), legs)
    return legs


@pytest.mark.parametrize("shift", [0.0, 37.123], ids=["on-grid", "off-grid"])
@pytest.mark.parametrize("step", [15.0, 60.0])
@pytest.mark.parametrize("classes", [["steady"], ["stops"], ["restart"], ["slow"], ["irregular"], ["mixed"], ["steady", "slow"]],
                         ids=lambda c: "+".join(c))
@pytest.mark.parametrize("hours", WINDOWS, ids=lambda w: f"{w[0]}h-{w[1]}h")
def test_one_overlapping_range_and_the_recursion_give_the_written_gaps_of_every_formulation(scraped, classes, hours, step, shift):
    # "off-grid": window ends that are not multiples of the step (the count leg's subquery
    # then reads at a negative offset of the grid's phase).
    client = CountingClient(scraped.url, timeout_seconds=30)
    selectors = [f'{METRIC}{{workload="{c}"}}' for c in classes]
    start, end = scraped.t0 + hours[0] * HOUR + shift, scraped.t0 + hours[1] * HOUR + shift
    new = cov.read_legs(client, selectors, start, end, step)
    # The recursion's requests were sent (no two-window query, no push leg).
    assert sum("[" + cov._range(cov.window_steps(step) * step) + "]" in q for q in client.sent) == 1
    assert not any("offset" in q and "count_over_time" in q and cov.LEG_LABEL in q and ":gap" in q for q in client.sent)
    old = old_legs(client, selectors, start, end, step)
    two = two_window_legs(client, selectors, start, end, step)
    for i, cls in enumerate(classes):
        expected = scraped.expected_gaps_at([cls], start, end, step)
        assert set(new.per_selector[i].get("gap", {})) == expected
        assert new.per_selector[i].get("gap", {}) == old.per_selector[i].get("gap", {}) == two.per_selector.get(i, {}).get("gap", {})
    # Every leg but the push legs (the previous form always asked them; none answers here) is the same.
    assert new.per_selector == {i: {k: v for k, v in legs.items() if k != "push"} for i, legs in old.per_selector.items()}
    judged_new = cov.judge(new, len(selectors), start, end, step)
    judged_old = cov.judge(old, len(selectors), start, end, step)
    assert judged_new.coverage == judged_old.coverage
    assert np.array_equal(judged_new.mask, judged_old.mask)
    # Known to have no Pushgateway group in reach: the real samples come from the
    # per-step counts (no real leg asked), and every leg is the same.
    known = cov.LegCache()
    known.set_pushed((start, end, step), False)
    sent = len(client.sent)
    counted = cov.read_legs(client, selectors, start, end, step, cache=known)
    assert not any(":real" in q or "pushgroups" in q for q in client.sent[sent:])
    assert counted.per_selector == new.per_selector


def test_a_selector_shared_by_two_signals_is_read_once_with_the_same_legs(scraped):
    client = CountingClient(scraped.url, timeout_seconds=30)
    start, end = scraped.t0 + HOUR, scraped.t0 + 2 * HOUR
    shared, own = f'{METRIC}{{workload="restart"}}', f'{METRIC}{{workload="slow"}}'
    cache = cov.LegCache()
    first = cov.read_legs(client, [shared], start, end, STEP, cache=cache)
    sent_first = len(client.sent)
    second = cov.read_legs(client, [own, shared], start, end, STEP, cache=cache)
    # Only the new selector was asked for, and the shared one's legs are its own.
    assert all(own in q and shared not in q for q in client.sent[sent_first:])
    assert second.per_selector[1] == first.per_selector[0]
    alone = cov.read_legs(client, [own, shared], start, end, STEP)
    assert second.per_selector == alone.per_selector
    assert cov.judge(second, 2, start, end, STEP).coverage == cov.judge(alone, 2, start, end, STEP).coverage
    # All selectors known: no request at all.
    before = len(client.sent)
    again = cov.read_legs(client, [shared, own], start, end, STEP, cache=cache)
    assert len(client.sent) == before
    assert again.per_selector == {0: second.per_selector[1], 1: second.per_selector[0]}


@pytest.mark.parametrize("step", [15.0, 60.0])
@pytest.mark.parametrize("minutes", [(30, 120), (60, 120), (15, 60), (56, 75)], ids=lambda w: f"{w[0]}m-{w[1]}m")
def test_population_extremes_read_with_the_counts_are_the_written_ones(scraped, minutes, step):
    # On-grid windows without a Pushgateway group: no subquery of count(s) is sent; the
    # extremes come from count(s)'s changes beside the per-step counts. (56 m, 75 m]:
    # ``restart``'s pods a and b both present just before the window, b alone in it.
    classes = ["steady", "stops", "restart", "slow", "irregular"]
    client = CountingClient(scraped.url, timeout_seconds=30)
    selectors = [f'{METRIC}{{workload="{c}"}}' for c in classes]
    start, end = scraped.t0 + minutes[0] * 60, scraped.t0 + minutes[1] * 60
    assert cov.population_in_counts(start, end, step)
    legs = cov.read_legs(client, selectors, start, end, step)
    assert not any("max_over_time" in q for q in client.sent)
    assert any(":popchange" in q for q in client.sent)
    for i, cls in enumerate(classes):
        pods = scraped.scraped[cls].values()
        present = [n for t in start + step * np.arange(1, round((end - start) / step) + 1)
                   if (n := sum(any(t - LOOKBACK < s <= t for s in pod) for pod in pods))]
        got = legs.per_selector.get(i, {})
        if present:
            assert (got["min"], got["max"]) == ({end: float(min(present))}, {end: float(max(present))})
        else:
            assert "min" not in got and "max" not in got
    # Off the grid the summary's subquery reads them, as before.
    shifted = CountingClient(scraped.url, timeout_seconds=30)
    assert not cov.population_in_counts(start + 7.5, end + 7.5, step)
    cov.read_legs(shifted, selectors[:1], start + 7.5, end + 7.5, step)
    assert any("max_over_time" in q for q in shifted.sent) and not any(":popchange" in q for q in shifted.sent)
