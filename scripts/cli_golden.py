#!/usr/bin/env python3
"""Record or compare the golden record of the obsctl CLI (tests/golden_cli/harness.py).

    scripts/cli_golden.py record OUT.json      run the fixture matrix, write the record
    scripts/cli_golden.py compare GOLDEN.json  run it again, print a unified diff per
                                               changed case; exit 1 if any changed

The CLI is run as ``PYTHON -m obsctl`` (``--python``, default: this interpreter) with this
process's environment plus ``--pythonpath`` prepended to PYTHONPATH, so a record can be
taken from any copy of the code, e.g. a wheel of an earlier commit installed with
``pip install --no-deps --target DIR``:

    .venv/bin/python scripts/cli_golden.py record golden.json --pythonpath DIR
    .venv/bin/python scripts/cli_golden.py compare tests/golden_cli/golden.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "tests" / "golden_cli" / "harness.py"
# The harness starts its Prometheus with the tests' local servers (support.servers, under tests/).
sys.path.insert(0, str(HARNESS.parents[1]))


def load_harness():
    # By file path: tests/ is no package, and the harness must not depend on sys.path.
    spec = importlib.util.spec_from_file_location("obsctl_cli_golden_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("path", type=Path, help="record: where to write; compare: the golden record")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs `-m obsctl` (default: this one)")
    parser.add_argument("--pythonpath", default=None, help="prepended to PYTHONPATH for the CLI")
    parser.add_argument("--keep", type=Path, default=None, help="copy the fixture folder (specs, store, outputs) here")
    parser.add_argument("--write-current", type=Path, default=None, help="compare: also write the new record here")
    args = parser.parse_args(argv)

    harness = load_harness()
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath, env.get("PYTHONPATH")) if p)
    runner = harness.Runner(python=args.python, env=env)
    print("obsctl code under test:\n  " + harness.provenance(runner).replace("\n", "\n  "), file=sys.stderr)
    current = harness.record(runner, keep=args.keep)

    if args.action == "record":
        harness.dump(current, args.path)
        print(f"recorded {len(current)} cases to {args.path}", file=sys.stderr)
        return 0
    if args.write_current:
        harness.dump(current, args.write_current)
    changed = harness.diff(harness.load(args.path), current)
    for text in changed.values():
        print(text)
        print()
    print(f"{len(changed)} of {len(current)} cases differ from {args.path}", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
