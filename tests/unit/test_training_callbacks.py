"""The Lightning and transformers Trainer callbacks with the real libraries on the CPU:
tiny models built from code / a config (no model hub), a few steps each. Expected counts
come from the data and the training arguments, not from the callbacks."""

from __future__ import annotations

import pytest
import torch

from obsctl.exporters.sdk import Workload

LABELS = {"workload": "train", "run": "t1"}


def value(wl, name):
    return wl.registry.get_sample_value(name, LABELS) or 0.0


def test_lightning_counts_samples_steps_tokens_and_step_time(tmp_path):
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, Dataset

    from obsctl.exporters.training.lightning import ObsctlCallback

    n, seq, batch, accumulate, epochs = 22, 6, 4, 2, 2
    torch.manual_seed(0)
    lengths = torch.randint(2, seq + 1, (n,))

    class Tokens(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            mask = (torch.arange(seq) < lengths[i]).long()
            return {"input_ids": torch.randint(0, 32, (seq,)), "attention_mask": mask}

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(32, 8)
            self.out = torch.nn.Linear(8, 32)

        def training_step(self, b, _):
            logits = self.out(self.emb(b["input_ids"]))
            return torch.nn.functional.cross_entropy(logits.view(-1, 32), b["input_ids"].view(-1))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    wl = Workload("train", labels={"run": "t1"})
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, accumulate_grad_batches=accumulate,
                         callbacks=[ObsctlCallback(wl)], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(Tiny(), DataLoader(Tokens(), batch_size=batch))

    batches_per_epoch = -(-n // batch)  # 6: five of 4 and one of 2
    steps_per_epoch = -(-batches_per_epoch // accumulate)  # the epoch's last accumulation flushes
    assert trainer.global_step == epochs * steps_per_epoch  # Lightning agrees with the arithmetic
    assert value(wl, "obsctl_steps_total") == epochs * steps_per_epoch
    assert value(wl, "obsctl_samples_total") == epochs * n
    assert value(wl, "obsctl_tokens_total") == epochs * int(lengths.sum())  # non-padding tokens
    assert value(wl, "obsctl_step_duration_seconds_count") == epochs * steps_per_epoch
    assert value(wl, "obsctl_step_duration_seconds_sum") > 0


def test_trainer_callback_counts_samples_steps_tokens_and_step_time(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from obsctl.exporters.training.hf import ObsctlTrainerCallback

    n, seq, batch, accumulate, steps = 12, 8, 2, 2, 3
    torch.manual_seed(0)
    lengths = torch.randint(3, seq + 1, (n,))
    data = []
    for i in range(n):
        ids = torch.randint(0, 64, (seq,))
        mask = (torch.arange(seq) < lengths[i]).long()
        data.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=seq, n_embd=16, n_layer=1, n_head=2))
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accumulate, eval_strategy="steps", eval_steps=1,
                             per_device_eval_batch_size=4, report_to=[], save_strategy="no", logging_strategy="no",
                             use_cpu=True, dataloader_num_workers=0, seed=0, disable_tqdm=True)
    wl = Workload("train", labels={"run": "t1"})
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:4], callbacks=[ObsctlTrainerCallback(wl)])
    seen = []  # the samples the Trainer really fed, recorded independently of the callback
    model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["attention_mask"]) if m.training else None,
                                    with_kwargs=True)
    trainer.train()

    assert trainer.state.global_step == steps
    assert sum("eval_loss" in h for h in trainer.state.log_history) == steps  # evaluation ran after every step...
    assert len(seen) == steps * accumulate  # ...and its forwards (eval mode) are not counted
    assert value(wl, "obsctl_steps_total") == steps
    assert value(wl, "obsctl_samples_total") == steps * accumulate * batch
    assert value(wl, "obsctl_tokens_total") == sum(int(m.sum()) for m in seen)
    assert value(wl, "obsctl_step_duration_seconds_count") == steps
    assert value(wl, "obsctl_step_duration_seconds_sum") > 0


@pytest.mark.parametrize("batch, samples, tokens", [
    (torch.zeros(5, 3), 5, None),
    ((torch.zeros(7, 2), torch.zeros(7)), 7, None),
    ({"input_ids": torch.zeros(2, 9, dtype=torch.long)}, 2, 18),
    ({"input_ids": torch.zeros(2, 4), "attention_mask": torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]])}, 2, 5),
    ({"meta": "x"}, 0, None),
    # lists under the tensor keys (an unpadded collator) were an AttributeError inside the training loop
    ({"input_ids": [[1, 2, 3], [4]], "attention_mask": [[1, 1, 1], [1]]}, 0, None),
    ({"input_ids": torch.zeros(3, 2), "attention_mask": [[1, 1], [1, 0], [0, 0]]}, 3, 6),
])
def test_batch_shapes(batch, samples, tokens):
    from obsctl.exporters.training.minibatch import batch_samples, batch_tokens

    assert batch_samples(batch) == samples
    got = batch_tokens(batch)
    assert (None if got is None else int(got)) == tokens


def test_trainer_callback_on_a_non_zero_rank_counts_samples_not_steps():
    from transformers import TrainerControl, TrainerState

    from obsctl.exporters.training.hf import ObsctlTrainerCallback

    wl = Workload("train", labels={"run": "t1"})
    cb = ObsctlTrainerCallback(wl)
    model = torch.nn.Embedding(16, 4)
    state, control = TrainerState(is_world_process_zero=False), TrainerControl()
    cb.on_train_begin(None, state, control, model=model)
    cb.on_step_begin(None, state, control)
    model.train()
    model(input=torch.zeros(3, 5, dtype=torch.long))  # a forward without input_ids: first tensor's batch
    cb.on_step_end(None, state, control)
    cb.on_train_end(None, state, control)
    model(input=torch.zeros(3, 5, dtype=torch.long))  # hook removed: not counted
    assert value(wl, "obsctl_samples_total") == 3
    assert value(wl, "obsctl_steps_total") == 0
    assert value(wl, "obsctl_step_duration_seconds_count") == 0
