"""npu_all_to_all_quant_matmul / npu_quant_matmul_all_to_all: the quantised forms of the all-to-all + matmul
fusions (npu_all_to_all_matmul / npu_matmul_all_to_all's exchanges, over the hccl group named hcom).

npu_all_to_all_quant_matmul: x1 (float16 / bfloat16) is exchanged and permuted to [BS / r, r * H] (all2all_out),
    then quantised per token on the fly (x1_quant_mode 7) to x1_quant_dtype (float8_e5m2 by default, or
    float8_e4m3fn / int8): scale = max |row| / the format's largest value; y = (q @ x2) * scale[m] * x2_scale[n]
    + bias with x2 (float8 / int8) and its per-channel x2_scale (x2_quant_mode 2).
npu_quant_matmul_all_to_all: y = (x1 @ x2) * x1_scale[m] * x2_scale[n] + bias with per-token x1_scale (mode 3)
    and per-channel x2_scale (mode 2), or MX e8m0 block scales along K ([BS, ceil(K / 64), 2] and
    [ceil(K / 64), H2, 2]); then permuted and exchanged to [r * BS, H2 / r].
Products accumulate exactly (int8) or in float32 (float8); y has y_dtype (float32 by default).
"""

import torch

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.add_quant_matmul import float8_values, is_e8m0, mx_matmul
from torch_npu.ops.all_to_all_matmul import exchanged
from torch_npu.ops.quant import int_matmul, requantize
from torch_npu.ops.registration import npu_op

__all__ = []

_WORLD_SIZES = (2, 4, 8, 16)
_DYNAMIC_PER_TOKEN, _PER_TOKEN, _PER_CHANNEL = 7, 3, 2
_QUANT_TARGETS = {23: torch.float8_e5m2, 291: torch.float8_e5m2, 24: torch.float8_e4m3fn, 292: torch.float8_e4m3fn,
                  1: torch.int8}  # fmt: skip
_COMMON = (
    "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? common_scale=None, "
    "Tensor? x1_offset=None, Tensor? x2_offset=None, int? x1_quant_mode=None, int? x2_quant_mode=None, "
    "int? common_quant_mode=None, int[]? group_sizes=None, int[]? all2all_axes=None, int? comm_quant_dtype=None"
)
_DTYPES = (
    "int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, "
    "int? output_scale_dtype=None, int? comm_scale_dtype=None, int? y_dtype=None, str? comm_mode=None"
)


def _checks(x1, x2, world_size, all2all_axes, unsupported, op, name):
    check(x1.dim() == 2, op, f"The x1 input of {name} is required to be 2D, but the actual x1 input is {x1.dim()}D.")
    check(x2.dim() == 2, op, f"The x2 input of {name} is required to be 2D, but the actual x2 input is {x2.dim()}D.")
    check(world_size in _WORLD_SIZES, op, f"The world_size should be in [2, 4, 8, 16], but the actual value is {world_size}.")  # fmt: skip
    check(not all2all_axes or list(all2all_axes) == [-2, -1], op, f"all2all_axes must be empty or [-2, -1], got {all2all_axes}")  # fmt: skip
    for what, value in unsupported.items():
        check(value is None, op, f"{what} is not computed by vnpu")


def _operand(x, dtype, name, op):
    """(values float32 or int8, exact integer product wanted)."""
    if x.dtype == torch.int8 and dtype is None:
        return x, True
    return float8_values(x, dtype, name, op), False


def _product(a, b, integer):
    return int_matmul(a, b).float() if integer else a @ b


def _scaled(product, x1_scale, x2_scale, op):
    m, n = product.shape
    check(x1_scale is not None and x1_scale.numel() == m, op, f"x1_scale must hold one per-token scale per row ({m})")
    check(x2_scale is not None and x2_scale.numel() in (1, n), op, f"x2_scale must hold 1 or {n} per-channel scales")
    return product * x1_scale.float().reshape(m, 1) * x2_scale.float().reshape(1, -1)


