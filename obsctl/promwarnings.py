"""What a Prometheus API warning means for an answer (pure text rules, no I/O).

Kept apart from :mod:`obsctl.promapi` so that the decision code (the verdict's caps)
can read a warning without importing the HTTP client.
"""

from __future__ import annotations

#: Prefixes of the annotations PromQL itself attaches to an answer (Prometheus >= 2.50
#: splits them into ``warnings`` and ``infos``; older versions put both in ``warnings``).
#: They describe the query, not missing data, so they never make an answer partial.
PROMQL_ANNOTATION_PREFIXES = ("PromQL info:", "PromQL warning:")


def is_partial_warning(text: str) -> bool:
    """True when a Prometheus API warning says the answer may lack data.

    Every warning that is not one of PromQL's own annotations
    (:data:`PROMQL_ANNOTATION_PREFIXES`) counts: a failed remote-read endpoint
    (Prometheus), a partial response from a store (Thanos, ``partial_response``), a
    failed ingester or store-gateway (Mimir, Cortex). Unknown wording errs on the side of
    "partial", because a silently incomplete answer is the worse mistake.
    """
    return not text.strip().startswith(PROMQL_ANNOTATION_PREFIXES)
