"""Combining the partial attention of sequence-parallel ranks: npu_attention_update (aclnnAttentionUpdate)."""

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
