"""Box encoders and decoders of detection heads (mmdetection's DeltaXYWH and YOLO coders) on the npu box
operators, as torch_npu's contrib wraps them: shapes checked with its ValueErrors, boxes converted to float32
and strides to int32 (box_dtype_check / stride_dtype_check), then npu_bounding_box_encode / _decode and
npu_yolo_boxes_encode compute (their formulas are in torch_npu/ops/boxes.py)."""

import torch_npu
from torch_npu.contrib.function.anchor_generator import box_dtype_check

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh", "npu_bbox_coder_decode_xywh2xyxy"]


def stride_dtype_check(stride):
    """The strides as int32, as torch_npu converts them (every dtype, int32 included)."""
    return stride.int()


def _check_pair(bboxes, others, name):
    if bboxes.size(0) != others.size(0):
        raise ValueError(f"Expected bboxes.size(0) == {name}.size(0)")
    if not (bboxes.size(-1) == others.size(-1) == 4):
        raise ValueError(f"Expected bboxes.size(-1) == {name}.size(-1) == 4")


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """YOLO deltas from bboxes to gt_bboxes ([N, 4] each) with a stride per box ([N])."""
    _check_pair(bboxes, gt_bboxes, "gt_bboxes")
    return torch_npu.npu_yolo_boxes_encode(
        box_dtype_check(bboxes), box_dtype_check(gt_bboxes), stride_dtype_check(stride), performance_mode=False
    )


def npu_bbox_coder_encode_xyxy2xywh(
    bboxes, gt_bboxes, means=None, stds=None, is_normalized=False, normalized_scale=10000.0
):
    """DeltaXYWH deltas from bboxes to gt_bboxes; normalized coordinates are scaled back first."""
    means = [0.0, 0.0, 0.0, 0.0] if means is None else means
    stds = [1.0, 1.0, 1.0, 1.0] if stds is None else stds
    _check_pair(bboxes, gt_bboxes, "gt_bboxes")
    bboxes, gt_bboxes = box_dtype_check(bboxes), box_dtype_check(gt_bboxes)
    if is_normalized:
        bboxes, gt_bboxes = bboxes * normalized_scale, gt_bboxes * normalized_scale
    return torch_npu.npu_bounding_box_encode(bboxes, gt_bboxes, *means, *stds)


def npu_bbox_coder_decode_xywh2xyxy(
    bboxes, pred_bboxes, means=None, stds=None, max_shape=None, wh_ratio_clip=16 / 1000
):
    """Boxes (x1, y1, x2, y2) from anchors and DeltaXYWH deltas, clipped to max_shape (h, w), [9999, 9999]
    when not given."""
    means = [0.0, 0.0, 0.0, 0.0] if means is None else means
    stds = [1.0, 1.0, 1.0, 1.0] if stds is None else stds
    max_shape = [9999, 9999] if max_shape is None else max_shape
    _check_pair(bboxes, pred_bboxes, "pred_bboxes")
    return torch_npu.npu_bounding_box_decode(
        box_dtype_check(bboxes), box_dtype_check(pred_bboxes), *means, *stds, list(max_shape), wh_ratio_clip
    )
