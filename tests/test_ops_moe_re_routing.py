"""npu_moe_re_routing against the reordering written out block by block (rank-major in, expert-major out), with
per-token scales, fake shapes / compile through check_op, and its argument checks."""

import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def reference(tokens, counts, *, per_token_scales=None):
    n, e = counts.shape
    blocks, offset = {}, 0
    for r in range(n):
        for x in range(e):
            blocks[r, x] = list(range(offset, offset + int(counts[r, x])))
            offset += int(counts[r, x])
    order = [i for x in range(e) for r in range(n) for i in blocks[r, x]]
    index = torch.tensor(order, dtype=torch.long)
    scales = per_token_scales[index] if per_token_scales is not None else torch.zeros(len(order))
    return tokens[index], scales, index.to(torch.int32), counts.sum(0).to(counts.dtype)


def test_reorders_by_expert_then_rank():
    counts = torch.tensor([[2, 0, 1], [1, 3, 2]], dtype=torch.int32)  # 2 ranks, 3 experts
    tokens = torch.randn(9, 16).bfloat16()
    scales = torch.rand(9)
    check_op(lambda t, c, s: torch_npu.npu_moe_re_routing(t, c, per_token_scales=s), (tokens, counts, scales),
             lambda t, c, s: reference(t, c, per_token_scales=s), atol=0, rtol=0)  # fmt: skip
    out = torch_npu.npu_moe_re_routing(tokens.npu(), counts.long().npu())
    # without per_token_scales op-plugin still allocates permute_per_token_scales [A] float32
    assert out[1].shape == (9,) and out[1].dtype == torch.float32
    assert out[3].dtype == torch.int64 and out[3].cpu().tolist() == [3, 3, 3]
    tokens_npu, counts_npu = tokens.npu(), counts.long().npu()
    with torch._subclasses.FakeTensorMode() as mode:
        traced = torch_npu.npu_moe_re_routing(mode.from_tensor(tokens_npu), mode.from_tensor(counts_npu))
        assert [tuple(t.shape) for t in traced] == [tuple(t.shape) for t in out]


def test_bad_arguments():
    tokens, counts = torch.randn(4, 8).npu(), torch.tensor([[1, 1], [1, 0]], dtype=torch.int32).npu()
    raises_operator_error(
        lambda: torch_npu.npu_moe_re_routing(tokens, counts),
        "npu_moe_re_routing: expert_token_num_per_rank must be non-negative and sum to A=4, got 3",
    )
    raises_operator_error(
        lambda: torch_npu.npu_moe_re_routing(tokens, counts, idx_type=1),
        "npu_moe_re_routing: idx_type only supports 0 (gather indices), got 1",
    )
    raises_operator_error(
        lambda: torch_npu.npu_moe_re_routing(tokens, counts.float()),
        "npu_moe_re_routing: expert_token_num_per_rank must be a 2-D int32 / int64 tensor [N, E]",
    )
