"""Prefetcher: moves the next batch of a DataLoader to npu on a side stream while the current one
is being used."""

import torch

__all__ = ["Prefetcher"]


def _to_npu(batch, non_blocking=True):
    if isinstance(batch, torch.Tensor):
        return batch.to("npu", non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_npu(b, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_npu(v, non_blocking) for k, v in batch.items()}
    return batch


class Prefetcher:
    """next() returns the next batch already on npu, or None once the loader is exhausted."""

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = stream if stream is not None else torch.npu.Stream()
        self.next_input = None
        self.preload()

    def preload(self):
        try:
            batch = next(self.loader)
        except StopIteration:
            self.next_input = None
            return
        with torch.npu.stream(self.stream):
            self.next_input = _to_npu(batch)

    def next(self):
        torch.npu.current_stream().wait_stream(self.stream)
        batch = self.next_input
        if batch is not None:
            self.preload()
        return batch
