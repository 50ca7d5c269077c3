"""npu_transpose_batchmatmul: a batched matmul whose operands and result are read and written through
permutations (the attention projections of MLA-style models keep [M, B, K] activations), as CANN's
TransposeBatchMatMul computes it: x1 permuted by perm_x1 to [B, M, K] (default [0, 1, 2]: x1 is [B, M, K]; [1, 0, 2]
reads an [M, B, K] x1), x2 by perm_x2 to [B, K, N], their product (float32 accumulation) permuted by perm_y to
[M, B, N]. With a float32 scale [B * N] the
result is [M, 1, B * N] multiplied by scale, truncated toward zero and saturated to int8 (the scale may be the int64
form npu_trans_quant_param makes); with batch_split_factor > 1 it is [batch_split_factor, M, B * N /
batch_split_factor]. Arguments are checked with op-plugin's texts: perm_x1 [0, 1, 2] or [1, 0, 2], perm_x2
[0, 1, 2], perm_y [1, 0, 2], float16 / float32 / bfloat16 operands."""

import torch

from torch_npu.ops._common import check, require
from torch_npu.ops.attention_quant import scale_values
from torch_npu.ops.registration import npu_op

__all__ = []

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


_PERMS = {
    "perm_x1": ([0, 1, 2], [1, 0, 2]),
    "perm_x2": ([0, 1, 2],),
    "perm_y": ([1, 0, 2],),
}


def _checked(x, weight, perm_x1, perm_x2, perm_y):
    """The three permutations (defaults filled in), after op-plugin's checks of ranks, dtypes and perms."""
    # op-plugin's text, its missing spaces included
    require(x.dim() == 3 and weight.dim() == 3, f"input dim is {x.dim()}but expected is 3weight dim is "
            f"{weight.dim()}but expected is 3")  # fmt: skip
    require(x.dtype in _FLOATS, "input's type supported for float16, float32 and bfloat16.")
    require(weight.dtype in _FLOATS, "weight's type supported for float16, float32 and bfloat16.")
    perms = {
        "perm_x1": [0, 1, 2] if perm_x1 is None else list(perm_x1),
        "perm_x2": [0, 1, 2] if perm_x2 is None else list(perm_x2),
        "perm_y": [1, 0, 2] if perm_y is None else list(perm_y),
    }
    for name, allowed in _PERMS.items():
        require(perms[name] in [list(a) for a in allowed], f"{name} should be " + " or ".join(map(str, allowed)))
    return perms["perm_x1"], perms["perm_x2"], perms["perm_y"]


def _fake(x, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1):
    perm_x1, perm_x2, _ = _checked(x, weight, perm_x1, perm_x2, perm_y)
    batched = x.permute(perm_x1)
    b, m, n = batched.shape[0], batched.shape[1], weight.permute(perm_x2).shape[2]
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
)
def npu_transpose_batchmatmul(
    x, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1
):
    """See the module doc: [M, B, N] by default, int8 [M, 1, B * N] with scale, [f, M, B * N / f] with
    batch_split_factor f > 1."""
    op = "npu_transpose_batchmatmul"
    check(bias is None, op, "bias is not supported by vnpu's TransposeBatchMatMul")
    perm_x1, perm_x2, perm_y = _checked(x, weight, perm_x1, perm_x2, perm_y)
    a, b = x.permute(perm_x1), weight.permute(perm_x2)
    check(
        a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1],
        op,
        f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}",
    )
    out = torch.matmul(a.float(), b.float()).permute(perm_y)
    m, batches, n = out.shape
    factor = batch_split_factor or 1
    check(scale is None or factor == 1, op, "scale and batch_split_factor > 1 cannot be combined")
    if scale is not None:
        check(scale.numel() == batches * n, op, f"scale must hold B * N = {batches * n} values, got {scale.numel()}")
        return (out.reshape(m, 1, batches * n) * scale_values(scale)).trunc().clamp(-128, 127).to(torch.int8)
    if factor > 1:
        check((batches * n) % factor == 0, op, f"batch_split_factor {factor} must divide B * N = {batches * n}")
        out = out.reshape(m, factor, -1).transpose(0, 1)
    return out.to(x.dtype)
