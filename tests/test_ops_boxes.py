"""torch_npu's detection operators: IoU family, NMS family, RoIAlign and the box coders — each against an
independent reference written here (loops over boxes)."""

import math

import pytest
import torch
from error_cases import raises_operator_error, t
from op_check import check_op
from subprocess_helpers import run_python

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
    # Faster R-CNN's inclusive boxes (x2 - x1 + 1 wide); the card's encoder computes in float16
    anchors, gts = rand_boxes(6, 4), rand_boxes(6, 5)
    means, stds = [0.0, 0.1, 0.0, -0.1], [0.1, 0.1, 0.2, 0.2]

    def enc_ref(a, g, *ms):
        m, s = torch.tensor(ms[:4]), torch.tensor(ms[4:])
        pw, ph = a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1
        gw, gh = g[:, 2] - g[:, 0] + 1, g[:, 3] - g[:, 1] + 1
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

    deltas = check_op(torch_npu.npu_bounding_box_encode, (anchors, gts, *means, *stds), enc_ref, atol=1e-2, rtol=2e-3)
    decoded = torch_npu.npu_bounding_box_decode(anchors.npu(), deltas, *means, *stds, [0], 16 / 1000)
    torch.testing.assert_close(decoded.cpu(), gts, atol=2e-2, rtol=2e-3)
    clipped = torch_npu.npu_bounding_box_decode(anchors.npu(), deltas, *means, *stds, [8], 16 / 1000)
    assert float(clipped.max()) <= 7.0


def test_bounding_box_coders_give_the_documented_card_results():
    # torch_npu's documented examples, printed on a card
    rois = torch.tensor([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]]).npu()
    boxes = torch.tensor([[5.0, 6.0, 7.0, 8.0], [7.0, 8.0, 9.0, 6.0]]).npu()
    decoded = torch_npu.npu_bounding_box_decode(rois, boxes, 0, 0, 0, 0, 1, 1, 1, 1, (10, 10), 0.1)
    assert decoded.cpu().tolist() == [[2.5, 6.5, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]]
    encoded = torch_npu.npu_bounding_box_encode(rois, boxes, 0, 0, 0, 0, 0.1, 0.1, 0.2, 0.2).cpu()
    assert encoded[0].tolist() == [13.328125, 13.328125, 0.0, 0.0]
    assert encoded[1, :3].tolist() == [13.328125, 6.6640625, 0.0] and encoded[1, 3].isnan()  # gt height -1


def test_bounding_box_encode_of_a_negative_size_on_ascend910a():
    # the Ascend910A kernel takes the sizes' magnitudes: op-plugin's test of that SoC expects -5.4922 where
    # Ascend910B gives NaN
    out = run_python(
        """
        import torch, torch_npu
        rois = torch.tensor([[3.0, 4.0, 5.0, 6.0]]).npu()
        boxes = torch.tensor([[7.0, 8.0, 9.0, 6.0]]).npu()
        print(torch_npu.npu_bounding_box_encode(rois, boxes, 0, 0, 0, 0, 0.1, 0.1, 0.2, 0.2).cpu()[0].tolist())
    """,
        env={"VNPU_SOC": "Ascend910A"},
    )
    assert out.stdout.split("\n")[0] == str([13.328125, 6.6640625, 0.0, -5.4921875])


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
        pw, ph = a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1
        gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
        gw, gh = pw * d[:, 2].exp(), ph * d[:, 3].exp()
        corners = [gx - gw / 2 + 0.5, gy - gh / 2 + 0.5, gx + gw / 2 - 0.5, gy + gh / 2 - 0.5]
        return torch.stack(corners, 1).clamp(0, 99)

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


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
INVALID_ARGUMENT_ERRORS = [
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
