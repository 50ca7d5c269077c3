"""npu_rotated_box_encode / npu_rotated_box_decode: the regression deltas between rotated anchor boxes and target
boxes (RotatedBoxEncode / RotatedBoxDecode).

Boxes are [B, 5, N]: per box (x0, y0, x1, y1, angle in degrees) along dim 1. A box's width and height are
x1 - x0 and y1 - y0, at least 1, its centre the middle of that extent. `weight` holds five factors
(x, y, w, h, angle). Computed in float32 (float16 inputs are upcast, as the kernel does):

    encode: dx = (cx_g - cx_a) / w_a * wx        dw = log(w_g / w_a) * ww
            dy = (cy_g - cy_a) / h_a * wy        dh = log(h_g / h_a) * wh
            da = (tan(angle_g) - tan(angle_a)) * wa, as sin(angle_g - angle_a) / (cos(angle_g) cos(angle_a))
    decode: the inverse, deltas divided by their weights; the angle is atan(tan(angle_a) + da / wa).
"""

import math

import torch

from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import HALF_AND_FLOAT
from torch_npu.ops.registration import npu_op

__all__ = []

_RADIANS = math.pi / 180


def _check(op, anchor, other, weight, other_name):
    check(anchor.dim() == 3 and anchor.shape[1] == 5, op, f"anchor_box must be [B, 5, N], got {tuple(anchor.shape)}")
    check(other.shape == anchor.shape, op, f"{other_name} must have anchor_box's shape {tuple(anchor.shape)}")
    check(weight.numel() == 5, op, f"weight must hold 5 values (x, y, w, h, angle), got {weight.numel()}")


def _extent(boxes):
    x0, y0, x1, y1, angle = boxes.float().unbind(1)
    w, h = (x1 - x0).clamp(min=1.0), (y1 - y0).clamp(min=1.0)
    return x0 + w * 0.5, y0 + h * 0.5, w, h, angle * _RADIANS


@npu_op(
    "npu_rotated_box_encode(Tensor self, Tensor gt_bboxes, Tensor weight) -> Tensor",
    dtypes={"self": HALF_AND_FLOAT, "gt_bboxes": HALF_AND_FLOAT},
    api="RotatedBoxEncode",
)
def npu_rotated_box_encode(anchor_box, gt_bboxes, weight):
    """Deltas [B, 5, N] (dx, dy, dw, dh, dangle) that take anchor_box to gt_bboxes."""
    _check("npu_rotated_box_encode", anchor_box, gt_bboxes, weight, "gt_bboxes")
    wx, wy, ww, wh, wa = weight.float().reshape(5).unbind()
    cxa, cya, w_a, h_a, ta = _extent(anchor_box)
    cxg, cyg, w_g, h_g, tg = _extent(gt_bboxes)
    dangle = torch.sin(tg - ta) / (torch.cos(tg) * torch.cos(ta))
    deltas = [
        (cxg - cxa) / w_a * wx,
        (cyg - cya) / h_a * wy,
        torch.log1p((w_g - w_a) / w_a) * ww,
        torch.log1p((h_g - h_a) / h_a) * wh,
        dangle * wa,
    ]
    return torch.stack(deltas, 1).to(anchor_box.dtype)


@npu_op(
    "npu_rotated_box_decode(Tensor self, Tensor deltas, Tensor weight) -> Tensor",
    dtypes={"self": HALF_AND_FLOAT, "deltas": HALF_AND_FLOAT},
    api="RotatedBoxDecode",
)
def npu_rotated_box_decode(anchor_boxes, deltas, weight):
    """Boxes [B, 5, N] (x0, y0, x1, y1, angle in degrees) that deltas make of anchor_boxes."""
    _check("npu_rotated_box_decode", anchor_boxes, deltas, weight, "deltas")
    wx, wy, ww, wh, wa = weight.float().reshape(5).unbind()
    cxa, cya, w_a, h_a, ta = _extent(anchor_boxes)
    dx, dy, dw, dh, dangle = deltas.float().unbind(1)
    cx, cy = dx / wx * w_a + cxa, dy / wy * h_a + cya
    w, h = torch.exp(dw / ww) * w_a, torch.exp(dh / wh) * h_a
    angle = torch.atan(torch.tan(ta) + dangle / wa) / _RADIANS
    boxes = [cx - w * 0.5, cy - h * 0.5, cx + w * 0.5, cy + h * 0.5, angle]
    return torch.stack(boxes, 1).to(anchor_boxes.dtype)
