"""The README leads a stack owner to a working vLLM spec: right after the quick start (the
two set-up commands ``make demo`` and ``make test``) comes "Using it on your stack", whose
first commands install obsctl and copy examples/vllm.yaml (which ``obsctl check``
accepts: catalogue signals only, an owner, a cadence, a target), its first snapshot reads
``--from-raw``, its YAML excerpt is the example's, and every ``obsctl`` command line in the
README names a real command and real options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import yaml
from click.testing import CliRunner

from obsctl.cli import cli

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
EXAMPLE = REPO / "examples" / "vllm.yaml"


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def _command_lines(text: str) -> list[str]:
    """``obsctl ...`` lines of the sh blocks, continuation lines joined, comments cut."""
    out = []
    for block in _blocks(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("obsctl "):
                out.append(line)
    return out


def test_using_it_on_your_stack_follows_the_quick_start():
    assert re.findall(r"^## (.+)$", README, re.M)[:2] == ["Quick start", "Using it on your stack"]
    quick = [line.split("#", 1)[0].strip() for line in _blocks(_section("Quick start"), "sh")[0].splitlines()]
    assert quick == ["make demo", "make test"]


def test_the_stack_section_starts_by_copying_the_vllm_example():
    setup = _blocks(_section("Using it on your stack"), "sh")[0].splitlines()
    commands = [line.split("#", 1)[0].strip() for line in setup if line.strip()]
    assert commands == ["pip install .", "cp examples/vllm.yaml obsctl.yaml"]


def test_the_vllm_example_passes_check_and_has_what_a_stack_owner_needs():
    result = CliRunner().invoke(cli, ["check", "--spec", str(EXAMPLE), "--output", "json"])
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(EXAMPLE.read_text())
    assert spec["cadence"] in ("weekly", "monthly")
    assert all(wc["source"] == "vllm" and wc["owner"] for wc in spec["workload_classes"])
    assert spec["signals"] and all(set(s) == {"name", "catalogue"} for s in spec["signals"])  # no hand PromQL
    assert spec["targets"]
    # every signal is one the check lists for the class (no silently absent signal)
    from obsctl.rules.sources import describe
    from obsctl.spec import load_spec

    loaded = load_spec(EXAMPLE)
    offered = describe(loaded.workload_class("chat"))["signals"]
    assert [s["catalogue"] for s in spec["signals"] if s["catalogue"] not in offered] == []


def test_the_readme_excerpt_is_the_example():
    excerpt = yaml.safe_load(_blocks(_section("Using it on your stack"), "yaml")[0])
    example = yaml.safe_load(EXAMPLE.read_text())
    for key in ("workload_classes", "signals", "targets"):
        for item in excerpt[key]:
            whole = next(x for x in example[key] if x.get("name", x.get("signal")) == item.get("name", item.get("signal")))
            assert {k: whole[k] for k in item} == item, (key, item)


def test_the_first_snapshot_reads_raw_series():
    snapshots = [line for line in _command_lines(_section("Using it on your stack")) if line.startswith("obsctl snapshot-baseline")]
    assert snapshots and "--from-raw" in shlex.split(snapshots[0])


def _resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command a README line names and the words after it."""
    command: click.Command = cli
    rest = words[1:]
    with click.Context(cli) as ctx:
        while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
            sub = command.get_command(ctx, rest[0])
            assert sub is not None, f"no command {rest[0]!r} in: {' '.join(words)}"
            command, rest = sub, rest[1:]
    return command, rest


def test_every_readme_command_names_real_options():
    lines = _command_lines(README)
    assert len(lines) >= 10
    for line in lines:
        command, rest = _resolve(shlex.split(line))
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        for word in rest:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in known, f"{word} is not an option of: {line}"


def test_the_option_check_can_fail():
    command, rest = _resolve(shlex.split("obsctl snapshot-baseline --from-raws"))
    known = {opt for p in command.params for opt in p.opts}
    assert "--from-raws" not in known and "--from-raw" in known
