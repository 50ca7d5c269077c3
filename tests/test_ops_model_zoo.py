"""The torch_npu operators model zoos call under their own names: npu_max / npu_min (int32 indices),
npu_sort_v2, npu_slice, npu_broadcast, npu_indexing, the npu_conv* family, npu_silu, npu_layer_norm_eval,
npu_softmax_cross_entropy_with_logits, npu_anchor_response_flags, npu_apply_adam_w and npu_fused_attention_score —
each against a reference written here, with gradients, fake shapes, torch.compile and its argument errors."""

import contextlib

import pytest
import torch
import torch.nn.functional as F
from error_cases import first_line
from op_check import check_op
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu


def npu(*shape, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.randn(*shape, dtype=dtype).npu()


@pytest.mark.parametrize("op,reference", [(torch_npu.npu_max, torch.amax), (torch_npu.npu_min, torch.amin)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_give_values_and_int32_indices(op, reference, keepdim):
    x = npu(3, 5, 4)
    values, indices = op(x, 1, keepdim)
    host = x.cpu()
    assert torch.equal(values.cpu(), reference(host, 1, keepdim))
    assert indices.dtype == torch.int32
    picked = host.gather(1, (indices.long() if keepdim else indices.long().unsqueeze(1)).cpu())
    assert torch.equal(picked if keepdim else picked.squeeze(1), values.cpu())


def test_max_backward_routes_the_gradient_to_the_maxima():
    x = npu(4, 6).requires_grad_()
    values, indices = torch_npu.npu_max(x, -1)
    values.sum().backward()
    expected = torch.zeros(4, 6)
    expected[torch.arange(4), indices.long().cpu()] = 1
    assert torch.equal(x.grad.cpu(), expected)


def test_sort_v2_slice_broadcast_match_their_references():
    x = npu(3, 7)
    assert torch.equal(torch_npu.npu_sort_v2(x).cpu(), x.cpu().sort(-1).values)
    assert torch.equal(torch_npu.npu_sort_v2(x, 0, True).cpu(), x.cpu().sort(0, descending=True).values)
    sliced = torch_npu.npu_slice(x, [1, 2], [2, 4])
    assert sliced.is_contiguous() and torch.equal(sliced.cpu(), x.cpu()[1:3, 2:6])
    row = npu(1, 7)
    assert torch.equal(torch_npu.npu_broadcast(row, [5, 7]).cpu(), row.cpu().repeat(5, 1))


@pytest.mark.parametrize(
    "begin,end,strides,masks,index",
    [
        ([0, 1], [4, 5], [1, 1], {}, (slice(0, 4), slice(1, 5))),
        ([1, 0], [3, 6], [1, 2], {}, (slice(1, 3), slice(0, 6, 2))),
        ([-3, 2], [-1, 0], [1, 1], {"end_mask": 0b10}, (slice(-3, -1), slice(2, None))),
        ([2, 0], [0, 6], [1, 3], {"begin_mask": 0b01, "shrink_axis_mask": 0b00}, (slice(None, 0), slice(0, 6, 3))),
        ([2, 0], [3, 6], [1, 1], {"shrink_axis_mask": 0b01}, (2, slice(0, 6))),
    ],
)
def test_indexing_is_a_strided_slice(begin, end, strides, masks, index):
    x = npu(4, 6)
    assert torch.equal(torch_npu.npu_indexing(x, begin, end, strides, **masks).cpu(), x.cpu()[index])


CONVOLUTIONS = [
    (
        torch_npu.npu_conv2d,
        (2, 3, 9, 9),
        (6, 3, 3, 3),
        lambda x, w, b: F.conv2d(x, w, b, 2, 1, 1, 1),
        ([2, 2], [1, 1], [1, 1], 1),
    ),
    (
        torch_npu.npu_conv3d,
        (1, 2, 5, 6, 6),
        (4, 2, 3, 3, 3),
        lambda x, w, b: F.conv3d(x, w, b, 1, 1, 1, 1),
        ([1, 1, 1], [1, 1, 1], [1, 1, 1], 1),
    ),
    (
        torch_npu.npu_convolution,
        (2, 4, 8, 8),
        (4, 2, 3, 3),
        lambda x, w, b: F.conv2d(x, w, b, 1, 0, 2, 2),
        ([1], [0], [2], 2),
    ),
]


@pytest.mark.parametrize("op,xs,ws,reference,args", CONVOLUTIONS, ids=["conv2d", "conv3d", "convolution"])
def test_convolutions_match_torch_and_differentiate(op, xs, ws, reference, args):
    x, w, b = npu(*xs, seed=1).requires_grad_(), npu(*ws, seed=2).requires_grad_(), npu(ws[0], seed=3).requires_grad_()
    out = op(x, w, b, *args)
    hx, hw, hb = (t.detach().cpu().requires_grad_() for t in (x, w, b))
    want = reference(hx, hw, hb)
    assert torch.equal(out.detach().cpu(), want.detach())
    out.sum().backward()
    want.sum().backward()
    for got, expected in ((x, hx), (w, hw), (b, hb)):
        assert torch.equal(got.grad.cpu(), expected.grad)


def test_transposed_convolutions_match_torch():
    x, w = npu(1, 3, 5, 5, seed=4), npu(3, 2, 3, 3, seed=5)
    want = F.conv_transpose2d(x.cpu(), w.cpu(), None, 2, 1, 1, 1, 1)
    for op in (torch_npu.npu_conv_transpose2d, torch_npu.npu_convolution_transpose):
        assert torch.equal(op(x, w, None, [1, 1], [1, 1], [2, 2], [1, 1], 1).cpu(), want)


def test_silu_layer_norm_eval_and_softmax_cross_entropy():
    x = npu(4, 8)
    torch.testing.assert_close(torch_npu.npu_silu(x).cpu(), x.cpu() * torch.sigmoid(x.cpu()))
    assert torch.equal(torch_npu.npu_silu(x).cpu(), F.silu(x.cpu()))  # the CPU's kernel, bit for bit
    y = x.clone()
    assert torch_npu.npu_silu_(y) is y and torch.equal(y.cpu(), F.silu(x.cpu()))
    weight, bias = npu(8, seed=6), npu(8, seed=7)
    assert torch.equal(
        torch_npu.npu_layer_norm_eval(x, [8], weight, bias).cpu(), F.layer_norm(x.cpu(), [8], weight.cpu(), bias.cpu())
    )
    labels = torch.softmax(npu(4, 8, seed=8), -1)
    loss = torch_npu.npu_softmax_cross_entropy_with_logits(x, labels)
    host = -(labels.cpu() * (x.cpu() - x.cpu().logsumexp(-1, keepdim=True))).sum(-1)
    torch.testing.assert_close(loss.cpu(), host, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_mul_is_gelu_of_the_left_half_times_the_right(approximate):
    x = npu(3, 2, 8).requires_grad_()
    out = torch_npu.npu_gelu_mul(x, approximate=approximate)
    host = x.detach().cpu().requires_grad_()
    want = F.gelu(host[..., :4], approximate=approximate) * host[..., 4:]
    assert out.shape == (3, 2, 4) and torch.equal(out.detach().cpu(), want.detach())
    out.sum().backward()
    want.sum().backward()
    assert torch.equal(x.grad.cpu(), host.grad)


def test_ptiou_is_npu_iou():
    boxes, gt = torch.tensor([[0.0, 0, 4, 4], [2, 2, 6, 6]]).npu(), torch.tensor([[1.0, 1, 5, 5]]).npu()
    for mode in (0, 1):
        assert torch.equal(torch_npu.npu_ptiou(boxes, gt, mode).cpu(), torch_npu.npu_iou(boxes, gt, mode).cpu())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_loss_is_log_softmax_and_nll(reduction, smoothing):
    x = npu(6, 5, seed=13).requires_grad_()
    target = torch.tensor([0, 1, 4, -100, 2, 3]).npu()
    weight = torch.tensor([1.0, 0.5, 0.25, 1.0, 0.75]).npu()
    loss, log_prob, zloss, lse = torch_npu.npu_cross_entropy_loss(x, target, weight, reduction, -100, smoothing)
    host = x.detach().cpu().requires_grad_()
    want = F.cross_entropy(host, target.cpu(), weight.cpu(), reduction=reduction, label_smoothing=smoothing)
    assert loss.shape == ((6,) if reduction == "none" else (1,))
    torch.testing.assert_close(loss.detach().cpu().reshape(want.shape), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(log_prob.detach().cpu(), torch.log_softmax(host.detach(), -1))
    assert zloss.numel() == 0 and lse.numel() == 0
    loss.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), host.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_group_norm_swish_is_swish_of_group_norm(scale):
    x = npu(2, 6, 3, 3, seed=14).requires_grad_()
    weight, bias = npu(6, seed=15), npu(6, seed=16)
    out, mean, rstd = torch_npu.npu_group_norm_swish(x, 3, weight, bias, 1e-5, scale)
    host = x.detach().cpu().double().requires_grad_()
    normed = F.group_norm(host, 3, weight.cpu().double(), bias.cpu().double(), 1e-5)
    want = normed * torch.sigmoid(scale * normed)
    torch.testing.assert_close(out.detach().cpu(), want.detach().float(), rtol=1e-5, atol=1e-5)
    grouped = host.detach().reshape(2, 3, -1)
    torch.testing.assert_close(mean.cpu(), grouped.mean(-1).float())
    torch.testing.assert_close(
        rstd.cpu(), grouped.var(-1, unbiased=False).add(1e-5).rsqrt().float(), rtol=1e-5, atol=1e-5
    )
    out.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), host.grad.float(), rtol=1e-4, atol=1e-5)


def _top_k_top_p_reference(row, p, k):
    """One row, by hand: keep the k largest, then the largest ones whose probabilities reach p."""
    import math

    ranked = sorted(range(len(row)), key=lambda i: (row[i], i))  # ascending, stable
    kept = set(ranked[len(row) - k :]) if k is not None else set(ranked)
    if p is not None:
        live = [i for i in ranked if i in kept]
        top = max(row[i] for i in live)
        weights = {i: math.exp(row[i] - top) for i in live}
        total, running = sum(weights.values()), 0.0
        for i in live[:-1]:
            running += weights[i] / total
            if running <= 1 - p:
                kept.discard(i)
    return [row[i] if i in kept else float("-inf") for i in range(len(row))]


@pytest.mark.parametrize("use_p,use_k", [(True, True), (True, False), (False, True)])
def test_top_k_top_p_filters_like_the_apply_top_k_top_p_kernel(use_p, use_k):
    logits = npu(4, 12, seed=17)
    p = torch.tensor([0.9, 0.5, 0.2, 0.99]) if use_p else None
    k = torch.tensor([3, 12, 1, 7]) if use_k else None
    got = torch_npu.npu_top_k_top_p(logits, None if p is None else p.npu(), None if k is None else k.npu()).cpu()
    for b in range(4):
        want = _top_k_top_p_reference(
            logits[b].cpu().tolist(), None if p is None else p[b].item(), None if k is None else int(k[b])
        )
        assert got[b].tolist() == pytest.approx(want), b


def test_top_k_top_p_traces_without_reading_k():
    # vLLM-style samplers compile this operator: its fake kernel checks shapes only (k's range is data).
    logits, p, k = npu(4, 12, seed=18), torch.full((4,), 0.8).npu(), torch.tensor([3, 12, 1, 7]).npu()
    with FakeTensorMode() as mode:
        out = torch_npu.npu_top_k_top_p(mode.from_tensor(logits), mode.from_tensor(p), mode.from_tensor(k))
        assert out.shape == logits.shape and out.dtype == logits.dtype
    compiled = torch.compile(torch_npu.npu_top_k_top_p, fullgraph=True, backend="eager")
    assert torch.equal(compiled(logits, p, k).cpu(), torch_npu.npu_top_k_top_p(logits, p, k).cpu())


def test_scatter_and_scatter_update_follow_torch_npus_examples():
    x = torch.tensor([[1.6279, 0.1226], [0.9041, 1.0980]]).npu()
    out = torch_npu.npu_scatter(
        x, torch.tensor([0, 1], dtype=torch.int32).npu(), torch.tensor([-1.1993, -1.5247]).npu(), 0
    )
    assert torch.equal(out.cpu(), torch.tensor([[-1.1993, 0.1226], [0.9041, -1.5247]]))
    data = torch.tensor([[[[1.0] * 8, [2.0] * 8]]]).npu()
    updates = torch.full((1, 1, 1, 8), 3.0).npu()
    updated = torch_npu.scatter_update(data, torch.tensor([1]).npu(), updates, -2)
    assert torch.equal(updated.cpu(), torch.tensor([[[[1.0] * 8, [3.0] * 8]]])) and data.cpu()[0, 0, 1, 0] == 2
    assert torch_npu.scatter_update_(data, torch.tensor([0]).npu(), updates, -2) is data
    assert torch.equal(data.cpu(), torch.tensor([[[[3.0] * 8, [2.0] * 8]]]))


def _bits(mask, n):
    return [(int(mask[i // 8]) >> (i % 8)) & 1 for i in range(n)]


def test_dropout_gen_mask_draws_bits_in_128_element_blocks():
    torch.manual_seed(3)
    mask = torch_npu.npu_dropout_gen_mask([300], 0.25)
    assert mask.dtype == torch.uint8 and mask.device.type == "npu" and mask.shape == (48,)  # 3 blocks of 16 bytes
    torch.manual_seed(3)
    assert torch.equal(torch_npu.npu_dropout_gen_mask([300], 0.25).cpu(), mask.cpu())  # the npu generator's draw
    big = torch_npu.npu_dropout_gen_mask([256, 512], 0.25).cpu()
    kept = sum(bin(b).count("1") for b in big.tolist()) / (256 * 512)
    assert abs(kept - 0.75) < 0.01
    assert torch_npu.npu_dropout_gen_mask([128], 0.0).cpu().tolist() == [255] * 16
    assert torch_npu.npu_dropout_gen_mask([128], 1.0).cpu().tolist() == [0] * 16


def test_dropout_do_mask_and_npu_dropout_apply_the_mask_bits():
    x = npu(5, 7, seed=18)
    mask = torch_npu.npu_dropout_gen_mask([5, 7], 0.4)
    out, returned = torch_npu.npu_dropout_do_mask(x, mask, 0.4)
    bits = torch.tensor(_bits(mask.cpu(), 35), dtype=torch.float32).view(5, 7)
    assert torch.equal(out.cpu(), x.cpu() * bits * (1 / 0.6)) and torch.equal(returned.cpu(), mask.cpu())
    y = npu(4, 9, seed=19).requires_grad_()
    dropped, drop_mask = torch_npu._npu_dropout(y, 0.5)
    keep = torch.tensor(_bits(drop_mask.cpu(), 36), dtype=torch.float32).view(4, 9)
    assert torch.equal(dropped.detach().cpu(), y.detach().cpu() * keep * 2)
    dropped.backward(torch.ones(4, 9).npu())
    assert torch.equal(y.grad.cpu(), keep * 2)  # the backward reuses the forward's mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_update_merges_partial_attention_like_one_softmax(dtype):
    # three ranks each attend to a third of the keys; merging their outputs gives attention over all keys
    torch.manual_seed(20)
    q, k, v = torch.randn(6, 8), torch.randn(6, 12, 8), torch.randn(6, 12, 8)
    scores = torch.einsum("nd,nkd->nk", q, k)
    parts_lse, parts_out = [], []
    for keys in (slice(0, 4), slice(4, 8), slice(8, 12)):
        s = scores[:, keys]
        parts_lse.append(torch.logsumexp(s, -1).npu())
        parts_out.append(torch.einsum("nk,nkd->nd", s.softmax(-1), v[:, keys]).to(dtype).npu())
    out, lse = torch_npu.npu_attention_update(parts_lse, parts_out, 1)
    whole = torch.einsum("nk,nkd->nd", scores.softmax(-1), v)
    assert out.dtype == dtype and lse.dtype == torch.float32
    torch.testing.assert_close(
        out.cpu().float(),
        whole,
        rtol=1e-3 if dtype == torch.float16 else 1e-5,
        atol=1e-3 if dtype == torch.float16 else 1e-5,
    )
    torch.testing.assert_close(lse.cpu(), torch.logsumexp(scores, -1))
    assert torch_npu.npu_attention_update(parts_lse, parts_out, 0)[1].numel() == 0


def test_prefetch_checks_its_arguments_and_changes_nothing():
    weight = npu(16, 16, seed=21)
    before = weight.cpu().clone()
    assert torch_npu.npu_prefetch(weight, None, 1024) is None
    assert torch_npu.npu_prefetch(weight, npu(4), 512, 128) is None and torch.equal(weight.cpu(), before)
    # torch_npu's meta function raises these texts, word for word, in eager and under FakeTensorMode alike.
    for mode in (contextlib.nullcontext(), torch._subclasses.FakeTensorMode()):
        with mode:
            x = torch.empty(8, 8, device="npu")
            with pytest.raises(RuntimeError) as info:
                torch_npu.npu_prefetch(x, None, -1)
            assert str(info.value) == "The max_size should be greater than zero, but got -1."
            with pytest.raises(RuntimeError) as info:
                torch_npu.npu_prefetch(x, None, 10, -1)
            assert str(info.value) == "The offset should be nonnegative, but got -1."


def test_reshape_and_one_():
    x = npu(2, 6)
    assert torch.equal(torch_npu.npu_reshape(x, [3, 4]).cpu(), x.cpu().reshape(3, 4))
    y = npu(3)
    assert torch_npu.one_(y) is y and torch.equal(y.cpu(), torch.ones(3))


def test_anchor_response_flags_mark_the_cells_of_box_centres():
    boxes = torch.tensor([[0.0, 0.0, 16.0, 16.0], [20.0, 4.0, 30.0, 10.0]]).npu()
    flags = torch_npu.npu_anchor_response_flags(boxes, [4, 5], [8, 8], 3)
    assert flags.dtype == torch.uint8 and flags.shape == (4 * 5 * 3,)
    cells = flags.view(20, 3).cpu()
    # centres (8, 8) -> cell (1, 1) = 6; (25, 7) -> cell (0, 3) = 3
    assert cells[:, 0].nonzero().flatten().tolist() == [3, 6] and torch.equal(cells[:, 0], cells[:, 2])


def test_sign_bits_pack_and_unpack_follow_torch_npus_examples():
    x = torch.tensor([5, 4, 3, 2, 0, -1, -2, 4, 3, 2, 1, 0, -1, -2], dtype=torch.float32).npu()
    packed = torch_npu.npu_sign_bits_pack(x, 2)
    assert packed.dtype == torch.uint8 and packed.cpu().tolist() == [[159], [15]]
    signs = torch_npu.npu_sign_bits_unpack(packed.flatten(), 1, torch.float16)
    expected = [1.0, 1, 1, 1, 1, -1, -1, 1, 1, 1, 1, 1, -1, -1, -1, -1]  # the two pad bits unpack as -1
    assert signs.dtype == torch.float16 and signs.cpu().tolist() == [expected]
    assert torch.equal(signs.flatten()[:14].cpu(), torch.where(x.cpu() >= 0, 1.0, -1.0).half())


@pytest.mark.parametrize("nesterov", [False, True])
def test_apply_adam_takes_tensorflows_adam_step_in_place(nesterov):
    grad, var0, m0, v0 = npu(6, seed=9), npu(6, seed=10), npu(6, seed=11) * 0.1, npu(6, seed=12).abs() * 0.01
    var, m, v = var0.clone(), m0.clone(), v0.clone()
    b1p, b2p, lr, b1, b2, eps = 0.9**3, 0.999**3, 0.01, 0.9, 0.999, 1e-8
    out = torch_npu.npu_apply_adam(b1p, b2p, lr, b1, b2, eps, grad, False, nesterov, var=var, m=m, v=v)
    assert out[0] is var and out[1] is m and out[2] is v
    g, hm, hv, hvar = grad.cpu().double(), m0.cpu().double(), v0.cpu().double(), var0.cpu().double()
    hm = hm + (1 - b1) * (g - hm)
    hv = hv + (1 - b2) * (g * g - hv)
    step = (b1 * hm + (1 - b1) * g) if nesterov else hm
    hvar = hvar - lr * (1 - b2p) ** 0.5 / (1 - b1p) * step / (hv.sqrt() + eps)
    for got, want in ((var, hvar), (m, hm), (v, hv)):
        torch.testing.assert_close(got.cpu(), want.float(), rtol=1e-6, atol=1e-7)


def test_yolo_boxes_encode_gives_cell_offsets_and_log_sizes():
    anchors = torch.tensor([[0.0, 0, 8, 8], [8, 8, 24, 24]]).npu()
    gt = torch.tensor([[2.0, 2, 10, 6], [4, 10, 20, 30]]).npu()
    stride = torch.tensor([8, 16], dtype=torch.int32).npu()
    out = torch_npu.npu_yolo_boxes_encode(anchors, gt, stride).cpu()
    import math

    expected = torch.tensor(
        [
            [(6 - 4) / 8 + 0.5, (4 - 4) / 8 + 0.5, math.log(8 / 8), math.log(4 / 8)],
            [(12 - 16) / 16 + 0.5, (20 - 16) / 16 + 0.5, math.log(16 / 16), math.log(20 / 16)],
        ]
    )
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("assign_all", [False, True])
def test_grid_assign_positive_follows_the_grid_assigner(assign_all):
    overlaps = torch.tensor([[0.1, 0.7, 0.7, 0.2, 0.0], [0.6, 0.3, 0.1, 0.9, 0.4]])
    flags = torch.tensor([1, 1, 1, 0, 1], dtype=torch.uint8)
    max_overlaps, argmax = overlaps.max(0)
    gt_max, gt_argmax = overlaps.max(1)
    start = torch.zeros(5)
    got = torch_npu.npu_grid_assign_positive(
        start.npu(),
        overlaps.npu(),
        flags.npu(),
        max_overlaps.npu(),
        argmax.npu(),
        gt_max.npu(),
        gt_argmax.npu(),
        2,
        0.5,
        0.3,
        assign_all,
    ).cpu()
    expected = start.clone()
    for j in range(5):  # responsible boxes above pos_iou_thr take their best gt
        if flags[j] and max_overlaps[j] > 0.5:
            expected[j] = argmax[j] + 1
    for i in range(2):  # each gt above min_pos_iou takes its best responsible box(es)
        if gt_max[i] > 0.3:
            boxes = [j for j in range(5) if overlaps[i, j] == gt_max[i]] if assign_all else [int(gt_argmax[i])]
            for j in boxes:
                if flags[j]:
                    expected[j] = i + 1
    assert torch.equal(got, expected)


def test_fake_shapes_and_compiled_graphs():
    with FakeTensorMode():
        x = torch.empty(3, 5, 4, device="npu")
        values, indices = torch_npu.npu_max(x, 2, True)
        assert values.shape == (3, 5, 1) and indices.dtype == torch.int32
        assert torch_npu.npu_indexing(x, [0, 1], [3, 5], [2, 2]).shape == (2, 2, 4)
    x = npu(3, 6)
    compiled = torch.compile(
        lambda t: torch_npu.npu_slice(torch_npu.npu_silu(t), [0, 1], [2, 4]).sum() + torch_npu.npu_max(t, 1)[0].sum(),
        backend="aot_eager",
        fullgraph=True,
    )
    eager = torch_npu.npu_slice(torch_npu.npu_silu(x), [0, 1], [2, 4]).sum() + torch_npu.npu_max(x, 1)[0].sum()
    assert torch.equal(compiled(x).cpu(), eager.cpu())


ERRORS = [
    (lambda: torch_npu.npu_max(npu(2, 3), 2), "npu_max: dim=2 is out of range for a 2-D input"),
    (lambda: torch_npu.npu_slice(npu(2, 3), [0], [1]), "npu_slice: offsets and size need 2 entries each, got 1 and 1"),
    (lambda: torch_npu.npu_slice(npu(2, 3), [1, 2], [2, 1]), "npu_slice: offset 1 + size 2 exceeds dim 0 of size 2"),
    (
        lambda: torch_npu.npu_indexing(npu(2, 3), [0, 0], [2, 3], [1, 0]),
        "npu_indexing: strides[1] must be positive, got 0",
    ),
    (
        lambda: torch_npu.npu_indexing(npu(2, 3), [0], [1], [1], ellipsis_mask=1),
        "npu_indexing: ellipsis_mask and new_axis_mask are not supported on vnpu; index with Python's ... and None instead",
    ),
    (
        lambda: torch_npu.npu_conv2d(npu(3, 8, 8), npu(2, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], 1),
        "npu_conv2d: input must be 4-D, got 3-D",
    ),
    (
        lambda: torch_npu.npu_softmax_cross_entropy_with_logits(npu(2, 3), npu(2, 4)),
        "npu_softmax_cross_entropy_with_logits: labels must have the shape of self (2, 3), got (2, 4)",
    ),
    (lambda: torch_npu.npu_gelu_mul(npu(2, 5)), "npu_gelu_mul: the last dimension of input (5) must be even"),
    (
        lambda: torch_npu.npu_top_k_top_p(npu(2, 4), None, torch.tensor([1, 5]).npu()),
        "npu_top_k_top_p: k must be in [1, 4]",
    ),
    (
        lambda: torch_npu.npu_reshape(npu(2, 3), [4, 2]),
        "npu_reshape: shape [4, 2] does not hold the 6 elements of self",
    ),
    (
        lambda: torch_npu.npu_cross_entropy_loss(npu(2, 3), torch.tensor([0, 1]).npu(), return_zloss=True),
        "npu_cross_entropy_loss: lse_square_scale_for_zloss and return_zloss (zloss) are not supported, as on torch_npu",
    ),
    (
        lambda: torch_npu.npu_cross_entropy_loss(npu(2, 3), torch.tensor([0, 1]).npu(), reduction="avg"),
        "npu_cross_entropy_loss: reduction must be 'mean', 'sum' or 'none', got 'avg'",
    ),
    (
        lambda: torch_npu.npu_anchor_response_flags(npu(2, 5), [2, 2], [4, 4], 1),
        "npu_anchor_response_flags: self must be [N, 4] boxes, got (2, 5)",
    ),
]


# Checks that need no tensor values run in the fake kernels too: tracing raises what eager raises.
TRACED_ERRORS = [
    (lambda: torch_npu.npu_top_k_top_p(npu(8), None, None), "npu_top_k_top_p: logits must be 2-D [B, V], got 1-D"),
    (
        lambda: torch_npu.npu_top_k_top_p(npu(2, 8), None, torch.tensor([1, 2, 3]).npu()),
        "npu_top_k_top_p: k must be [B] with B=2, got (3,)",
    ),
    (
        lambda: torch.ops.npu.scatter_update(npu(2, 4, 8), torch.tensor([0]).npu(), npu(2, 1, 8), -2),
        "scatter_update: indices must be [batch] with batch=2 (2-D indices are not supported on vnpu), got (1,)",
    ),
    (
        lambda: torch.ops.npu.scatter_update(npu(2, 4, 8), torch.tensor([0, 1]).npu(), npu(2, 1, 8), 0),
        "scatter_update: axis=0 must name a dimension after the batch dimension",
    ),
    (
        lambda: torch_npu.npu_quantize(npu(2, 12), torch.ones(12).npu(), None, torch.quint4x2, -1),
        "npu_quantize: If dtype is quint4x2, last dim must be divided by 8",
    ),
]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize(
    "call,message", TRACED_ERRORS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(TRACED_ERRORS)]
)
def test_shape_errors_are_the_same_eager_and_traced(call, message, traced):
    with FakeTensorMode(allow_non_fake_inputs=True) if traced else contextlib.nullcontext():
        with pytest.raises(RuntimeError) as info:
            call()
    assert first_line(info.value) == message and "ERR01001 OPS invalid parameter" in str(info.value)


def test_traced_grouped_matmul_refuses_a_tensor_group_list_with_one_output_per_group():
    x, ws, groups = npu(7, 4), [npu(4, 3) for _ in range(3)], torch.tensor([2, 5, 7]).npu()
    with FakeTensorMode(allow_non_fake_inputs=True), pytest.raises(RuntimeError) as info:
        torch_npu.npu_grouped_matmul([x], ws, group_list=groups, split_item=0, group_type=0)
    assert first_line(info.value) == (
        "npu_grouped_matmul: with group_list and split_item 0/1 the output sizes depend on group_list's values "
        "(not traceable); use split_item=3"
    )


@pytest.mark.parametrize("call,message", ERRORS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(ERRORS)])
def test_bad_arguments_name_the_argument(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert first_line(info.value) == message and "ERR01001 OPS invalid parameter" in str(info.value)


@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_npu_apply_adam_w_matches_torch_adamw(amsgrad, maximize):
    g = torch.Generator().manual_seed(3)
    p0 = torch.randn(10, generator=g)
    grads = [torch.randn(10, generator=g) for _ in range(3)]
    ref = torch.nn.Parameter(p0.clone())
    opt = torch.optim.AdamW(
        [ref], lr=0.1, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01, amsgrad=amsgrad, maximize=maximize
    )
    var, m, v, max_norm = (
        p0.clone().npu(),
        torch.zeros(10, device="npu"),
        torch.zeros(10, device="npu"),
        torch.zeros(10, device="npu"),
    )
    for step, grad in enumerate(grads, 1):
        ref.grad = grad.clone()
        opt.step()
        torch_npu.npu_apply_adam_w(
            0.9 ** (step - 1),  # the kernel advances beta^(t-1) to beta^t itself (as MindSpeed's AdamW passes it)
            0.99 ** (step - 1),
            0.1,
            0.01,
            0.9,
            0.99,
            1e-8,
            grad.npu(),
            max_norm,
            amsgrad,
            maximize,
            var=var,
            m=m,
            v=v,
        )
    torch.testing.assert_close(var.cpu(), ref.detach(), atol=1e-6, rtol=1e-5)
    # functional form: one step from zero state
    nv, nm, nvv = torch_npu.npu_apply_adam_w(1.0, 1.0, 0.1, 0.0, 0.9, 0.99, 1e-8, grads[0].npu(), None, False, False)
    torch.testing.assert_close(
        nv.cpu(), -0.1 * grads[0].sign() * (1 / (1 + 1e-8 / grads[0].abs())), atol=1e-6, rtol=1e-5
    )


def test_npu_fused_attention_score():
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    mask = torch.randn(2, 1, 5, 5, generator=g)

    def ref(q, k, v, mask, scale, keep_prob):
        ctx = torch.softmax(q @ k.transpose(-1, -2) * scale + mask, -1) @ v
        return ctx.permute(0, 2, 1, 3).reshape(10, 12)

    check_op(torch_npu.npu_fused_attention_score, (q, k, v, mask, 0.5, 1.0), ref, atol=1e-5, rtol=1e-5)


def test_grid_assign_positive_reads_num_gts_real_rows_of_padded_overlaps():
    # num_gts is the real gt count among overlaps' k (possibly padded) rows; torch_npu's own example passes 128
    # with 2 rows, which the rows that exist bound
    overlaps = torch.tensor([[0.1, 0.8, 0.2, 0.3], [0.9, 0.1, 0.2, 0.3]])
    flags = torch.ones(4, dtype=torch.uint8)
    max_overlaps, argmax = torch.zeros(4), torch.zeros(4, dtype=torch.int32)  # no box passes pos_iou_thr

    def assign(num_gts):
        args = (torch.zeros(4), overlaps, flags, max_overlaps, argmax, overlaps.max(1)[0], overlaps.max(1)[1].int())
        return torch_npu.npu_grid_assign_positive(*(a.npu() for a in args), num_gts, 0.5, 0.0, True).cpu()

    assert assign(1).tolist() == [0.0, 1.0, 0.0, 0.0]  # the padded second row takes no part
    assert assign(2).tolist() == assign(128).tolist() == [2.0, 1.0, 0.0, 0.0]
    wrong = (torch.zeros(4), overlaps[:, :3], flags, max_overlaps, argmax, overlaps.max(1)[0], overlaps.max(1)[1].int())
    with pytest.raises(RuntimeError) as error:
        torch_npu.npu_grid_assign_positive(*(a.npu() for a in wrong), 2, 0.5, 0.0, True)
    assert first_line(error.value) == (
        "npu_grid_assign_positive: overlaps must be [k, 4] (k gt rows, the first num_gts real), got (2, 3)"
    )
