"""``baseline promote`` only takes a verdict judged with the spec's guards: a verify with
--no-guards, a guard without a baseline or without data is refused unless an override
reason is given, which the initiative, the ledger (text and Markdown) and the report keep.
The verdict cap for a guard that could not be evaluated is in test_verify_guard_rules."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml
from click.testing import CliRunner

from obsctl.baselining.practice.ledger import build_ledger
from obsctl.baselining.promote import promote, unjudged_guards
from obsctl.baselining.report import render_markdown
from obsctl.baselining.store import Store
from obsctl.baselining.text.present_ledger import ledger_lines, ledger_markdown
from obsctl.cli import cli
from obsctl.errors import StoreError, UsageError
from obsctl.records import GuardResult, Initiative, Statistics, VerificationResult, Window
from obsctl.spec import load_spec
from support.store_records import T0, make_baseline

CLASS = "embed-online"
SIGNALS = [
    {"name": "tokens_per_second", "category": "throughput", "query": "sum(rate(obsctl_tokens_total{$selector}[1m]))",
     "unit": "tokens/s", "direction": "higher_is_better"},
    {"name": "answer_quality", "category": "quality", "query": "avg(obsctl_quality_ratio{$selector})",
     "unit": "ratio", "direction": "higher_is_better"},
    {"name": "usd_per_million_tokens", "category": "cost", "query": "avg(obsctl_usd_per_million_tokens{$selector})",
     "unit": "USD", "direction": "lower_is_better"},
]
HOUR = dt.timedelta(hours=1)


def _stats(mean):
    return Statistics(sample_count=240, mean=mean, median=mean, p5=mean, p95=mean, stddev=1.0, batch_means=[mean] * 4)


def _guard(signal, category, verdict, base_id):
    return GuardResult(signal=signal, category=category, unit="ratio", direction="higher_is_better", baseline_id=base_id, query="q",
                       verdict=verdict, reason="window: 0 samples" if verdict == "NO_DATA" else "within margin",
                       window_stats=None if verdict == "NO_DATA" else _stats(1.0))


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "obsctl.yaml").write_text(yaml.safe_dump({
        "store": "store", "signals": SIGNALS,
        "workload_classes": [{"name": CLASS, "kind": "inference", "selector": {"workload": CLASS}}]}))
    spec = load_spec(tmp_path / "obsctl.yaml")
    store = Store(spec.store_path())
    base = store.save_baseline(make_baseline(CLASS, "tokens_per_second", 1000.0, T0))
    quality = store.save_baseline(make_baseline(CLASS, "answer_quality", 1.0, T0))
    return tmp_path, spec, store, base, quality


def verified(store, base, guards, evaluated=True, missing=(), verdict="IMPROVED", iid="batch-size-32"):
    result = VerificationResult(
        verdict=verdict, primary_verdict="IMPROVED", baseline_id=base.id, signal="tokens_per_second",
        window=Window(start=T0 + HOUR, end=T0 + 2 * HOUR, step_seconds=15), baseline_mean=1000.0, window_mean=1300.0,
        change_ratio=0.3, ci_low=0.25, ci_high=0.35, confidence=0.95, window_stats=_stats(1300.0), query=base.query,
        verified_at=T0 + 2 * HOUR, guards=guards, guards_evaluated=evaluated, guards_missing=list(missing))
    store.add_initiative(Initiative(id=iid, name="batch size 32", lever="batch-size", workload_class=CLASS,
                                    primary_signal="tokens_per_second", baseline_id=base.id, started_at=T0 + HOUR,
                                    status="verified", verifications=[result]))
    return result


def test_no_guards_verdict_is_refused_naming_the_guards_and_the_override(setup):
    _, spec, store, base, _ = setup
    verified(store, base, [], evaluated=False)
    with pytest.raises(StoreError) as err:
        promote(spec, store, "batch-size-32")
    text = str(err.value)
    assert "not judged with the spec's guards (verified with --no-guards (answer_quality, usd_per_million_tokens not judged))" in text
    assert "--override-reason TEXT" in text
    assert store.initiative("batch-size-32").status == "verified"
    assert store.current_baseline(CLASS, "tokens_per_second").id == base.id


def test_guard_without_baseline_or_data_is_a_gap(setup):
    _, spec, store, base, quality = setup
    # The cost guard has no baseline (verify recorded it missing), the quality guard had no data.
    result = verified(store, base, [_guard("answer_quality", "quality", "NO_DATA", quality.id)], missing=["usd_per_million_tokens"],
                      verdict="INCONCLUSIVE")
    init = store.initiative("batch-size-32")
    assert unjudged_guards(spec, init, result) == ["guard answer_quality NO_DATA (window: 0 samples)",
                                                   "guard usd_per_million_tokens not evaluated (no baseline)"]
    with pytest.raises(StoreError, match=r"latest verdict is INCONCLUSIVE; only an IMPROVED window can become the baseline \(guard "
                                         r"answer_quality NO_DATA .*--override-reason TEXT"):
        promote(spec, store, "batch-size-32")


def test_all_guards_judged_promotes_without_override(setup):
    _, spec, store, base, quality = setup
    cost = store.save_baseline(make_baseline(CLASS, "usd_per_million_tokens", 2.0, T0))
    verified(store, base, [_guard("answer_quality", "quality", "NO_CHANGE", quality.id),
                           _guard("usd_per_million_tokens", "cost", "NO_CHANGE", cost.id)])
    initiative, stored = promote(spec, store, "batch-size-32")
    assert initiative.status == "promoted" and initiative.promote_override == ""
    assert [b.signal for b in stored] == ["tokens_per_second", "answer_quality", "usd_per_million_tokens"]


def test_override_reason_promotes_and_is_recorded_in_ledger_and_report(setup):
    _, spec, store, base, quality = setup
    result = verified(store, base, [_guard("answer_quality", "quality", "NO_CHANGE", quality.id)], missing=["usd_per_million_tokens"],
                      verdict="INCONCLUSIVE")
    with pytest.raises(UsageError, match="must not be empty"):
        promote(spec, store, "batch-size-32", override_reason="  ")
    with pytest.raises(UsageError, match="control character"):
        promote(spec, store, "batch-size-32", override_reason="ok\n# forged heading")
    initiative, stored = promote(spec, store, "batch-size-32", override_reason="cost series | not *scraped* yet")
    expected = "cost series | not *scraped* yet (unjudged: guard usd_per_million_tokens not evaluated (no baseline))"
    assert initiative.status == "promoted" and initiative.promote_override == expected
    assert store.initiative("batch-size-32").promote_override == expected
    assert [b.signal for b in stored] == ["tokens_per_second", "answer_quality"]

    ledger = build_ledger(spec, store)
    assert ledger.entries[0].promote_override == expected
    assert f"  promoted without every guard judged: {expected}" in ledger_lines(ledger)
    assert "(promoted without every guard judged: cost series \\| not \\*scraped\\* yet (unjudged:" in ledger_markdown(ledger)
    report = render_markdown(store.initiative("batch-size-32"), base, result, "f.png")
    assert "- Promoted without every guard judged: cost series \\| not \\*scraped\\* yet (unjudged:" in report
    assert "| `usd_per_million_tokens` | | n/a | n/a | n/a | n/a | **NOT EVALUATED** (no baseline) |" in report


def test_override_never_lifts_a_regression(setup):
    _, spec, store, base, quality = setup
    verified(store, base, [_guard("answer_quality", "quality", "REGRESSED", quality.id)], missing=["usd_per_million_tokens"],
             verdict="REGRESSED")
    with pytest.raises(StoreError, match="latest verdict is REGRESSED; only an IMPROVED window can become the baseline$"):
        promote(spec, store, "batch-size-32", override_reason="ship it")


def test_cli_override_flag_and_exit_codes(setup):
    path, _, store, base, _ = setup
    verified(store, base, [], evaluated=False)
    spec_path = str(path / "obsctl.yaml")
    refused = CliRunner().invoke(cli, ["baseline", "promote", "--spec", spec_path, "--initiative", "batch-size-32"])
    assert refused.exit_code == 1 and "verified with --no-guards" in refused.output and "Traceback" not in refused.output
    empty = CliRunner().invoke(cli, ["baseline", "promote", "--spec", spec_path, "--initiative", "batch-size-32", "--override-reason", ""])
    assert empty.exit_code == 2 and "--override-reason must not be empty" in empty.output
    done = CliRunner().invoke(cli, ["baseline", "promote", "--spec", spec_path, "--initiative", "batch-size-32",
                                    "--override-reason", "guards verified by hand", "-o", "json"])
    assert done.exit_code == 0, done.output
    assert '"override": "guards verified by hand (unjudged: verified with --no-guards' in done.output


def test_the_report_summarises_the_population_and_lists_it_below(setup):
    from obsctl.records import Population

    _, _, store, base, _ = setup
    sets = [{"__name__": "vllm:e2e_request_latency_seconds_bucket", "instance": f"r{r}", "le": str(le)} for r in (1, 2) for le in range(12)]
    result = verified(store, base, [], evaluated=False).model_copy(update={"population": Population(series_count=24, label_sets=sets)})
    text = render_markdown(store.initiative("batch-size-32"), base, result, "f.png")
    row = next(line for line in text.splitlines() if line.startswith("| population |"))
    assert row == "| population | 1 series (listed under [Input series](#input-series)) | 2 replicas (instance), 24 series (listed under [Input series](#input-series)) |"
    assert "Verification window: 24 series" in text
    assert text.count("- {\\_\\_name\\_\\_=\"vllm:e2e\\_request\\_latency\\_seconds\\_bucket\", instance=\"r2\"") == 12
