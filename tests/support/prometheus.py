"""A real Prometheus (Debian package, 127.0.0.1, a free port) serving history backfilled
with ``promtool tsdb create-blocks-from openmetrics``, optionally evaluating rules.

:func:`served_history` is the one factory for it. With rules it returns only after a
barrier: the generated rules chain across groups (sources -> saturation, gpu -> cost ->
class cost, signals -> target gaps) and Prometheus evaluates each group on its own
ticker, so one recorded series existing says nothing about the others. The barrier
waits for ``depth + 1`` rounds, ``depth`` being the longest chain of evaluations the rule
files need (:func:`chain_depth`); a round ends when every group has started an
evaluation at least one group interval after the previous round ended (an evaluation's
query time lies at most one interval before its start), so in round ``k`` every rule
``k`` evaluations deep reads inputs that were complete in round ``k - 1``.

After the barrier, :attr:`Served.instant` is the one instant every query of the test
uses, read from the server (the end of the last round's evaluations, from
``lastEvaluation`` and ``evaluationTime``), never from the test's clock: every series
recorded at or before it is settled and stored (one more evaluation of every group has
finished past it), and history written into the future (``out_of_order_time_window``
lets the rule manager append at the wall clock below those blocks) keeps raw data under
it however long the tests run.

A scraped live test waits on :func:`scraped` instead: the instant of the first scrape of
every target past a change, read from ``up``'s own sample times.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from support.polling import wait_until
from support.servers import Prometheus, create_blocks_from_openmetrics

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass
class _BackfilledPrometheus(Prometheus):
    """Prometheus that accepts rule results below backfilled blocks reaching into the future."""

    def config(self) -> dict:
        return {**super().config(), "storage": {"tsdb": {"out_of_order_time_window": "3650d"}}}


@dataclass
class Served:
    """A running server: ``url``, and with rules the pinned query ``instant`` (unix seconds)."""

    url: str
    instant: float | None = None

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """Instant query at ``at`` (default :attr:`instant`); the result list."""
        when = self.instant if at is None else at
        assert when is not None, "no pinned instant: pass at="
        return _get(f"{self.url}/api/v1/query", {"query": expr, "time": when})

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        return _get(f"{self.url}/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step})

    def rule_groups(self) -> list[dict]:
        body = requests.get(f"{self.url}/api/v1/rules", timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]["groups"]


def _get(url: str, params: dict) -> list[dict]:
    resp = requests.get(url, params=params, timeout=10)
    body = resp.json()
    assert resp.status_code == 200 and body["status"] == "success", f"{params.get('query')}: {body}"
    return body["data"]["result"]


def chain_depth(rule_files: Iterable[Path]) -> int:
    """Evaluations the rules need until every rule has read settled inputs.

    A rule reading only raw series needs one; one reading a series recorded by an earlier
    rule of its own group needs as many as that rule (groups evaluate their rules in
    order), and one reading a series recorded in another group, or later in its own, one
    more. Names are matched as PromQL identifiers, so a label value spelling a recorded
    name over-counts, which only makes the wait longer.
    """
    rules = []  # (group index, rule index, output name, names read)
    for gi, group in enumerate(g for path in rule_files for g in (yaml.safe_load(Path(path).read_text()) or {}).get("groups", [])):
        for ri, rule in enumerate(group.get("rules", [])):
            rules.append((gi, ri, rule.get("record") or "ALERTS", set(_NAME.findall(rule["expr"]))))
    producers: dict[str, list[int]] = {}
    for i, (_, _, name, _) in enumerate(rules):
        producers.setdefault(name, []).append(i)
    depth = [1] * len(rules)
    for _ in range(len(rules) + 1):
        changed = False
        for i, (gi, ri, _, reads) in enumerate(rules):
            need = max([depth[p] + (0 if rules[p][0] == gi and rules[p][1] < ri else 1)
                        for name in reads for p in producers.get(name, ()) if p != i] or [1])
            if need > depth[i]:
                depth[i], changed = need, True
        if not changed:
            return max(depth, default=0)
    raise ValueError("the rules read each other in a cycle")


def _started(group: dict) -> float:
    """A group's lastEvaluation (start of its last completed evaluation) in unix seconds."""
    return unix_seconds(group["lastEvaluation"])


def unix_seconds(text: str) -> float:
    """An RFC 3339 time of the Prometheus or Alertmanager API (UTC, ``Z``, up to nanoseconds) in unix seconds."""
    whole, _, frac = text.rstrip("Z").partition(".")
    stamp = dt.datetime.fromisoformat(whole).replace(tzinfo=dt.UTC).timestamp()
    return stamp + float(f"0.{frac or 0}")


