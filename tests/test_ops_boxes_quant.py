"""torch_npu operators: IoU/NMS/RoIAlign/box coders and quantisation/matmul — each against an
independent reference written here (loops over boxes, integer arithmetic by hand)."""

import math

import pytest
import torch
from error_cases import int8_zeros, raises_operator_error, t
from op_check import check_op

import torch_npu


def box_iou_loop(a, b):
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw, ih = max(0.0, min(ax2, bx2) - max(ax1, bx1)), max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    return inter, (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter


def rand_boxes(n, seed):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 10
    wh = torch.rand(n, 2, generator=g) * 5 + 0.5
    return torch.cat([xy, xy + wh], 1)


def offset_iou_loop(a, b, mode, eps=0.01):
    """The card's Iou kernel: eps added to the widths and heights of the two areas."""
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    area_a, area_b = (ax2 - ax1 + eps) * (ay2 - ay1 + eps), (bx2 - bx1 + eps) * (by2 - by1 + eps)
    return iw * ih / (area_a if mode == 1 else area_a + area_b - iw * ih)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("mode", [0, 1])
def test_npu_iou_is_the_float16_kernel_with_its_offset(mode, dtype):
    boxes, gt = rand_boxes(5, 0).to(dtype), rand_boxes(3, 1).to(dtype)

    def ref(boxes, gt, mode=0):
        boxes, gt = boxes.half().double(), gt.half().double()
        out = [[offset_iou_loop(gt[m].tolist(), boxes[n].tolist(), mode) for n in range(5)] for m in range(3)]
        return torch.tensor(out).half().to(dtype)

    check_op(torch_npu.npu_iou, (boxes, gt), ref, kwargs={"mode": mode}, atol=1e-3, rtol=1e-3)


def test_npu_iou_reproduces_torch_npus_documented_example():
    bboxes = torch.tensor([[0, 0, 10, 10], [10, 10, 20, 20], [32, 32, 38, 42]], dtype=torch.float16)
    gtboxes = torch.tensor([[0, 0, 10, 20], [0, 10, 10, 10], [10, 10, 20, 20]], dtype=torch.float16)
    documented = torch.tensor([[0.4985, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.9961, 0.0]], dtype=torch.float16)
    out = torch_npu.npu_iou(bboxes.npu(), gtboxes.npu(), 0).cpu()
    assert out.dtype == torch.float16 and out[2, 1] == documented[2, 1]
    torch.testing.assert_close(out, documented, atol=5e-4, rtol=0)  # the card's reciprocal is approximate


def test_npu_iou_of_a_zero_area_box_is_finite_as_on_the_card():
    boxes = torch.tensor([[0.0, 0, 10, 10], [10, 10, 20, 20]])
    flat = torch.tensor([[0.0, 10, 10, 10]])  # zero height
    for mode in (0, 1):
        out = torch_npu.npu_iou(boxes.npu(), flat.npu(), mode).cpu()
        want = [offset_iou_loop(flat[0].tolist(), b.tolist(), mode) for b in boxes]
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, torch.tensor([want]).half().float(), atol=1e-3, rtol=1e-3)


def _pair_metric(name, b, g, mode=0):
    """One IoU-family value of box b and gt g (tensors of 4), written out with torch scalars; mode 1 uses
    the IoF (intersection over the gt box's area) for the IoU."""
    iw = (torch.minimum(b[2], g[2]) - torch.maximum(b[0], g[0])).clamp(min=0)
    ih = (torch.minimum(b[3], g[3]) - torch.maximum(b[1], g[1])).clamp(min=0)
    inter = iw * ih
    union = (b[2] - b[0]) * (b[3] - b[1]) + (g[2] - g[0]) * (g[3] - g[1]) - inter
    iou = inter / (union if mode == 0 else (g[2] - g[0]) * (g[3] - g[1]))
    cw = torch.maximum(b[2], g[2]) - torch.minimum(b[0], g[0])
    ch = torch.maximum(b[3], g[3]) - torch.minimum(b[1], g[1])
    if name == "npu_giou":
        return iou - (cw * ch - union) / (cw * ch)
    centre = ((b[0] + b[2]) / 2 - (g[0] + g[2]) / 2) ** 2 + ((b[1] + b[3]) / 2 - (g[1] + g[3]) / 2) ** 2
    diou = iou - centre / (cw**2 + ch**2)
    if name == "npu_diou":
        return diou
    v = 4 / math.pi**2 * (torch.atan((g[2] - g[0]) / (g[3] - g[1])) - torch.atan((b[2] - b[0]) / (b[3] - b[1]))) ** 2
    return diou - v / (1 - iou + v) * v


