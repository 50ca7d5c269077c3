"""Bit masks as the card packs them: eight flags to a uint8, the first flag in the lowest bit (dropout masks,
sign bits, the vocabulary-parallel target mask)."""

import torch

__all__ = ["pack_bits", "unpack_bits"]


def pack_bits(flags, padding=0):
    """flags (bool or 0/1, 1-D) -> uint8 [ceil(n / 8)]; a partial last byte is filled with `padding`."""
    bits = flags.to(torch.uint8).reshape(-1)
    bits = torch.nn.functional.pad(bits, (0, (-bits.numel()) % 8), value=int(padding))
    shifts = torch.arange(8, dtype=torch.uint8, device=bits.device)
    return (bits.view(-1, 8) << shifts).sum(-1).to(torch.uint8)


def unpack_bits(packed, count=None):
    """uint8 [k] -> uint8 0/1 flags [count] (all 8k without count)."""
    shifts = torch.arange(8, dtype=torch.uint8, device=packed.device)
    bits = ((packed.reshape(-1, 1) >> shifts) & 1).reshape(-1)
    return bits if count is None else bits[:count]
