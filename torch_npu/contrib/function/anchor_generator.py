"""Anchor helpers of YOLO-style detectors (mmdetection's responsible flags)."""

import torch

from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["box_dtype_check", "npu_single_level_responsible_flags"]


def box_dtype_check(box):
    """The boxes as float32, as torch_npu's check returns them: its test compares the tensor (not its dtype)
    with the float dtypes, so every box tensor is converted, float16 and integer ones alike."""
    if not isinstance(box, torch.Tensor):
        raise RuntimeError(f"boxes must be a tensor, got {type(box).__name__}" + ops_error(ErrCode.TYPE))
    return box.float()


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """uint8 flags [H*W*num_base_anchors]: 1 for the anchors of every feature-map cell that contains
    the centre of a ground-truth box (gt_bboxes [N, 4] as x1, y1, x2, y2; stride (sx, sy))."""
    gt_bboxes = box_dtype_check(gt_bboxes)
    feat_h, feat_w = featmap_size
    centre_x = (gt_bboxes[:, 0] + gt_bboxes[:, 2]) * 0.5
    centre_y = (gt_bboxes[:, 1] + gt_bboxes[:, 3]) * 0.5
    grid_x = torch.floor(centre_x / stride[0]).long()
    grid_y = torch.floor(centre_y / stride[1]).long()
    flags = torch.zeros(feat_h * feat_w, dtype=torch.uint8, device=gt_bboxes.device)
    flags[grid_y * feat_w + grid_x] = 1
    return flags[:, None].expand(feat_h * feat_w, num_base_anchors).reshape(-1)
