"""torch_npu.contrib.function's box-overlap helpers: npu_iou / npu_ptiou, npu_giou, npu_diou, npu_ciou.

They put torch_npu's operators of the same names behind the argument conventions of detection code:
npu_iou takes boxes [N, 4] and [M, 4] (xmin, ymin, xmax, ymax) and returns [N, M]; npu_giou takes pairs of
[n, 4] boxes in xywh and returns [n, 1]; npu_diou / npu_ciou take [4, n] boxes and return [1, n]. As torch_npu's
helpers do, npu_iou and npu_giou compute in float32 whatever the boxes' dtype. torch_npu exports these names
from the package without listing them in its `__all__`.
"""

import torch_npu
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.0):
    """torch_npu.npu_iou (mode "iou") or npu_ptiou (mode "ptiou") of every pair of boxes1 [N, 4] and boxes2 [M, 4],
    as [N, M]; normalised coordinates are scaled by normalized_scale first (the operators' small constant in the
    areas would otherwise dominate)."""
    if mode not in ("iou", "ptiou"):
        raise ValueError("Expected mode in [iou, ptiou]" + ops_error(ErrCode.VALUE))
    boxes1, boxes2 = boxes1.float(), boxes2.float()
    if is_normalized:
        boxes1, boxes2 = boxes1 * normalized_scale, boxes2 * normalized_scale
    operator = torch_npu.npu_iou if mode == "iou" else torch_npu.npu_ptiou
    return operator(boxes2, boxes1)


npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """GIoU of box i of boxes1 with box i of boxes2 (both [n, 4] in xywh, transposed to the operator's [4, n]
    unless is_permuted is False), as [n, 1]; differentiable."""
    if boxes1.shape != boxes2.shape:
        raise ValueError("Expected boxes1.shape == boxes2.shape" + ops_error(ErrCode.VALUE))
    boxes1, boxes2 = boxes1.float(), boxes2.float()
    if is_permuted:
        boxes1, boxes2 = boxes1.permute(1, 0), boxes2.permute(1, 0)
    return torch_npu.npu_giou(boxes1, boxes2, trans=True, is_cross=False)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """DIoU of [4, n] boxes (xywh when trans): IoU - (centre distance / enclosing diagonal)^2, as [1, n]."""
    return torch_npu.npu_diou(boxes1, boxes2, trans, is_cross, mode)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """CIoU of [4, n] boxes (xywh when trans): DIoU with the aspect-ratio term, as [1, n]; its backward uses
    the forward's arctangent difference, as torch_npu's helper asks the operator for."""
    return torch_npu.npu_ciou(boxes1, boxes2, trans, is_cross, mode, True)