@pytest.mark.parametrize("name", ["npu_giou", "npu_diou", "npu_ciou"])
@pytest.mark.parametrize("is_cross", [False, True])
@pytest.mark.parametrize("mode", [0, 1])
def test_giou_diou_ciou(name, is_cross, mode):
    boxes, gt = rand_boxes(4, 2).t().contiguous(), (rand_boxes(4 if not is_cross else 3, 3)).t().contiguous()

    def ref(boxes, gt, trans=False, is_cross=False, mode=0):
        n, m = boxes.shape[1], gt.shape[1]
        if is_cross:
            return torch.stack(
                [torch.stack([_pair_metric(name, boxes[:, j], gt[:, i], mode) for j in range(n)]) for i in range(m)]
            )
        pairs = torch.stack([_pair_metric(name, boxes[:, j], gt[:, j], mode) for j in range(n)])
        # aligned pairs: npu_giou returns a [N, 1] column, npu_diou / npu_ciou the [1, N] row of their kernels
        return pairs[:, None] if name == "npu_giou" else pairs[None, :]

    check_op(
        getattr(torch_npu, name),
        (boxes, gt),
        ref,
        kwargs={"is_cross": is_cross, "mode": mode},
        atol=1e-5,
        rtol=1e-4,
        grad=(0, 1),
    )


def test_giou_xywh_boxes_and_errors():
    xywh = torch.tensor([[2.0, 2.0, 2.0, 2.0]]).t()
    gt = torch.tensor([[2.0, 2.0, 2.0, 2.0]]).t()  # both in (cx, cy, w, h) with trans=True
    out = torch_npu.npu_giou(xywh.npu(), gt.npu(), trans=True)
    torch.testing.assert_close(out.cpu(), torch.tensor([[1.0]]))
    with pytest.raises(RuntimeError, match="must be \\[4, N\\]"):
        torch_npu.npu_giou(torch.ones(3, 4, device="npu"), gt.npu())
    with pytest.raises(RuntimeError, match="mode must be 0 \\(iou\\) or 1 \\(iof\\), got 2"):
        torch_npu.npu_diou(gt.npu(), gt.npu(), mode=2)


def _nms_loop(boxes, scores, thr):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep = []
    for i in order:
        if all(box_iou_loop(boxes[i], boxes[j])[0] / box_iou_loop(boxes[i], boxes[j])[1] <= thr for j in keep):
            keep.append(i)
    return keep


def test_npu_nms_v4():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 9], [50, 50, 51, 51.0]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.01])
    idx, count = torch_npu.npu_nms_v4(boxes.npu(), scores.npu(), 10, torch.tensor(0.5).npu(), torch.tensor(0.05).npu())
    expected = [i for i in _nms_loop(boxes.tolist(), scores.tolist(), 0.5) if scores[i] > 0.05]
    assert idx.dtype == torch.int32 and idx.cpu().tolist() == expected and int(count) == len(expected)
    padded, count = torch_npu.npu_nms_v4(
        boxes.npu(), scores.npu(), 6, torch.tensor(0.5).npu(), torch.tensor(0.05).npu(), True
    )
    assert padded.cpu().tolist() == expected + [0] * (6 - len(expected)) and int(count) == len(expected)
    args = (boxes.npu(), scores.npu(), 6, torch.tensor(0.5).npu(), torch.tensor(0.05).npu())
    compiled = torch.compile(lambda *a: torch_npu.npu_nms_v4(*a, True), backend="aot_eager", fullgraph=True)
    assert [t.cpu().tolist() for t in compiled(*args)] == [padded.cpu().tolist(), len(expected)]
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        dynamic = torch.compile(lambda *a: torch_npu.npu_nms_v4(*a)[0] + 0, backend="aot_eager", fullgraph=True)
        assert dynamic(*args).cpu().tolist() == expected


