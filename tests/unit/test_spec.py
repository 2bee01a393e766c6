"""Spec loading: the valid example loads; every kind of bad spec gives one readable
message with file, line, field and what is allowed, and exit code 2 from the CLI."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from obsctl.errors import EXIT_USAGE, SpecError
from obsctl.spec import escape_label_value, load_spec, promql_matchers

VALID = textwrap.dedent(
    """\
    workload_classes:
      - name: embed
        kind: inference
        selector: {job: w, workload: embed}
    signals:
      - name: tokens_per_second
        category: throughput
        query: sum(rate(obsctl_tokens_total{$selector}[1m]))
        unit: tokens/s
        direction: higher_is_better
    """
)


def write(tmp_path, text, name="obsctl.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def error_of(path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_example_spec_loads(example_spec_path):
    spec = load_spec(example_spec_path)
    assert [c.name for c in spec.workload_classes] == ["embed-online", "finetune-batch"]
    assert spec.signal("tokens_per_second").record_name == "workload_class:obsctl_tokens:rate1m"
    assert spec.query_for("tokens_per_second", "embed-online") == (
        'sum(rate(obsctl_tokens_total{job="obsctl-workload",workload="embed-online"}[1m]))'
    )


def test_defaults_and_store_relative_to_spec(tmp_path):
    spec = load_spec(write(tmp_path, VALID))
    assert spec.prometheus.url == "http://127.0.0.1:9090"
    assert spec.store_path() == tmp_path.resolve() / ".obsctl-store"
    assert spec.verification.min_samples == 10
    assert spec.signal("tokens_per_second").record_name == "workload_class:obsctl_tokens_per_second:value"


def test_env_var_names_the_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("OBSCTL_SPEC", str(write(tmp_path, VALID, "other.yaml")))
    assert load_spec(None).path.name == "other.yaml"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "spec is empty"),
        ("- a\n- b\n", ":1: spec must be a YAML mapping"),
        ("a: [1, 2\nb: 3\n", "YAML syntax error"),
        (VALID + "bogus: 1\n", ":11: bogus: unknown key; allowed here: version, prometheus"),
        (VALID.replace("kind: inference", "kind: serving"), ":3: workload_classes[0].kind: Input should be 'training' or 'inference'"),
        (VALID.replace("    kind: inference\n", "    kind: inference\n    colour: red\n"), ":4: workload_classes[0].colour: unknown key; allowed here: name, kind, selector"),
        (VALID.replace("direction: higher_is_better", "direction: up"), ":10: signals[0].direction"),
        (VALID.replace("{$selector}", "{job='x'}"), "signals[0].query: must contain $selector"),
        (VALID.replace("{job: w, workload: embed}", "{'bad-label': x}"), "is not a Prometheus label name"),
        (VALID + "targets:\n  - {workload_class: nope, signal: tokens_per_second, relative: 0.1, driver: d, deadline: 2027-01-01}\n",
         ":12: targets[0].workload_class: 'nope' is not one of: embed"),
        (VALID + "targets:\n  - {workload_class: embed, signal: tokens_per_second, relative: 0.1, absolute: 5, driver: d, deadline: 2027-01-01}\n",
         "give exactly one of 'relative'"),
        (VALID + "verification: {min_samples: two}\n", "verification.min_samples: Input should be a valid integer"),
        (VALID + "verification: {batches: 10}\n", "verification: 'batches' was removed: verdicts size their interval from the signal's memory; use min_samples"),
        (VALID + "prometheus: {url: localhost:9090}\n", "prometheus.url: must be an http:// or https:// URL"),
        (VALID.replace("    unit: tokens/s\n", "    unit: tokens/s\n    record: obsctl_tokens:rate5m\n"),
         ":10: signals[0].record: workload_class:obsctl_tokens:rate5m is a canonical series the source rules publish"),
        (VALID + "alertmanager_url: http://u:p@127.0.0.1:9093\n", "alertmanager_url: must not hold a user or password"),
        (VALID + "store: ''\n", ":11: store: must be a folder path, not empty or blank"),
        (VALID + "store: '   '\n", ":11: store: must be a folder path, not empty or blank"),
    ],
)
def test_bad_specs_name_file_line_and_field(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = error_of(path)
    assert str(path) in message
    assert expected in message


def test_not_utf8_names_the_line(tmp_path):
    path = write(tmp_path, VALID.encode() + b"# caf\xe9\n")
    assert f"{path}:11: spec is not valid UTF-8" in error_of(path)


def test_missing_file_and_directory(tmp_path):
    assert "spec file not found" in error_of(tmp_path / "absent.yaml")
    assert "is a directory" in error_of(tmp_path)


@pytest.mark.parametrize("value, escaped", [('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb"), ("plain", "plain")])
def test_label_values_are_escaped(value, escaped):
    assert escape_label_value(value) == escaped
    assert promql_matchers({"z": "1", "job": value}) == f'job="{escaped}",z="1"'


def test_selector_injection_is_escaped_in_queries(tmp_path):
    spec = load_spec(write(tmp_path, VALID.replace("workload: embed}", 'workload: "x\\"} or vector(1) #"}')))
    query = spec.query_for("tokens_per_second", "embed")
    assert 'workload="x\\"} or vector(1) #"' in query


def test_cli_check_exit_codes(tmp_path):
    good = write(tmp_path, VALID)
    ok = subprocess.run([sys.executable, "-m", "obsctl", "check", "--spec", str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "OK: 1 workload class(es), 1 signal(s)" in ok.stdout
    bad = write(tmp_path, VALID + "bogus: 1\n", "bad.yaml")
    result = subprocess.run([sys.executable, "-m", "obsctl", "check", "--spec", str(bad)], capture_output=True, text=True)
    assert result.returncode == EXIT_USAGE
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "bogus: unknown key" in result.stderr


# --- hostile input (findings of the bad-input review) -------------------------------

BOMB = "".join(
    [f'{chr(97 + i)}: &{chr(97 + i)} [' + ",".join([f"*{chr(96 + i)}"] * 9) + "]\n" for i in range(1, 9)]
).replace("&a [*`,*`,*`,*`,*`,*`,*`,*`,*`]", '&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]')


def test_alias_bomb_is_refused_quickly(tmp_path):
    message = error_of(write(tmp_path, VALID + BOMB))
    assert "YAML aliases" in message and "not supported" in message


def test_deep_nesting_is_a_readable_error(tmp_path):
    message = error_of(write(tmp_path, VALID + "x: " + "[" * 20000 + "]" * 20000 + "\n"))
    assert "nesting too deep" in message or "YAML" in message


def test_duplicate_keys_name_both_lines(tmp_path):
    message = error_of(write(tmp_path, VALID + "store: other\nstore: again\n"))
    assert ":12: YAML syntax error: duplicate key 'store' (first at line 11)" in message


def test_special_files_are_refused_without_reading(tmp_path):
    import os

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "is not a regular file" in error_of(fifo)
    assert "is not a regular file" in error_of("/dev/zero")


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("alert_for", "30s1h", "units in descending order"),
        ("alert_for", "0s", "positive Prometheus duration"),
        ("tolerance_ratio", ".nan", "tolerance_ratio"),
    ],
)
def test_signal_durations_and_numbers(tmp_path, field, value, expected):
    text = VALID.replace("direction: higher_is_better", f"direction: higher_is_better\n    {field}: {value}")
    assert expected in error_of(write(tmp_path, text))


@pytest.mark.parametrize("snippet", ["pricing: {node_hour_usd: .inf}", "verification: {step: 0s}", "verification: {window: 1h1d}"])
def test_non_finite_and_zero_values_are_refused(tmp_path, snippet):
    message = error_of(write(tmp_path, VALID + snippet + "\n"))
    assert ":11:" in message


def test_reserved_label_names_in_selectors_are_refused(tmp_path):
    assert "reserved" in error_of(write(tmp_path, VALID.replace("{job: w, workload: embed}", "{__name__: foo}")))


def test_placeholders_inside_label_values_stay_literal(tmp_path):
    text = VALID.replace("{job: w, workload: embed}", "{job: 'x$class', workload: '$node_selector'}")
    spec = load_spec(write(tmp_path, text))
    assert spec.query_for("tokens_per_second", "embed") == 'sum(rate(obsctl_tokens_total{job="x$class",workload="$node_selector"}[1m]))'
