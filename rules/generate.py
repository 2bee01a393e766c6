"""Generate the Prometheus rule files from the spec and the current baselines.

One file per concern (``obsctl-signals``, ``obsctl-baselines``, ``obsctl-targets``,
``obsctl-alerts``, ``obsctl-gpu``). Output is deterministic: sorted classes, signals and
targets, no timestamps, so committed copies can be checked (``--check``).

``python -m obsctl.rules.generate [--check]`` regenerates the committed copy in
``rules/generated/`` from ``examples/obsctl.yaml`` with an empty store (``make generate``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from obsctl.baselining.models import Baseline
from obsctl.rules.alerts import alert_groups
from obsctl.rules.baselines import baseline_groups, select_baselines, target_groups
from obsctl.rules.gpu import gpu_groups
from obsctl.rules.render import dump_rule_file, stale_files, write_atomic
from obsctl.rules.signals import signal_groups
from obsctl.spec import Spec, load_spec

PATTERN = "obsctl-*.rules.yaml"
REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SPEC = REPO / "examples" / "obsctl.yaml"
COMMITTED = REPO / "rules" / "generated"


def generate(spec: Spec, baselines: list[Baseline]) -> tuple[dict[str, str], list[str]]:
    """Render every rule file.

    Args:
        spec: the loaded spec.
        baselines: current baselines (one per class x signal; extras are resolved by
            :func:`obsctl.rules.baselines.select_baselines`).

    Returns:
        ``({file name: YAML text}, warnings)``.
    """
    chosen, warnings = select_baselines(spec, baselines)
    source = spec.path.name if spec.path else "spec"
    files = {
        "obsctl-signals.rules.yaml": signal_groups(spec),
        "obsctl-baselines.rules.yaml": baseline_groups(chosen),
        "obsctl-targets.rules.yaml": target_groups(spec),
        "obsctl-alerts.rules.yaml": alert_groups(spec),
        "obsctl-gpu.rules.yaml": gpu_groups(),
    }
    store_note = f"{source} and {len(chosen)} baseline(s) from the store"
    return {name: dump_rule_file(groups, store_note) for name, groups in sorted(files.items())}, warnings


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write each file atomically into ``out`` (created if needed); returns the paths."""
    paths = []
    for name, text in files.items():
        write_atomic(out / name, text)
        paths.append(out / name)
    return paths


def check(out: Path, files: dict[str, str]) -> list[str]:
    """File names in ``out`` that are missing, extra or differ from ``files`` (empty: up to date)."""
    return stale_files(out, files, PATTERN)


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` verify) the committed rules; exit 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m obsctl.rules.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    parser.add_argument("--spec", type=Path, default=EXAMPLE_SPEC)
    parser.add_argument("--out", type=Path, default=COMMITTED)
    args = parser.parse_args(argv)
    files, _ = generate(load_spec(args.spec), [])
    if args.check:
        stale = check(args.out, files)
        if stale:
            print(f"{args.out}: out of date: {', '.join(stale)}; run: python -m obsctl.rules.generate", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    for path in write(args.out, files):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
