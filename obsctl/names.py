"""The names the spec defines and the store reads back: one pattern each, one place.

The spec validates what a user writes with these; the store's records are validated
with the same patterns when read (an edited record must not smuggle a label name into
PromQL or a path component out of the store).
"""

from __future__ import annotations

import re
from typing import Literal

#: A workload class or signal name: the ``workload_class`` / ``signal`` label value.
IDENT = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
#: A Prometheus label name (data model: ``[a-zA-Z_][a-zA-Z0-9_]*``).
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: A store record id (baseline, initiative): one path component, no ``..``.
RECORD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")

#: An owner name (a label value and an Alertmanager receiver name): printable, no control
#: characters, no leading or trailing space.
OWNER_PATTERN = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$"
#: The optimization levers an initiative names; ``other`` is a lever outside the list,
#: which the initiative then describes (``--lever-description``).
Lever = Literal["batch-size", "scheduling", "storage-tiering", "quantization", "right-sizing", "topology",
                "prefix-caching", "speculative-decoding", "chunked-prefill", "other"]
LEVERS: tuple[str, ...] = Lever.__args__  # type: ignore[attr-defined]


def is_label_name(name: str) -> bool:
    """True for a Prometheus label name that is not reserved (``__`` prefix)."""
    return bool(LABEL_NAME.match(name)) and not name.startswith("__")


def is_record_id(text: str) -> bool:
    """True for a store id that is one safe path component."""
    return bool(RECORD_ID.match(text)) and ".." not in text
