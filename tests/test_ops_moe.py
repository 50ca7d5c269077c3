"""torch_npu MoE routing operators against loop references written here."""

import pytest
import torch
from error_cases import NPU, raises_operator_error, t
from op_check import check_op
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu


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
    want_y, want_idx, _ = ref(x, k=2)
    assert idx[1].cpu().tolist() == [8, 8] and idx[4].cpu().tolist() == [8, 8]
    assert torch.equal(idx[0].cpu(), want_idx[0]) and torch.equal(y.cpu(), want_y)  # finished rows keep y


@pytest.mark.parametrize("norm_type,mode", [(0, 0), (1, 1)])
def test_gating_top_k_grouped(norm_type, mode):
    g = torch.Generator().manual_seed(0)
    x, bias = torch.randn(4, 16, generator=g), torch.randn(16, generator=g) * 0.1

    def ref(
        x,
        k,
        bias=None,
        k_group=1,
        group_count=1,
        group_select_mode=0,
        norm_type=0,
        out_flag=False,
        routed_scaling_factor=1.0,
    ):
        weights, idxs = [], []
        for row in range(x.shape[0]):
            s = torch.softmax(x[row], -1) if norm_type == 0 else torch.sigmoid(x[row])
            sb = s + bias
            groups = sb.view(group_count, -1)
            gscore = (
                groups.max(-1).values
                if group_select_mode == 0
                else groups.sort(-1, descending=True).values[:, :2].sum(-1)
            )
            kept = set(gscore.argsort(descending=True)[:k_group].tolist())
            candidates = [(float(sb[e]), e) for e in range(16) if e // (16 // group_count) in kept]
            top = [e for _, e in sorted(candidates, key=lambda t: -t[0])[:k]]
            w = s[top]
            if norm_type == 1:
                w = w / (w.sum() + 1e-20)
            weights.append(w * routed_scaling_factor)
            idxs.append(torch.tensor(top, dtype=torch.int32))
        scores = torch.softmax(x, -1) if norm_type == 0 else torch.sigmoid(x)
        return torch.stack(weights), torch.stack(idxs), scores  # [T, E] float32 whatever out_flag says

    check_op(
        torch_npu.npu_moe_gating_top_k,
        (x, 3),
        ref,
        kwargs={
            "bias": bias,
            "k_group": 2,
            "group_count": 4,
            "group_select_mode": mode,
            "norm_type": norm_type,
            "out_flag": True,
            "routed_scaling_factor": 2.5,
        },
    )
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
        return (
            torch.stack([x[s % n] for s in dst2src[:active]]),
            expanded_row,
            torch.tensor([int(expert_idx.view(-1)[r]) for r in routes], dtype=torch.int32),
        )

    ex, expanded_row, expanded_expert = check_op(torch_npu.npu_moe_init_routing, (x, row_idx, expert_idx, n), ref)
    counts = check_op(
        torch_npu.npu_moe_compute_expert_tokens,
        (expanded_expert.cpu(), experts),
        lambda s, e: torch.tensor([int((s <= i).sum()) for i in range(e)], dtype=torch.int32),
    )
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
    check_op(
        torch_npu.npu_moe_finalize_routing,
        (ex.cpu(), skip, None, bias, scales, expanded_row.cpu(), expert_idx),
        fin_ref,
        atol=1e-5,
        rtol=1e-5,
    )
    out = torch_npu.npu_moe_finalize_routing(ex, skip.npu(), None, None, scales.npu(), expanded_row, None)
    torch.testing.assert_close(out.cpu(), skip + scales.sum(1, keepdim=True) * x)


def test_token_permute_and_unpermute():
    tokens = torch.randn(4, 3)
    indices = torch.tensor([[1, 0], [0, 2], [2, 1], [1, 1]])
    probs = torch.rand(4, 2)

    def perm_ref(tokens, indices, num_out_tokens=None):
        flat = indices.reshape(-1).tolist()
        order = sorted(range(len(flat)), key=lambda i: (flat[i], i))
        row_of_route = [order.index(r) for r in range(len(flat))]  # sorted_indices: each route's row
        return torch.stack([tokens[i // 2] for i in order]), torch.tensor(row_of_route, dtype=torch.int32)

    permuted, sorted_idx = check_op(torch_npu.npu_moe_token_permute, (tokens, indices), perm_ref, grad=(0,))

    def unperm_ref(permuted, sorted_idx, probs):
        out = torch.zeros(4, 3)
        for route, row in enumerate(sorted_idx.tolist()):
            if row < permuted.shape[0]:
                out[route // 2] += permuted[row] * probs[route // 2, route % 2]
        return out

    check_op(torch_npu.npu_moe_token_unpermute, (permuted.cpu(), sorted_idx.cpu(), probs), unperm_ref)
    back = torch_npu.npu_moe_token_unpermute(permuted, sorted_idx, torch.ones(4, 2, device="npu"))
    torch.testing.assert_close(back.cpu(), tokens * 2)
    truncated, rows = torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu(), num_out_tokens=5)
    assert truncated.shape == (5, 3)
    check_op(torch_npu.npu_moe_token_unpermute, (truncated.cpu(), rows.cpu(), probs), unperm_ref)
    # num_out_tokens as torch_npu counts it: more than the 8 routes keeps them all, a negative one drops that many
    tokens_npu, indices_npu = tokens.npu(), indices.npu()
    for num_out, kept in ((20, 8), (-3, 5), (0, 8)):
        eager = torch_npu.npu_moe_token_permute(tokens_npu, indices_npu, num_out_tokens=num_out)[0]
        with torch._subclasses.FakeTensorMode() as mode:
            traced = torch_npu.npu_moe_token_permute(
                mode.from_tensor(tokens_npu), mode.from_tensor(indices_npu), num_out_tokens=num_out
            )[0]
        assert eager.shape == traced.shape == (kept, 3), num_out


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
        return w / (w.sum(-1, keepdim=True) + 1e-20), idx.to(torch.int32), s

    check_op(
        torch_npu.npu_moe_gating_top_k,
        (x, 2),
        ref,
        kwargs={"bias": bias, "group_count": 4, "k_group": 2, "norm_type": 1},
        grad=(0,),
        compile=False,
    )


def _routes_by_expert(expert_idx, start, end):
    """Route numbers (token * k + j) with their expert in [start, end), ordered by expert then route."""
    flat = expert_idx.reshape(-1).tolist()
    return sorted((r for r in range(len(flat)) if start <= flat[r] < end), key=lambda r: (flat[r], r)), flat


@pytest.mark.parametrize("row_idx_type", [0, 1])
def test_init_routing_v2_dropless(row_idx_type):
    n, k, h = 5, 2, 3
    x = torch.randn(n, h)
    expert_idx = torch.tensor([[0, 2], [1, 2], [3, 0], [2, 1], [0, 3]], dtype=torch.int32)
    scale = torch.rand(n)
    out_x, row_idx, tokens, out_scale = torch_npu.npu_moe_init_routing_v2(
        x.npu(),
        expert_idx.npu(),
        scale=scale.npu(),
        active_expert_range=[1, 3],
        expert_num=4,
        expert_tokens_num_flag=True,
        expert_tokens_num_type=1,
        row_idx_type=row_idx_type,
    )
    routes, flat = _routes_by_expert(expert_idx, 1, 3)
    pad = n * k - len(routes)  # rows the routing does not fill are zero
    torch.testing.assert_close(out_x.cpu(), torch.cat([torch.stack([x[r // k] for r in routes]), torch.zeros(pad, h)]))
    torch.testing.assert_close(
        out_scale.cpu(), torch.cat([torch.stack([scale[r // k] for r in routes]), torch.zeros(pad)])
    )
    assert tokens.cpu().tolist() == [sum(1 for r in routes if flat[r] == e) for e in (1, 2)]
    if row_idx_type == 1:
        assert row_idx.cpu().tolist()[: len(routes)] == routes and sorted(row_idx.cpu().tolist()) == list(range(n * k))
    else:
        expected = [-1] * (n * k)
        for pos, r in enumerate(routes):
            expected[r] = pos
        assert row_idx.cpu().tolist() == expected
    out_x, _, cum, _ = torch_npu.npu_moe_init_routing_v2(
        x.npu(), expert_idx.npu(), expert_tokens_num_flag=True, active_num=6
    )
    assert out_x.shape == (6, h) and cum.cpu().tolist() == [3, 5, 8, 10]  # Cumsum(Histogram(all sorted routes))
    pairs = torch_npu.npu_moe_init_routing_v2(
        x.npu(), expert_idx.npu(), expert_tokens_num_flag=True, expert_tokens_num_type=2, expert_num=5
    )[2]
    assert pairs.cpu().tolist() == [[0, 3], [1, 2], [2, 3], [3, 2], [4, 0]]
    no_tokens = torch_npu.npu_moe_init_routing_v2(x.npu(), expert_idx.npu(), expert_num=4)[2]
    assert no_tokens.shape == ()


def test_init_routing_v2_drop_pad_fills_each_expert_up_to_its_capacity():
    n, k, h, capacity = 6, 2, 4, 2
    x = torch.randn(n, h)
    expert_idx = torch.tensor([[0, 1], [0, 2], [0, 1], [2, 0], [1, 3], [2, 2]], dtype=torch.int32)
    out_x, row_idx, tokens, _ = torch_npu.npu_moe_init_routing_v2(
        x.npu(),
        expert_idx.npu(),
        expert_capacity=capacity,
        expert_num=4,
        drop_pad_mode=1,
        expert_tokens_num_flag=True,
        expert_tokens_num_type=1,
    )
    routes, flat = _routes_by_expert(expert_idx, 0, 4)
    expected_x, expected_idx = torch.zeros(4, capacity, h), [-1] * (n * k)
    for e in range(4):
        for slot, r in enumerate([r for r in routes if flat[r] == e][:capacity]):
            expected_x[e, slot] = x[r // k]
            expected_idx[r] = e * capacity + slot
    assert out_x.shape == (4, capacity, h)
    torch.testing.assert_close(out_x.cpu(), expected_x)
    assert row_idx.cpu().tolist() == expected_idx
    assert tokens.cpu().tolist() == [4, 3, 4, 1]  # routes per expert before the capacity drop


def test_init_routing_v2_static_and_dynamic_quantisation():
    g = torch.Generator().manual_seed(8)
    n, k, h = 4, 2, 16
    x = torch.randn(n, h, generator=g)
    expert_idx = torch.randint(0, 3, (n, k), generator=g, dtype=torch.int32)
    routes, flat = _routes_by_expert(expert_idx, 0, 3)
    scale, offset = torch.tensor([20.0]), torch.tensor([0.5])
    out_x, _, _, out_scale = torch_npu.npu_moe_init_routing_v2(
        x.npu(), expert_idx.npu(), scale=scale.npu(), offset=offset.npu(), expert_num=3, quant_mode=0
    )
    want = torch.stack(
        [(x[r // k].half() * scale.half() + offset.half()).float().round().clamp(-128, 127) for r in routes]
    ).to(torch.int8)
    assert out_x.dtype == torch.int8 and torch.equal(out_x.cpu(), want) and out_scale.shape == ()
    smooth = torch.rand(3, h, generator=g) + 0.5
    for smooth_scale in (None, smooth):
        out_x, _, _, out_scale = torch_npu.npu_moe_init_routing_v2(
            x.npu(),
            expert_idx.npu(),
            scale=None if smooth_scale is None else smooth_scale.npu(),
            expert_num=3,
            quant_mode=1,
        )
        rows = [x[r // k] * (1.0 if smooth_scale is None else smooth_scale[flat[r]]) for r in routes]
        row_scales = torch.stack([row.abs().max() / 127 for row in rows])
        torch.testing.assert_close(out_scale.cpu(), row_scales)
        want = torch.stack([(row / s).round() for row, s in zip(rows, row_scales)]).to(torch.int8)
        assert torch.equal(out_x.cpu(), want)


def test_init_routing_v2_fake_shapes_and_compile():
    x, expert_idx = torch.randn(5, 3), torch.tensor([[0, 2], [1, 2], [3, 0], [2, 1], [0, 3]], dtype=torch.int32)
    cases = [
        dict(expert_num=4, active_num=7, expert_tokens_num_flag=True),
        dict(expert_num=4, drop_pad_mode=1, expert_capacity=2, quant_mode=1),
        dict(
            active_expert_range=[1, 3],
            expert_num=4,
            expert_tokens_num_flag=True,
            expert_tokens_num_type=2,
            scale=torch.tensor([1.5]),
            quant_mode=0,
        ),
    ]
    for kwargs in cases:
        kwargs_npu = {key: (v.npu() if isinstance(v, torch.Tensor) else v) for key, v in kwargs.items()}
        real = torch_npu.npu_moe_init_routing_v2(x.npu(), expert_idx.npu(), **kwargs_npu)
        mode = torch._subclasses.fake_tensor.FakeTensorMode()
        fake_args = [mode.from_tensor(t) for t in (x.npu(), expert_idx.npu())]
        fake_kwargs = {
            key: (mode.from_tensor(v) if isinstance(v, torch.Tensor) else v) for key, v in kwargs_npu.items()
        }
        with mode:
            fake = torch_npu.npu_moe_init_routing_v2(*fake_args, **fake_kwargs)
        assert [(t.shape, t.dtype) for t in fake] == [(t.shape, t.dtype) for t in real]
        compiled = torch.compile(
            lambda a, b, kw=kwargs_npu: torch_npu.npu_moe_init_routing_v2(a, b, **kw),
            backend="aot_eager",
            fullgraph=True,
        )
        for got, want in zip(compiled(x.npu(), expert_idx.npu()), real):
            assert torch.equal(got.cpu(), want.cpu())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_moe_and_box_operators_in_low_precision(dtype):
    x = torch.randn(6, 8)
    y, idx, _ = torch_npu.npu_moe_gating_top_k_softmax(x.to(dtype).npu(), k=2)
    want_y, want_idx = torch.softmax(x.to(dtype).float(), -1).topk(2, -1)
    assert y.dtype == dtype and torch.equal(idx.cpu().long(), want_idx)
    torch.testing.assert_close(y.cpu().float(), want_y.to(dtype).float())
    boxes = torch.tensor([[0, 0, 4, 4], [1, 1, 5, 5.0]])
    iou = torch_npu.npu_iou(boxes.to(dtype).npu(), boxes.to(dtype).npu())
    assert iou.dtype == dtype
    torch.testing.assert_close(iou.cpu().float(), torch.tensor([[1.0, 9 / 23], [9 / 23, 1.0]]), atol=2e-2, rtol=2e-2)


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
INVALID_ARGUMENT_ERRORS = [
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], scale=[t(2)]),
        "npu_grouped_matmul: with scale (quantised), x and weight must be int8, got torch.float32 and torch.float32",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], group_type=2),
        "npu_grouped_matmul: group_type=2: only -1 (no grouping) and 0 (split M) are implemented",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul(
            [t(4, 3)],
            [t(3, 2), t(3, 2)],
            group_list=torch.tensor([1, 2, 4], device=NPU),
            group_list_type=1,
            split_item=3,
        ),
        "npu_grouped_matmul: group_list covers 7 rows but x has 4",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul(
            [t(4, 3)], [t(3, 2), t(3, 2)], group_list=torch.tensor([1, 2, 4], device=NPU), split_item=3
        ),
        "npu_grouped_matmul: group_list has 3 groups for 2 weights",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(4), k=1),
        "npu_moe_gating_top_k_softmax: x must be 2-D or 3-D, got 1-D",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(2, 4), k=5),
        "npu_moe_gating_top_k_softmax: k=5 must be in [1, 4]",
    ),
    (lambda: torch_npu.npu_moe_gating_top_k(t(4), 1), "npu_moe_gating_top_k: x must be 2-D [tokens, experts], got 1-D"),
    (
        lambda: torch_npu.npu_moe_gating_top_k(t(2, 8), 1, norm_type=2),
        "npu_moe_gating_top_k: norm_type must be 0 (softmax) or 1 (sigmoid), got 2",
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k(t(2, 8), 1, group_count=2, k_group=3),
        "npu_moe_gating_top_k: k_group=3 must be in [1, group_count=2]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing(t(2, 4), t(2, 1).int(), t(2, 2).int(), 2),
        "npu_moe_init_routing: x [N, H], row_idx and expert_idx [N, k] expected, got (2, 4), (2, 1), (2, 2)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(3, 2).int()),
        "npu_moe_init_routing_v2: x [N, H] and expert_idx [N, k] expected, got (2, 4) and (3, 2)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), quant_mode=0),
        "npu_moe_init_routing_v2: quant_mode=0 (static) needs scale",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), quant_mode=2),
        "npu_moe_init_routing_v2: quant_mode must be -1 (none), 0 (static) or 1 (dynamic), got 2 (MX FP8 quantisation "
        "is not supported by vnpu)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), drop_pad_mode=1, expert_num=4),
        "npu_moe_init_routing_v2: drop_pad_mode=1 needs expert_capacity > 0 and expert_num >= the experts in range (4), "
        "got expert_capacity=-1, expert_num=4",
    ),
    (
        lambda: torch_npu.npu_moe_finalize_routing(t(4, 2), None, None, t(2, 2), t(2, 2), t(4).int(), None),
        "npu_moe_finalize_routing: bias needs export_for_source_row",
    ),
    (
        lambda: torch_npu.npu_moe_finalize_routing(
            t(4, 2), None, None, None, t(2, 2), t(4).int(), None, drop_pad_mode=1
        ),
        "npu_moe_finalize_routing: drop_pad_mode must be 0 (the only value torch_npu documents for this operator), got 1",
    ),
    (
        lambda: torch_npu.npu_moe_token_permute(t(2, 2), t(2, 1).long(), padded_mode=True),
        "npu_moe_token_permute: padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)",
    ),
    (
        lambda: torch_npu.npu_moe_token_unpermute(t(2, 2), t(2).int(), padded_mode=True),
        "npu_moe_token_unpermute: padded_mode=True is not supported (CANN's MoeTokenPermute does not support it either)",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], scale=[t(2)], antiquant_scale=[t(2)]),
        "npu_grouped_matmul: scale (quantised) and antiquant_scale (weight antiquant) exclude each other",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 3)], [t(3, 2)], act_type=3),
        "npu_grouped_matmul: act_type must be one of [0, 1, 2, 4, 5], got 3",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul([t(2, 4)], [t(4, 2).to(torch.int8)], antiquant_scale=[t(3, 2)]),
        "npu_grouped_matmul: antiquant_scale[0] has 3 groups for k=4",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, scale=t(3)),
        "npu_moe_init_routing_v2: scale must be [N=2] without quantisation, got (3,)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, quant_mode=0, scale=t(2)),
        "npu_moe_init_routing_v2: static quantisation takes scale and offset of shape [1]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, quant_mode=1, scale=t(2, 3)),
        "npu_moe_init_routing_v2: dynamic quantisation takes scale [1 or 4, H=4], got (2, 3)",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), active_expert_range=[3, 1]),
        "npu_moe_init_routing_v2: active_expert_range must be increasing, got [3, 1]",
    ),
    (
        lambda: torch_npu.npu_moe_init_routing_v2(t(2, 4), t(2, 2).int(), expert_num=4, row_idx_type=2),
        "npu_moe_init_routing_v2: row_idx_type must be 0 or 1, got 2",
    ),
    (lambda: torch_npu.npu_giou(t(4, 2), t(4, 2), mode=2), "npu_giou: mode must be 0 (iou) or 1 (iof), got 2"),
    (
        lambda: torch_npu.npu_fused_attention_score(t(2, 4), t(2, 4), t(2, 4), t(2, 2), 1.0, 1.0),
        "npu_fused_attention_score: query_layer must be [B, N, S, D], got (2, 4)",
    ),
    (
        lambda: torch_npu.npu_fused_attention_score(
            t(1, 1, 2, 4), t(1, 1, 2, 4), t(1, 1, 2, 4), t(1, 1, 2, 2), 1.0, 0.0
        ),
        "npu_fused_attention_score: keep_prob must be in (0, 1], got 0.0",
    ),
]


@pytest.mark.parametrize("call,message", INVALID_ARGUMENT_ERRORS, ids=[c[1][:56] for c in INVALID_ARGUMENT_ERRORS])
def test_invalid_argument_error_message(call, message):
    raises_operator_error(call, message)


@pytest.mark.parametrize("renorm", [0, 1])
def test_moe_gating_top_k_softmax_v2(renorm):
    x = torch.randn(6, 8)
    finished = torch.tensor([False, True, False, False, True, False])

    def ref(x, *, k, finished, renorm, output_softmax):
        if renorm == 0:
            p = torch.softmax(x.float(), -1)
            y, idx = p.topk(k, -1)
            softmax = p if output_softmax else x.new_empty(0)
        else:
            top, idx = x.topk(k, -1)
            y, softmax = torch.softmax(top, -1), x.new_empty(0)
        return y, idx.masked_fill(finished[:, None], 8).int(), softmax

    kwargs = {"k": 3, "finished": finished, "renorm": renorm, "output_softmax": True}
    y, _, softmax = check_op(
        lambda x, **kw: torch_npu.npu_moe_gating_top_k_softmax_v2(x, **kw), (x,), ref, kwargs, atol=1e-6, rtol=1e-6
    )
    if renorm == 1:  # the k probabilities of each row are renormalised to sum to 1
        torch.testing.assert_close(y.cpu().sum(-1), torch.ones(6))
        assert softmax.numel() == 0


@pytest.mark.parametrize("output_softmax", [False, True])
def test_moe_gating_top_k_softmax_v2_softmax_output_is_float32(output_softmax):
    # op-plugin allocates the softmax output as float32, empty when not asked for, for 16-bit x too
    x = torch.randn(4, 8).half().npu()
    y, idx, softmax = torch_npu.npu_moe_gating_top_k_softmax_v2(x, k=2, output_softmax=output_softmax)
    assert (y.dtype, idx.dtype, softmax.dtype) == (torch.float16, torch.int32, torch.float32)
    assert tuple(softmax.shape) == ((4, 8) if output_softmax else (0,))
    with FakeTensorMode() as mode:
        fake = torch_npu.npu_moe_gating_top_k_softmax_v2(mode.from_tensor(x), k=2, output_softmax=output_softmax)
    assert fake[2].dtype == torch.float32 and tuple(fake[2].shape) == tuple(softmax.shape)
