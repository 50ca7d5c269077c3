"""Prefetcher: moves the next (input, target) batch of a DataLoader to npu on a side stream while the current
one is being used."""

import torch

__all__ = ["Prefetcher"]


class Prefetcher:
    """next() returns the next (input, target) already on npu, or (None, None) once the loader is exhausted.

    The loader yields (input, target) pairs. Pass `stream` when the prefetcher is created repeatedly, so that
    every one copies on the same side stream. The returned tensors are recorded on the consumer's stream
    (Tensor.record_stream): their memory is not handed back to the side stream's next copies while the consumer
    may still use it (torch_npu's prefetcher leaves that race to the card; the sanitizer reports it)."""

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = stream if stream is not None else torch.npu.Stream()
        self.preload()

    def preload(self):
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = None
            self.next_target = None
            return
        with torch.npu.stream(self.stream):
            self.next_input = self.next_input.npu(non_blocking=True)
            self.next_target = self.next_target.npu(non_blocking=True)

    def next(self):
        current = torch.npu.current_stream()
        current.wait_stream(self.stream)
        next_input, next_target = self.next_input, self.next_target
        if next_target is not None:
            next_input.record_stream(current)
            next_target.record_stream(current)
            self.preload()
        return next_input, next_target
