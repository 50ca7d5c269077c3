"""Rotated boxes: npu_rotated_overlaps, npu_rotated_iou, npu_nms_rotated.

A rotated box is (cx, cy, w, h, angle) with the angle in degrees, counter-clockwise ("xywht"), or
(x1, y1, x2, y2, angle) ("xyxyt": the axis-aligned extent before rotation, its angle measured clockwise,
as CANN's RotatedNMS mode 1 reads it). The intersection of two boxes is the convex polygon of the corners
of each inside the other and the crossings of their edges, its area by the shoelace formula — computed in
float32 around the pair's mean centre (for precision, as CANN's kernels do); identical boxes have IoU 1 and
empty ones 0. The tolerance arguments v_threshold / e_threshold of npu_rotated_iou relax the card's
approximate edge tests; the computation here is exact, so they are accepted and have no effect.
"""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import HALF_AND_FLOAT
from torch_npu.ops.registration import npu_op

__all__ = ["rotated_intersection"]

_SAME_POINT = 1e-5


def _from_corners(boxes):
    """xyxyt -> xywht (the angle turned counter-clockwise)."""
    x1, y1, x2, y2, angle = boxes.unbind(-1)
    return torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, -angle], -1)


def _corners(boxes):
    """[..., 5] xywht -> [..., 4, 2] corners, counter-clockwise."""
    cx, cy, w, h, angle = boxes.unbind(-1)
    theta = angle * (math.pi / 180)
    cos, sin = torch.cos(theta)[..., None], torch.sin(theta)[..., None]
    dx = torch.stack([w, -w, -w, w], -1) / 2
    dy = torch.stack([h, h, -h, -h], -1) / 2
    return torch.stack([cx[..., None] + dx * cos - dy * sin, cy[..., None] + dx * sin + dy * cos], -1)


def _inside(points, quad):
    """[..., P] whether each point lies in the convex quadrilateral (boundary included)."""
    edge = (quad.roll(-1, -2) - quad)[..., None, :, :]
    rel = points[..., :, None, :] - quad[..., None, :, :]
    cross = edge[..., 0] * rel[..., 1] - edge[..., 1] * rel[..., 0]
    return (cross >= 0).all(-1) | (cross <= 0).all(-1)


def _edge_crossings(a, b):
    """Points where the edges of a cross those of b: ([..., 16, 2], valid [..., 16])."""
    a1, b1 = a[..., :, None, :], b[..., None, :, :]
    da, db = (a.roll(-1, -2) - a)[..., :, None, :], (b.roll(-1, -2) - b)[..., None, :, :]
    det = db[..., 0] * da[..., 1] - db[..., 1] * da[..., 0]
    gap = b1 - a1
    t = (db[..., 0] * gap[..., 1] - db[..., 1] * gap[..., 0]) / det
    u = (da[..., 0] * gap[..., 1] - da[..., 1] * gap[..., 0]) / det
    valid = (det.abs() > 1e-14) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
    return (a1 + t[..., None] * da).flatten(-3, -2), valid.flatten(-2)


def rotated_intersection(a, b):
    """Intersection areas of xywht boxes a [..., 5] and b [..., 5] (broadcast), float32; also whether each
    pair is the same box."""
    a, b = torch.broadcast_tensors(a.float(), b.float())
    centre = (a[..., :2] + b[..., :2]) / 2
    shift = torch.cat([centre, centre.new_zeros(*centre.shape[:-1], 3)], -1)
    pa, pb = _corners(a - shift), _corners(b - shift)
    crossings, crossing_ok = _edge_crossings(pa, pb)
    points = torch.cat([pa, pb, crossings], -2)
    valid = torch.cat([_inside(pa, pb), _inside(pb, pa), crossing_ok], -1)
    points = torch.where(valid[..., None], points, torch.zeros_like(points))  # parallel edges cross at inf/nan
    count = valid.sum(-1)
    mean = (points * valid[..., None]).sum(-2) / count.clamp(min=1)[..., None]
    angle = torch.atan2(points[..., 1] - mean[..., None, 1], points[..., 0] - mean[..., None, 0])
    order = torch.where(valid, angle, torch.full_like(angle, 4.0)).argsort(-1)  # invalid points last
    ordered = torch.gather(points, -2, order[..., None].expand_as(points))
    ordered = torch.where(torch.gather(valid, -1, order)[..., None], ordered, ordered[..., :1, :])
    following = ordered.roll(-1, -2)
    area = (ordered[..., 0] * following[..., 1] - ordered[..., 1] * following[..., 0]).sum(-1).abs() / 2
    area = torch.where(count >= 3, area, torch.zeros_like(area))
    same = ((pa - pb).abs() <= _SAME_POINT).all(-1).all(-1)
    return area, same


def _boxes(boxes, trans):
    return _from_corners(boxes.float()) if trans else boxes.float()


def _check_batched(boxes, query_boxes, op):
    check(
        boxes.dim() == 3 and query_boxes.dim() == 3 and boxes.shape[-1] == 5 and query_boxes.shape[-1] == 5,
        op,
        f"self and query_boxes must be [B, N, 5] and [B, K, 5], got {tuple(boxes.shape)} and {tuple(query_boxes.shape)}",
    )
    check(boxes.shape[0] == query_boxes.shape[0], op, "self and query_boxes must have the same batch size")


