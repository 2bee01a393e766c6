"""Generate the Prometheus rule files from the spec and the current baselines.

One file per concern (``obsctl-signals``, ``obsctl-baselines``, ``obsctl-targets``,
``obsctl-alerts``, ``obsctl-gpu``, ``obsctl-saturation``, ``obsctl-cost``, ``obsctl-training``). Output is deterministic: sorted classes, signals and
targets, no timestamps, so committed copies can be checked (``--check``).

``python -m obsctl.rules.generate [--check]`` regenerates the committed copy in
``rules/generated/`` from ``examples/obsctl.yaml`` with an empty store (``make generate``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from obsctl.escape import go_template_text
from obsctl.generated import regenerate_main, stale_files, write_files
from obsctl.records import Baseline
from obsctl.rules.alerts import alert_groups
from obsctl.rules.baselines import baseline_groups, select_baselines, target_groups
from obsctl.rules.cost import cost_groups
from obsctl.rules.gpu import gpu_groups
from obsctl.rules.render import dump_rule_file
from obsctl.rules.saturation import saturation_groups
from obsctl.rules.signals import signal_groups
from obsctl.rules.sources import source_groups
from obsctl.rules.training import training_groups
from obsctl.spec import Spec

PATTERN = "obsctl-*.rules.yaml"
REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SPEC = REPO / "examples" / "obsctl.yaml"
COMMITTED = REPO / "rules" / "generated"


def generate(spec: Spec, baselines: list[Baseline], anchored: dict | None = None) -> tuple[dict[str, str], list[str]]:
    """Render every rule file.

    Args:
        spec: the loaded spec.
        baselines: current baselines (one per class x signal; extras are resolved by
            :func:`obsctl.rules.baselines.select_baselines`).
        anchored: the anchored relative targets' values (:func:`obsctl.rules.baselines.target_groups`).

    Returns:
        ``({file name: YAML text}, warnings)``.
    """
    chosen, warnings = select_baselines(spec, baselines)
    source = spec.path.name if spec.path else "spec"
    files = {
        "obsctl-signals.rules.yaml": signal_groups(spec),
        "obsctl-baselines.rules.yaml": baseline_groups(chosen, spec),
        "obsctl-targets.rules.yaml": target_groups(spec, anchored),
        "obsctl-alerts.rules.yaml": alert_groups(spec),
        "obsctl-gpu.rules.yaml": gpu_groups(),
        "obsctl-sources.rules.yaml": source_groups(spec),
        "obsctl-saturation.rules.yaml": saturation_groups(spec),
        "obsctl-cost.rules.yaml": cost_groups(spec),
        "obsctl-training.rules.yaml": training_groups(spec),
    }
    for groups in files.values():
        _set_runbook_base(groups, spec.runbook_base_url)
    store_note = f"{source} and {len(chosen)} baseline(s) from the store"
    return {name: dump_rule_file(groups, store_note) for name, groups in sorted(files.items())}, warnings


def _set_runbook_base(groups: list[dict], base: str) -> None:
    """Point every alert's ``runbook_url`` at ``base`` (the spec's ``runbook_base_url``),
    keeping the per-alert anchor, so on-call links open the team's own runbook copy."""
    for group in groups:
        for rule in group["rules"]:
            annotations = rule.get("annotations", {})
            if "runbook_url" in annotations:
                anchor = annotations["runbook_url"].partition("#")[2]
                annotations["runbook_url"] = go_template_text(f"{base}#{anchor}")  # annotations are templates


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write each file atomically into ``out`` (created if needed); returns the paths."""
    return write_files(out, files)


def check(out: Path, files: dict[str, str]) -> list[str]:
    """File names in ``out`` that are missing, extra or differ from ``files`` (empty: up to date)."""
    return stale_files(out, files, PATTERN)


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` verify) the committed rules; exit 1 when stale."""
    return regenerate_main(
        "python -m obsctl.rules.generate", lambda spec: generate(spec, [])[0], PATTERN, EXAMPLE_SPEC, COMMITTED, argv
    )


if __name__ == "__main__":
    sys.exit(main())