def test_npu_nms_with_mask():
    data = torch.tensor([[0, 0, 10, 10, 0.6], [1, 1, 11, 11, 0.9], [20, 20, 30, 30, 0.7]])
    boxes, idx, mask = torch_npu.npu_nms_with_mask(data.npu(), 0.5)
    assert idx.cpu().tolist() == [1, 2, 0] and mask.cpu().tolist() == [1, 1, 0]
    torch.testing.assert_close(boxes.cpu(), data[[1, 2, 0]])


def test_npu_batch_nms():
    boxes = torch.tensor([[[[0, 0, 10, 10.0]], [[1, 1, 11, 11.0]], [[20, 20, 30, 30.0]]]])  # [1, 3, 1, 4]
    scores = torch.tensor([[[0.9, 0.1], [0.8, 0.6], [0.7, 0.05]]])  # [1, 3, 2]
    out = check_op(
        torch_npu.npu_batch_nms,
        (boxes, scores, 0.3, 0.5, 2, 4),
        lambda b, s, st, it, pc, tt: (
            torch.tensor([[[0, 0, 10, 10.0], [20, 20, 30, 30.0], [1, 1, 11, 11.0], [0, 0, 0, 0.0]]]),
            torch.tensor([[0.9, 0.7, 0.6, 0.0]]),
            torch.tensor([[0.0, 0.0, 1.0, 0.0]]),
            torch.tensor([3], dtype=torch.int32),
        ),
    )
    assert out[3].dtype == torch.int32


def test_npu_roi_align_modes():
    feat = torch.arange(36.0).view(1, 1, 6, 6)
    rois = torch.tensor([[0, 0.0, 0.0, 2.0, 2.0]])
    # mode 0, 2x2 samples of the 2x2 roi: the bilinear values at (0.5|1.5, 0.5|1.5) average to 7.0
    out = torch_npu.npu_roi_align(feat.npu(), rois.npu(), 1.0, 1, 1, 2, 0)
    torch.testing.assert_close(out.cpu(), torch.tensor([[[[7.0]]]]))
    # mode 3 (aligned) shifts by half a pixel: samples at (0|1, 0|1) average to (0+1+6+7)/4
    out = torch_npu.npu_roi_align(feat.npu(), rois.npu(), 1.0, 1, 1, 2, 3)
    torch.testing.assert_close(out.cpu(), torch.tensor([[[[3.5]]]]))
    # mode 1 (inclusive end): the roi spans 3 pixels
    out = torch_npu.npu_roi_align(feat.npu(), rois.npu(), 1.0, 1, 1, 1, 1)
    torch.testing.assert_close(out.cpu(), torch.tensor([[[[(1.5 * 6 + 1.5)]]]]))
    with pytest.raises(RuntimeError, match="roi_end_mode"):
        torch_npu.npu_roi_align(feat.npu(), rois.npu(), 1.0, 1, 1, 2, 2)


def test_bounding_box_encode_decode():
    anchors, gts = rand_boxes(6, 4), rand_boxes(6, 5)
    means, stds = [0.0, 0.1, 0.0, -0.1], [0.1, 0.1, 0.2, 0.2]

    def enc_ref(a, g, *ms):
        m, s = torch.tensor(ms[:4]), torch.tensor(ms[4:])
        pw, ph = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
        gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
        d = torch.stack(
            [
                ((g[:, 0] + g[:, 2]) - (a[:, 0] + a[:, 2])) / 2 / pw,
                ((g[:, 1] + g[:, 3]) - (a[:, 1] + a[:, 3])) / 2 / ph,
                (gw / pw).log(),
                (gh / ph).log(),
            ],
            1,
        )
        return (d - m) / s

    deltas = check_op(torch_npu.npu_bounding_box_encode, (anchors, gts, *means, *stds), enc_ref, atol=1e-5, rtol=1e-4)
    decoded = torch_npu.npu_bounding_box_decode(anchors.npu(), deltas, *means, *stds, [0], 16 / 1000)
    torch.testing.assert_close(decoded.cpu(), gts, atol=1e-4, rtol=1e-4)
    clipped = torch_npu.npu_bounding_box_decode(anchors.npu(), deltas, *means, *stds, [8], 16 / 1000)
    assert float(clipped.max()) <= 8.0


