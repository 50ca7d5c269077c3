"""npu_transpose_quant_batchmatmul: a batched matmul of 8-bit operands with the layouts permuted around it
(TransposeQuantBatchMatMul; DeepSeek's grouped output projection): x1 [M, B, K] is read as [B, M, K] (perm_x1
[1, 0, 2], the only one), x2 [B, K, N] as it is (perm_x2 [0, 1, 2]), and the [B, M, N] product is written [M, B, N]
(perm_y [1, 0, 2]); with batch_split_factor s > 1 the output is [s, M, B * N / s].

Operands: float8_e4m3fn / float8_e5m2, or HiFloat8 codes (x*_dtype = torch_npu.hifloat8). Scales:
- per token and per channel (float32): y[m, b, n] = (x1 @ x2)[b, m, n] * x1_scale[m] * x2_scale[n];
- MX (e8m0, group_sizes (0, 0, 32)): npu_dynamic_mx_quant's layouts, x1_scale [M, B, ceil(K / 64), 2] (along K of
  x1) and x2_scale [B, ceil(K / 64), N, 2] (along K of x2).
The product accumulates in float32; bias (float32, broadcast to [M, B, N]) is added; the result is rounded to dtype.
"""

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.add_quant_matmul import float8_values, is_e8m0, mx_matmul
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_transpose_quant_batchmatmul"


def _check_perms(perm_x1, perm_x2, perm_y):
    for name, perm, want in (("perm_x1", perm_x1, [1, 0, 2]), ("perm_x2", perm_x2, [0, 1, 2]), ("perm_y", perm_y, [1, 0, 2])):  # fmt: skip
        given = want if perm is None else list(perm)
        check(given == want, _OP, f"{name} should be {want}, got {given}")


def _fake(x1, x2, dtype, *, bias=None, x1_scale=None, x2_scale=None, group_sizes=None, perm_x1=None, perm_x2=None,
          perm_y=None, batch_split_factor=1, x1_dtype=None, x2_dtype=None):  # fmt: skip
    _check_perms(perm_x1, perm_x2, perm_y)
    m, b, n = x1.shape[0], x1.shape[1], x2.shape[2]
    split = batch_split_factor or 1
    shape = (m, b, n) if split <= 1 else (split, m, b * n // split)
    return x1.new_empty(shape, dtype=dtype_of(dtype, _OP))


@npu_op(
    "npu_transpose_quant_batchmatmul(Tensor x1, Tensor x2, int dtype, *, Tensor? bias=None, Tensor? x1_scale=None, "
    "Tensor? x2_scale=None, int[]? group_sizes=None, int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, "
    "int? batch_split_factor=1, int? x1_dtype=None, int? x2_dtype=None) -> Tensor",
    fake=_fake,
)
def npu_transpose_quant_batchmatmul(x1, x2, dtype, *, bias=None, x1_scale=None, x2_scale=None, group_sizes=None,
                                    perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1, x1_dtype=None,
                                    x2_dtype=None):  # fmt: skip
    """[M, B, N] (or [split, M, B * N / split]) in dtype."""
    _check_perms(perm_x1, perm_x2, perm_y)
    out_dtype = dtype_of(dtype, _OP)
    check(x1.dim() == 3 and x2.dim() == 3, _OP, f"x1 [M, B, K] and x2 [B, K, N] must be 3-D, got {tuple(x1.shape)} and {tuple(x2.shape)}")  # fmt: skip
    m, batch, k = x1.shape
    check(x2.shape[0] == batch and x2.shape[1] == k, _OP, f"x2 must be [{batch}, {k}, N], got {tuple(x2.shape)}")
    n = x2.shape[2]
    a = float8_values(x1, x1_dtype, "x1", _OP)
    b = float8_values(x2, x2_dtype, "x2", _OP)
    check(x1_scale is not None and x2_scale is not None, _OP, "x1_scale and x2_scale are required")
    if is_e8m0(x1_scale, None) or is_e8m0(x2_scale, None):
        check(group_sizes is None or list(group_sizes) == [0, 0, 32], _OP, f"MX scales need group_sizes (0, 0, 32), got {group_sizes}")  # fmt: skip
        check(x1_scale.dim() == 4 and x2_scale.dim() == 4, _OP, "MX scales must be [M, B, ceil(K / 64), 2] and [B, ceil(K / 64), N, 2]")  # fmt: skip
        out = torch.stack([mx_matmul(a[:, i], b[i], x1_scale[:, i], x2_scale[i], _OP) for i in range(batch)], 1)
    else:
        check(x1_scale.numel() == m and x2_scale.numel() == n, _OP,
              f"per-token x1_scale [{m}] and per-channel x2_scale [{n}] expected, got {tuple(x1_scale.shape)} and {tuple(x2_scale.shape)}")  # fmt: skip
        out = torch.einsum("mbk,bkn->mbn", a, b) * x1_scale.float().reshape(m, 1, 1) * x2_scale.float().reshape(1, 1, n)
    if bias is not None:
        out = out + bias.float()
    split = batch_split_factor or 1
    if split > 1:
        check(batch * n % split == 0, _OP, f"B * N = {batch * n} must be divisible by batch_split_factor {split}")
        out = out.reshape(m, split, batch * n // split).transpose(0, 1)
    return out.to(out_dtype).contiguous()
