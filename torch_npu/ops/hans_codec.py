"""npu_hans_encode.out / npu_hans_decode.out: the lossless split of a floating-point tensor into its low-entropy
exponent bytes and its mantissa bytes (HANS, MindSpeed's activation compression), and its inverse.

Encode: each element's most significant byte (sign and exponent) is a symbol; pdf [256] (int32) receives their
histogram when statistic is True; mantissa receives the remaining bytes of every element in order; fixed receives
the symbol stream; var (the overflow the card's entropy coder spills into) is left untouched. Decode rebuilds
out bit for bit from mantissa and fixed. vnpu stores the symbols unencoded in fixed, so the round trip is exact
and the buffers keep the card's sizes, but the streams are not interchangeable with a card's (its asymmetric
numeral system coding is not reproduced). reshuff is accepted and has no effect on the layout.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_SYMBOLS = 256
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _bytes(t):
    return t.contiguous().view(torch.uint8).reshape(t.numel(), t.element_size())


def _check_buffers(op, dtype, numel, esize, mantissa, fixed):
    check(dtype in _FLOATS, op, f"the tensor must be float16, bfloat16 or float32, got {dtype}")
    check(mantissa.dtype == dtype and fixed.dtype == dtype, op, f"mantissa and fixed must be {dtype}")
    check(mantissa.numel() * esize >= numel * (esize - 1), op,
          f"mantissa must hold numel * (element size - 1) bytes ({numel * (esize - 1)}), got {mantissa.numel() * esize}")  # fmt: skip
    check(fixed.numel() >= numel, op, f"fixed must hold at least numel ({numel}) elements, got {fixed.numel()}")


@npu_op(
    "npu_hans_encode.out(Tensor input, bool statistic=False, bool reshuff=False, *, Tensor(a!) pdf, "
    "Tensor(b!) mantissa, Tensor(c!) fixed, Tensor(d!) var) -> (Tensor(a!), Tensor(b!), Tensor(c!), Tensor(d!))",
    fake=lambda input, statistic=False, reshuff=False, *, pdf, mantissa, fixed, var: (pdf, mantissa, fixed, var),
)
def npu_hans_encode_out(input, statistic=False, reshuff=False, *, pdf, mantissa, fixed, var):  # noqa: A002
    """(pdf, mantissa, fixed, var) filled in place."""
    op = "npu_hans_encode"
    numel, esize = input.numel(), input.element_size()
    _check_buffers(op, input.dtype, numel, esize, mantissa, fixed)
    check(pdf.dtype == torch.int32 and pdf.numel() == _SYMBOLS, op, f"pdf must be int32 [{_SYMBOLS}], got {pdf.dtype} {tuple(pdf.shape)}")  # fmt: skip
    raw = _bytes(input)
    symbols = raw[:, -1]
    if statistic:
        pdf.copy_(torch.bincount(symbols.long(), minlength=_SYMBOLS).to(torch.int32).reshape(pdf.shape))
    mantissa_bytes = mantissa.view(torch.uint8).reshape(-1)
    mantissa_bytes[: numel * (esize - 1)] = raw[:, :-1].reshape(-1)
    fixed_bytes = fixed.view(torch.uint8).reshape(-1)
    fixed_bytes.zero_()
    fixed_bytes[:numel] = symbols
    return pdf, mantissa, fixed, var


@npu_op(
    "npu_hans_decode.out(Tensor mantissa, Tensor fixed, Tensor var, Tensor pdf, bool reshuff=False, *, "
    "Tensor(a!) out) -> Tensor(a!)",
    fake=lambda mantissa, fixed, var, pdf, reshuff=False, *, out: out,
)
def npu_hans_decode_out(mantissa, fixed, var, pdf, reshuff=False, *, out):
    """out rebuilt from mantissa and fixed; out returned."""
    op = "npu_hans_decode"
    numel, esize = out.numel(), out.element_size()
    _check_buffers(op, out.dtype, numel, esize, mantissa, fixed)
    rebuilt = torch.cat([mantissa.contiguous().view(torch.uint8).reshape(-1)[: numel * (esize - 1)].reshape(numel, esize - 1),
                         fixed.contiguous().view(torch.uint8).reshape(-1)[:numel, None]], 1)  # fmt: skip
    return out.copy_(rebuilt.reshape(-1).view(out.dtype).reshape(out.shape))
