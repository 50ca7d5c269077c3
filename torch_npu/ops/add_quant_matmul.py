"""npu_add_quant_matmul(_) and npu_add_quant_gmm(_): a quantised matmul accumulated into a float32 matrix
(QuantBatchMatmulInplaceAdd / QuantGroupedMatmulInplaceAdd: gradient accumulation across micro-batches).

x1 [M, K] and x2 [K, N] hold float8_e4m3fn / float8_e5m2 values, or HiFloat8 codes (uint8 / int8 with
x1_dtype / x2_dtype = torch_npu.hifloat8). Two schemes, by the scales:
- MX: e8m0 block scales (uint8 / int8 bytes with x*_scale_dtype = torch_npu.float8_e8m0fnu, or
  torch.float8_e8m0fnu), one per 32 values of K: x1_scale [M, ceil(K / 64), 2], x2_scale [ceil(K / 64), N, 2];
  group_sizes None or [1, 1, 32].
- T-T (HiFloat8, float32 scales): self += (x1 @ x2) * x1_scale * x2_scale, one scale each ([1]); the grouped
  form also takes one x2_scale per output column (T-C, [g, N]).
The grouped form splits K by group_list (cumulative ends, or sizes with group_list_type 1) and accumulates
group i into self[i] ([g, M, N]); with MX scales each group's blocks start on a fresh pair of scale rows
(x*_scale hold K / 64 + g rows). Products are exact float32 values summed in float32.
"""

import math

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.ops._common import check
from torch_npu.ops.functionalization import functionalized_by
from torch_npu.ops.quant import group_row_counts
from torch_npu.ops.registration import npu_op
from torch_npu.utils import hifloat8

__all__ = []

_MX_BLOCK = 32
_FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_MATMUL_ARGS = (
    "Tensor x1, Tensor x2, Tensor x2_scale, *, Tensor? x1_scale=None, int[]? group_sizes=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None"
)
_GMM_ARGS = (
    "Tensor x1, Tensor x2, Tensor x2_scale, Tensor group_list, *, Tensor? x1_scale=None, int? group_list_type=0, "
    "int[]? group_sizes=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, "
    "int? x2_scale_dtype=None"
)


def _like_self(self, *args, **kwargs):
    return torch.empty_like(self)


def _self(self, *args, **kwargs):
    return self


def float8_values(x, dtype, name, op):
    """The float32 values of an 8-bit operand."""
    if dtype is not None and int(dtype) == DTypeNumber.hifloat8:
        check(x.element_size() == 1, op, f"{name} holds HiFloat8 codes and must be an 8-bit tensor, got {x.dtype}")
        return hifloat8.decode(x)
    check(x.dtype in _FLOAT8, op, f"{name} must be float8_e4m3fn, float8_e5m2 or HiFloat8 codes "
          f"({name[:2]}_dtype=torch_npu.hifloat8), got {x.dtype}")  # fmt: skip
    return x.float()


def is_e8m0(scale, scale_dtype):
    if scale_dtype is not None:
        return int(scale_dtype) == DTypeNumber.float8_e8m0fnu
    return scale.dtype == torch.float8_e8m0fnu


def _powers(scale, name, op):
    """e8m0 bytes -> float32 2 ** (byte - 127) (255 is NaN)."""
    check(scale.element_size() == 1, op, f"{name} holds e8m0 bytes and must be an 8-bit tensor, got {scale.dtype}")
    exponent = scale.view(torch.uint8).float()
    return torch.where(exponent == 255, torch.nan, torch.exp2(exponent - 127))


