"""``obsctl verify`` against a Prometheus answering every query with a 50 MB matrix of
per-pod series (a signal query that forgot its ``sum()``): one ``obsctl: error:`` line
naming the series the query returns and the ``sum()`` it needs (exit 2), not "cannot reach
Prometheus", with the spec's short deadlines (1 s a request, 2 s in all) that reading the
whole matrix missed; the store is untouched."""

from __future__ import annotations

from click.testing import CliRunner

from obsctl.baselining.cli import verify
from support.faultkit import seed_store, tree_digest, write_fault_spec
from support.matrix_flood import Matrix


def test_verify_names_a_query_that_forgot_its_sum(tmp_path, history, raw_server) -> None:
    (tmp_path / "seed").mkdir()
    store = seed_store(tmp_path / "seed", history, write_fault_spec)
    before = tree_digest(store)
    matrix = Matrix(content_length=False)
    spec = write_fault_spec(tmp_path / "obsctl.yaml", raw_server(matrix).url, store)
    result = CliRunner().invoke(verify, ["--spec", str(spec), "--class", "steady", "--end", history.iso(2)])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("obsctl: error: steady/tokens_per_second: the query returns at least "), lines
    assert "{'pod': 'chat-00000', 'job': 'vllm'}" in lines[0] and "aggregate with sum(...)" in lines[0]
    assert "cannot reach" not in result.output and "Traceback" not in result.output
    assert tree_digest(store) == before
