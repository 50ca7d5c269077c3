"""Rotated boxes (npu_rotated_overlaps, npu_rotated_iou, npu_nms_rotated) against a reference written
here with another algorithm: Sutherland-Hodgman clipping of one rectangle by the other, in float64."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def rectangle(box):
    cx, cy, w, h, angle = (float(v) for v in box)
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    return [
        (cx + dx * c - dy * s, cy + dx * s + dy * c)
        for dx, dy in ((w / 2, h / 2), (-w / 2, h / 2), (-w / 2, -h / 2), (w / 2, -h / 2))
    ]


def clip(polygon, a, b):
    def side(p):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])

    out = []
    for i, p in enumerate(polygon):
        q = polygon[(i + 1) % len(polygon)]
        sp, sq = side(p), side(q)
        if sp >= 0:
            out.append(p)
        if (sp >= 0) != (sq >= 0):
            t = sp / (sp - sq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def overlap_area(box_a, box_b):
    polygon, window = rectangle(box_a), rectangle(box_b)
    for i in range(4):
        if not polygon:
            return 0.0
        polygon = clip(polygon, window[i], window[(i + 1) % 4])
    return abs(sum(p[0] * q[1] - p[1] * q[0] for p, q in zip(polygon, polygon[1:] + polygon[:1]))) / 2


def iou(box_a, box_b, mode=0):
    inter = overlap_area(box_a, box_b)
    area_a, area_b = float(box_a[2] * box_a[3]), float(box_b[2] * box_b[3])
    return inter / (area_b if mode == 1 else area_a + area_b - inter)


def random_boxes(*shape):
    centre = torch.rand(*shape, 2) * 40 + 20
    size = torch.randint(1, 20, (*shape, 2)).float()
    angle = torch.randint(-180, 180, (*shape, 1)).float()
    return torch.cat([centre, size, angle], -1)


def pairwise(fn, a, b):
    return torch.tensor([[[fn(x, y) for y in b[i]] for x in a[i]] for i in range(a.shape[0])])


def test_overlaps_are_the_clipped_intersection_areas():
    a, b = random_boxes(3, 6), random_boxes(3, 5)
    check_op(
        torch_npu.npu_rotated_overlaps, (a, b), lambda a, b: pairwise(overlap_area, a, b).float(), atol=2e-3, rtol=1e-4
    )


@pytest.mark.parametrize("mode", [0, 1])
def test_iou_and_iof_for_every_pair(mode):
    a, b = random_boxes(2, 7), random_boxes(2, 4)
    a[0, 0] = b[0, 0]  # an identical pair: IoU exactly 1

    def ref(a, b, trans, mode):
        return pairwise(lambda x, y: iou(x, y, mode), a, b).float()

    out = check_op(torch_npu.npu_rotated_iou, (a, b, False, mode), ref, atol=1e-4, rtol=1e-4)
    if mode == 0:
        assert out[0, 0, 0].item() == 1.0


def test_aligned_iou_and_xyxyt_boxes():
    a, b = random_boxes(1, 5), random_boxes(1, 5)
    aligned = torch_npu.npu_rotated_iou(a.npu(), b.npu(), is_cross=False).cpu()
    assert aligned.shape == (1, 5)
    torch.testing.assert_close(
        aligned[0], torch.tensor([iou(a[0, i], b[0, i]) for i in range(5)]).float(), atol=1e-4, rtol=1e-4
    )
    # xyxyt: the extent before rotation, the angle clockwise
    xyxy = torch.cat([a[..., :2] - a[..., 2:4] / 2, a[..., :2] + a[..., 2:4] / 2, -a[..., 4:]], -1)
    same = torch_npu.npu_rotated_iou(xyxy.npu(), xyxy.npu(), trans=True).cpu()
    torch.testing.assert_close(same, torch_npu.npu_rotated_iou(a.npu(), a.npu()).cpu(), atol=1e-4, rtol=1e-4)


def test_axis_aligned_boxes_agree_with_npu_iou():
    a, b = random_boxes(1, 6), random_boxes(1, 4)
    a[..., 4] = 0
    b[..., 4] = 180  # a half turn is the same rectangle
    rotated = torch_npu.npu_rotated_iou(a.npu(), b.npu()).cpu()[0]
    to_xyxy = lambda r: torch.cat([r[..., :2] - r[..., 2:4] / 2, r[..., :2] + r[..., 2:4] / 2], -1)  # noqa: E731
    plain = torch_npu.npu_iou(to_xyxy(b[0]).npu(), to_xyxy(a[0]).npu()).cpu()  # [M=a, N=b]
    # npu_iou is the float16 kernel with a 0.01 offset on widths and heights (boxes here are 1..10 wide)
    torch.testing.assert_close(rotated, plain, atol=5e-3, rtol=5e-3)


def greedy_reference(dets, scores, threshold, limit=-1):
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    kept = []
    for i in order:
        if all(iou(dets[i], dets[j]) <= threshold for j in kept):
            kept.append(i)
    return kept if limit < 0 else kept[:limit]


@pytest.mark.parametrize("limit", [-1, 5])
def test_nms_rotated_keeps_the_greedy_selection(limit):
    dets = random_boxes(40) * torch.tensor([0.5, 0.5, 1.5, 1.5, 1.0])
    scores = torch.rand(40)
    index, count = torch_npu.npu_nms_rotated(dets.npu(), scores.npu(), 0.2, max_output_size=limit)
    want = greedy_reference(dets, scores, 0.2, limit)
    assert index.dtype == torch.int32 and count.dtype == torch.int32 and count.shape == (1,)
    assert index.cpu().tolist() == want and count.item() == len(want)


def test_nms_rotated_drops_boxes_below_the_score_threshold():
    dets = random_boxes(10)
    scores = torch.linspace(0.05, 0.95, 10)
    index, _ = torch_npu.npu_nms_rotated(dets.npu(), scores.npu(), 1.0, scores_threshold=0.5)
    assert index.cpu().tolist() == list(range(9, 4, -1))


ROTATED_ERRORS = [
    (
        lambda: torch_npu.npu_rotated_iou(torch.rand(2, 3, 4, device="npu"), torch.rand(2, 3, 5, device="npu")),
        "npu_rotated_iou: self and query_boxes must be [B, N, 5] and [B, K, 5], got (2, 3, 4) and (2, 3, 5)",
    ),
    (
        lambda: torch_npu.npu_rotated_iou(torch.rand(1, 3, 5, device="npu"), torch.rand(1, 3, 5, device="npu"), mode=2),
        "npu_rotated_iou: mode must be 0 (iou) or 1 (iof), got 2",
    ),
    (
        lambda: torch_npu.npu_nms_rotated(torch.rand(4, 5, device="npu"), torch.rand(3, device="npu"), 0.5),
        "npu_nms_rotated: scores must be [num_boxes], got (3,)",
    ),
]


@pytest.mark.parametrize("call,message", ROTATED_ERRORS, ids=[c[1][:56] for c in ROTATED_ERRORS])
def test_rotated_invalid_arguments(call, message):
    raises_operator_error(call, message)