def _all_to_all_fake(x1, x2, hcom, world_size, *, all2all_out_flag=True, y_dtype=None, **kwargs):
    y = x1.new_empty(x1.shape[0] // world_size, x2.shape[1], dtype=dtype_of(y_dtype if y_dtype is not None else 6, "npu_all_to_all_quant_matmul"))  # fmt: skip
    out = x1.new_empty(x1.shape[0] // world_size, x1.shape[1] * world_size) if all2all_out_flag else x1.new_empty(0)
    return y, out


@npu_op(
    f"npu_all_to_all_quant_matmul(Tensor x1, Tensor x2, str hcom, int world_size, *, bool all2all_out_flag=True, "
    f"{_COMMON}, int? x1_quant_dtype=None, {_DTYPES}) -> (Tensor, Tensor)",
    fake=_all_to_all_fake,
)
def npu_all_to_all_quant_matmul(x1, x2, hcom, world_size, *, all2all_out_flag=True, bias=None, x1_scale=None,
                                x2_scale=None, common_scale=None, x1_offset=None, x2_offset=None, x1_quant_mode=None,
                                x2_quant_mode=None, common_quant_mode=None, group_sizes=None, all2all_axes=None,
                                comm_quant_dtype=None, x1_quant_dtype=None, x1_dtype=None, x2_dtype=None,
                                x1_scale_dtype=None, x2_scale_dtype=None, output_scale_dtype=None,
                                comm_scale_dtype=None, y_dtype=None, comm_mode=None):  # fmt: skip
    """(y [BS / r, N], all2all_out [BS / r, r * H] or empty)."""
    op = "npu_all_to_all_quant_matmul"
    unsupported = {"x1_scale (a smooth scale)": x1_scale, "common_scale": common_scale, "x1_offset": x1_offset,
                   "x2_offset": x2_offset, "comm_quant_dtype": comm_quant_dtype}  # fmt: skip
    _checks(x1, x2, world_size, all2all_axes, unsupported, op, "alltoallquantmatmul")
    check((x1_quant_mode or _DYNAMIC_PER_TOKEN) == _DYNAMIC_PER_TOKEN, op, f"x1_quant_mode {x1_quant_mode} is not computed by vnpu (7, dynamic per-token, is)")  # fmt: skip
    check((x2_quant_mode or _PER_CHANNEL) == _PER_CHANNEL, op, f"x2_quant_mode {x2_quant_mode} is not computed by vnpu (2, per-channel, is)")  # fmt: skip
    check(x1.dtype in (torch.float16, torch.bfloat16), op, f"x1 must be float16 or bfloat16, got {x1.dtype}")
    bs, h = x1.shape
    check(bs % world_size == 0, op, f"BS ({bs}) must be divisible by world_size ({world_size})")
    check(x2.shape[0] == h * world_size, op, f"x2 must have H * world_size = {h * world_size} rows, got {x2.shape[0]}")  # fmt: skip
    target = _QUANT_TARGETS.get(23 if x1_quant_dtype is None else int(x1_quant_dtype))
    check(target is not None, op, f"x1_quant_dtype must be float8_e5m2, float8_e4m3fn or int8, got {x1_quant_dtype}")
    received = exchanged(x1.reshape(world_size, bs // world_size, h), hcom, world_size, op)
    permuted = received.permute(1, 0, 2).reshape(bs // world_size, world_size * h)
    rows = permuted.float()
    top = 127.0 if target == torch.int8 else torch.finfo(target).max
    token_scale = rows.abs().amax(-1).clamp(min=1e-12) / top
    quantised = rows / token_scale[:, None]
    q = requantize(quantised, torch.int8) if target == torch.int8 else quantised.to(target)
    a, integer = _operand(q, None, "x1", op)
    b, b_integer = _operand(x2, x2_dtype, "x2", op)
    check(integer == b_integer, op, f"x1_quant_dtype {target} and x2 {x2.dtype} must both be int8 or both float8")
    y = _scaled(_product(a, b, integer), token_scale, x2_scale, op)
    if bias is not None:
        y = y + bias.float()
    y = y.to(dtype_of(y_dtype if y_dtype is not None else 6, op))
    return y, permuted if all2all_out_flag else x1.new_empty(0)


def _matmul_fake(x1, x2, hcom, world_size, bias=None, *args, y_dtype=None, **kwargs):
    return x1.new_empty(x1.shape[0] * world_size, x2.shape[1] // world_size, dtype=dtype_of(y_dtype if y_dtype is not None else 6, "npu_quant_matmul_all_to_all"))  # fmt: skip


@npu_op(
    f"npu_quant_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, {_COMMON}, {_DTYPES}) -> Tensor",
    fake=_matmul_fake,
)
def npu_quant_matmul_all_to_all(x1, x2, hcom, world_size, bias=None, x1_scale=None, x2_scale=None, common_scale=None,
                                x1_offset=None, x2_offset=None, x1_quant_mode=None, x2_quant_mode=None,
                                common_quant_mode=None, group_sizes=None, all2all_axes=None, comm_quant_dtype=None,
                                x1_dtype=None, x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None,
                                output_scale_dtype=None, comm_scale_dtype=None, y_dtype=None, comm_mode=None):  # fmt: skip
    """y [r * BS, H2 / r]."""
    op = "npu_quant_matmul_all_to_all"
    unsupported = {"common_scale": common_scale, "x1_offset": x1_offset, "x2_offset": x2_offset,
                   "comm_quant_dtype": comm_quant_dtype}  # fmt: skip
    _checks(x1, x2, world_size, all2all_axes, unsupported, op, "quantmatmulalltoall")
    check(x2.shape[1] % world_size == 0, op, "The x2 second-axis should be divisible by world_size.")
    check(x1.shape[1] == x2.shape[0], op, f"k of x1 ({x1.shape[1]}) and x2 ({x2.shape[0]}) must be equal")
    a, integer = _operand(x1, x1_dtype, "x1", op)
    b, b_integer = _operand(x2, x2_dtype, "x2", op)
    check(integer == b_integer, op, f"x1 {x1.dtype} and x2 {x2.dtype} must both be int8 or both float8")
    if is_e8m0(x2_scale, x2_scale_dtype):
        check(x1_scale is not None and is_e8m0(x1_scale, x1_scale_dtype), op, "MX scales: x1_scale must be e8m0 too")
        out = mx_matmul(a, b, x1_scale, x2_scale, op)
    else:
        check((x1_quant_mode or _PER_TOKEN) == _PER_TOKEN and (x2_quant_mode or _PER_CHANNEL) == _PER_CHANNEL, op,
              "vnpu computes x1_quant_mode 3 (per token) with x2_quant_mode 2 (per channel), or MX scales")  # fmt: skip
        out = _scaled(_product(a, b, integer), x1_scale, x2_scale, op)
    if bias is not None:
        out = out + bias.float()
    out = out.to(dtype_of(y_dtype if y_dtype is not None else 6, op))
    bs, h2 = out.shape
    chunks = out.reshape(bs, world_size, h2 // world_size).permute(1, 0, 2)
    return exchanged(chunks, hcom, world_size, op).reshape(world_size * bs, h2 // world_size)
