"""A LightningModule trained by Lightning's Trainer, as its users run it.

Usage: python lightning_loop.py --out DIR --accelerator ACC --devices N --precision P
       [--package lightning.pytorch|pytorch_lightning]
Each process writes DIR/rank<N>.json: strategy, root device, precision plugin, the loss of every
step and the final parameters. Several devices run DDP (Lightning relaunches this script per rank).
"""

import argparse
import importlib
import json
import os

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--accelerator", default="npu")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--package", default="lightning.pytorch")
    args = parser.parse_args()
    pl = importlib.import_module(args.package)

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
        accelerator=args.accelerator,
        devices=args.devices,
        precision=args.precision,
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
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{trainer.global_rank}.json"), "w") as f:
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


if __name__ == "__main__":
    main()
