"""npu_quant_conv2d: an int8 convolution dequantised in the operator (QuantConv2D), the quantised Conv2d of
torch_npu.contrib:

    y = (conv2d(input, weight) + bias) * scale [+ offset]      in output_dtype (float16 by default)

input [N, C, H, W] int8 (less offset_x), weight [C_out, C / groups, kh, kw] int8, bias int32 [C_out], scale per
output channel: float32, or int64 words from npu_trans_quant_param (the FP19 scale, and an offset it packs).
The convolution accumulates exactly, as the card's int32 does: in float32 pieces of at most 1024 products
(exact below 2^24) summed as int64 (npu has no float64). Not computed: float8 /
HiFloat8 operands (input_dtype / weight_dtype) and round_mode other than 'rint'.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check, dtype_of
from torch_npu.ops.quant_param import unpacked_quant_param
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_quant_conv2d"


def _fake(x, weight, scale, strides=(1, 1), pads=(0, 0), dilations=(1, 1), groups=1, offset_x=0, round_mode="rint",
          output_dtype=None, bias=None, offset=None, input_dtype=None, weight_dtype=None):  # fmt: skip
    h, w = x.shape[-2:]
    kh, kw = weight.shape[-2:]
    oh = (h + 2 * pads[0] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + 2 * pads[1] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    dtype = dtype_of(output_dtype, _OP, "output_dtype") if output_dtype is not None else torch.float16
    return x.new_empty(x.shape[0], weight.shape[0], oh, ow, dtype=dtype)


@npu_op(
    "npu_quant_conv2d(Tensor input, Tensor weight, Tensor scale, int[2] strides=1, int[2] pads=0, "
    "int[2] dilations=1, int groups=1, int offset_x=0, str round_mode='rint', int? output_dtype=None, "
    "Tensor? bias=None, Tensor? offset=None, int? input_dtype=None, int? weight_dtype=None) -> Tensor",
    fake=_fake,
)
def npu_quant_conv2d(x, weight, scale, strides=(1, 1), pads=(0, 0), dilations=(1, 1), groups=1, offset_x=0,
                     round_mode="rint", output_dtype=None, bias=None, offset=None, input_dtype=None,
                     weight_dtype=None):  # fmt: skip
    """[N, C_out, H_out, W_out] dequantised."""
    check(x.dtype == torch.int8 and weight.dtype == torch.int8, _OP, f"input and weight must be int8, got {x.dtype} and {weight.dtype}")  # fmt: skip
    check(input_dtype is None and weight_dtype is None, _OP, "float8 / HiFloat8 operands (input_dtype / weight_dtype) are not computed by vnpu")  # fmt: skip
    check(round_mode == "rint", _OP, f"round_mode must be 'rint', got {round_mode!r}")
    dtype = dtype_of(output_dtype, _OP, "output_dtype") if output_dtype is not None else torch.float16
    acc = _exact_conv(x.float() - offset_x, weight.float(), tuple(strides), tuple(pads), tuple(dilations), groups)
    if bias is not None:
        acc = acc + bias.to(torch.int64).reshape(1, -1, 1, 1)
    packed_offset = None
    if scale.dtype == torch.int64:
        scale, packed_offset = unpacked_quant_param(scale)
    value = acc.float() * scale.float().reshape(1, -1, 1, 1)
    for extra in (offset, packed_offset if offset is None else None):
        if extra is not None:
            value = value + extra.float().reshape(1, -1, 1, 1)
    return value.to(dtype)


def _exact_conv(x, w, stride, padding, dilation, groups):
    """int64 conv2d of integral float operands: input-channel pieces small enough for float32 to stay exact."""
    per_channel = w.shape[2] * w.shape[3] * 256 * 256
    step = max(1, 2**24 // per_channel)
    if groups > 1 or w.shape[1] <= step:
        return F.conv2d(x, w, None, stride, padding, dilation, groups).to(torch.int64)
    return sum(
        F.conv2d(x[:, c : c + step], w[:, c : c + step], None, stride, padding, dilation).to(torch.int64)
        for c in range(0, w.shape[1], step)
    )
