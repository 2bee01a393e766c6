"""The review-state alerts through ``promtool test rules`` at fixed times, over series as
``obsctl publish`` pushes them (labels job/instance of the Pushgateway group).

promtool's clock starts at 0, so instants are seconds from the test's start: a baseline
taken 8 days before (max age 7 days) is stale from the start, one taken 1 day before is
not; an initiative planned to end at 10 min is overdue from then, one ending at 2 h is
not; one target_behind finding (owner "finance"), one target_met finding.
"""

from __future__ import annotations

import yaml

from obsctl.rules import generate as gen
from obsctl.rules.loop_series import (
    REVIEW_BASELINE_END,
    REVIEW_BASELINE_MAX_AGE,
    REVIEW_FINDINGS,
    REVIEW_INITIATIVE_DUE,
)
from support.promtool import evaluate
from support.rules_fixtures import SPEC, write_spec

DAY = 86400
PUSHED = 'job="obsctl-publish",instance="obsctl"'


def _inputs() -> list[tuple[str, str]]:
    return [
        (f'{REVIEW_BASELINE_END}{{{PUSHED},workload_class="svc",signal="tokens_per_second"}}', f"{-8 * DAY}x200"),
        (f'{REVIEW_BASELINE_MAX_AGE}{{{PUSHED},workload_class="svc",signal="tokens_per_second"}}', f"{7 * DAY}x200"),
        (f'{REVIEW_BASELINE_END}{{{PUSHED},workload_class="other",signal="tokens_per_second"}}', f"{-1 * DAY}x200"),
        (f'{REVIEW_BASELINE_MAX_AGE}{{{PUSHED},workload_class="other",signal="tokens_per_second"}}', f"{7 * DAY}x200"),
        (f'{REVIEW_INITIATIVE_DUE}{{{PUSHED},workload_class="svc",initiative="batch-32",lever="batch-size"}}', "600x200"),
        (f'{REVIEW_INITIATIVE_DUE}{{{PUSHED},workload_class="other",initiative="sched",lever="scheduling"}}', "7200x200"),
        (f'{REVIEW_FINDINGS}{{{PUSHED},workload_class="svc",signal="usd_per_million_tokens",kind="target_behind",'
         f'severity="warning",owner="finance"}}', "1x200"),
        (f'{REVIEW_FINDINGS}{{{PUSHED},workload_class="svc",signal="tokens_per_second",kind="target_met",'
         f'severity="info",owner="ops"}}', "1x200"),
    ]


def _firing(tmp_path, at: str) -> list[tuple]:
    data = yaml.safe_load(yaml.safe_dump(SPEC))
    data["workload_classes"][0]["owner"] = "ops"
    files, _ = gen.generate(write_spec(tmp_path, data), [])
    paths = gen.write(tmp_path / "rules", files)
    got = evaluate(tmp_path / at, paths, _inputs(), {"a": 'ALERTS{alertstate="firing",alertname=~"ObsctlBaselineStale|ObsctlTargetBehind|ObsctlInitiativeOverdue"}'}, at)
    return sorted((s["alertname"], s["workload_class"], s.get("signal") or s.get("initiative"), s.get("owner"), s["severity"]) for s, _ in got["a"])


def test_review_alerts_fire_for_the_planted_state_only(tmp_path):
    # At 20 min: the stale baseline has been stale 20 min (for: 15m), the finding 20 min;
    # batch-32 is 10 min past its end, not yet 15.
    assert _firing(tmp_path, "20m") == [
        ("ObsctlBaselineStale", "svc", "tokens_per_second", "ops", "warning"),  # the class's owner, joined
        ("ObsctlTargetBehind", "svc", "usd_per_million_tokens", "finance", "warning"),  # the finding's owner
    ]
    # At 30 min batch-32 has been overdue 20 min; sched (ends at 2 h) and other's 1-day-old baseline never.
    assert ("ObsctlInitiativeOverdue", "svc", "batch-32", "ops", "warning") in _firing(tmp_path, "30m")
    assert len(_firing(tmp_path, "30m")) == 3


def test_alert_values_are_age_and_lateness(tmp_path):
    files, _ = gen.generate(write_spec(tmp_path), [])
    rules = {r["alert"]: r for g in yaml.safe_load(files["obsctl-alerts.rules.yaml"])["groups"] for r in g["rules"] if "alert" in r}
    paths = gen.write(tmp_path / "rules", files)
    got = evaluate(tmp_path / "v", paths, _inputs(), {k: rules[k]["expr"] for k in ("ObsctlBaselineStale", "ObsctlInitiativeOverdue")}, "30m")
    assert [v for _, v in got["ObsctlBaselineStale"]] == [8 * DAY + 1800]
    assert [v for _, v in got["ObsctlInitiativeOverdue"]] == [1800 - 600]