def test_npu_quant_matmul_integer_semantics():
    g = torch.Generator().manual_seed(0)
    x1 = torch.randint(-128, 128, (3, 16), generator=g, dtype=torch.int8)
    x2 = torch.randint(-128, 128, (16, 4), generator=g, dtype=torch.int8)
    bias = torch.randint(-1000, 1000, (4,), generator=g, dtype=torch.int32)
    scale, pertoken = torch.rand(4, generator=g) * 1e-3, torch.rand(3, generator=g) + 0.5

    def acc():
        return [
            [sum(int(x1[i, k]) * int(x2[k, j]) for k in range(16)) + int(bias[j]) for j in range(4)] for i in range(3)
        ]

    def ref_fp16(x1, x2, scale, bias, pertoken_scale, output_dtype):
        return (torch.tensor(acc(), dtype=torch.float64) * scale.double() * pertoken_scale.double()[:, None]).half()

    check_op(
        torch_npu.npu_quant_matmul,
        (x1, x2, scale),
        ref_fp16,
        kwargs={"bias": bias, "pertoken_scale": pertoken, "output_dtype": torch.float16},
        atol=1e-3,
        rtol=1e-3,
    )
    int32 = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=torch.int32)
    assert int32.cpu().tolist() == acc()
    int8 = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu() * 0 + 0.01, bias=bias.npu())
    expected = (torch.tensor(acc(), dtype=torch.float64) * 0.01).round().clamp(-128, 127).to(torch.int8)
    assert torch.equal(int8.cpu(), expected)
    with pytest.raises(RuntimeError, match=r"x1 and x2 must be int8 \(A8W8\) or int32 holding int4 \(A4W4\)"):
        torch_npu.npu_quant_matmul(x1.float().npu(), x2.float().npu(), scale.npu())


@pytest.mark.parametrize("group", [0, 4])
def test_npu_weight_quant_batchmatmul(group):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 8, generator=g)
    w = torch.randint(-8, 8, (8, 3), generator=g, dtype=torch.int8)
    scale = torch.rand(3, generator=g) if group == 0 else torch.rand(2, 3, generator=g)
    offset = torch.randn(scale.shape, generator=g)
    bias = torch.randn(3, generator=g)

    def ref(x, w, scale, offset, bias, group):
        s = scale if group == 0 else scale.repeat_interleave(group, 0)
        o = offset if group == 0 else offset.repeat_interleave(group, 0)
        return x @ ((w.float() + o) * s) + bias

    check_op(
        lambda x, w, s, o, b, group: torch_npu.npu_weight_quant_batchmatmul(
            x, w, s, o, bias=b, antiquant_group_size=group
        ),
        (x, w, scale, offset, bias),
        ref,
        kwargs={"group": group},
        atol=1e-5,
        rtol=1e-4,
    )


