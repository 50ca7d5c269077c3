"""Dropout with the card's bit masks: npu_dropout_gen_mask (one bit per element, the first element in the
lowest bit, padded to whole 128-element blocks), npu_dropout_do_mask and _npu_dropout (both return the
mask with the result; the backward reuses it, never draws again)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.bit_masks import pack_bits, unpack_bits
from torch_npu.ops.dtype_support import FLOATS
from torch_npu.ops.registration import _export, _library, npu_op

__all__ = []

_BLOCK = 128  # elements per mask block (16 bytes)


def _mask_bytes(numel):
    return (numel + _BLOCK - 1) // _BLOCK * _BLOCK // 8


def _check_p(p, op):
    check(0.0 <= p <= 1.0, op, f"p must be in [0, 1], got {p}")


def _apply(x, mask, p, op):
    _check_p(p, op)
    check(
        mask.dtype == torch.uint8 and mask.dim() == 1,
        op,
        f"mask must be a 1-D uint8 bit mask, got {mask.dtype} {tuple(mask.shape)}",
    )
    check(mask.numel() * 8 >= x.numel(), op, f"mask has {mask.numel() * 8} bits, self needs {x.numel()}")
    keep = unpack_bits(mask, x.numel()).view(x.shape).to(x.dtype)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return x * keep * scale


def _generate(shape, p, device, generator=None):
    """The bit mask of `shape`: bits drawn keep-with-probability 1 - p (from `generator`, a CPU one, when given;
    the device's otherwise); the padding bytes past the elements' last byte are zero, as the card leaves them."""
    numel = 1
    for d in shape:
        numel *= d
    bits = _mask_bytes(numel) * 8
    draws = torch.rand(bits, device=device) if generator is None else torch.rand(bits, generator=generator)
    mask = pack_bits(draws.to(device) >= p)
    mask[(numel + 7) // 8 :] = 0
    return mask


_GEN_MASK = (
    "npu_dropout_gen_mask(int[] size, float p, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor"
)


def npu_dropout_gen_mask(size, p, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A dropout bit mask for `size` elements: bit i is 1 (keep) with probability 1 - p, drawn from the
    device's generator; numel rounded up to 128-element blocks, 16 bytes each."""
    _check_p(p, "npu_dropout_gen_mask")
    return _generate(list(size), p, device or torch.device("npu"))


# A factory operator: without a tensor argument no backend is picked, so one kernel serves every device.
_library("npu").define(_GEN_MASK)
_library("npu").impl("npu_dropout_gen_mask", npu_dropout_gen_mask, "CompositeExplicitAutograd")
_export("npu_dropout_gen_mask")


@npu_op(
    "_npu_dropout_gen_mask.Tensor(Tensor self, int[] size, float p, int seed, int offset, *, bool? parallel=True, "
    "bool? sync=None) -> Tensor",
    fake=lambda x, size, p, seed, offset, *, parallel=True, sync=None: x.new_empty(
        _mask_bytes(int(torch.Size(size).numel())), dtype=torch.uint8
    ),
)
def _npu_dropout_gen_mask(x, size, p, seed, offset, *, parallel=True, sync=None):
    """The bit mask of npu_dropout_gen_mask for `size`, drawn from the Philox position (seed, offset): the same
    seed and offset give the same mask (parallel or not). The bits are vnpu's stream, not the card's Philox
    bits."""
    _check_p(p, "_npu_dropout_gen_mask")
    generator = torch.Generator().manual_seed(hash((int(seed), int(offset))) & (2**63 - 1))
    return _generate(list(size), p, x.device, generator)


@npu_op(
    "npu_dropout_do_mask(Tensor self, Tensor mask, float p) -> (Tensor, Tensor)",
    dtypes={"self": FLOATS},
    api="DropOutDoMask",
)
def npu_dropout_do_mask(x, mask, p):
    """self * mask bit / (1 - p) (0 where dropped); returns (result, mask)."""
    return _apply(x, mask, p, "npu_dropout_do_mask"), mask.clone()


def _dropout_setup(ctx, inputs, output):
    ctx.p = inputs[1]
    ctx.save_for_backward(output[1])


def _dropout_backward(ctx, grad, _grad_mask):
    (mask,) = ctx.saved_tensors
    return _apply(grad, mask, ctx.p, "_npu_dropout"), None


@npu_op(
    "_npu_dropout(Tensor self, float p) -> (Tensor, Tensor)",
    dtypes={"self": FLOATS},
    api="DropOutDoMask",
    backward=_dropout_backward,
    setup_context=_dropout_setup,
    fake=lambda x, p: (torch.empty_like(x), torch.empty(_mask_bytes(x.numel()), dtype=torch.uint8, device=x.device)),
)
def _npu_dropout(x, p):
    """Dropout of self with a fresh bit mask: (self * mask / (1 - p), mask)."""
    mask = _generate(list(x.shape), p, x.device)
    return _apply(x, mask, p, "_npu_dropout"), mask
