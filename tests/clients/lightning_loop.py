"""A LightningModule trained by Lightning's Trainer, as its users run it.

Usage: python lightning_loop.py --out DIR --devices N [--package lightning.pytorch|pytorch_lightning] RUN [RUN ...]
where each RUN is ACCELERATOR:PRECISION (e.g. npu:bf16-mixed), one Trainer.fit each, in one process (Lightning's
import dominates a short run). Each run writes DIR/ACCELERATOR:PRECISION/rank<N>.json: strategy, root device,
precision plugin, the loss of every step and the final parameters. Several devices run DDP (Lightning relaunches
this script per rank, and the ranks make the same runs in the same order).
"""

import argparse
import importlib
import json
import os

import torch
import torch.nn.functional as F


def fit(pl, accelerator, devices, precision, out):
    class Classifier(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
            self.losses = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self.net(x).float(), y)
            self.losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    y = (x[:, :4].sum(dim=1) > 0).long() + 2 * (x[:, 4:].sum(dim=1) > 0).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    model = Classifier()
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=devices,
        precision=precision,
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    seen = {}

    class Where(pl.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            seen.setdefault("param_device", str(next(module.parameters()).device))
            seen.setdefault("batch_device", str(batch[0].device))

    trainer.callbacks.append(Where())
    trainer.fit(model, loader)
    plugin = trainer.precision_plugin
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{trainer.global_rank}.json"), "w") as f:
        json.dump(
            {
                "strategy": type(trainer.strategy).__name__,
                "root_device": str(trainer.strategy.root_device),
                "accelerator": type(trainer.accelerator).__name__,
                "precision": type(plugin).__name__,
                "scaler": type(getattr(plugin, "scaler", None)).__module__ if getattr(plugin, "scaler", None) else None,
                "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
                **seen,
                "losses": model.losses,
                "params": [p.detach().float().cpu().flatten().tolist() for p in model.parameters()],
            },
            f,
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--package", default="lightning.pytorch")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    pl = importlib.import_module(args.package)
    for run in args.runs:
        accelerator, precision = run.split(":")
        fit(pl, accelerator, args.devices, precision, os.path.join(args.out, run))


if __name__ == "__main__":
    main()
