"""Hugging Face ``transformers`` Trainer callback publishing samples, steps, tokens and step time.

Needs ``transformers`` and ``accelerate`` (``pip install 'obsctl[hf]'``).

Example::

    wl = Workload("finetune-batch", labels={"run": run_id})
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[ObsctlTrainerCallback(wl)])

The Trainer hands callbacks no batch, so the callback puts a forward pre-hook on the model
at ``on_train_begin`` and counts what each training forward receives (in train mode only;
evaluation forwards are not counted), per process (each data-parallel rank counts its own):

* samples: the first dimension of the forward's ``input_ids`` (else its first tensor argument);
* tokens: ``attention_mask.sum()`` (non-padding tokens) when given, else ``input_ids.numel()``;
  summed on the device and read once per optimizer step (one sync per step, as the
  Trainer's own ``include_num_input_tokens_seen`` does);
* steps: optimizer steps (``on_step_end``); step time: ``on_step_begin`` to ``on_step_end``
  (forward and backward of every accumulated micro-batch and the optimizer step; the
  Trainer fetches the micro-batches before ``on_step_begin``, so data loading is outside).
  Both by the world's process zero only: a data-parallel step is one step of the job.
"""

from __future__ import annotations

import time

from transformers import TrainerCallback

from obsctl.exporters.sdk import Workload
from obsctl.exporters.training.minibatch import batch_samples, batch_tokens


class ObsctlTrainerCallback(TrainerCallback):
    """Trainer callback counting into ``workload`` (see the module docstring for what)."""

    def __init__(self, workload: Workload):
        self.workload = workload
        self._hook = None
        self._start: float | None = None
        self._samples = 0
        self._tokens = None  # int or a device tensor, summed without syncing

    def _on_forward(self, module, args, kwargs) -> None:
        if not module.training:
            return
        inputs = dict(kwargs)
        if args and "input_ids" not in inputs:
            inputs["input_ids"] = args[0]
        self._samples += batch_samples(inputs.get("input_ids", inputs))
        tokens = batch_tokens(inputs)
        if tokens is not None:
            self._tokens = tokens if self._tokens is None else self._tokens + tokens

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None and self._hook is None:
            self._hook = model.register_forward_pre_hook(self._on_forward, with_kwargs=True)

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        duration = time.perf_counter() - self._start if self._start is not None else 0.0
        tokens = float(self._tokens) if self._tokens is not None else 0
        if state.is_world_process_zero:
            self.workload.observe_step(duration, samples=self._samples, tokens=tokens)
        else:
            self.workload.count_samples(self._samples)
            self.workload.count_tokens(tokens)
        self._start, self._samples, self._tokens = None, 0, None

    def on_train_end(self, args, state, control, **kwargs):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
