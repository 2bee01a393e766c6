"""PyTorch Lightning callback publishing samples, steps, tokens and step time through the SDK.

Needs ``lightning`` (``pip install 'obsctl[lightning]'``; ``pytorch_lightning`` works too).

Example::

    wl = Workload("finetune-batch", labels={"run": run_id})
    wl.serve(9400)                      # single process; for DDP see obsctl.exporters.sdk
    trainer = L.Trainer(callbacks=[ObsctlCallback(wl)], ...)

What is counted, per process (each data-parallel rank counts its own batches):

* samples: every training batch's size, from ``batch_size(batch)`` (default: the first
  dimension of the batch's first tensor, :func:`obsctl.exporters.training.minibatch.batch_samples`);
* tokens: ``tokens(batch)`` (default: the batch's non-padding ``attention_mask`` sum or
  ``input_ids`` size when it is a mapping, else nothing), summed on the device and read
  once per optimizer step (one device sync per step, not per batch);
* steps: optimizer steps (``trainer.global_step`` advancing; with gradient accumulation
  one step spans several batches), counted by global rank 0 only: a data-parallel step is
  one step of the job, not one per rank;
* step time: wall time from the start of a step's first batch to the end of its last
  (forward, backward, optimizer; the data loading before the first batch is outside),
  rank 0's (the ranks synchronize every step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older standalone package
    from pytorch_lightning.callbacks import Callback

from obsctl.exporters.sdk import Workload
from obsctl.exporters.training.minibatch import batch_samples, batch_tokens


class ObsctlCallback(Callback):
    """Lightning callback counting into ``workload``.

    Args:
        workload: the SDK instrumentation to count into.
        batch_size: ``batch -> samples``; default :func:`batch_samples`.
        tokens: ``batch -> tokens`` (int or 0-d tensor) or None to use :func:`batch_tokens`.
    """

    def __init__(self, workload: Workload, batch_size: Callable[[Any], int] | None = None,
                 tokens: Callable[[Any], Any] | None = None):
        super().__init__()
        self.workload = workload
        self._batch_size = batch_size or batch_samples
        self._tokens = tokens or batch_tokens
        self._step_start: float | None = None
        self._last_step: int | None = None
        self._pending_tokens = None  # int or a device tensor, read once per step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._last_step is None:
            self._last_step = trainer.global_step
        if self._step_start is None:
            self._step_start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.workload.count_samples(self._batch_size(batch))
        tokens = self._tokens(batch)
        if tokens is not None:
            self._pending_tokens = tokens if self._pending_tokens is None else self._pending_tokens + tokens
        if trainer.global_step > self._last_step:
            self._flush_tokens()
            duration = time.perf_counter() - self._step_start
            if trainer.is_global_zero:
                for _ in range(trainer.global_step - self._last_step):  # one per optimizer step taken
                    self.workload.observe_step(duration)
            self._last_step = trainer.global_step
            self._step_start = None

    def _flush_tokens(self) -> None:
        if self._pending_tokens is not None:
            self.workload.count_tokens(float(self._pending_tokens))
            self._pending_tokens = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._flush_tokens()  # batches after the last optimizer step (a stopped run)
