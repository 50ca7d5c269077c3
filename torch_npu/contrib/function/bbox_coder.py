"""Box encoders and decoders of detection heads (mmdetection's DeltaXYWH and YOLO coders).

encode_xyxy2xywh: deltas ((gx-px)/pw, (gy-py)/ph, log(gw/pw), log(gh/ph)), then (d - means) / stds.
decode_xywh2xyxy: the inverse, with dw, dh clipped to |log(wh_ratio_clip)| and boxes clipped to
max_shape (h, w). encode_yolo: ((gx-px)/stride + 0.5, (gy-py)/stride + 0.5) clamped to
[eps, 1-eps] and log(gw/pw), log(gh/ph) with eps = 1e-6."""

import math

import torch

from torch_npu.contrib.function.anchor_generator import box_dtype_check

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh", "npu_bbox_coder_decode_xywh2xyxy"]


def _centre_size(boxes):
    return (
        (boxes[..., 0] + boxes[..., 2]) * 0.5,
        (boxes[..., 1] + boxes[..., 3]) * 0.5,
        boxes[..., 2] - boxes[..., 0],
        boxes[..., 3] - boxes[..., 1],
    )


def _stats(values, like):
    return torch.tensor(values, dtype=like.dtype, device=like.device)


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    box_dtype_check(bboxes)
    eps = 1e-6
    gx, gy, gw, gh = _centre_size(gt_bboxes)
    px, py, pw, ph = _centre_size(bboxes)
    if not isinstance(stride, torch.Tensor):
        stride = torch.tensor(stride, dtype=bboxes.dtype, device=bboxes.device)
    w_target = torch.log((gw / pw).clamp(min=eps))
    h_target = torch.log((gh / ph).clamp(min=eps))
    x_target = ((gx - px) / stride + 0.5).clamp(eps, 1 - eps)
    y_target = ((gy - py) / stride + 0.5).clamp(eps, 1 - eps)
    return torch.stack([x_target, y_target, w_target, h_target], dim=-1)


def npu_bbox_coder_encode_xyxy2xywh(
    bboxes, gt_bboxes, means=None, stds=None, is_normalized=False, normalized_scale=10000.0
):
    box_dtype_check(bboxes)
    if is_normalized:
        bboxes, gt_bboxes = bboxes * normalized_scale, gt_bboxes * normalized_scale
    px, py, pw, ph = _centre_size(bboxes)
    gx, gy, gw, gh = _centre_size(gt_bboxes)
    deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], dim=-1)
    means = _stats(means or [0.0, 0.0, 0.0, 0.0], deltas)
    stds = _stats(stds or [1.0, 1.0, 1.0, 1.0], deltas)
    return (deltas - means) / stds


def npu_bbox_coder_decode_xywh2xyxy(
    bboxes, pred_bboxes, means=None, stds=None, max_shape=None, wh_ratio_clip=16 / 1000
):
    box_dtype_check(bboxes)
    deltas = pred_bboxes * _stats(stds or [1.0, 1.0, 1.0, 1.0], pred_bboxes) + _stats(
        means or [0.0, 0.0, 0.0, 0.0], pred_bboxes
    )
    dx, dy, dw, dh = deltas.unbind(-1)
    max_ratio = abs(math.log(wh_ratio_clip))
    dw, dh = dw.clamp(-max_ratio, max_ratio), dh.clamp(-max_ratio, max_ratio)
    px, py, pw, ph = _centre_size(bboxes)
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * dx, py + ph * dy
    x1, y1, x2, y2 = gx - gw * 0.5, gy - gh * 0.5, gx + gw * 0.5, gy + gh * 0.5
    if max_shape is not None:
        x1, x2 = x1.clamp(0, max_shape[1]), x2.clamp(0, max_shape[1])
        y1, y2 = y1.clamp(0, max_shape[0]), y2.clamp(0, max_shape[0])
    return torch.stack([x1, y1, x2, y2], dim=-1)
