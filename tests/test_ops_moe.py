"""torch_npu MoE routing operators against loop references written here."""
import pytest
import torch

import torch_npu
from op_check import check_op


def test_gating_top_k_softmax():
    x = torch.randn(5, 8)

    def ref(x, finished=None, k=1):
        p = torch.softmax(x, -1)
        y, idx = p.topk(k, -1)
        rows = torch.tensor([[j * 5 + n for j in range(k)] for n in range(5)], dtype=torch.int32)
        return y, idx.to(torch.int32), rows

    check_op(torch_npu.npu_moe_gating_top_k_softmax, (x,), ref, kwargs={"k": 3})
    finished = torch.tensor([False, True, False, False, True])
    y, idx, _ = torch_npu.npu_moe_gating_top_k_softmax(x.npu(), finished.npu(), k=2)
    assert idx[1].cpu().tolist() == [8, 8] and float(y[1].abs().sum()) == 0.0


@pytest.mark.parametrize("norm_type,mode", [(0, 0), (1, 1)])
def test_gating_top_k_grouped(norm_type, mode):
    g = torch.Generator().manual_seed(0)
    x, bias = torch.randn(4, 16, generator=g), torch.randn(16, generator=g) * 0.1

    def ref(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, norm_type=0, out_flag=False,
            routed_scaling_factor=1.0):
        weights, idxs = [], []
        for row in range(x.shape[0]):
            s = torch.softmax(x[row], -1) if norm_type == 0 else torch.sigmoid(x[row])
            sb = s + bias
            groups = sb.view(group_count, -1)
            gscore = groups.max(-1).values if group_select_mode == 0 else groups.sort(-1, descending=True).values[:, :2].sum(-1)
            kept = set(gscore.argsort(descending=True)[:k_group].tolist())
            candidates = [(float(sb[e]), e) for e in range(16) if e // (16 // group_count) in kept]
            top = [e for _, e in sorted(candidates, key=lambda t: -t[0])[:k]]
            w = s[top]
            if norm_type == 1:
                w = w / (w.sum() + 1e-20)
            weights.append(w * routed_scaling_factor)
            idxs.append(torch.tensor(top, dtype=torch.int32))
        scores = torch.softmax(x, -1) if norm_type == 0 else torch.sigmoid(x)
        return torch.stack(weights), torch.stack(idxs), scores if out_flag else scores.new_empty(0)

    check_op(torch_npu.npu_moe_gating_top_k, (x, 3),
             ref, kwargs={"bias": bias, "k_group": 2, "group_count": 4, "group_select_mode": mode,
                          "norm_type": norm_type, "out_flag": True, "routed_scaling_factor": 2.5})
    with pytest.raises(RuntimeError, match="group_count=3 must divide"):
        torch_npu.npu_moe_gating_top_k(x.npu(), 2, group_count=3)


def test_init_routing_compute_tokens_and_finalize_round_trip():
    n, k, h, experts = 5, 2, 4, 4
    x = torch.randn(n, h)
    expert_idx = torch.tensor([[0, 2], [1, 2], [3, 0], [2, 1], [0, 3]], dtype=torch.int32)
    row_idx = torch.arange(n * k, dtype=torch.int32).view(k, n).t().contiguous()

    def ref(x, row_idx, expert_idx, active_num):
        routes = sorted(range(n * k), key=lambda r: (int(expert_idx.view(-1)[r]), r))
        dst2src = [int(row_idx.view(-1)[r]) for r in routes]
        expanded_row = torch.empty(n * k, dtype=torch.int32)
        for pos, src in enumerate(dst2src):
            expanded_row[src] = pos
        active = min(n, active_num) * k
        return (torch.stack([x[s % n] for s in dst2src[:active]]), expanded_row,
                torch.tensor([int(expert_idx.view(-1)[r]) for r in routes], dtype=torch.int32))

    ex, expanded_row, expanded_expert = check_op(torch_npu.npu_moe_init_routing, (x, row_idx, expert_idx, n), ref)
    counts = check_op(torch_npu.npu_moe_compute_expert_tokens, (expanded_expert.cpu(), experts),
                      lambda s, e: torch.tensor([int((s <= i).sum()) for i in range(e)], dtype=torch.int32))
    assert counts.cpu().tolist()[-1] == n * k
    # experts act as identity: finalize_routing with scales must give sum_j scales * x + skip
    scales = torch.rand(n, k)
    skip = torch.randn(n, h)

    def fin_ref(rows, skip1, skip2, bias, scales, src_to_dst, export):
        out = skip1.clone()
        for i in range(n):
            for j in range(k):
                out[i] += scales[i, j] * (rows[int(src_to_dst[i + j * n])] + bias[int(export[i, j])])
        return out

    bias = torch.randn(experts, h)
    check_op(torch_npu.npu_moe_finalize_routing, (ex.cpu(), skip, None, bias, scales, expanded_row.cpu(),
                                                  expert_idx), fin_ref, atol=1e-5, rtol=1e-5)
    out = torch_npu.npu_moe_finalize_routing(ex, skip.npu(), None, None, scales.npu(), expanded_row, None)
    torch.testing.assert_close(out.cpu(), skip + scales.sum(1, keepdim=True) * x)


def test_token_permute_and_unpermute():
    tokens = torch.randn(4, 3)
    indices = torch.tensor([[1, 0], [0, 2], [2, 1], [1, 1]])
    probs = torch.rand(4, 2)

    def perm_ref(tokens, indices, num_out_tokens=None):
        flat = indices.reshape(-1).tolist()
        order = sorted(range(len(flat)), key=lambda i: (flat[i], i))
        return torch.stack([tokens[i // 2] for i in order]), torch.tensor(order, dtype=torch.int32)

    permuted, sorted_idx = check_op(torch_npu.npu_moe_token_permute, (tokens, indices), perm_ref, grad=(0,))

    def unperm_ref(permuted, sorted_idx, probs):
        out = torch.zeros(4, 3)
        for pos, src in enumerate(sorted_idx.tolist()):
            out[src // 2] += permuted[pos] * probs[src // 2, src % 2]
        return out

    check_op(torch_npu.npu_moe_token_unpermute, (permuted.cpu(), sorted_idx.cpu(), probs), unperm_ref)
    back = torch_npu.npu_moe_token_unpermute(permuted, sorted_idx, torch.ones(4, 2, device="npu"))
    torch.testing.assert_close(back.cpu(), tokens * 2)
    truncated, _ = torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu(), num_out_tokens=5)
    assert truncated.shape == (5, 3)


def test_gating_top_k_gradient_matches_composition():
    g = torch.Generator().manual_seed(2)
    x, bias = torch.randn(3, 8, generator=g), torch.randn(8, generator=g) * 0.1

    def ref(x, k, bias, group_count, k_group, norm_type):
        s = torch.sigmoid(x)
        sb = s + bias
        groups = sb.detach().view(3, group_count, -1).max(-1).values
        keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, groups.topk(k_group, -1).indices, True)
        masked = sb.detach().masked_fill(~keep.repeat_interleave(8 // group_count, 1), float("-inf"))
        idx = masked.topk(k, -1).indices
        w = s.gather(1, idx)
        return w / (w.sum(-1, keepdim=True) + 1e-20), idx.to(torch.int32), s.new_empty(0)

    check_op(torch_npu.npu_moe_gating_top_k, (x, 2), ref,
             kwargs={"bias": bias, "group_count": 4, "k_group": 2, "norm_type": 1}, grad=(0,), compile=False)


@pytest.mark.parametrize("row_idx_type", [0, 1])
def test_init_routing_v2(row_idx_type):
    n, k, h = 5, 2, 3
    x = torch.randn(n, h)
    expert_idx = torch.tensor([[0, 2], [1, 2], [3, 0], [2, 1], [0, 3]], dtype=torch.int32)
    scale = torch.rand(n)
    out_x, row_idx, tokens, out_scale = torch_npu.npu_moe_init_routing_v2(
        x.npu(), expert_idx.npu(), scale=scale.npu(), active_expert_range=[1, 3], expert_num=4,
        expert_tokens_num_flag=True, expert_tokens_num_type=1, row_idx_type=row_idx_type)
    flat = expert_idx.view(-1).tolist()
    routes = sorted((r for r in range(n * k) if 1 <= flat[r] < 3), key=lambda r: (flat[r], r))
    torch.testing.assert_close(out_x.cpu(), torch.stack([x[r // k] for r in routes]))
    torch.testing.assert_close(out_scale.cpu(), torch.stack([scale[r // k] for r in routes]))
    assert tokens.cpu().tolist() == [sum(1 for r in routes if flat[r] == e) for e in (1, 2)]
    if row_idx_type == 1:
        assert row_idx.cpu().tolist() == routes
    else:
        expected = [-1] * (n * k)
        for pos, r in enumerate(routes):
            expected[r] = pos
        assert row_idx.cpu().tolist() == expected
    cum = torch_npu.npu_moe_init_routing_v2(x.npu(), expert_idx.npu(), expert_tokens_num_flag=True, active_num=6)[2]
    assert cum.cpu().tolist() == [3, 5, 6, 6]  # the first 6 sorted routes: experts 0, 0, 0, 1, 1, 2
    with pytest.raises(RuntimeError, match="drop_pad_mode=1"):
        torch_npu.npu_moe_init_routing_v2(x.npu(), expert_idx.npu(), drop_pad_mode=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_moe_and_box_operators_in_low_precision(dtype):
    x = torch.randn(6, 8)
    y, idx, _ = torch_npu.npu_moe_gating_top_k_softmax(x.to(dtype).npu(), k=2)
    want_y, want_idx = torch.softmax(x.to(dtype).float(), -1).topk(2, -1)
    assert y.dtype == dtype and torch.equal(idx.cpu().long(), want_idx)
    torch.testing.assert_close(y.cpu().float(), want_y.to(dtype).float())
    boxes = torch.tensor([[0, 0, 4, 4], [1, 1, 5, 5.]])
    iou = torch_npu.npu_iou(boxes.to(dtype).npu(), boxes.to(dtype).npu())
    assert iou.dtype == dtype
    torch.testing.assert_close(iou.cpu().float(), torch.tensor([[1.0, 9 / 23], [9 / 23, 1.0]]), atol=2e-2, rtol=2e-2)
