"""The loop end to end in a subprocess through ``obsctl.cli:main`` (the ``obsctl`` console
script's entry point, with run_main's error handling), so the verdict exit codes are the
ones a pipeline sees."""

from __future__ import annotations

import json
import subprocess
import sys


def obsctl(*args):
    cmd = [sys.executable, "-c", "from obsctl.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_loop_exit_codes_through_the_console_script(history, loop_spec, tmp_path):
    snap = obsctl("snapshot-baseline", "--spec", loop_spec, "--window", "1h", "--end", history.iso(1))
    assert snap.returncode == 0, snap.stderr
    assert "[4/4] missing/tokens_per_second ... NO DATA" in snap.stderr

    for cls in ("steady", "vanishing"):
        started = obsctl("initiative", "start", "--spec", loop_spec, "--name", f"tune {cls}", "--lever", "batch-size",
                         "--class", cls, "--signal", "tokens_per_second", "--started-at", history.iso(1))
        assert started.returncode == 0, started.stderr

    improved = obsctl("verify", "--spec", loop_spec, "--class", "steady", "--end", history.iso(2))
    assert improved.returncode == 0, improved.stderr
    assert improved.stdout.startswith("IMPROVED: tokens_per_second +")
    assert "95 % CI +" in improved.stdout and "alerts fired: none" in improved.stdout

    no_data = obsctl("verify", "--spec", loop_spec, "--class", "vanishing", "--start", history.iso(1), "--end", history.iso(3))
    assert no_data.returncode == 13, no_data.stdout + no_data.stderr

    no_initiative = obsctl("verify", "--spec", loop_spec, "--class", "missing")
    assert no_initiative.returncode == 1
    assert no_initiative.stderr.startswith("obsctl: error: workload class 'missing' has no open initiative")
    undefined = obsctl("verify", "--spec", loop_spec, "--class", "nosuch")
    assert undefined.returncode == 2 and "no workload class 'nosuch'; defined: " in undefined.stderr, undefined.stderr

    listed = json.loads(obsctl("baseline", "list", "--spec", loop_spec, "--output", "json").stdout)
    assert {b["workload_class"] for b in listed} == {"steady", "noisy", "vanishing"}
