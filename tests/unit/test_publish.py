"""obsctl publish without a Pushgateway: the exposition from a store (support.ledger_store
plus an open initiative), the textfile, and one-line errors."""

from __future__ import annotations

import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from obsctl.baselining.store import Store
from obsctl.cli import cli
from obsctl.records import Initiative
from obsctl.spec import load_spec
from support import ledger_store as L
from support.store_records import T0

SPEC = {"store": "store", "cadence": "weekly",
        "workload_classes": [{"name": L.CLASS, "kind": "inference", "selector": {"workload": L.CLASS}}],
        "signals": [{"name": L.SIGNAL, "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
                     "unit": "tokens/s", "direction": "higher_is_better"}]}


def _samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_textfile_holds_the_store_state(tmp_path):
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    L.build(store, spec)
    store.add_initiative(Initiative(id="late", name="late", lever="scheduling", workload_class=L.CLASS, primary_signal=L.SIGNAL,
                                    baseline_id="x", started_at=T0, planned_window_seconds=7200))
    out = tmp_path / "obsctl.prom"
    result = CliRunner().invoke(cli, ["publish", "--spec", str(spec.path), "--no-review", "--textfile", str(out)])
    assert result.exit_code == 0, result.output
    got = _samples(out.read_text())
    current = store.current_baseline(L.CLASS, L.SIGNAL, samples=False)
    ident = (("signal", L.SIGNAL), ("workload_class", L.CLASS))
    # One age definition: from the window's end, as the review counts it (the promoted
    # baseline was created after its window ended, so the two differ here).
    assert current.created_at != current.window.end
    assert got[("obsctl_review_baseline_window_end_timestamp_seconds", ident)] == current.window.end.timestamp()
    assert got[("obsctl_review_baseline_max_age_seconds", ident)] > 0
    due = [(k, v) for k, v in got.items() if k[0] == "obsctl_review_initiative_due_timestamp_seconds"]
    assert due == [(("obsctl_review_initiative_due_timestamp_seconds", (("initiative", "late"), ("lever", "scheduling"),
                                                                         ("workload_class", L.CLASS))), T0.timestamp() + 7200)]
    promotes = sorted(dict(k[1])["initiative"] for k in got if k[0] == "obsctl_initiative_event_timestamp_seconds"
                      and dict(k[1])["event"] == "promote")
    assert promotes == ["batch-size-32", "scheduler-tweak"]


def test_errors_are_one_line(tmp_path):
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    runner = CliRunner()
    bad = runner.invoke(cli, ["publish", "--spec", str(tmp_path / "obsctl.yaml"), "--no-review", "--pushgateway", "ftp://x"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output and "--pushgateway" in bad.output
    down = runner.invoke(cli, ["publish", "--spec", str(tmp_path / "obsctl.yaml"), "--no-review", "--pushgateway", "http://127.0.0.1:9"])
    assert down.exit_code == 3 and "Pushgateway http://127.0.0.1:9: push failed" in down.output and "Traceback" not in down.output


def test_verdict_state_set_holds_each_verified_initiatives_last_verdict(tmp_path):
    """One series per verdict per verified initiative: 1 for the last look's verdict (the ledger
    store's table: two IMPROVED, one NO_CHANGE), 0 for the other four; no series for an
    initiative without a look."""
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    L.build(store, spec)
    store.add_initiative(Initiative(id="late", name="late", lever="scheduling", workload_class=L.CLASS, primary_signal=L.SIGNAL,
                                    baseline_id="x", started_at=T0, planned_window_seconds=7200))
    out = tmp_path / "obsctl.prom"
    result = CliRunner().invoke(cli, ["publish", "--spec", str(spec.path), "--no-review", "--textfile", str(out)])
    assert result.exit_code == 0, result.output
    states = {}
    for (name, labels), value in _samples(out.read_text()).items():
        if name == "obsctl_initiative_verdict":
            labels = dict(labels)
            assert labels["workload_class"] == L.CLASS
            states.setdefault(labels["initiative"], {})[labels["verdict"]] = value
    expected = {iid: verdict for iid, *_, verdict in L.PLAN}
    assert sorted(states) == sorted(expected)  # "late" has no look: no verdict
    for iid, verdict in expected.items():
        assert states[iid] == {v: (1.0 if v == verdict else 0.0)
                               for v in ("IMPROVED", "NO_CHANGE", "INCONCLUSIVE", "REGRESSED", "NO_DATA")}, iid


def test_textfile_target_must_be_a_prom_file_in_an_existing_folder(tmp_path):
    """A mistyped folder is not created, a name node_exporter would not read is refused, and a
    FIFO or a symbolic link is never replaced (exit 2, one line, nothing written)."""
    import os

    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump(SPEC))
    fifo, link, target = tmp_path / "fifo.prom", tmp_path / "link.prom", tmp_path / "target.prom"
    os.mkfifo(fifo)
    target.write_text("kept\n")
    link.symlink_to(target)
    for out, says in ((tmp_path / "nosuch" / "x.prom", "does not exist"), (tmp_path / "out.txt", "only *.prom"),
                      (fifo, "not a regular file"), (link, "not a regular file")):
        result = CliRunner().invoke(cli, ["publish", "--spec", str(tmp_path / "obsctl.yaml"), "--no-review", "--textfile", str(out)])
        assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output, (out, result.output)
    assert not (tmp_path / "nosuch").exists() and not (tmp_path / "out.txt").exists()
    assert fifo.is_fifo() and link.is_symlink() and target.read_text() == "kept\n"


def test_a_named_spec_keeps_its_fingerprint_when_it_gains_a_class_or_moves_its_store(tmp_path):
    """A team's scheduled publish keeps its group after the spec changes; two unnamed specs
    under one default instance still differ by their classes and store."""
    from obsctl.baselining.practice.publish import spec_fingerprint

    def fingerprint(**changes) -> str:
        doc = {**SPEC, **changes}
        path = tmp_path / "obsctl.yaml"
        path.write_text(yaml.safe_dump(doc))
        return spec_fingerprint(load_spec(path))

    more = SPEC["workload_classes"] + [{"name": "embed-batch", "kind": "inference", "selector": {"workload": "embed-batch"}}]
    named = fingerprint(name="team-a")
    assert fingerprint(name="team-a", workload_classes=more) == named
    assert fingerprint(name="team-a", store="elsewhere") == named
    assert fingerprint(name="team-b") != named
    assert fingerprint(workload_classes=more) != fingerprint()
    assert fingerprint(store="elsewhere") != fingerprint()
