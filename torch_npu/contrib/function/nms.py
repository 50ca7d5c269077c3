"""Multi-class NMS of detection heads (torch_npu's npu_batch_nms semantics).

For every class: boxes scoring above score_thr, greedy NMS at IoU nms_thr (IoU without the +1
pixel convention); then the max_num best detections over all classes, by score, padded with
zeros. Like the NPU kernel, it computes in float16. The last score column is the background class.
"""
import torch

from torch_npu.ops.boxes import greedy_nms as _greedy_nms

__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms"]


def _nms_one_image(bboxes, scores, score_thr, nms_thr, max_num):
    """bboxes [N, C or 1, 4], scores [N, C] -> dets [max_num, 5], labels [max_num]."""
    num_classes = scores.size(1)
    found = []
    for c in range(num_classes):
        boxes_c = bboxes[:, c if bboxes.size(1) > 1 else 0, :]
        scores_c = scores[:, c]
        valid = scores_c > score_thr
        if not bool(valid.any()):
            continue
        boxes_c, scores_c = boxes_c[valid], scores_c[valid]
        keep = _greedy_nms(boxes_c, scores_c, nms_thr)[:max_num]
        found.append((boxes_c[keep], scores_c[keep], torch.full((keep.numel(),), c, device=bboxes.device)))
    dets = torch.zeros(max_num, 5, dtype=torch.float16, device=bboxes.device)
    labels = torch.zeros(max_num, dtype=torch.float16, device=bboxes.device)
    if found:
        boxes = torch.cat([f[0] for f in found])
        scores_all = torch.cat([f[1] for f in found])
        classes = torch.cat([f[2] for f in found])
        order = torch.argsort(scores_all, descending=True, stable=True)[:max_num]
        n = order.numel()
        dets[:n, :4] = boxes[order]
        dets[:n, 4] = scores_all[order]
        labels[:n] = classes[order].to(torch.float16)
    return dets, labels


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None):
    """multi_bboxes [N, C*4] (or [N, 4]), multi_scores [N, C+1] -> (dets [max_num, 5], labels [max_num])."""
    num_boxes = multi_scores.size(0)
    scores = multi_scores[:, :-1]
    if score_factors is not None:
        scores = scores * score_factors[:, None]
    bboxes = multi_bboxes.reshape(num_boxes, -1, 4).half()
    return _nms_one_image(bboxes, scores.half(), score_thr, nms_thr, max_num)


def npu_batched_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                               score_factors=None):
    """The batched form: multi_bboxes [B, N, C*4], multi_scores [B, N, C+1] -> ([B, max_num, 5], [B, max_num])."""
    results = []
    for b in range(multi_scores.size(0)):
        factors = None if score_factors is None else score_factors[b]
        results.append(npu_multiclass_nms(multi_bboxes[b], multi_scores[b], score_thr, nms_thr, max_num, factors))
    return torch.stack([r[0] for r in results]), torch.stack([r[1] for r in results])