def test_npu_dynamic_quant_and_anti_quant():
    x = torch.randn(4, 32)
    smooth = torch.rand(32) + 0.5

    def ref(x, smooth_scales=None):
        xs = x * smooth_scales
        scale = xs.abs().amax(-1) / 127
        return (xs / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale

    y, scale = check_op(torch_npu.npu_dynamic_quant, (x,), ref, kwargs={"smooth_scales": smooth})
    back = torch_npu.npu_anti_quant(y, scale[:, None], dst_dtype=torch.float32)
    torch.testing.assert_close(back.cpu(), x * smooth, atol=float(scale.max()) / 2 + 1e-6, rtol=0)


def test_npu_quantize():
    x = torch.randn(2, 3, 4)
    scales, zps = torch.tensor([0.1, 0.2, 0.05]), torch.tensor([1.0, -2.0, 0.0])

    def ref(x, scales, zps, dtype, axis=1, div_mode=True):
        return (x / scales[None, :, None] + zps[None, :, None]).round().clamp(-128, 127).to(torch.int8)

    check_op(torch_npu.npu_quantize, (x, scales, zps, torch.qint8), ref, kwargs={"axis": 1})
    with pytest.raises(RuntimeError, match="dtype"):
        torch_npu.npu_quantize(x.npu(), scales.npu(), zps.npu(), torch.float32)


def test_npu_convert_weight_to_int4pack():
    w = torch.tensor([[1, 2, 3, 4, 5, 6, 7, -1], [0, 0, 0, 0, 0, 0, 0, -8]], dtype=torch.int32)
    out = torch_npu.npu_convert_weight_to_int4pack(w.npu()).cpu()
    expected = []
    for row in w.tolist():
        v = sum((n & 0xF) << (4 * i) for i, n in enumerate(row))
        expected.append([v - 2**32 if v >= 2**31 else v])
    assert out.tolist() == expected
    with pytest.raises(RuntimeError, match="multiple of 8"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(2, 6, dtype=torch.int32, device="npu"))


def test_npu_grouped_matmul_list_and_group_list_forms():
    xs = [torch.randn(3, 4), torch.randn(2, 5)]
    ws = [torch.randn(4, 6), torch.randn(5, 2)]
    bs = [torch.randn(6), torch.randn(2)]
    outs = torch_npu.npu_grouped_matmul([x.npu() for x in xs], [w.npu() for w in ws], bias=[b.npu() for b in bs])
    for o, x, w, b in zip(outs, xs, ws, bs):
        torch.testing.assert_close(o.cpu(), x @ w + b)
    x = torch.randn(7, 4)
    ws = [torch.randn(4, 3) for _ in range(3)]
    for group_list, group_list_type in (([2, 5, 7], 0), ([2, 3, 2], 1)):
        (out,) = torch_npu.npu_grouped_matmul(
            [x.npu()],
            [w.npu() for w in ws],
            group_list=torch.tensor(group_list).npu(),
            split_item=3,
            group_type=0,
            group_list_type=group_list_type,
        )
        expected = torch.cat([x[:2] @ ws[0], x[2:5] @ ws[1], x[5:] @ ws[2]])
        torch.testing.assert_close(out.cpu(), expected)
    compiled = torch.compile(
        lambda a, w0, w1, w2, gl: torch_npu.npu_grouped_matmul(
            [a], [w0, w1, w2], group_list=gl, split_item=3, group_type=0
        )[0],
        backend="aot_eager",
    )
    torch.testing.assert_close(
        compiled(x.npu(), *[w.npu() for w in ws], torch.tensor([2, 5, 7]).npu()).cpu(),
        torch.cat([x[:2] @ ws[0], x[2:5] @ ws[1], x[5:] @ ws[2]]),
    )
    with pytest.raises(RuntimeError, match="do not chain"):
        torch_npu.npu_grouped_matmul([torch.randn(2, 3, device="npu")], [torch.randn(4, 2, device="npu")])


def test_npu_grouped_matmul_quantised_with_group_list_and_per_token_scale():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-128, 128, (7, 16), generator=g, dtype=torch.int8)
    ws = [torch.randint(-128, 128, (16, 4), generator=g, dtype=torch.int8) for _ in range(2)]
    scales = [torch.rand(4, generator=g) * 1e-3 for _ in range(2)]
    biases = [torch.randint(-500, 500, (4,), generator=g, dtype=torch.int32) for _ in range(2)]
    token_scale = torch.rand(7, generator=g) + 0.5
    sizes = [3, 4]

    def expected(output_dtype):
        rows, start = [], 0
        for i, n in enumerate(sizes):
            acc = [
                [sum(int(x[r, k]) * int(ws[i][k, c]) for k in range(16)) + int(biases[i][c]) for c in range(4)]
                for r in range(start, start + n)
            ]
            value = (
                torch.tensor(acc, dtype=torch.float64)
                * scales[i].double()
                * token_scale[start : start + n, None].double()
            )
            rows.append(
                value.round().clamp(-128, 127).to(torch.int8) if output_dtype is None else value.to(output_dtype)
            )
            start += n
        return torch.cat(rows)

    for output_dtype in (None, torch.float16, torch.bfloat16):
        (out,) = torch_npu.npu_grouped_matmul(
            [x.npu()],
            [w.npu() for w in ws],
            bias=[b.npu() for b in biases],
            scale=[s.npu() for s in scales],
            per_token_scale=[token_scale.npu()],
            group_list=torch.tensor(sizes).npu(),
            group_list_type=1,
            split_item=3,
            group_type=0,
            output_dtype=output_dtype,
        )
        assert out.dtype == (torch.int8 if output_dtype is None else output_dtype)
        assert torch.equal(out.cpu(), expected(output_dtype))
    fake = torch.compile(
        lambda a, w0, w1, s0, s1, gl: torch_npu.npu_grouped_matmul(
            [a], [w0, w1], scale=[s0, s1], group_list=gl, split_item=3, group_type=0, output_dtype=torch.float16
        )[0],
        backend="aot_eager",
        fullgraph=True,
    )
    got = fake(x.npu(), *(w.npu() for w in ws), *(s.npu() for s in scales), torch.tensor([3, 7]).npu())
    assert got.dtype == torch.float16 and got.shape == (7, 4)
    with pytest.raises(RuntimeError, match="must be int8"):
        torch_npu.npu_grouped_matmul([x.float().npu()], [ws[0].npu()], scale=[scales[0].npu()])


