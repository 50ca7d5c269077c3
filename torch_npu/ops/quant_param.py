"""npu_trans_quant_param: the float32 quantisation scale (and optional offset) of npu_quant_matmul packed into
the int64 word the card's matmul reads (CANN's TransQuantParamV2/V3):

    out = (bits(scale) & 0xFFFFE000) | 1 << 46                    scale kept as FP19 (its top 19 bits)
    out = (out & 0x4000FFFFFFFF) | (offset & 0x1FF) << 37         offset = clamp(round(offset), -256, 255)

round_mode 0 truncates the scale to FP19; round_mode 1 rounds it to the nearest FP19 (ties to even).
`unpacked_quant_param` reads such a word back (npu_quant_matmul accepts either form)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = ["unpacked_quant_param"]

_FP19_MASK = 0xFFFFE000
_FLAG = 1 << 46
_KEEP = 0x4000FFFFFFFF


def _fp19_bits(scale, round_mode):
    bits = scale.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if round_mode == 1:
        bits = bits + 0xFFF + ((bits >> 13) & 1)  # round the 13 dropped bits to nearest, ties to even
    return bits & _FP19_MASK


@npu_op(
    "npu_trans_quant_param(Tensor scale, Tensor? offset=None, int? round_mode=0) -> Tensor",
    dtypes={"scale": (torch.float32,), "offset": (torch.float32,)},
    api="aclnnTransQuantParamV3",
)
def npu_trans_quant_param(scale, offset=None, round_mode=0):
    """int64 words [n] (or scale's 2-D shape) packing the FP19 scale and the 9-bit offset (see the module doc)."""
    op = "npu_trans_quant_param"
    round_mode = 0 if round_mode is None else round_mode
    check(round_mode in (0, 1), op, f"round_mode must be 0 or 1, got {round_mode}")
    check(scale.dim() in (1, 2), op, f"scale must be 1-D (t,) or 2-D (1, n), got {tuple(scale.shape)}")
    out = _fp19_bits(scale, round_mode) | _FLAG
    if offset is not None:
        out, packed = torch.broadcast_tensors(out, torch.round(offset.float()).clamp(-256, 255).to(torch.int64))
        out = (out & _KEEP) | ((packed & 0x1FF) << 37)
    return out.contiguous()


def unpacked_quant_param(param):
    """(scale float32, offset float32 or None) of npu_trans_quant_param's int64 words."""
    low = (param & 0xFFFFFFFF).to(torch.int64)
    scale = torch.where(low >= 2**31, low - 2**32, low).to(torch.int32).view(torch.float32)
    nine = (param >> 37) & 0x1FF
    offset = torch.where(nine >= 256, nine - 512, nine).float()
    return scale, (offset if bool((nine != 0).any()) else None)
