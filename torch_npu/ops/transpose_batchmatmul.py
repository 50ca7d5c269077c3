"""npu_transpose_batchmatmul: a batched matmul whose operands and result are read and written through
permutations (the attention projections of MLA-style models keep [M, B, K] activations), as CANN's
TransposeBatchMatMul computes it: x1 permuted by perm_x1 to [B, M, K], x2 by perm_x2 to [B, K, N], their
product (float32 accumulation) permuted by perm_y (default: [M, B, N]). With a float32 scale [B * N] the
result is [M, 1, B * N] multiplied by scale, truncated toward zero and saturated to int8; with
batch_split_factor > 1 it is [batch_split_factor, M, B * N / batch_split_factor]."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _permuted(x, perm, default, op, name):
    perm = list(perm) if perm is not None else default
    check(
        x.dim() == 3 and sorted(perm) == [0, 1, 2],
        op,
        f"{name} must be 3-D with a permutation of [0, 1, 2], got {tuple(x.shape)} and {perm}",
    )
    return x.permute(perm)


def _fake(x, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1):
    batched = x.permute(list(perm_x1) if perm_x1 is not None else [1, 0, 2])
    b, m, n = (
        batched.shape[0],
        batched.shape[1],
        weight.permute(list(perm_x2) if perm_x2 is not None else [0, 1, 2]).shape[2],
    )
    if scale is not None:
        return x.new_empty(m, 1, b * n, dtype=torch.int8)
    factor = batch_split_factor or 1
    if factor > 1:
        return x.new_empty(factor, m, b * n // factor)
    return x.new_empty(m, b, n)


@npu_op(
    "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None, "
    "int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor",
    fake=_fake,
    dtypes={"input": _FLOATS, "weight": _FLOATS},
    api="aclnnTransposeBatchMatMul",
)
def npu_transpose_batchmatmul(
    x, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1
):
    """See the module doc: [M, B, N] by default, int8 [M, 1, B * N] with scale, [f, M, B * N / f] with
    batch_split_factor f > 1."""
    op = "npu_transpose_batchmatmul"
    check(bias is None, op, "bias is not supported by vnpu's TransposeBatchMatMul")
    a = _permuted(x, perm_x1, [1, 0, 2], op, "input")
    b = _permuted(weight, perm_x2, [0, 1, 2], op, "weight")
    check(
        a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1],
        op,
        f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}",
    )
    out = _permuted(torch.matmul(a.float(), b.float()), perm_y, [1, 0, 2], op, "the result")
    m, batches, n = out.shape
    factor = batch_split_factor or 1
    check(scale is None or factor == 1, op, "scale and batch_split_factor > 1 cannot be combined")
    if scale is not None:
        check(scale.numel() == batches * n, op, f"scale must hold B * N = {batches * n} values, got {scale.numel()}")
        return (out.reshape(m, 1, batches * n) * scale.float()).trunc().clamp(-128, 127).to(torch.int8)
    if factor > 1:
        check((batches * n) % factor == 0, op, f"batch_split_factor {factor} must divide B * N = {batches * n}")
        out = out.reshape(m, factor, -1).transpose(0, 1)
    return out.to(x.dtype)