@pytest.mark.parametrize("groups", [1, 4])
def test_npu_grouped_matmul_weight_antiquant_and_activations(groups):
    g = torch.Generator().manual_seed(4)
    xs = [torch.randn(3, 8, generator=g), torch.randn(2, 8, generator=g)]
    ws = [torch.randint(-8, 8, (8, 5), generator=g, dtype=torch.int8) for _ in range(2)]
    shape = (5,) if groups == 1 else (groups, 5)
    scales = [torch.rand(shape, generator=g) for _ in range(2)]
    offsets = [torch.randn(shape, generator=g) for _ in range(2)]
    activations = {
        0: lambda y: y,
        1: lambda y: y.clamp(min=0),
        2: lambda y: 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3))),
        4: lambda y: y / (1 + torch.exp(-1.702 * y)),
        5: lambda y: y / (1 + torch.exp(-y)),
    }
    for act_type, act in activations.items():
        outs = torch_npu.npu_grouped_matmul(
            [x.npu() for x in xs],
            [w.npu() for w in ws],
            antiquant_scale=[s.npu() for s in scales],
            antiquant_offset=[o.npu() for o in offsets],
            act_type=act_type,
        )
        for out, x, w, sc, of in zip(outs, xs, ws, scales, offsets):
            rows_per_group = 8 // groups
            wf = torch.stack(
                [
                    (w[k].float() + of.reshape(groups, 5)[k // rows_per_group])
                    * sc.reshape(groups, 5)[k // rows_per_group]
                    for k in range(8)
                ]
            )
            torch.testing.assert_close(out.cpu(), act(x @ wf), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="act_type must be one of"):
        torch_npu.npu_grouped_matmul([xs[0].npu()], [xs[0].t().contiguous().npu()], act_type=3)


def test_box_operators_fake_and_compile():
    feat = torch.randn(1, 3, 8, 8)
    rois = torch.tensor([[0, 1.0, 1.0, 6.0, 5.0], [0, 0.0, 2.0, 7.0, 7.0]])
    from torch_npu.ops.boxes import roi_align_reference

    check_op(
        lambda f, r: torch_npu.npu_roi_align(f, r, 0.5, 2, 3, 2, 0),
        (feat, rois),
        lambda f, r: roi_align_reference(f, r, (2, 3), 0.5, 2, aligned=False),
    )
    anchors, deltas = rand_boxes(5, 7), torch.randn(5, 4) * 0.1

    def dec_ref(a, d):
        px, py = (a[:, 0] + a[:, 2]) / 2, (a[:, 1] + a[:, 3]) / 2
        pw, ph = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
        gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
        gw, gh = pw * d[:, 2].exp(), ph * d[:, 3].exp()
        return torch.stack([gx - gw / 2, gy - gh / 2, gx + gw / 2, gy + gh / 2], 1).clamp(0, 100)

    check_op(
        lambda a, d: torch_npu.npu_bounding_box_decode(a, d, 0, 0, 0, 0, 1, 1, 1, 1, [100], 16 / 1000),
        (anchors, deltas),
        dec_ref,
        atol=1e-5,
        rtol=1e-5,
    )
    data = torch.tensor([[0, 0, 10, 10, 0.6], [1, 1, 11, 11, 0.9], [20, 20, 30, 30, 0.7]])
    check_op(
        lambda d: torch_npu.npu_nms_with_mask(d, 0.5),
        (data,),
        lambda d: (
            d[[1, 2, 0]],
            torch.tensor([1, 2, 0], dtype=torch.int32),
            torch.tensor([1, 1, 0], dtype=torch.uint8),
        ),
    )


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
            0.9**step,
            0.99**step,
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
    nv, nm, nvv = torch_npu.npu_apply_adam_w(0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, grads[0].npu(), None, False, False)
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


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
INVALID_ARGUMENT_ERRORS = [
    (
        lambda: torch_npu.npu_linear(t(2, 3), t(4, 5)),
        "npu_linear: input's last dim (3) must equal weight's in_features (5)",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(int8_zeros(2, 3), int8_zeros(4, 5), t(5)),
        "npu_quant_matmul: x1 (2, 3) and x2 (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 3), int8_zeros(4, 5), t(5)),
        "npu_weight_quant_batchmatmul: x (2, 3) and weight (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 4), int8_zeros(4, 5), t(5), antiquant_group_size=2),
        "npu_weight_quant_batchmatmul: a group-wise antiquant_scale must be [ceil(k / group), n]",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), quant_mode="perchannel"),
        "npu_dynamic_quant: quant_mode must be 'pertoken' or 'pertensor', got 'perchannel'",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), dst_type=torch.int32),
        "npu_dynamic_quant: dst_type=3: vnpu quantises to torch.int8 or torch.quint4x2 (int4 packed in int32)",
    ),
    (
        lambda: torch_npu.npu_quantize(t(2, 2), t(2), None, torch.float32),
        "npu_quantize: dtype must be an 8- or 32-bit integer type, got torch.float32",
    ),
    (lambda: torch_npu.npu_iou(t(2, 4), t(2, 4), mode=2), "npu_iou: mode must be 0 (iou) or 1 (iof), got 2"),
    (lambda: torch_npu.npu_iou(t(2, 5), t(2, 4)), "npu_iou: boxes must be [N, 4] and [M, 4]"),
    (
        lambda: torch_npu.npu_giou(t(4, 2), t(4, 3)),
        "npu_giou: with is_cross=False self and gtboxes must hold as many boxes (2 vs 3)",
    ),
    (lambda: torch_npu.npu_nms_v4(t(3, 5), t(3), 2, t(()), t(())), "npu_nms_v4: self must be [N, 4], got (3, 5)"),
    (lambda: torch_npu.npu_nms_v4(t(3, 4), t(2), 2, t(()), t(())), "npu_nms_v4: scores must be [N], got (2,)"),
    (
        lambda: torch_npu.npu_nms_with_mask(t(3, 4), 0.5),
        "npu_nms_with_mask: input must be [N, 5] (x1, y1, x2, y2, score), got (3, 4)",
    ),
    (
        lambda: torch_npu.npu_batch_nms(t(3, 4), t(1, 3, 2), 0.1, 0.5, 2, 2),
        "npu_batch_nms: self must be [B, A, q, 4] and scores [B, A, C], got (3, 4) and (1, 3, 2)",
    ),
    (
        lambda: torch_npu.npu_roi_align(t(1, 1, 4, 4), t(2, 4), 1.0, 1, 1, 1, 0),
        "npu_roi_align: rois must be [K, 5], got (2, 4)",
    ),
    (
        lambda: torch_npu.npu_bounding_box_encode(t(2, 4), t(3, 4), 0, 0, 0, 0, 1, 1, 1, 1),
        "npu_bounding_box_encode: anchor_box and ground_truth_box must both be [N, 4], got (2, 4) and (3, 4)",
    ),
]


@pytest.mark.parametrize("call,message", INVALID_ARGUMENT_ERRORS, ids=[c[1][:56] for c in INVALID_ARGUMENT_ERRORS])
def test_invalid_argument_error_message(call, message):
    raises_operator_error(call, message)


def test_anti_quant_reads_int32_as_eight_packed_int4_values():
    values = torch.tensor([[0, 1, 2, 3, -8, -1, 7, -4], [5, -5, 6, -6, 4, -3, 2, -2]], dtype=torch.int32)
    packed = torch_npu.npu_convert_weight_to_int4pack(values.npu())
    assert packed.shape == (2, 1)
    scale = torch.linspace(0.5, 2.0, 8)
    out = torch_npu.npu_anti_quant(packed, scale.npu(), offset=torch.ones(8, device="npu"))
    assert out.dtype == torch.float16 and out.shape == (2, 8)
    assert torch.equal(out.cpu(), ((values.float() + 1) * scale).half())
