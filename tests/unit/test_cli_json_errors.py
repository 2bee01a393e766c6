"""With --output json every command's error is one JSON document on stdout (and one line on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from obsctl.clikit import wants_json

VALID = """\
prometheus: {url: "http://127.0.0.1:9"}
workload_classes: [{name: embed, kind: inference, selector: {job: w}}]
signals:
  - {name: tokens_per_second, category: throughput, query: 'sum(rate(t{$selector}[1m]))', unit: tokens/s, direction: higher_is_better}
"""


def obsctl(*args, cwd):
    return subprocess.run([sys.executable, "-m", "obsctl", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("argv, code", [
    (["baseline", "list"], 2),  # the spec is missing
    (["verify", "--class", "embed"], 2),
    (["plan", "--class", "embed", "--signal", "tokens_per_second", "--effect", "0.1"], 2),
    (["initiative", "list"], 2),
])
def test_missing_spec_is_one_json_document(tmp_path, argv, code):
    r = obsctl(*argv, "--spec", str(tmp_path / "nope.yaml"), "-o", "json", cwd=tmp_path)
    assert r.returncode == code
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == code and "nope.yaml" in doc["error"]
    assert r.stderr.strip().splitlines() == [f"obsctl: error: {doc['error']}"]


def test_refused_and_usage_errors_are_json(tmp_path):
    (tmp_path / "obsctl.yaml").write_text(VALID)
    spec = str(tmp_path / "obsctl.yaml")
    r = obsctl("verify", "--spec", spec, "--class", "embed", "--output", "json", cwd=tmp_path)
    assert r.returncode == 1 and json.loads(r.stdout)["exit_code"] == 1 and "no open initiative" in json.loads(r.stdout)["error"]
    r = obsctl("verify", "--spec", spec, "--no-such-flag", "--output=json", cwd=tmp_path)
    assert r.returncode == 2 and "no-such-flag" in json.loads(r.stdout)["error"]
    text = obsctl("verify", "--spec", spec, "--class", "embed", cwd=tmp_path)  # text mode: nothing on stdout
    assert text.returncode == 1 and text.stdout == ""


def test_wants_json():
    assert wants_json(["verify", "-o", "json"]) and wants_json(["--output=json"]) and wants_json(["-ojson"])
    assert not wants_json(["-o", "text"]) and not wants_json(["--output"]) and not wants_json(["json"])


def _interrupted_command(emit_first: bool):
    import click

    from obsctl.clikit import emit_json, output_option, wrap_errors

    @click.command()
    @output_option
    @wrap_errors
    def slow(output):
        if emit_first:
            emit_json({"done": True})
        raise KeyboardInterrupt

    return slow


@pytest.mark.parametrize("argv", [["-o", "json"], ["--output=json"]])
def test_ctrl_c_with_json_is_one_error_document_and_exit_130(capsys, argv):
    from obsctl.clikit import run_main

    with pytest.raises(SystemExit) as stopped:
        run_main(_interrupted_command(False), argv)
    assert stopped.value.code == 130
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": "aborted", "exit_code": 130}
    assert err.strip() == "obsctl: aborted"


def test_ctrl_c_in_text_mode_or_after_the_document_adds_nothing_to_stdout(capsys):
    from obsctl.clikit import run_main

    with pytest.raises(SystemExit) as stopped:
        run_main(_interrupted_command(False), [])
    assert stopped.value.code == 130 and capsys.readouterr().out == ""
    with pytest.raises(SystemExit) as stopped:
        run_main(_interrupted_command(True), ["-o", "json"])
    assert stopped.value.code == 130 and json.loads(capsys.readouterr().out) == {"done": True}
