"""npu_swiglu_quant: SwiGLU then int8 (or int4) quantisation, with MoE groups of smoothing scales.

act = x1 * silu(x2), or silu(x1) * x2 with activate_left (x1, x2 the halves of the last dim); each group of rows
(group_index as cumulative ends, group_list_type 0, or as counts, 1) is multiplied by its row of smooth_scales
(and, for static quantisation, quant_mode 0, shifted by its row of offsets); rows after the last group are
left as they are. Dynamic quantisation (quant_mode 1) scales every row by 127 (int4: 7) / its largest
magnitude and returns those factors (the reciprocal of npu_dynamic_quant's scale, as torch_npu returns them);
static quantisation returns an empty scale. Values are rounded half to even and saturated.
"""

import torch
import torch.nn.functional as F

from torch_npu.ops._common import check
from torch_npu.ops.quant import group_row_counts, packs_int4, quantised
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_swiglu_quant"


def _grouped(values, parameter, group_index, group_list_type, combine):
    """values with each group's rows combined (torch.mul, torch.add) with that group's row of parameter; without
    groups, with parameter broadcast over every row."""
    if group_index is None:
        return combine(values, parameter)
    counts = group_row_counts(group_index, group_list_type, values.shape[0], _OP)
    rows, start = [], 0
    for g, count in enumerate(counts):
        rows.append(combine(values[start : start + count], parameter[g]))
        start += count
    rows.append(values[start:])
    return torch.cat(rows)


@npu_op(
    "npu_swiglu_quant(Tensor x, *, Tensor? smooth_scales=None, Tensor? offsets=None, Tensor? group_index=None, "
    "bool activate_left=False, int quant_mode=0, int group_list_type=0, ScalarType? dst_type=None) "
    "-> (Tensor, Tensor)"
)
def npu_swiglu_quant(
    x,
    *,
    smooth_scales=None,
    offsets=None,
    group_index=None,
    activate_left=False,
    quant_mode=0,
    group_list_type=0,
    dst_type=None,
):
    check(x.dim() == 2, _OP, f"x must be 2-D [tokens, 2N], got {x.dim()}-D")
    check(x.shape[-1] % 2 == 0, _OP, f"the last dim of x must be even, got {x.shape[-1]}")
    check(quant_mode in (0, 1), _OP, f"quant_mode must be 0 (static) or 1 (dynamic), got {quant_mode}")
    check(group_list_type in (0, 1), _OP, f"group_list_type must be 0 (cumsum) or 1 (count), got {group_list_type}")
    x1, x2 = x.float().chunk(2, -1)
    act = F.silu(x1) * x2 if activate_left else x1 * F.silu(x2)
    if smooth_scales is not None:
        act = _grouped(act, smooth_scales.float(), group_index, group_list_type, torch.mul)
    if quant_mode == 0 and offsets is not None:
        act = _grouped(act, offsets.float(), group_index, group_list_type, torch.add)
    limit = 7.0 if packs_int4(dst_type, _OP, "dst_type") else 127.0
    if quant_mode == 1:
        scale = limit / act.abs().amax(-1)
        return quantised(act * scale.unsqueeze(-1), dst_type, _OP, "dst_type"), scale
    return quantised(act, dst_type, _OP, "dst_type"), act.new_empty(0)