def mx_matmul(a, b, a_scale, b_scale, op):
    """sum over blocks of 32 along K of the block products times both block scales; a_scale [M, pairs, 2],
    b_scale [pairs, N, 2]."""
    m, k = a.shape
    blocks = math.ceil(k / _MX_BLOCK)
    check(a_scale.dim() == 3 and a_scale.shape[0] == m and a_scale.shape[2] == 2 and a_scale.shape[1] * 2 >= blocks,
          op, f"x1_scale must be [{m}, {math.ceil(k / 64)}, 2], got {tuple(a_scale.shape)}")  # fmt: skip
    n = b.shape[1]
    check(b_scale.dim() == 3 and b_scale.shape[1] == n and b_scale.shape[2] == 2 and b_scale.shape[0] * 2 >= blocks,
          op, f"x2_scale must be [{math.ceil(k / 64)}, {n}, 2], got {tuple(b_scale.shape)}")  # fmt: skip
    per_k_a = _powers(a_scale, "x1_scale", op).reshape(m, -1)[:, :blocks].repeat_interleave(_MX_BLOCK, 1)[:, :k]
    per_k_b = _powers(b_scale, "x2_scale", op).permute(0, 2, 1).reshape(-1, n)[:blocks]
    per_k_b = per_k_b.repeat_interleave(_MX_BLOCK, 0)[:k]
    return (a * per_k_a) @ (b * per_k_b)


def _check_group_sizes(group_sizes, mx, op):
    if group_sizes is None:
        return
    allowed = ([1, 1, 32], [0, 0, 0]) if mx else ([0, 0, 0],)
    check(len(group_sizes) == 3, op,
          f"When group_sizes is not empty, it only supports input with 3 elements, but got {len(group_sizes)}")  # fmt: skip
    check(list(group_sizes) in [list(g) for g in allowed], op,
          f"group_sizes must be {' or '.join(str(g) for g in allowed)} for this scheme, got {list(group_sizes)}")  # fmt: skip


def _operands(self, x1, x2, x1_dtype, x2_dtype, op):
    check(self.dtype == torch.float32, op, f"self must be float32, got {self.dtype}")
    check(x1.dim() == 2 and x2.dim() == 2 and x1.shape[1] == x2.shape[0], op,
          f"x1 [M, K] and x2 [K, N] must share K, got {tuple(x1.shape)} and {tuple(x2.shape)}")  # fmt: skip
    return float8_values(x1, x1_dtype, "x1", op), float8_values(x2, x2_dtype, "x2", op)


def _product(a, b, x1_scale, x2_scale, group_sizes, x1_scale_dtype, x2_scale_dtype, op):
    """One quantised product [M, N] in float32."""
    mx = is_e8m0(x2_scale, x2_scale_dtype)
    _check_group_sizes(group_sizes, mx, op)
    check(x1_scale is not None, op, "x1_scale is required")
    if mx:
        check(is_e8m0(x1_scale, x1_scale_dtype), op, "x1_scale and x2_scale must both be e8m0 (MX) or both float32")
        return mx_matmul(a, b, x1_scale, x2_scale, op)
    check(x1_scale.dtype == torch.float32 and x2_scale.dtype == torch.float32, op,
          f"T-T scales must be float32, got {x1_scale.dtype} and {x2_scale.dtype}")  # fmt: skip
    check(x1_scale.numel() == 1, op, f"x1_scale must hold one value, got {tuple(x1_scale.shape)}")
    n = b.shape[1]
    check(x2_scale.numel() in (1, n), op, f"x2_scale must hold 1 or {n} values, got {tuple(x2_scale.shape)}")
    return (a @ b) * x1_scale.reshape(1, 1) * x2_scale.reshape(1, -1)


def _add_quant_matmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                      x2_scale_dtype, op):  # fmt: skip
    a, b = _operands(self, x1, x2, x1_dtype, x2_dtype, op)
    check(tuple(self.shape) == (a.shape[0], b.shape[1]), op,
          f"self must be [M, N] = [{a.shape[0]}, {b.shape[1]}], got {tuple(self.shape)}")  # fmt: skip
    return self + _product(a, b, x1_scale, x2_scale, group_sizes, x1_scale_dtype, x2_scale_dtype, op)


@npu_op(f"npu_add_quant_matmul(Tensor self, {_MATMUL_ARGS}) -> Tensor", fake=_like_self)
def npu_add_quant_matmul(self, x1, x2, x2_scale, *, x1_scale=None, group_sizes=None, x1_dtype=None, x2_dtype=None,
                         x1_scale_dtype=None, x2_scale_dtype=None):  # fmt: skip
    """self + the quantised x1 @ x2, as a new tensor."""
    return _add_quant_matmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                             x2_scale_dtype, "npu_add_quant_matmul")  # fmt: skip


