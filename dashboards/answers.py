"""What each panel answers, for the panels whose module gives no ``description``.

Grafana shows a panel's description in the (i) tooltip, and docs/dashboards.md lists every
dashboard's rows and panels with it (:mod:`obsctl.dashboards.doc`), so every panel has one:
where the dashboard module sets none, :func:`apply` fills it from :data:`ANSWERS`
(dashboard uid -> panel title -> text). tests/unit/test_dashboard_doc.py fails when a panel
has neither, or when an entry here names no panel.
"""

from __future__ import annotations

ANSWERS: dict[str, dict[str, str]] = {
    "obsctl-cost": {
        "Spend": "What the selected classes cost per hour now (attributed GPU prices, else node prices).",
        "Energy cost": "What the selected classes' GPU energy costs per hour now, at the spec's electricity price.",
        "USD per hour now": "Which classes cost most per hour right now.",
        "Energy cost by class": "How each class's GPU energy cost per hour moves over time.",
        "Energy (GPU power) by class": "How much GPU power each class draws (mean watts from the energy counters).",
        "USD per successful request": "What one successful request costs each class.",
        "USD per sample": "What one processed sample costs each class (training and batch work).",
        "Tokens per GPU-second": "How many tokens each class gets per busy and per allocated GPU-second: "
                                 "the gap between the two is paid idle time.",
        "Tokens per joule": "How much work each class gets per joule of GPU energy.",
        "Idle waste by class": "How much each class pays per hour for attributed accelerators below the idle threshold.",
    },
    "obsctl-gpu-fleet": {
        "GPUs up": "How many GPUs answered the exporters' last scrape.",
        "GPUs down": "How many known GPUs did not answer (lost, in error, or past the scrape deadline).",
        "Fleet GPU utilization": "How busy the selected fleet is: mean utilization over its GPUs.",
        "Fleet power": "How much power the selected GPUs draw in total now.",
        "GPU utilization": "Which GPUs are busy and which idle, over time.",
        "GPU memory used": "How full each GPU's (or MIG instance's) memory is.",
        "Power": "How much power each GPU draws over time.",
        "Temperature": "How hot each GPU runs; sustained heat precedes thermal throttling.",
        "Utilization by workload class": "Which workload classes keep their GPUs busy (mean utilization per class).",
        "Exporters up": "How many obsctl-exporter scrape targets Prometheus reaches.",
        "GPU inventory": "Which GPUs each node has: model, driver, PCI bus id, MIG mode.",
        "GPU attribution": "Which workload class and owner each GPU (or MIG instance) serves, and how that was found.",
        "Failing exporter collectors": "Which exporter collectors fail now, and why (the reason label).",
    },
    "obsctl-inference": {
        "Tokens per second": "How many input, output and total tokens each class serves per second.",
        "Requests per second by outcome": "How many requests each class completes per second, by outcome "
                                          "(success, error, ...).",
        "Time to first token": "How long users wait for the first token (p50 and p95).",
        "Inter-token latency p95": "How fast tokens stream once generation started (p95 gap between tokens).",
        "End-to-end latency p95": "How long a whole request takes (p95).",
        "Requests running and waiting": "How many requests are being served and how many are queued.",
        "Queue wait p95": "How long requests wait before the engine starts them (p95).",
        "Offered load (arrivals incl. rejected)": "How much demand reaches each class, including requests "
                                                  "it rejected: the load, not just what was served.",
    },
    "obsctl-loop-overview": {
        "Firing obsctl alerts": "Which obsctl alerts fire now for the selected classes and signals.",
    },
    "obsctl-training": {
        "Samples per second": "How many samples each training class processes per second.",
        "Steps per second": "How many optimizer steps each class completes per second.",
        "Tokens per second": "How many tokens each class trains on per second.",
        "Busy fraction (GPU, else engine, else CPU)": "How much of its allocated accelerators each class keeps busy.",
        "GPUs allocated": "How many GPUs each class holds.",
        "USD per sample": "What one trained sample costs each class.",
    },
    "obsctl-verification": {
        "Saturation state now": "Which saturation state each class is in now (saturated, constrained, "
                                "demand-bound, ...).",
        "Busy fraction (GPU, else engine, else CPU)": "How busy each class's accelerators are: with the queue, whether a "
                                                          "change could show at all.",
    },
}


def apply(dashboard: dict) -> dict:
    """Fill the ``description`` of the dashboard's panels that have none from :data:`ANSWERS`."""
    answers = ANSWERS.get(dashboard["uid"], {})
    for panel in dashboard["panels"]:
        if panel["type"] != "row" and not panel.get("description") and panel["title"] in answers:
            panel["description"] = answers[panel["title"]]
    return dashboard