@npu_op(
    "npu_rotated_overlaps(Tensor self, Tensor query_boxes, bool trans=False) -> Tensor",
    dtypes={"self": HALF_AND_FLOAT, "query_boxes": HALF_AND_FLOAT},
    api="RotatedOverlaps",
)
def npu_rotated_overlaps(boxes, query_boxes, trans=False):
    """Intersection areas [B, N, K] of boxes [B, N, 5] with query_boxes [B, K, 5], in self's dtype."""
    _check_batched(boxes, query_boxes, "npu_rotated_overlaps")
    a, b = _boxes(boxes, trans)[:, :, None, :], _boxes(query_boxes, trans)[:, None, :, :]
    return rotated_intersection(a, b)[0].to(boxes.dtype)


def _iou(a, b, mode):
    inter, same = rotated_intersection(a, b)
    area_a, area_b = a[..., 2] * a[..., 3], b[..., 2] * b[..., 3]
    denominator = area_b if mode == 1 else area_a + area_b - inter
    overlap = torch.where(denominator > 0, inter / denominator, torch.zeros_like(inter))
    empty = (area_a <= 0) | (area_b <= 0)
    return torch.where(empty, torch.zeros_like(overlap), torch.where(same, torch.ones_like(overlap), overlap))


def _rotated_iou_fake(boxes, query_boxes, trans=False, mode=0, is_cross=True, v_threshold=0.0, e_threshold=0.0):
    shape = (boxes.shape[0], boxes.shape[1], query_boxes.shape[1]) if is_cross else boxes.shape[:2]
    return boxes.new_empty(shape)


@npu_op(
    "npu_rotated_iou(Tensor self, Tensor query_boxes, bool trans=False, int mode=0, bool is_cross=True, "
    "float v_threshold=0.0, float e_threshold=0.0) -> Tensor",
    fake=_rotated_iou_fake,
    dtypes={"self": HALF_AND_FLOAT, "query_boxes": HALF_AND_FLOAT},
    api="RotatedIou",
)
def npu_rotated_iou(boxes, query_boxes, trans=False, mode=0, is_cross=True, v_threshold=0.0, e_threshold=0.0):
    """IoU (mode 0) or IoF (mode 1: intersection / area of the query box) of boxes [B, N, 5] with
    query_boxes [B, K, 5]: [B, N, K] for every pair (is_cross), or [B, N] for aligned pairs (K == N)."""
    op = "npu_rotated_iou"
    _check_batched(boxes, query_boxes, op)
    check(mode in (0, 1), op, f"mode must be 0 (iou) or 1 (iof), got {mode}")
    a, b = _boxes(boxes, trans), _boxes(query_boxes, trans)
    if is_cross:
        a, b = a[:, :, None, :], b[:, None, :, :]
    else:
        check(
            a.shape == b.shape,
            op,
            f"with is_cross=False self and query_boxes must hold as many boxes, got {tuple(a.shape)} and {tuple(b.shape)}",
        )
    return _iou(a, b, mode).to(boxes.dtype)


def _nms_rotated_fake(dets, scores, iou_threshold, scores_threshold=0, max_output_size=-1, mode=0):
    limit = dets.shape[0] if max_output_size < 0 else min(dets.shape[0], max_output_size)
    size = torch.library.get_ctx().new_dynamic_size(max=limit)
    return dets.new_empty(size, dtype=torch.int32), dets.new_empty(1, dtype=torch.int32)


@npu_op(
    "npu_nms_rotated(Tensor self, Tensor scores, float iou_threshold, float scores_threshold=0, "
    "int max_output_size=-1, int mode=0) -> (Tensor, Tensor)",
    fake=_nms_rotated_fake,
    dtypes={"self": HALF_AND_FLOAT, "scores": HALF_AND_FLOAT},
    api="RotatedNMS",
)
def npu_nms_rotated(dets, scores, iou_threshold, scores_threshold=0, max_output_size=-1, mode=0):
    """Greedy NMS of rotated boxes dets [N, 5] (mode 0 xywht, mode 1 xyxyt), highest score first (ties by
    index): a box is kept when its IoU with every kept box is <= iou_threshold; boxes scoring below
    scores_threshold are dropped; at most max_output_size (-1: no limit). Returns (selected_index int32 [M],
    selected_num int32 [1])."""
    op = "npu_nms_rotated"
    check(dets.dim() == 2 and dets.shape[1] == 5, op, f"dets must be [num_boxes, 5], got {tuple(dets.shape)}")
    check(scores.shape == dets.shape[:1], op, f"scores must be [num_boxes], got {tuple(scores.shape)}")
    check(mode in (0, 1), op, f"mode must be 0 (xywht) or 1 (xyxyt), got {mode}")
    order = torch.argsort(scores.float(), descending=True, stable=True)
    order = order[scores.float()[order] >= scores_threshold]
    boxes = _boxes(dets[order], mode == 1)
    iou = _iou(boxes[:, None, :], boxes[None, :, :], 0).tolist()
    limit = order.numel() if max_output_size < 0 else max_output_size
    kept = []
    for i in range(order.numel()):
        if len(kept) == limit:
            break
        if all(iou[i][j] <= iou_threshold for j in kept):
            kept.append(i)
    index = order[torch.tensor(kept, dtype=torch.long, device=dets.device)].to(torch.int32)
    return index, torch.tensor([index.numel()], dtype=torch.int32, device=dets.device)
