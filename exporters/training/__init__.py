"""Training and batch work: framework callbacks, Pushgateway batch jobs, model FLOPs utilization.

Modules (each imports its framework only when imported itself):

* :mod:`obsctl.exporters.training.lightning`: ``ObsctlCallback`` for PyTorch Lightning
  (extra ``obsctl[lightning]``);
* :mod:`obsctl.exporters.training.hf`: ``ObsctlTrainerCallback`` for the Hugging Face
  ``transformers`` Trainer (extra ``obsctl[hf]``);
* :mod:`obsctl.exporters.training.batch`: ``BatchJob``, a short or batch job (evaluation,
  fine-tune) that pushes its SDK series to a Pushgateway;
* :mod:`obsctl.exporters.training.peaks`: dense peak FLOP/s by GPU model and dtype, with
  sources, for model FLOPs utilization (MFU; rules in :mod:`obsctl.rules.training`).

All of them publish the :class:`obsctl.exporters.sdk.Workload` series
(``obsctl_samples_total``, ``obsctl_steps_total``, ``obsctl_tokens_total``,
``obsctl_step_duration_seconds``, ``obsctl_quality_score``), so a training class with
``source: sdk`` gets the canonical STEPS / SAMPLES / TOKENS / STEP_TIME series. One
process per data-parallel rank: run with ``PROMETHEUS_MULTIPROC_DIR`` set and each rank
counts its own batches; the aggregate sums them (see :mod:`obsctl.exporters.sdk`).
"""
