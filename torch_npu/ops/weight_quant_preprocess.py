"""npu_weight_quant_preprocess: lays a pseudo-quantised matmul's weight and its parameters out for the kernels that
read them (WeightQuantPreprocess, Ascend 950). The values are unchanged; the formats are those the card produces:

- MM / GMM MX A8W4 (x float8_e4m3fn, weight float4_e2m1 packed in uint8 [.., K / 2, N], weight_scale e8m0
  [.., ceil(K / 64), N, 2], k_group_size 32): the weight becomes FRACTAL_NZ_C0_16.
- MM A16S4 (x float16 / bfloat16, weight int4 packed in uint8, weight_scale float16 / bfloat16): per tensor, or a
  transposed weight ([K / 2, N] view of an [N, K / 2] storage), stays ND; a per-channel ([N] / [1, N]) or per-group
  ([G, N], k_group_size > 0) weight that is not transposed becomes FRACTAL_NZ_C0_8.
Returns (out_weight, out_weight_scale, out_weight_offset (empty without weight_offset), out_bias (empty without
bias)).
"""

import torch

from torch_npu._c_children import DTypeNumber
from torch_npu.npu._format import Format
from torch_npu.ops._common import check
from torch_npu.ops.format_cast import npu_format_cast
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_weight_quant_preprocess"
_FP8_E4M3 = (24, 292)
_HALVES = (5, 15)
_FP4 = (int(DTypeNumber.float4_e2m1fn_x2), 45)
_E8M0 = (int(DTypeNumber.float8_e8m0fnu), 44)
_INT4 = (int(DTypeNumber.int4),)


def _is_transposed(t):
    return t.dim() >= 2 and t.stride(-2) == 1 and t.stride(-1) == t.shape[-2] and t.shape[-1] > 1


def _layout(
    weight, weight_scale, x_dtype, weight_dtype, weight_scale_dtype, weight_offset, x_scale_dtype, k_group_size
):
    """The format the weight takes: Format.ND, FRACTAL_NZ_C0_16 or FRACTAL_NZ_C0_8."""
    check(weight.dtype in (torch.uint8, torch.int8), _OP, f"weight must be 4-bit values packed in uint8, got {weight.dtype}")  # fmt: skip
    if int(weight_dtype) in _FP4:
        check(int(x_dtype) in _FP8_E4M3, _OP, f"the MX A8W4 flow takes x_dtype float8_e4m3fn, got {x_dtype}")
        check(int(weight_scale_dtype) in _E8M0, _OP, f"the MX A8W4 flow takes weight_scale_dtype float8_e8m0fnu, got {weight_scale_dtype}")  # fmt: skip
        check(x_scale_dtype is not None and int(x_scale_dtype) in _E8M0, _OP, "the MX A8W4 flow takes x_scale_dtype float8_e8m0fnu")  # fmt: skip
        check(k_group_size == 32, _OP, f"the MX A8W4 flow takes k_group_size 32, got {k_group_size}")
        check(weight_offset is None, _OP, "weight_offset must be None in the MX A8W4 flow")
        check(weight.dim() in (2, 3), _OP, f"weight must be [K / 2, N] or [G, K / 2, N], got {tuple(weight.shape)}")
        k = weight.shape[-2] * 2
        check(k % k_group_size == 0, _OP, f"K ({k}) must be a multiple of k_group_size ({k_group_size})")
        check(weight_scale.dim() == weight.dim() + 1 and weight_scale.shape[-2] == weight.shape[-1], _OP,
              f"weight_scale must be [.., ceil(K / 64), N, 2], got {tuple(weight_scale.shape)}")  # fmt: skip
        return Format.FRACTAL_NZ_C0_16
    check(int(weight_dtype) in _INT4, _OP, f"weight_dtype must be float4_e2m1fn_x2 (MX A8W4) or int4 (A16S4), got {weight_dtype}")  # fmt: skip
    check(int(x_dtype) in _HALVES, _OP, f"the A16S4 flow takes x_dtype float16 or bfloat16, got {x_dtype}")
    check(x_scale_dtype is None, _OP, "x_scale_dtype must be None in the A16S4 flow")
    check(weight.dim() == 2, _OP, f"the A16S4 flow takes a 2-D weight, got {tuple(weight.shape)}")
    check(weight_scale.dtype in (torch.float16, torch.bfloat16), _OP, f"weight_scale must be float16 or bfloat16, got {weight_scale.dtype}")  # fmt: skip
    check(weight_offset is None or (weight_offset.shape == weight_scale.shape and weight_offset.dtype == weight_scale.dtype),
          _OP, "weight_offset must have weight_scale's shape and dtype")  # fmt: skip
    if weight_scale.numel() == 1:
        check(k_group_size == 0, _OP, "per-tensor weight_scale takes k_group_size 0")
        return Format.ND
    per_group = weight_scale.dim() == 2 and weight_scale.shape[0] > 1
    check(k_group_size > 0 if per_group else k_group_size == 0, _OP,
          "per-group weight_scale [G, N] takes k_group_size > 0; per-channel takes 0")  # fmt: skip
    return Format.ND if _is_transposed(weight) else Format.FRACTAL_NZ_C0_8


def _fake(weight, weight_scale, x_dtype, weight_dtype, weight_scale_dtype, weight_offset=None, bias=None,
          x_scale_dtype=None, k_group_size=0):  # fmt: skip
    empty = weight.new_empty(0)
    return (torch.empty_like(weight), torch.empty_like(weight_scale),
            empty if weight_offset is None else torch.empty_like(weight_offset), empty if bias is None else torch.empty_like(bias))  # fmt: skip


@npu_op(
    "npu_weight_quant_preprocess(Tensor weight, Tensor weight_scale, int x_dtype, int weight_dtype, "
    "int weight_scale_dtype, Tensor? weight_offset=None, Tensor? bias=None, int? x_scale_dtype=None, "
    "int? k_group_size=0) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_fake,
)
def npu_weight_quant_preprocess(weight, weight_scale, x_dtype, weight_dtype, weight_scale_dtype, weight_offset=None,
                                bias=None, x_scale_dtype=None, k_group_size=0):  # fmt: skip
    """(out_weight, out_weight_scale, out_weight_offset, out_bias)."""
    k_group_size = k_group_size or 0
    fmt = _layout(weight, weight_scale, x_dtype, weight_dtype, weight_scale_dtype, weight_offset, x_scale_dtype,
                  k_group_size)  # fmt: skip
    out_weight = weight.clone() if fmt == Format.ND else npu_format_cast(weight.contiguous(), int(fmt))
    empty = weight.new_empty(0)
    return (out_weight, weight_scale.clone(), empty if weight_offset is None else weight_offset.clone(),
            empty if bias is None else bias.contiguous().clone())  # fmt: skip
