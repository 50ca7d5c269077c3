"""Combining partial attention results: npu_attention_update (the outputs of sequence-parallel ranks, by lse) and
npu_ring_attention_update (two flash-attention passes over disjoint key blocks, by softmax max and sum)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


@npu_op(
    "npu_attention_update(Tensor[] lse, Tensor[] local_out, int update_type) -> (Tensor, Tensor)",
    dtypes={},
    api="aclnnAttentionUpdate",
)
def npu_attention_update(lse, local_out, update_type):
    """The global attention output of sp partial ones: lse_m = log(sum_i exp(lse_i)) (from the largest lse_i)
    and O = sum_i O_i * exp(lse_i - lse_m), in fp32, O in local_out's dtype. lse_i are float32 [N] and O_i are
    [N, head_dim]. update_type 1 also returns lse_m (float32 [N]); 0 returns an empty tensor in its place."""
    op = "npu_attention_update"
    check(update_type in (0, 1), op, f"update_type must be 0 or 1, got {update_type}")
    check(
        1 <= len(lse) <= 16 and len(lse) == len(local_out),
        op,
        f"lse and local_out need the same length sp in [1, 16], got {len(lse)} and {len(local_out)}",
    )
    for i, (part_lse, part_out) in enumerate(zip(lse, local_out)):
        check(part_lse.dtype == torch.float32, op, f"lse[{i}] must be float32, got {part_lse.dtype}")
        check(
            part_lse.dim() == 1 and part_out.dim() == 2 and part_out.shape[0] == part_lse.shape[0],
            op,
            f"lse[{i}] must be [N] and local_out[{i}] [N, head_dim], got {tuple(part_lse.shape)} and "
            f"{tuple(part_out.shape)}",
        )
    stacked = torch.stack(list(lse))
    lse_max = stacked.max(0).values
    lse_m = lse_max + torch.log(torch.exp(stacked - lse_max).sum(0))
    out = sum(o.float() * torch.exp(part_lse - lse_m).unsqueeze(-1) for part_lse, o in zip(lse, local_out))
    lse_out = lse_m if update_type == 1 else lse_m.new_empty(0)
    return out.to(local_out[0].dtype), lse_out


def _per_element(scale, layout, attn):
    """Stats [B, N, S, 8] (SBH) or [T, N, 8] (TND) -> a scale broadcastable to attn [S, B, H] / [T, N, D]."""
    first = scale[..., 0]
    if layout == "TND":
        return first.unsqueeze(-1)  # [T, N, 1]
    b, n, s = first.shape
    d = attn.shape[-1] // n
    return first.permute(2, 0, 1).unsqueeze(-1).expand(s, b, n, d).reshape(s, b, n * d)


@npu_op(
    "npu_ring_attention_update(Tensor prev_attn_out, Tensor prev_softmax_max, Tensor prev_softmax_sum, "
    "Tensor cur_attn_out, Tensor cur_softmax_max, Tensor cur_softmax_sum, *, Tensor? actual_seq_qlen=None, "
    'str input_layout="SBH", str input_softmax_layout="") -> (Tensor, Tensor, Tensor)',
    dtypes={"prev_attn_out": (torch.float16, torch.float32, torch.bfloat16), "prev_softmax_max": (torch.float32,)},
    api="aclnnRingAttentionUpdate",
)
def npu_ring_attention_update(
    prev_attn_out,
    prev_softmax_max,
    prev_softmax_sum,
    cur_attn_out,
    cur_softmax_max,
    cur_softmax_sum,
    *,
    actual_seq_qlen=None,
    input_layout="SBH",
    input_softmax_layout="",
):
    """Merges two flash-attention results over disjoint key blocks (ring attention): max = max(prev, cur);
    each side's sum is rescaled by exp(its max - max); attn_out = prev_out * prev_sum' / sum + cur_out *
    cur_sum' / sum, computed in float32 and returned in attn_out's dtype with the new (max, sum). SBH:
    attn_out [S, B, H], stats [B, N, S, 8]; TND: attn_out [T, N, D], stats [T, N, 8] (the 8 values equal)."""
    op = "npu_ring_attention_update"
    check(input_layout in ("SBH", "TND"), op, f"input_layout must be 'SBH' or 'TND', got {input_layout!r}")
    check(
        input_softmax_layout in ("", input_layout),
        op,
        f"input_softmax_layout {input_softmax_layout!r} is not supported",
    )
    check(
        input_layout != "TND" or actual_seq_qlen is not None,
        op,
        "actual_seq_qlen is required when input_layout is 'TND'",
    )
    check(prev_attn_out.shape == cur_attn_out.shape, op, "prev_attn_out and cur_attn_out must have the same shape")
    check(
        prev_softmax_max.shape == cur_softmax_max.shape == prev_softmax_sum.shape == cur_softmax_sum.shape,
        op,
        "the softmax max and sum inputs must all have the same shape",
    )
    softmax_max = torch.maximum(prev_softmax_max, cur_softmax_max)
    prev_sum = prev_softmax_sum * torch.exp(prev_softmax_max - softmax_max)
    cur_sum = cur_softmax_sum * torch.exp(cur_softmax_max - softmax_max)
    softmax_sum = prev_sum + cur_sum
    prev_scale = _per_element(prev_sum / softmax_sum, input_layout, prev_attn_out)
    cur_scale = _per_element(cur_sum / softmax_sum, input_layout, cur_attn_out)
    attn_out = prev_attn_out.float() * prev_scale + cur_attn_out.float() * cur_scale
    return attn_out.to(prev_attn_out.dtype), softmax_max, softmax_sum
