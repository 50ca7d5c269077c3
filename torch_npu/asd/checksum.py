"""torch_npu.matmul_checksum(a, b, c): does c look like a @ b, or did the AI Core corrupt it?

torch_npu checks with the V-ABFT operator `torch.ops.npu._npu_matmul_abft_verify` when the CANN it runs on
ships it (a vendor package, probed once) and the inputs fit its contract (2-D bfloat16/float32); vnpu has no
such operator, so the probe fails as on a card without the package and the PyTorch check runs: the row sums
of c against a @ (row sums of b) in float32, within the accumulated rounding of c's elements (2^-8 of the
row's largest magnitude times sqrt(n) when a few elements dominate the row, of its mean magnitude times n
otherwise), with five times that margin. A row outside it is confirmed by computing a @ b into c again: the
check reports a corruption when the recomputed row means differ, and c holds the correct product after it."""

import math

import torch

from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

_SUPPORTED_DTYPES = (torch.bfloat16, torch.float32)
_ELEMENT_ROUNDING = 2.0**-8  # bfloat16's relative rounding, the coarsest operand precision
_MARGIN = 5.0
_DOMINATED_ROW = 5.0  # max / mean magnitude above which a row's rounding grows with sqrt(n), not n

_ABFT_E_MAX = {torch.bfloat16: 0.001, torch.float32: 0.00002}  # the operator's recommended error bounds

_abft_available_cache = None  # whether the V-ABFT operator runs here; None until probed


def _npu_matmul_abft_verify_available():
    """Whether torch.ops.npu._npu_matmul_abft_verify exists and runs (probed once per process)."""
    global _abft_available_cache
    if _abft_available_cache is None:
        try:
            a = torch.ones(8, 16, dtype=torch.bfloat16, device="npu")
            c = torch.full((8, 16), 16.0, dtype=torch.float32, device="npu")
            weight = torch.ones(16, dtype=torch.bfloat16, device="npu")
            torch.ops.npu._npu_matmul_abft_verify(a, a.new_ones(16, 16), c, weight, e_max=0.001)
            _abft_available_cache = True
        except (RuntimeError, AttributeError, TypeError):
            _abft_available_cache = False
    return _abft_available_cache


def _abft_path_applicable(a, b, c):
    """Whether (a, b, c) fits the V-ABFT operator: 2-D, a and b of one supported dtype, c of that dtype or
    float32, shapes [m, k] @ [k, n] = [m, n] with no empty dimension."""
    if a.dim() != 2 or b.dim() != 2 or c.dim() != 2:
        return False
    if a.dtype != b.dtype or a.dtype not in _SUPPORTED_DTYPES or c.dtype not in (a.dtype, torch.float32):
        return False
    (m, k), (k2, n) = a.shape, b.shape
    return m > 0 and k > 0 and n > 0 and k == k2 and tuple(c.shape) == (m, n)


def _check_inputs(a, b, c):
    for t in (a, b, c):
        if not isinstance(t, torch.Tensor) or t.device.type != "npu":
            raise TypeError("tensor should be torch.Tensor, and device type should be npu" + pta_error(ErrCode.PARAM))
    if any(t.dtype not in _SUPPORTED_DTYPES for t in (a, b, c)):
        raise TypeError(
            "matmul_checksum only supports bfloat16 and float32, but got "
            f"a.dtype={a.dtype}, b.dtype={b.dtype}, c.dtype={c.dtype}" + pta_error(ErrCode.PARAM)
        )


def _row_sum_check(a, b, c):
    """The PyTorch check (see the module docstring): a bool scalar tensor on npu."""
    c_sums = c.sum(dim=-1, dtype=torch.float32)
    expected = torch.matmul(a.float(), b.sum(dim=-1, keepdim=True, dtype=torch.float32)).squeeze(-1)
    n = b.shape[-1]
    magnitude = c.abs()
    row_max, row_mean = magnitude.amax(dim=-1), magnitude.mean(dim=-1)
    if torch.min(row_max / row_mean) > _DOMINATED_ROW:
        rounding = row_max * _ELEMENT_ROUNDING * math.sqrt(n)
    else:
        rounding = row_mean * _ELEMENT_ROUNDING * n
    outside = (c_sums - expected).abs() - _MARGIN * rounding.float() > _MARGIN * 1e-20
    if not outside.any():
        return outside.any()
    torch.matmul(a, b, out=c)
    return (c.abs().mean(dim=-1) != row_mean).any()


def _abft_check(a, b, c):
    """The V-ABFT operator's verdict. It returns one byte per 8 rows and column segment (segment-major,
    ceil(m / 8) bytes per segment), a set bit (least significant first) for each correct row; bits past
    row m pad the last byte of each segment."""
    verdicts = torch.ops.npu._npu_matmul_abft_verify(
        a.contiguous(),
        b.contiguous(),
        c.float().contiguous(),
        torch.ones(b.shape[1], dtype=a.dtype, device=a.device),
        e_max=_ABFT_E_MAX[a.dtype],
    )
    m = a.shape[0]
    expected = torch.full_like(verdicts, 255)
    if m % 8:
        expected.view(-1, (m + 7) // 8)[:, -1] = (1 << (m % 8)) - 1
    return ((verdicts & expected) != expected).any()


def _matmul_checksum(a, b, c):
    """A bool scalar tensor on npu: True when c is not a @ b (see the module docstring)."""
    _check_inputs(a, b, c)
    if _abft_path_applicable(a, b, c) and _npu_matmul_abft_verify_available():
        return _abft_check(a, b, c)
    return _row_sum_check(a, b, c)
