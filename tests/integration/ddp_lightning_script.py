"""Lightning DDP on the CPU (2 processes, gloo) with ObsctlCallback in multiprocess mode, for
tests/integration/test_training_ddp.py. Lightning re-runs this script for rank 1.
Args: samples, batch size, root dir. Rank 0 prints GLOBAL_STEP=<n>."""

import sys

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from obsctl.exporters.sdk import Workload
from obsctl.exporters.training.lightning import ObsctlCallback

n, batch, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, b, _):
        x, y = b
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    torch.manual_seed(0)
    wl = Workload("ddp-train", labels={"run": "d1"})
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, callbacks=[ObsctlCallback(wl)],
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=root)
    trainer.fit(Tiny(), DataLoader(TensorDataset(torch.randn(n, 4), torch.randn(n, 1)), batch_size=batch))
    if trainer.is_global_zero:
        print(f"GLOBAL_STEP={trainer.global_step}", flush=True)
