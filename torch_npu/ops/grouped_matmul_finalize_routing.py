"""npu_grouped_matmul_finalize_routing: the MoE down projection fused with the combine of the experts' outputs
(GroupedMatMul + MoeFinalizeRouting), in its A8W8 form.

Rows of x (int8 [m, k]) are split into consecutive groups (group_list: counts, group_list_type 1, or cumulative
ends, 0); group e is multiplied by w[e] (int8 [k, n]) with int32 accumulation, then dequantised by scale[e]
(per output channel) and pertoken_scale (per row) and weighted by logit (per row). The output (float32
[output_bs, n], zeros) first receives shared_input * shared_input_weight at rows shared_input_offset..., then
each computed row is added to output row row_index[i]. Rows after the last group are not computed. Not
supported: the A8W4 form (int4 weights with int64 scales, bias, offset).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import group_row_counts, int_matmul
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_grouped_matmul_finalize_routing"


def _fake(x, w, group_list, *, row_index=None, output_bs=0, **kwargs):
    rows = output_bs if output_bs else x.shape[0]
    return x.new_empty(rows, w.shape[-1], dtype=torch.float32)


@npu_op(
    "npu_grouped_matmul_finalize_routing(Tensor x, Tensor w, Tensor group_list, *, Tensor? scale=None, "
    "Tensor? bias=None, Tensor? offset=None, Tensor? pertoken_scale=None, Tensor? shared_input=None, "
    "Tensor? logit=None, Tensor? row_index=None, ScalarType? dtype=None, float? shared_input_weight=1.0, "
    "int? shared_input_offset=0, int? output_bs=0, int? group_list_type=1, int[]? tuning_config=None, "
    "int? x_dtype=None, int? w_dtype=None, int? scale_dtype=None, int? pertoken_scale_dtype=None) -> Tensor",
    fake=_fake,
)
def npu_grouped_matmul_finalize_routing(
    x,
    w,
    group_list,
    *,
    scale=None,
    bias=None,
    offset=None,
    pertoken_scale=None,
    shared_input=None,
    logit=None,
    row_index=None,
    dtype=None,
    shared_input_weight=1.0,
    shared_input_offset=0,
    output_bs=0,
    group_list_type=1,
    tuning_config=None,
    x_dtype=None,
    w_dtype=None,
    scale_dtype=None,
    pertoken_scale_dtype=None,
):
    check(x.dim() == 2 and x.dtype == torch.int8, _OP, f"x must be int8 [m, k], got {x.dtype} {tuple(x.shape)}")
    check(
        w.dim() == 3 and w.dtype == torch.int8,
        _OP,
        f"w must be int8 [e, k, n] (the A8W4 form is not supported by vnpu), got {w.dtype} {tuple(w.shape)}",
    )
    check(bias is None and offset is None, _OP, "bias and offset belong to the A8W4 form, which vnpu does not support")
    check(w.shape[1] == x.shape[1], _OP, f"k of x ({x.shape[1]}) and w ({w.shape[1]}) must be equal")
    check(
        group_list.numel() == w.shape[0], _OP, f"group_list must hold e={w.shape[0]} groups, got {group_list.numel()}"
    )
    counts = group_row_counts(group_list, 0 if group_list_type == 0 else 1, x.shape[0], _OP)
    parts, start = [], 0
    for e, count in enumerate(counts):
        part = int_matmul(x[start : start + count], w[e]).float()
        if scale is not None:
            part = part * scale[e].float().reshape(-1)
        parts.append(part)
        start += count
    computed = torch.cat(parts) if parts else x.new_empty(0, w.shape[-1], dtype=torch.float32)
    if pertoken_scale is not None:
        computed = computed * pertoken_scale[:start].float().unsqueeze(-1)
    if logit is not None:
        computed = computed * logit[:start].float().unsqueeze(-1)
    out = torch.zeros(output_bs or x.shape[0], w.shape[-1], dtype=torch.float32, device=x.device)
    if shared_input is not None:
        rows = shared_input.shape[0]
        check(
            shared_input_offset + rows <= out.shape[0],
            _OP,
            f"shared_input rows {shared_input_offset}..{shared_input_offset + rows} exceed the {out.shape[0]} output rows",
        )
        out[shared_input_offset : shared_input_offset + rows] += shared_input.float() * shared_input_weight
    if row_index is None:
        out[:start] += computed
        return out
    targets = row_index[:start].long()
    check(
        bool(((targets >= 0) & (targets < out.shape[0])).all()),
        _OP,
        f"row_index must name output rows in [0, {out.shape[0]})",
    )
    return out.index_add_(0, targets, computed)
