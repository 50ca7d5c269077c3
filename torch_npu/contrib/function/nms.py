"""Multi-class NMS of detection heads, on torch_npu.npu_batch_nms as torch_npu's contrib does it.

For every class: boxes scoring above score_thr, greedy NMS at IoU nms_thr; then the max_num best
detections over all classes, by score, padded with zeros. Like the NPU path it computes in
float16. The last score column is the background class.
"""

import torch

__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms"]


def npu_batched_multiclass_nms(
    multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None
):
    """multi_bboxes [B, N, C*4] (or [B, N, 4]), multi_scores [B, N, C+1] -> ([B, max_num, 5], [B, max_num])."""
    import torch_npu

    batch, num_boxes = multi_scores.shape[:2]
    scores = multi_scores[..., :-1]
    if score_factors is not None:
        scores = scores * score_factors[..., None]
    bboxes = multi_bboxes.reshape(batch, num_boxes, -1, 4)
    boxes, nms_scores, classes, _ = torch_npu.npu_batch_nms(
        bboxes.half(), scores.half(), score_thr, nms_thr, max_num, max_num
    )
    return torch.cat([boxes, nms_scores[..., None]], -1), classes


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None):
    """multi_bboxes [N, C*4] (or [N, 4]), multi_scores [N, C+1] -> (dets [max_num, 5], labels [max_num])."""
    factors = None if score_factors is None else score_factors[None]
    dets, labels = npu_batched_multiclass_nms(
        multi_bboxes[None], multi_scores[None], score_thr, nms_thr, max_num, factors
    )
    return dets[0], labels[0]
