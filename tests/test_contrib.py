"""torch_npu.contrib: the documented semantics of its functions and modules, checked against
hand-computed values or plain PyTorch formulations, on npu and cpu alike."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from error_cases import raises_exactly, t
from subprocess_helpers import last_line, run_python

import torch_npu
from torch_npu import contrib
from torch_npu.contrib.module.channel_shuffle import ChannelShuffle


def test_activations_equal_pytorch():
    x = torch.randn(64)
    assert torch.equal(contrib.Mish()(x.npu()).cpu(), F.mish(x))
    assert torch.equal(contrib.SiLU()(x.npu()).cpu(), F.silu(x))
    assert torch.equal(contrib.Swish()(x.npu()).cpu(), F.silu(x))
    assert torch.allclose(contrib.Swish()(x.npu()).cpu(), x * torch.sigmoid(x))


def test_roll_and_index_put_and_matmul_transpose():
    x = torch.arange(12.0).view(3, 4)
    assert torch.equal(contrib.roll(x.npu(), 1, 0).cpu(), torch.roll(x, 1, 0))
    cond = x > 5
    assert torch.equal(
        contrib.npu_fast_condition_index_put(x.clone().npu(), cond.npu(), -1.0).cpu(),
        torch.where(cond, torch.tensor(-1.0), x),
    )
    a = torch.randn(2, 3, 4, requires_grad=True)
    b = torch.randn(2, 5, 4, requires_grad=True)
    an, bn = a.detach().npu().requires_grad_(), b.detach().npu().requires_grad_()
    out = contrib.matmul_transpose(an, bn)
    ref = a @ b.transpose(-2, -1)
    assert torch.allclose(out.detach().cpu(), ref.detach())
    out.sum().backward()
    ref.sum().backward()
    assert torch.allclose(an.grad.cpu(), a.grad) and torch.allclose(bn.grad.cpu(), b.grad)


def test_fuse_add_softmax_dropout_eval_path():
    scores, mask = torch.randn(2, 4, 8, 8), torch.zeros(2, 1, 8, 8)
    mask[..., -2:] = -10000.0
    out = contrib.function.fuse_add_softmax_dropout(False, nn.Dropout(0.1).eval(), mask.npu(), scores.npu(), 64)
    assert torch.allclose(out.cpu(), F.softmax(scores / 8.0 + mask, dim=-1))


def test_dropout_with_byte_mask_scales_kept_values():
    x = torch.ones(10000, device="npu")
    y = contrib.function.dropout_with_byte_mask(x, p=0.25)
    kept = y[y != 0]
    assert torch.allclose(kept.cpu(), torch.full_like(kept.cpu(), 1 / 0.75))
    assert 0.2 < 1 - kept.numel() / 10000 < 0.3
    m = contrib.module.DropoutWithByteMask(p=0.5).eval()
    assert torch.equal(m(x).cpu(), x.cpu())


def test_bbox_coders_are_the_npu_box_operators_on_float32_boxes():
    # as torch_npu's contrib: boxes of any dtype go in as float32, then the box operators compute
    anchors = torch.tensor([[0, 0, 10, 10], [5, 5, 25, 15]])
    gts = torch.tensor([[1, 2, 11, 14], [4, 6, 30, 16]])
    stds = [0.1, 0.1, 0.2, 0.2]
    deltas = contrib.npu_bbox_coder_encode_xyxy2xywh(anchors.npu(), gts.half().npu(), stds=stds)
    direct = torch_npu.npu_bounding_box_encode(anchors.float().npu(), gts.float().npu(), 0, 0, 0, 0, *stds)
    assert deltas.dtype == torch.float32 and torch.equal(deltas.cpu(), direct.cpu())
    dx = ((1 + 11) / 2 - 5) / 11 / 0.1  # inclusive widths: 10 - 0 + 1
    assert abs(float(deltas[0, 0]) - dx) < 1e-2
    normalized = contrib.npu_bbox_coder_encode_xyxy2xywh(
        anchors.npu() / 100.0, gts.npu() / 100.0, stds=stds, is_normalized=True, normalized_scale=100.0
    )
    torch.testing.assert_close(normalized.cpu(), deltas.cpu(), atol=1e-2, rtol=1e-3)
    boxes = contrib.npu_bbox_coder_decode_xywh2xyxy(anchors.npu(), deltas, stds=stds)
    torch.testing.assert_close(boxes.cpu(), gts.float(), atol=2e-2, rtol=1e-3)
    clipped = contrib.npu_bbox_coder_decode_xywh2xyxy(anchors.npu(), deltas, stds=stds, max_shape=(12, 20))
    assert float(clipped[:, 2].max()) <= 19 and float(clipped[:, 3].max()) <= 11


def test_bbox_encode_yolo():
    anchors = torch.tensor([[0.0, 0.0, 8.0, 8.0]])
    gts = torch.tensor([[2.0, 2.0, 10.0, 6.0]])
    out = contrib.npu_bbox_coder_encode_yolo(anchors.npu(), gts.npu(), torch.tensor([8.0]).npu())
    expected = torch.tensor([[(6 - 4) / 8 + 0.5, (4 - 4) / 8 + 0.5, math.log(8 / 8), math.log(4 / 8)]])
    assert torch.allclose(out.cpu(), expected, atol=1e-6)
    from_ints = contrib.npu_bbox_coder_encode_yolo(anchors.long().npu(), gts.long().npu(), torch.tensor([8]).npu())
    assert torch.equal(from_ints.cpu(), out.cpu())


def test_multiclass_nms_keeps_best_non_overlapping_boxes():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10.0]])
    # two classes + background column
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.8, 0.1, 0.0], [0.7, 0.2, 0.0], [0.01, 0.6, 0.0]])
    dets, labels = contrib.npu_multiclass_nms(boxes.npu(), scores.npu(), score_thr=0.05, nms_thr=0.5, max_num=5)
    assert dets.shape == (5, 5) and labels.shape == (5,) and dets.dtype == torch.float16
    kept = [(round(float(d[4]), 2), int(label)) for d, label in zip(dets.cpu(), labels.cpu()) if float(d[4]) > 0]
    # box 1 is suppressed by box 0 in class 0 (IoU 0.68); class 1 keeps box 3 and box 2 (box 0/1 score 0.1 overlap)
    assert kept == [(0.9, 0), (0.7, 0), (0.6, 1), (0.2, 1)]
    bd, bl = contrib.npu_batched_multiclass_nms(boxes[None].npu(), scores[None].npu(), nms_thr=0.5, max_num=5)
    assert torch.equal(bd[0].cpu(), dets.cpu()) and torch.equal(bl[0].cpu(), labels.cpu())


def test_single_level_responsible_flags():
    gts = torch.tensor([[0.0, 0.0, 16.0, 16.0], [40.0, 8.0, 56.0, 24.0]])
    flags = contrib.npu_single_level_responsible_flags((4, 4), gts.npu(), (16, 16), 3)
    assert flags.shape == (48,) and flags.dtype == torch.uint8
    expected = torch.zeros(16, dtype=torch.uint8)
    expected[0 * 4 + 0] = 1
    expected[1 * 4 + 3] = 1
    assert torch.equal(flags.cpu(), expected.repeat_interleave(3))


def test_channel_shuffle_interleaves_and_backpropagates():
    x1 = torch.arange(2 * 2 * 1 * 1.0).view(2, 2, 1, 1)
    x2 = 10 + x1
    shuffle = ChannelShuffle(4, groups=2, split_shuffle=False).npu()
    out = shuffle(x1.npu(), x2.npu())
    assert out[0, :, 0, 0].cpu().tolist() == [0.0, 10.0, 1.0, 11.0]
    a, b = x1.npu().requires_grad_(), x2.npu().requires_grad_()
    o1, o2 = ChannelShuffle(4).npu()(a, b)
    assert torch.equal(torch.cat([o1, o2], 1).detach().cpu(), out.cpu())
    (o1.sum() * 2 + o2.sum() * 3).backward()
    # o1 holds (a0, b0), o2 holds (a1, b1)
    assert a.grad[0, :, 0, 0].cpu().tolist() == [2.0, 3.0] and b.grad[0, :, 0, 0].cpu().tolist() == [2.0, 3.0]
    with pytest.raises(RuntimeError, match="expects at least 4 channels"):
        shuffle(x1.npu(), x1[:, :1].npu())


def test_channel_shuffle_of_a_wider_concatenation_picks_from_its_first_channels():
    # torch_npu's indices select from the first in_channels channels of cat(x1, x2); its own test passes
    # ChannelShuffle(2) the same two-channel tensor twice and expects that tensor back
    x = torch.randn(2, 2, 3, 3)
    out = ChannelShuffle(2, split_shuffle=False).npu()(x.npu(), x.npu())
    assert torch.equal(out.cpu(), x)
    o1, o2 = ChannelShuffle(4, groups=2).npu()(x.npu(), x.npu())
    assert torch.equal(o1.cpu(), torch.stack([x[:, 0], x[:, 0]], 1)) and torch.equal(
        o2.cpu(), torch.stack([x[:, 1], x[:, 1]], 1)
    )


def test_label_smoothing_cross_entropy():
    pred, target = torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 4, 0])
    loss = contrib.LabelSmoothingCrossEntropy(num_classes=5, smooth_factor=0.2)(pred.npu(), target.npu())
    labels = torch.full((6, 5), 0.2 / 4)
    labels[torch.arange(6), target] = 0.8
    assert torch.allclose(loss.cpu(), (-(labels * F.log_softmax(pred, 1)).sum(1)).mean())
    plain = contrib.LabelSmoothingCrossEntropy(num_classes=5)(pred.npu(), target.npu())
    assert torch.allclose(plain.cpu(), F.cross_entropy(pred, target))


def test_drop_path_and_fairseq_dropout():
    x = torch.ones(1000, 4, device="npu")
    dp = contrib.NpuDropPath(0.5)
    y = dp(x)
    rows = y.cpu()
    assert set(rows[:, 0].tolist()) <= {0.0, 2.0} and bool((rows == rows[:, :1]).all())
    assert torch.equal(dp.eval()(x).cpu(), x.cpu())
    contrib.NpuDropPath.enable_droppath_ensemble(nn.Sequential(dp))
    fd = contrib.NpuFairseqDropout(0.3)
    assert torch.equal(fd.eval()(x).cpu(), x.cpu())
    fd.apply_during_inference = True
    assert float((fd(x) == 0).float().mean()) > 0.2
    assert isinstance(contrib.NpuCachedDropout(0.1), contrib.NpuFairseqDropout)


def test_focus_slices_then_convolves():
    torch.manual_seed(0)
    focus = contrib.Focus(3, 8, k=3).npu().eval()
    x = torch.randn(2, 3, 8, 8, device="npu")
    sliced = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
    assert torch.equal(focus(x).cpu(), focus.conv(sliced).cpu())
    assert focus(x).shape == (2, 8, 4, 4)


def test_bilstm_equals_two_directional_lstms():
    torch.manual_seed(0)
    m = contrib.BiLSTM(5, 7).npu()
    x = torch.randn(6, 2, 5, device="npu")
    out = m(x)
    assert out.shape == (6, 2, 14)
    fw = m.fw_rnn(x)[0]
    assert torch.equal(out[..., :7].cpu(), fw.cpu())
    assert torch.allclose(out[-1, :, 7:].cpu(), m.bw_rnn(x[-1:])[0][0].cpu(), atol=1e-6)


def test_roi_align_matches_hand_computed_average():
    feat = torch.arange(16.0).view(1, 1, 4, 4)
    rois = torch.tensor([[0, 0.0, 0.0, 2.0, 2.0]])
    out = contrib.ROIAlign((1, 1), 1.0, 2, aligned=False)(feat.npu(), rois.npu())
    # 2x2 samples at (0.5, 0.5), (0.5, 1.5), (1.5, 0.5), (1.5, 1.5): bilinear values 2.5, 3.5, 6.5, 7.5
    assert torch.allclose(out.cpu(), torch.tensor([[[[5.0]]]]))
    aligned = contrib.ROIAlign((2, 2), 1.0, 1, aligned=True)(feat.npu(), torch.tensor([[0, 0.5, 0.5, 2.5, 2.5]]).npu())
    # shifted by -0.5: bin centres at (0.5, 0.5), (0.5, 1.5), ... between four pixels each
    assert torch.allclose(aligned.cpu().flatten(), torch.tensor([2.5, 3.5, 6.5, 7.5]))


def test_ps_roi_pool_reads_position_sensitive_channels():
    gs, dim = 2, 1
    feat = torch.stack([torch.full((4, 4), float(c)) for c in range(dim * gs * gs)])[None]
    rois = torch.tensor([[0, 0.0, 0.0, 3.0, 3.0]])
    out = contrib.PSROIPool(pooled_height=2, pooled_width=2, spatial_scale=1.0, group_size=gs, output_dim=dim)(
        feat.npu(), rois.npu()
    )
    assert out.cpu().flatten().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_modulated_deform_conv_with_zero_offsets_is_a_convolution():
    torch.manual_seed(0)
    m = contrib.ModulatedDeformConv(4, 6, 3, padding=1).npu()
    x = torch.randn(2, 4, 5, 5, device="npu", requires_grad=True)
    out = m(x)
    # fresh module: offsets 0 and masks sigmoid(0) = 0.5
    ref = F.conv2d(x, m.weight * 0.5, m.bias, padding=1)
    assert torch.allclose(out.detach().cpu(), ref.detach().cpu(), atol=1e-5)
    out.sum().backward()
    assert x.grad is not None and m.weight.grad is not None and m.conv_offset_mask.weight.grad is not None


def test_deform_conv_offset_moves_the_sampling_point():
    from torch_npu.contrib.module.deform_conv import ModulatedDeformConv2dFunction

    x = torch.arange(25.0).view(1, 1, 5, 5).npu()
    w = torch.ones(1, 1, 1, 1, device="npu")
    offset = torch.zeros(1, 2, 5, 5, device="npu")
    offset[:, 1] = 1.0  # dx = +1: every output reads its right neighbour
    mask = torch.ones(1, 1, 5, 5, device="npu")
    out = ModulatedDeformConv2dFunction.apply(x, offset, mask, w)
    expected = torch.cat([x[..., 1:], torch.zeros(1, 1, 5, 1, device="npu")], -1)
    assert torch.allclose(out.cpu(), expected.cpu())


def test_multihead_attention_matches_reference_computation():
    torch.manual_seed(0)
    bsz, tgt, emb, heads = 2, 5, 16, 4
    m = contrib.MultiheadAttention(emb, heads, self_attention=True).npu().eval()
    x = torch.randn(bsz * tgt, emb, device="npu")
    out, weights = m(x, x, x, bsz, tgt, tgt)
    q = (m.q_proj(x) * (emb // heads) ** -0.5).view(bsz, tgt, heads, -1).transpose(1, 2)
    k = m.k_proj(x).view(bsz, tgt, heads, -1).transpose(1, 2)
    v = m.v_proj(x).view(bsz, tgt, heads, -1).transpose(1, 2)
    probs = F.softmax(q @ k.transpose(-1, -2), -1)
    ref = m.out_proj((probs @ v).transpose(1, 2).reshape(bsz * tgt, emb))
    assert torch.allclose(out.cpu(), ref.cpu(), atol=1e-6)
    assert weights.shape == (bsz, tgt, tgt) and torch.allclose(weights.cpu(), probs.mean(1).cpu(), atol=1e-6)
    pad = torch.zeros(bsz, tgt, dtype=torch.bool, device="npu")
    pad[:, -1] = True
    _, w2 = m(x, x, x, bsz, tgt, tgt, key_padding_mask=pad)
    assert float(w2[..., -1].abs().max()) == 0.0
    with pytest.raises(NotImplementedError):
        m(x, x, x, bsz, tgt, tgt, incremental_state={})


def test_fused_attention_checks_formats_and_computes_attention():
    torch.manual_seed(0)
    b, s, h = 2, 4, 64
    hidden = torch.randn(b * s, h, device="npu")
    mask = torch.zeros(b, 1, s, s, device="npu")
    kernels = [torch.randn(h, h, device="npu") * 0.1 for _ in range(3)]
    biases = [torch.randn(h, device="npu") for _ in range(3)]
    with pytest.raises(RuntimeError, match="format not matches"):
        contrib.npu_fused_attention(hidden, mask, *kernels, *biases)
    nz = [torch_npu.npu_format_cast(t, 29) for t in [hidden, mask] + kernels]
    out = contrib.npu_fused_attention(*nz, *biases, scale=0.125, keep_prob=1.0)
    q, k, v = [(hidden @ kk + bb).view(b, s, 1, h).transpose(1, 2) for kk, bb in zip(kernels, biases)]
    ref = (F.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, -1) @ v).transpose(1, 2).reshape(b * s, h)
    assert torch.allclose(out.cpu(), ref.cpu(), atol=1e-5)


def test_linear_quant_integer_semantics():
    m = contrib.LinearQuant(4, 2, bias=True, output_dtype=torch.float16).npu()
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[1, 2, 3, 4], [-1, -1, -1, -1]], dtype=torch.int8))
        m.scale.copy_(torch.tensor([0.5, 2.0]))
        m.bias.copy_(torch.tensor([10, -3], dtype=torch.int32))
    x = torch.tensor([[1, 1, 1, 1], [2, 0, 0, 1]], dtype=torch.int8, device="npu")
    out = m(x)
    expected = torch.tensor([[(10 + 10) * 0.5, (-4 - 3) * 2.0], [(6 + 10) * 0.5, (-3 - 3) * 2.0]], dtype=torch.float16)
    assert out.dtype == torch.float16 and torch.equal(out.cpu(), expected)
    m.output_dtype = None
    assert m(x).dtype == torch.int8
    assert issubclass(contrib.LinearA8W8Quant, contrib.LinearQuant)


def test_linear_weight_quant_dequantises_weights():
    m = contrib.LinearWeightQuant(4, 2, bias=False, dtype=torch.float32, antiquant_offset=True).npu()
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[1, 2, 3, 4], [0, 0, 0, 1]], dtype=torch.int8))
        m.antiquant_scale.copy_(torch.tensor([0.5, 2.0]))
        m.antiquant_offset.copy_(torch.tensor([1.0, 0.0]))
    x = torch.ones(1, 4, device="npu")
    assert m(x).cpu().tolist() == [[(2 + 3 + 4 + 5) * 0.5, 1 * 2.0]]


def test_quant_conv2d():
    m = contrib.QuantConv2d(1, 1, 1, output_dtype=torch.float16).npu()
    with torch.no_grad():
        m.weight.fill_(3)
        m.scale.fill_(0.25)
        m.bias.fill_(1)
    x = torch.full((1, 1, 2, 2), 2, dtype=torch.int8, device="npu")
    assert torch.equal(m(x).cpu(), torch.full((1, 1, 2, 2), (6 + 1) * 0.25, dtype=torch.float16))
    with pytest.raises(ValueError):
        contrib.QuantConv2d(1, 1, 1, torch.float16, round_mode="floor")


def test_prefetcher_moves_batches_to_npu():
    loader = [(torch.full((2,), float(i)), torch.tensor([i])) for i in range(3)]
    pf = contrib.Prefetcher(loader)
    seen = []
    inputs, target = pf.next()
    while inputs is not None:  # torch_npu's loop: (None, None) ends it
        assert inputs.device.type == "npu" and target.device.type == "npu"
        seen.append((inputs.tolist(), int(target)))
        inputs, target = pf.next()
    assert seen == [([float(i)] * 2, i) for i in range(3)]
    assert pf.next() == (None, None)


def test_prefetcher_training_loop_passes_the_stream_sanitizer():
    out = run_python(
        """
        import torch, torch_npu
        from torch_npu.contrib.module.prefetcher import Prefetcher
        loader = [(torch.randn(64, 16), torch.randint(0, 4, (64,))) for _ in range(6)]
        pf, w, steps = Prefetcher(loader), torch.randn(16, 4, device="npu"), 0
        inputs, target = pf.next()
        while inputs is not None:
            loss = torch.nn.functional.cross_entropy(inputs @ w, target)
            steps += 1
            inputs, target = pf.next()
        print(steps)
        """,
        env={"TORCH_NPU_SANITIZER": "1"},
    )
    assert last_line(out) == "6"


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
CONTRIB_ERRORS = [
    (
        lambda: torch_npu.contrib.amp.scale_loss(t(1), None).__enter__()
        if not torch_npu.contrib.amp.frontend._state.scalers
        else (_ for _ in ()).throw(RuntimeError("Call torch_npu.contrib.amp.initialize() before amp.scale_loss()")),
        RuntimeError,
        "Call torch_npu.contrib.amp.initialize() before amp.scale_loss()",
    ),
    (
        lambda: contrib.npu_single_level_responsible_flags((2, 2), [[0, 0, 1, 1]], (8, 8), 1),
        RuntimeError,
        "boxes must be a tensor, got list",
    ),
    (
        lambda: contrib.npu_bbox_coder_encode_yolo(t(2, 4), t(3, 4), t(2)),
        ValueError,
        "Expected bboxes.size(0) == gt_bboxes.size(0)",
    ),
    (
        lambda: contrib.npu_bbox_coder_decode_xywh2xyxy(t(2, 4), t(2, 5)),
        ValueError,
        "Expected bboxes.size(-1) == pred_bboxes.size(-1) == 4",
    ),
    (
        lambda: contrib.npu_fused_attention(
            t(8, 64), t(1, 1, 8, 8), t(64, 64), t(64, 64), t(64, 64), t(64), t(64), t(64)
        ),
        RuntimeError,
        "fused attention check compatibility failed, format not matches (expected [29, 29, 29, 29, 29, 2, 2, 2], "
        "got [2, 0, 2, 2, 2, 2, 2, 2])",
    ),
    (
        lambda: contrib.function.dropout_with_byte_mask(t(2), p=1.5),
        ValueError,
        "dropout probability has to be between 0 and 1, but got 1.5",
    ),
    (
        lambda: contrib.module.DropoutWithByteMask(p=-0.1),
        ValueError,
        "dropout probability has to be between 0 and 1, but got -0.1",
    ),
    (lambda: ChannelShuffle(5, groups=2), ValueError, "in_channels (5) must be divisible by groups (2)"),
    (
        lambda: ChannelShuffle(4)(t(1, 2, 1, 1), t(1, 1, 1, 1)),
        RuntimeError,
        "ChannelShuffle expects at least 4 channels, got 3",
    ),
    (
        lambda: contrib.ModulatedDeformConv(2, 2, 3, pack=False)(t(1, 2, 4, 4)),
        RuntimeError,
        "ModulatedDeformConv(pack=False) takes offset and mask from the caller: call "
        "ModulatedDeformConv2dFunction.apply(x, offset, mask, weight, bias, ...) directly",
    ),
    (lambda: contrib.MultiheadAttention(10, 3), ValueError, "embed_dim must be divisible by num_heads"),
    (
        lambda: contrib.MultiheadAttention(8, 2, kdim=4, self_attention=True),
        ValueError,
        "Self-attention requires query, key and value to be of the same size",
    ),
    (
        lambda: contrib.PSROIPool(2, 2, 1.0, 2, 3)(t(1, 4, 4, 4), t(1, 5)),
        RuntimeError,
        "PSROIPool expects 12 channels, got 4",
    ),
    (
        lambda: contrib.QuantConv2d(1, 1, 1, torch.float16, round_mode="floor"),
        ValueError,
        "round_mode must be 'rint', but got 'floor'",
    ),
    (
        lambda: contrib.MultiheadAttention(8, 2)(t(2, 8), t(2, 8), t(2, 8), 1, 2, 2, incremental_state={}),
        NotImplementedError,
        "torch_npu.contrib.MultiheadAttention: incremental decoding (incremental_state) is not "
        "implemented in vnpu; call it without incremental_state",
    ),
]


@pytest.mark.parametrize("call,kind,message", CONTRIB_ERRORS, ids=[c[2][:48] for c in CONTRIB_ERRORS])
def test_contrib_error_message(call, kind, message):
    raises_exactly(call, kind, message)