@npu_op(f"npu_add_quant_matmul_(Tensor(a!) self, {_MATMUL_ARGS}) -> Tensor(a!)", fake=_self)
def npu_add_quant_matmul_(self, x1, x2, x2_scale, *, x1_scale=None, group_sizes=None, x1_dtype=None, x2_dtype=None,
                          x1_scale_dtype=None, x2_scale_dtype=None):  # fmt: skip
    """self += the quantised x1 @ x2."""
    return self.copy_(_add_quant_matmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype,
                                        x1_scale_dtype, x2_scale_dtype, "npu_add_quant_matmul_"))  # fmt: skip


def _group_scale(scale, i, groups, name, op):
    check(scale.shape[0] == groups, op, f"{name} must hold one entry per group ({groups}), got {tuple(scale.shape)}")
    return scale[i]


def _add_quant_gmm(self, x1, x2, x2_scale, group_list, x1_scale, group_list_type, group_sizes, x1_dtype, x2_dtype,
                   x1_scale_dtype, x2_scale_dtype, op):  # fmt: skip
    a, b = _operands(self, x1, x2, x1_dtype, x2_dtype, op)
    check(group_sizes is None, op, f"group_sizes only supports the default None, got {group_sizes}")
    groups = group_list.numel()
    check(1 <= groups <= 1024, op, f"group_list must hold 1 to 1024 groups, got {groups}")
    check(tuple(self.shape) == (groups, a.shape[0], b.shape[1]), op,
          f"self must be [g, M, N] = [{groups}, {a.shape[0]}, {b.shape[1]}], got {tuple(self.shape)}")  # fmt: skip
    sizes = group_row_counts(group_list, group_list_type or 0, a.shape[1], op)
    mx = is_e8m0(x2_scale, x2_scale_dtype)
    check(x1_scale is not None, op, "x1_scale is required")
    out, start, pair = [], 0, 0
    for i, size in enumerate(sizes):
        end = start + size
        if mx:
            pairs = math.ceil(size / 64)
            s1, s2 = x1_scale[:, pair : pair + pairs], x2_scale[pair : pair + pairs]
            pair += pairs
        else:
            s1 = _group_scale(x1_scale.reshape(groups, -1), i, groups, "x1_scale", op)
            s2 = _group_scale(x2_scale.reshape(groups, -1), i, groups, "x2_scale", op)
        product = _product(a[:, start:end], b[start:end], s1, s2, None, x1_scale_dtype, x2_scale_dtype, op)
        out.append(self[i] + product)
        start = end
    return torch.stack(out)


@npu_op(f"npu_add_quant_gmm(Tensor self, {_GMM_ARGS}) -> Tensor", fake=_like_self)
def npu_add_quant_gmm(self, x1, x2, x2_scale, group_list, *, x1_scale=None, group_list_type=0, group_sizes=None,
                      x1_dtype=None, x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None):  # fmt: skip
    """self[i] + the quantised x1[:, K_i] @ x2[K_i] for each group i of K, as a new tensor."""
    return _add_quant_gmm(self, x1, x2, x2_scale, group_list, x1_scale, group_list_type, group_sizes, x1_dtype,
                          x2_dtype, x1_scale_dtype, x2_scale_dtype, "npu_add_quant_gmm")  # fmt: skip


@npu_op(f"npu_add_quant_gmm_(Tensor(a!) self, {_GMM_ARGS}) -> Tensor(a!)", fake=_self)
def npu_add_quant_gmm_(self, x1, x2, x2_scale, group_list, *, x1_scale=None, group_list_type=0, group_sizes=None,
                       x1_dtype=None, x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None):  # fmt: skip
    """self[i] += the quantised x1[:, K_i] @ x2[K_i] for each group i of K."""
    return self.copy_(_add_quant_gmm(self, x1, x2, x2_scale, group_list, x1_scale, group_list_type, group_sizes,
                                     x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, "npu_add_quant_gmm_"))  # fmt: skip


functionalized_by("npu_add_quant_matmul_", "npu_add_quant_matmul")
functionalized_by("npu_add_quant_gmm_", "npu_add_quant_gmm")
