"""The ledger's USD/month figures against a real Prometheus holding the class's cost
series (backfilled with promtool): the spend over each initiative's baseline window and
verification window, known answers computed here from the values written.

Cost (USD/hour) of embed-online: 2.0 until T0+30m, 1.5 until T0+2h30m, then 1.2; the
windows (support.ledger_store) are T0-1h..T0 (origin), T0+1h..T0+2h, T0+3h..T0+4h and
T0+5h..T0+6h, each inside one constant stretch.
"""

from __future__ import annotations

import pytest
import yaml

from obsctl.baselining.practice.ledger import HOURS_PER_MONTH, build_ledger
from obsctl.baselining.store import Store
from obsctl.promapi import PrometheusClient
from obsctl.rules.canonical import COST_USD_PER_HOUR
from obsctl.spec import load_spec
from support import ledger_store as L
from support.prometheus import served_history
from support.store_records import T0

STEP = 15


def _cost(ts: float) -> float:
    offset = ts - T0.timestamp()
    return 2.0 if offset < 1800 else 1.5 if offset < 9000 else 1.2


def _history() -> str:
    start, end = int(T0.timestamp()) - 2 * 3600, int(T0.timestamp()) + 7 * 3600
    lines = [f'{COST_USD_PER_HOUR}{{workload_class="{L.CLASS}"}} {_cost(ts)!r} {ts}' for ts in range(start, end + 1, STEP)]
    return "\n".join(lines + ["# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    with served_history(tmp_path_factory.mktemp("ledger-live"), _history()) as served:
        yield served


def test_spend_change_per_initiative(prom, tmp_path):
    spec_data = {"prometheus": {"url": prom.url}, "store": "store",
                 "workload_classes": [{"name": L.CLASS, "kind": "inference", "selector": {"workload": L.CLASS}}],
                 "signals": [{"name": L.SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                              "unit": "tokens/s", "direction": "higher_is_better"}]}
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(spec_data))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    L.build(store, spec)
    ledger = build_ledger(spec, store, PrometheusClient.from_spec(spec))
    got = {e.id: (e.usd_per_month_before, e.usd_per_month_after, e.usd_per_month_change) for e in ledger.entries}
    expected = {"batch-size-32": (2.0, 1.5), "scheduler-tweak": (1.5, 1.2), "int8-weights": (1.2, 1.2)}
    for iid, (before, after) in expected.items():
        b, a, change = got[iid]
        assert b == pytest.approx(before * HOURS_PER_MONTH, rel=1e-9) and a == pytest.approx(after * HOURS_PER_MONTH, rel=1e-9)
        assert change == pytest.approx((after - before) * HOURS_PER_MONTH, rel=1e-9, abs=1e-9)
    assert ledger.notes == []