def settle(served: Served, rounds: int, data_present_at: float, settled_for: float = 0.0, timeout: float = 120.0) -> float:
    """Wait ``rounds`` barrier rounds (module docstring) from ``data_present_at``; the end of the last.

    A round ends when its evaluations have finished: the latest ``lastEvaluation`` plus
    ``evaluationTime`` of the groups once every group passed it, as the server reports
    them. The returned instant is that end of the last round, and it is returned only once
    every group has evaluated again past it, so no evaluation at or before it is still
    being written.

    With ``settled_for``, one more round starts that many seconds after the last: the
    recorded series then hold at least ``settled_for`` seconds of settled samples before
    the returned instant (a subquery stepping every 15 s needs one step inside them).
    """
    assert served.rule_groups(), "Prometheus loaded no rule groups"

    def passed(after: float, what: str) -> list[dict]:
        def groups() -> list[dict] | None:
            seen = served.rule_groups()
            return seen if all(_started(g) >= after + g["interval"] for g in seen) else None

        return wait_until(groups, timeout + settled_for, interval=0.05,
                          what=lambda: f"{what}: every rule group evaluated again "
                          f"({[(g['name'], g['lastEvaluation']) for g in served.rule_groups()][:5]} ...)")

    boundary = data_present_at
    for n in range(rounds + (1 if settled_for else 0)):
        if n == rounds:
            boundary += settled_for
        groups = passed(boundary, f"barrier round {n + 1}/{rounds}")
        boundary = max(_started(g) + g["evaluationTime"] for g in groups)
    passed(boundary, "every evaluation up to the pinned instant stored")
    return boundary


#: Prometheus moves a scrape's timestamp by up to 2 ms onto the target's interval grid.
SCRAPE_ALIGNMENT = 0.002


def _scrape_times(url: str) -> dict[tuple[str, str], list[float]]:
    """(job, instance) of every active target -> the times of its stored scrapes (``up``) of the last minute."""
    body = requests.get(f"{url}/api/v1/targets", params={"state": "active"}, timeout=10).json()
    assert body["status"] == "success", body
    targets = [(t["labels"]["job"], t["labels"]["instance"], t["lastScrape"]) for t in body["data"]["activeTargets"]]
    last = max((unix_seconds(when) for _, _, when in targets), default=0.0)
    if last <= 0:  # no target scraped yet (lastScrape is year 1)
        return {(job, instance): [] for job, instance, _ in targets}
    # Read at the latest scrape the server reports (not the test's clock); a scrape still
    # being written is seen at a later poll.
    rows = _get(f"{url}/api/v1/query", {"query": "up[1m]", "time": round(last + SCRAPE_ALIGNMENT, 3)})
    times = {(r["metric"]["job"], r["metric"]["instance"]): [float(t) for t, _ in r["values"]] for r in rows}
    return {(job, instance): times.get((job, instance), []) for job, instance, _ in targets}


def scraped(url: str, after: float = 0.0, timeout: float = 60.0) -> float:
    """Wait until every active target has a scrape stored that began after ``after``; the instant to query it at.

    The instant is the latest of the targets' first such scrapes, as Prometheus stores
    them (``up``'s sample times). It is returned once every target has a later scrape
    stored too, so every scrape at or before it is in the TSDB and a query there reads
    the same samples however often it is repeated. ``after`` is a lower bound (e.g. the
    test's clock after the change the scrape must see), never a query time.
    """
    def first_past() -> float | None:
        times = _scrape_times(url)
        firsts = [min((t for t in ts if t > after + SCRAPE_ALIGNMENT), default=None) for ts in times.values()]
        return max(firsts) if times and None not in firsts else None

    instant = wait_until(first_past, timeout, interval=0.05, what=lambda: f"a scrape of every target after {after}: {_scrape_times(url)}")
    wait_until(lambda: all(ts and max(ts) > instant for ts in _scrape_times(url).values()), timeout, interval=0.05,
               what=lambda: f"a scrape of every target after {instant}: {_scrape_times(url)}")
    return instant


@contextmanager
def served_history(workdir: Path, openmetrics: str | Path, *, rule_files: Iterable[Path] = (),
                   evaluation_interval: str = "1s", settled_for: float = 0.0) -> Iterator[Served]:
    """Backfill ``openmetrics`` (text or a file), start Prometheus on it and yield :class:`Served`.

    With ``rule_files`` the server evaluates them every ``evaluation_interval`` and the
    context is entered after the barrier (:func:`settle`, with ``settled_for``), with
    :attr:`Served.instant` set. The server is stopped on exit.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if isinstance(openmetrics, str):
        path = workdir / "history.om"
        path.write_text(openmetrics)
    else:
        path = openmetrics
    create_blocks_from_openmetrics(path, workdir / "data")
    rule_files = list(rule_files)
    prom = _BackfilledPrometheus(workdir / "prom", rule_files=rule_files, data_dir=workdir / "data",
                                 evaluation_interval=evaluation_interval)
    # A lower bound for the barrier, not a query time: every input is on disk before the
    # server starts, so an evaluation starting an interval after this reads all of it.
    data_present_at = time.time()
    try:
        prom.start()
        served = Served(prom.url)
        if rule_files:
            served.instant = settle(served, chain_depth(rule_files) + 1, data_present_at, settled_for)
        yield served
    finally:
        prom.stop()
