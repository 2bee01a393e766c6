"""How many samples and tokens a batch holds, for the framework callbacks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _first_tensor(value: Any):
    if hasattr(value, "shape") and len(getattr(value, "shape", ())) > 0:
        return value
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def batch_samples(batch: Any) -> int:
    """Samples in ``batch``: the first dimension of its first tensor (a tensor, or the first
    tensor found in a mapping / list / tuple, depth first); 0 if it holds none."""
    tensor = _first_tensor(batch)
    return int(tensor.shape[0]) if tensor is not None else 0


def batch_tokens(batch: Any):
    """Tokens in a language-model batch: ``attention_mask.sum()`` (non-padding tokens) when
    the batch is a mapping with one, else ``input_ids.numel()``; None for other batches.
    May return a 0-d tensor (summed without a device sync; ``float()`` it once per step)."""
    if not isinstance(batch, Mapping):
        return None
    # Tensors only: a collator may pass lists (unpadded token ids) under the same keys,
    # and a counting callback must not stop the training run.
    mask, ids = batch.get("attention_mask"), batch.get("input_ids")
    if hasattr(mask, "sum") and hasattr(mask, "shape"):
        return mask.sum()
    if hasattr(ids, "numel"):
        return ids.numel()
    return None
