"""Detection operators: IoU family, NMS family, RoI align and box coders.

Boxes are (x1, y1, x2, y2) unless a `trans` flag says (cx, cy, w, h); areas have no +1 pixel.
"""

import math

import torch

from torch_npu.npu.utils import get_soc_version
from torch_npu.ops._common import check
from torch_npu.ops.dtype_support import FLOATS, HALF_AND_FLOAT
from torch_npu.ops.registration import npu_op

__all__ = ["pairwise_iou", "greedy_nms", "roi_align_reference"]

_ASCEND910B = 220  # SoC numbers as torch_npu.npu.utils.get_soc_version gives them


def _area(b):
    return (b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0)


def _intersection(a, b):
    lt = torch.maximum(a[..., :2], b[..., :2])
    rb = torch.minimum(a[..., 2:], b[..., 2:])
    wh = (rb - lt).clamp(min=0)
    return wh[..., 0] * wh[..., 1]


def pairwise_iou(boxes, gt):
    """[M, N] IoU of every gt box (M) with every box (N)."""
    inter = _intersection(gt[:, None, :], boxes[None, :, :])
    return inter / (_area(gt)[:, None] + _area(boxes)[None, :] - inter)


# The card's Iou kernel as torch_npu calls it: boxes cast to float16, and its `eps` attribute (0.01) added to the
# width and height of each box's area (not to the intersection), so a box of zero area gives 0 rather than 0 / 0.
# This reproduces the documented example (IoU of identical 10x10 boxes 0.9961, of [0,0,10,10] in [0,0,10,20]
# 0.4988 where the card prints 0.4985: its float16 reciprocal is approximate).
_IOU_EPS = 0.01


def _iou_with_offset(boxes, gt, mode):
    b, g = boxes.half().float(), gt.half().float()
    lt = torch.maximum(g[:, None, :2], b[None, :, :2])
    rb = torch.minimum(g[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]

    def area(x):
        return (x[:, 2] - x[:, 0] + _IOU_EPS) * (x[:, 3] - x[:, 1] + _IOU_EPS)

    denominator = area(g)[:, None] if mode == 1 else area(g)[:, None] + area(b)[None, :] - inter
    return inter / denominator


@npu_op(
    "npu_iou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor",
    dtypes={"bboxes": FLOATS, "gtboxes": FLOATS},
    api="aclnnIou",
)
def npu_iou(bboxes, gtboxes, mode=0):
    """[M, N] overlaps of gtboxes [M, 4] with bboxes [N, 4]: mode 0 IoU, mode 1 IoF (inter / gt area), computed
    in float16 with the kernel's 0.01 added to the widths and heights of the areas."""
    check(mode in (0, 1), "npu_iou", f"mode must be 0 (iou) or 1 (iof), got {mode}")
    check(bboxes.shape[-1] == 4 and gtboxes.shape[-1] == 4, "npu_iou", "boxes must be [N, 4] and [M, 4]")
    return _iou_with_offset(bboxes, gtboxes, mode).half().to(bboxes.dtype)


@npu_op(
    "npu_ptiou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor",
    dtypes={"bboxes": FLOATS, "gtboxes": FLOATS},
    api="aclnnIou",
)
def npu_ptiou(bboxes, gtboxes, mode=0):
    """torch_npu's other name of npu_iou (the same kernel)."""
    return npu_iou(bboxes, gtboxes, mode)


def _iou_terms(boxes, gt, trans, is_cross, mode, op):
    """boxes [4, N], gt [4, M] -> (boxes, gt, overlap, union, enclosing top-left, enclosing bottom-right),
    pairwise (aligned: [N]; cross: [M, N]). overlap is the IoU (mode 0) or the IoF, inter / gt area (mode 1,
    as npu_iou's mode 1)."""
    check(mode in (0, 1), op, f"mode must be 0 (iou) or 1 (iof), got {mode}")
    check(
        boxes.dim() == 2 and boxes.shape[0] == 4 and gt.dim() == 2 and gt.shape[0] == 4,
        op,
        f"self and gtboxes must be [4, N] and [4, M], got {tuple(boxes.shape)} and {tuple(gt.shape)}",
    )
    b, g = boxes.float().t(), gt.float().t()
    if trans:
        b = torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)
        g = torch.cat([g[:, :2] - g[:, 2:] / 2, g[:, :2] + g[:, 2:] / 2], 1)
    if is_cross:
        b, g = b[None, :, :], g[:, None, :]
    else:
        check(
            b.shape == g.shape,
            op,
            f"with is_cross=False self and gtboxes must hold as many boxes " f"({b.shape[0]} vs {g.shape[0]})",
        )
    inter = _intersection(b, g)
    union = _area(b) + _area(g) - inter
    enclose_lt = torch.minimum(b[..., :2], g[..., :2])
    enclose_rb = torch.maximum(b[..., 2:], g[..., 2:])
    overlap = inter / (union if mode == 0 else _area(g))
    return b, g, overlap, union, enclose_lt, enclose_rb


def _shape_result(value, is_cross, like, aligned_as_row=False):
    """is_cross=False gives one value per box pair: a [N, 1] column (npu_giou), or for npu_diou/npu_ciou the
    [1, N] row their Ascend kernels return."""
    if not is_cross:
        value = value[None, :] if aligned_as_row else value[:, None]
    return value.to(like.dtype)


@npu_op(
    "npu_giou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=False, int mode=0) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "gtboxes": FLOATS},
    api="aclnnGIoU",
)
def npu_giou(boxes, gtboxes, trans=False, is_cross=False, mode=0):
    """GIoU = IoU - (C - U) / C (C: enclosing box area). Boxes [4, N]; is_cross=False pairs box i with gt i
    and returns [N, 1]; is_cross=True returns [M, N]. mode 1 puts the IoF (inter / gt area) in place of the
    IoU; the documentation names the mode without its formula, this is the one npu_iou's mode 1 defines."""
    _, _, overlap, union, lt, rb = _iou_terms(boxes, gtboxes, trans, is_cross, mode, "npu_giou")
    enclose = (rb - lt).clamp(min=0).prod(-1)
    return _shape_result(overlap - (enclose - union) / (enclose + 1e-10), is_cross, boxes)


def _diou_penalty(b, g, lt, rb):
    centre = ((b[..., :2] + b[..., 2:]) / 2 - (g[..., :2] + g[..., 2:]) / 2).pow(2).sum(-1)
    diagonal = (rb - lt).pow(2).sum(-1) + 1e-10
    return centre / diagonal


@npu_op(
    "npu_diou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=False, int mode=0) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "gtboxes": FLOATS},
    api="aclnnDIoU",
)
def npu_diou(boxes, gtboxes, trans=False, is_cross=False, mode=0):
    """DIoU = IoU - d^2 / c^2 (d: centre distance, c: enclosing-box diagonal); modes as npu_giou; is_cross=False
    returns [1, N]."""
    b, g, overlap, _, lt, rb = _iou_terms(boxes, gtboxes, trans, is_cross, mode, "npu_diou")
    return _shape_result(overlap - _diou_penalty(b, g, lt, rb), is_cross, boxes, aligned_as_row=True)


@npu_op(
    "npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
    "bool atan_sub_flag=False) -> Tensor",
    differentiable=True,
    dtypes={"self": FLOATS, "gtboxes": FLOATS},
    api="aclnnCIoU",
)
def npu_ciou(boxes, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
    """CIoU = DIoU - a v, v = 4/pi^2 (atan(wg/hg) - atan(w/h))^2, a = v / (1 - IoU + v); shapes and modes as
    npu_giou (mode 1: the IoF stands for the IoU in both places)."""
    return ciou_with_atan_difference(boxes, gtboxes, trans, is_cross, mode, "npu_ciou")[0]


def ciou_with_atan_difference(boxes, gtboxes, trans, is_cross, mode, op):
    """(CIoU, atan(wg/hg) - atan(w/h)) of the box pairs, both shaped as npu_ciou's result (the second is what the
    card's CIoU backward reads)."""
    b, g, iou, _, lt, rb = _iou_terms(boxes, gtboxes, trans, is_cross, mode, op)
    penalty = _diou_penalty(b, g, lt, rb)
    wb, hb = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    wg, hg = g[..., 2] - g[..., 0], g[..., 3] - g[..., 1]
    atan_sub = torch.atan(wg / hg) - torch.atan(wb / hb)
    v = (4 / math.pi**2) * atan_sub.pow(2)
    alpha = v / (1 - iou + v + 1e-10)
    return tuple(
        _shape_result(value, is_cross, boxes, aligned_as_row=True) for value in (iou - penalty - alpha * v, atan_sub)
    )


def greedy_nms(boxes, scores, iou_threshold):
    """Indices kept by greedy NMS (highest score first, ties by index), suppressing IoU > threshold."""
    order = torch.argsort(scores, descending=True, stable=True)
    keep = []
    while order.numel():
        i = int(order[0])
        keep.append(i)
        if order.numel() == 1:
            break
        ious = pairwise_iou(boxes[order[1:]].float(), boxes[i : i + 1].float())[0]
        order = order[1:][ious <= iou_threshold]
    return torch.tensor(keep, dtype=torch.long, device=boxes.device)


def _nms_v4_fake(boxes, scores, max_output_size, iou_threshold, scores_threshold, pad_to_max_output_size=False):
    """Padded: [max_output_size] indices. Unpadded, the count depends on the values: an unbacked size
    (torch.compile needs capture_dynamic_output_shape_ops for it, as for torch.nonzero)."""
    limit = int(max_output_size)
    size = limit if pad_to_max_output_size else torch.library.get_ctx().new_dynamic_size(max=limit)
    return boxes.new_empty(size, dtype=torch.int32), boxes.new_empty((), dtype=torch.int32)


@npu_op(
    "npu_nms_v4(Tensor self, Tensor scores, Scalar max_output_size, Tensor iou_threshold, "
    "Tensor scores_threshold, bool pad_to_max_output_size=False) -> (Tensor, Tensor)",
    fake=_nms_v4_fake,
    dtypes={"self": FLOATS, "scores": FLOATS},
    api="aclnnNmsV4",
)
def npu_nms_v4(boxes, scores, max_output_size, iou_threshold, scores_threshold, pad_to_max_output_size=False):
    """TensorFlow's NonMaxSuppressionV4: boxes scoring above scores_threshold, greedy NMS, at most
    max_output_size. Returns (selected_indices int32, valid_count int32 0-d); with
    pad_to_max_output_size the indices are zero-padded to max_output_size."""
    check(boxes.dim() == 2 and boxes.shape[1] == 4, "npu_nms_v4", f"self must be [N, 4], got {tuple(boxes.shape)}")
    check(scores.shape == boxes.shape[:1], "npu_nms_v4", f"scores must be [N], got {tuple(scores.shape)}")
    candidates = torch.nonzero(scores > float(scores_threshold)).flatten()
    kept = (
        candidates[greedy_nms(boxes[candidates], scores[candidates], float(iou_threshold))]
        if candidates.numel()
        else candidates
    )
    kept = kept[: int(max_output_size)].to(torch.int32)
    count = torch.tensor(kept.numel(), dtype=torch.int32, device=boxes.device)
    if pad_to_max_output_size:
        kept = torch.cat([kept, kept.new_zeros(int(max_output_size) - kept.numel())])
    return kept, count


def _nms_with_mask_fake(boxes_scores, iou_threshold):
    n = boxes_scores.shape[0]
    return (
        boxes_scores.new_empty(n, 5),
        boxes_scores.new_empty(n, dtype=torch.int32),
        boxes_scores.new_empty(n, dtype=torch.uint8),
    )


@npu_op(
    "npu_nms_with_mask(Tensor input, Scalar iou_threshold) -> (Tensor, Tensor, Tensor)",
    fake=_nms_with_mask_fake,
    dtypes={"input": FLOATS},
    api="aclnnNMSWithMask",
)
def npu_nms_with_mask(boxes_scores, iou_threshold):
    """input [N, 5] (x1, y1, x2, y2, score): returns the boxes sorted by score (descending), their original
    indices (int32) and a uint8 mask of the boxes greedy NMS keeps (IoU > iou_threshold suppresses)."""
    check(
        boxes_scores.dim() == 2 and boxes_scores.shape[1] >= 5,
        "npu_nms_with_mask",
        f"input must be [N, 5] (x1, y1, x2, y2, score), got {tuple(boxes_scores.shape)}",
    )
    order = torch.argsort(boxes_scores[:, 4], descending=True, stable=True)
    sorted_boxes = boxes_scores[order, :5]
    kept = greedy_nms(sorted_boxes[:, :4], sorted_boxes[:, 4], float(iou_threshold))
    mask = torch.zeros(boxes_scores.shape[0], dtype=torch.uint8, device=boxes_scores.device)
    mask[kept] = 1
    return sorted_boxes, order.to(torch.int32), mask


@npu_op(
    "npu_batch_nms(Tensor self, Tensor scores, float score_threshold, float iou_threshold, "
    "int max_size_per_class, int max_total_size, bool change_coordinate_frame=False, "
    "bool transpose_box=False) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=lambda boxes, scores, st, it, per_class, total, ccf=False, tb=False: (
        boxes.new_empty(boxes.shape[0], total, 4),
        scores.new_empty(scores.shape[0], total),
        scores.new_empty(scores.shape[0], total),
        scores.new_empty(scores.shape[0], dtype=torch.int32),
    ),
    dtypes={"self": FLOATS, "scores": FLOATS},
    api="aclnnBatchNms",
)
def npu_batch_nms(
    boxes,
    scores,
    score_threshold,
    iou_threshold,
    max_size_per_class,
    max_total_size,
    change_coordinate_frame=False,
    transpose_box=False,
):
    """Per image and class: boxes scoring above score_threshold, greedy NMS, at most max_size_per_class;
    then the best max_total_size over the classes, zero-padded. boxes [B, A, q, 4] (q = 1 or C),
    scores [B, A, C]. Returns (boxes [B, T, 4], scores [B, T], classes [B, T], valid counts [B] int32).
    transpose_box: boxes given as [B, A, 4, q]."""
    check(
        boxes.dim() == 4 and scores.dim() == 3,
        "npu_batch_nms",
        f"self must be [B, A, q, 4] and scores [B, A, C], got {tuple(boxes.shape)} and {tuple(scores.shape)}",
    )
    if transpose_box:
        boxes = boxes.transpose(2, 3)
    batch, _, classes = scores.shape
    out_boxes = boxes.new_zeros(batch, max_total_size, 4)
    out_scores = scores.new_zeros(batch, max_total_size)
    out_classes = scores.new_zeros(batch, max_total_size)
    counts = torch.zeros(batch, dtype=torch.int32, device=scores.device)
    for b in range(batch):
        found = []
        for c in range(classes):
            boxes_c = boxes[b, :, c if boxes.shape[2] > 1 else 0]
            scores_c = scores[b, :, c]
            valid = torch.nonzero(scores_c > score_threshold).flatten()
            if not valid.numel():
                continue
            keep = valid[greedy_nms(boxes_c[valid], scores_c[valid], iou_threshold)][:max_size_per_class]
            found.append((boxes_c[keep], scores_c[keep], torch.full((keep.numel(),), c, device=scores.device)))
        if not found:
            continue
        all_boxes = torch.cat([f[0] for f in found])
        all_scores = torch.cat([f[1] for f in found])
        all_classes = torch.cat([f[2] for f in found])
        order = torch.argsort(all_scores, descending=True, stable=True)[:max_total_size]
        n = order.numel()
        out_boxes[b, :n], out_scores[b, :n] = all_boxes[order], all_scores[order]
        out_classes[b, :n] = all_classes[order].to(out_classes.dtype)
        counts[b] = n
    return out_boxes, out_scores, out_classes, counts


def _interp_weights(coords, size):
    """[n, size] bilinear weights per coordinate (zero rows outside [-1, size]; torchvision's rules)."""
    weights = coords.new_zeros(coords.numel(), size)
    valid = (coords >= -1.0) & (coords <= size)
    c = coords.clamp(min=0)
    low = c.floor().long().clamp(max=size - 1)
    at_end = low >= size - 1
    high = torch.where(at_end, low, low + 1)
    frac = torch.where(at_end, torch.zeros_like(c), c - low.to(c.dtype))
    rows = torch.arange(coords.numel(), device=coords.device)
    zero = torch.zeros_like(frac)
    weights.index_put_((rows, low), torch.where(valid, 1 - frac, zero), accumulate=True)
    weights.index_put_((rows, high), torch.where(valid, frac, zero), accumulate=True)
    return weights


def roi_align_reference(features, rois, output_size, spatial_scale, sampling_ratio, aligned, end_offset=0.0):
    """Average of bilinear samples per output bin (Mask R-CNN RoIAlign, torchvision's sampling rules)."""
    ph, pw = output_size
    channels, height, width = features.shape[1:]
    out = features.new_zeros(rois.shape[0], channels, ph, pw)
    offset = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois.tolist()):
        batch = int(roi[0])
        x1, y1 = roi[1] * spatial_scale - offset, roi[2] * spatial_scale - offset
        x2, y2 = (roi[3] + end_offset) * spatial_scale - offset, (roi[4] + end_offset) * spatial_scale - offset
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / ph, roi_w / pw
        grid_h = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_h / ph), 1)
        grid_w = sampling_ratio if sampling_ratio > 0 else max(math.ceil(roi_w / pw), 1)
        dtype, device = features.dtype, features.device
        ys = y1 + (
            torch.arange(ph, dtype=dtype, device=device)[:, None] * bin_h
            + (torch.arange(grid_h, dtype=dtype, device=device)[None, :] + 0.5) * bin_h / grid_h
        )
        xs = x1 + (
            torch.arange(pw, dtype=dtype, device=device)[:, None] * bin_w
            + (torch.arange(grid_w, dtype=dtype, device=device)[None, :] + 0.5) * bin_w / grid_w
        )
        samples = _interp_weights(ys.reshape(-1), height) @ features[batch] @ _interp_weights(xs.reshape(-1), width).t()
        out[k] = samples.view(channels, ph, grid_h, pw, grid_w).sum(dim=(2, 4)) / (grid_h * grid_w)
    return out


def _roi_align_fake(features, rois, spatial_scale, pooled_height, pooled_width, sample_num, roi_end_mode):
    return features.new_empty(rois.shape[0], features.shape[1], pooled_height, pooled_width)


@npu_op(
    "npu_roi_align(Tensor self, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "
    "int sample_num, int roi_end_mode) -> Tensor",
    fake=_roi_align_fake,
    dtypes={"self": FLOATS, "rois": FLOATS},
    api="aclnnRoiAlign",
)
def npu_roi_align(features, rois, spatial_scale, pooled_height, pooled_width, sample_num, roi_end_mode):
    """RoIAlign of features [N, C, H, W] over rois [K, 5] (batch index, x1, y1, x2, y2) -> [K, C, ph, pw].
    roi_end_mode 0: roi size max(x2 - x1, 1) (torchvision aligned=False); 1: Caffe's inclusive end
    (x2 + 1); 3: half-pixel aligned coordinates (torchvision aligned=True)."""
    check(roi_end_mode in (0, 1, 3), "npu_roi_align", f"roi_end_mode must be 0, 1 or 3, got {roi_end_mode}")
    check(rois.dim() == 2 and rois.shape[1] == 5, "npu_roi_align", f"rois must be [K, 5], got {tuple(rois.shape)}")
    return roi_align_reference(
        features,
        rois,
        (pooled_height, pooled_width),
        spatial_scale,
        sample_num,
        aligned=roi_end_mode == 3,
        end_offset=1.0 if roi_end_mode == 1 else 0.0,
    )


def _centre_size(b):
    """Centre and size of Faster R-CNN's boxes as the card's BoundingBoxEncode/Decode take them (mmdetection
    1.x): corners are inclusive pixel indices, so a box is x2 - x1 + 1 wide."""
    return (
        (b[..., 0] + b[..., 2]) * 0.5,
        (b[..., 1] + b[..., 3]) * 0.5,
        b[..., 2] - b[..., 0] + 1.0,
        b[..., 3] - b[..., 1] + 1.0,
    )


@npu_op(
    "npu_bounding_box_encode(Tensor anchor_box, Tensor ground_truth_box, float means0, float means1, "
    "float means2, float means3, float stds0, float stds1, float stds2, float stds3) -> Tensor",
    dtypes={"anchor_box": FLOATS, "ground_truth_box": FLOATS},
    api="aclnnBoundingBoxEncode",
)
def npu_bounding_box_encode(anchor, gt, means0, means1, means2, means3, stds0, stds1, stds2, stds3):
    """Faster R-CNN deltas ((gx-px)/pw, (gy-py)/ph, log(gw/pw), log(gh/ph)), then (d - means) / stds, with
    inclusive box sizes (see _centre_size). The card computes them in float16 whatever the input dtype, scaling by
    the reciprocal of stds (torch_npu's Ascend910B contrib test: 4/3 comes back as 1.3330; its documented example
    with stds 0.1: 13.3281)."""
    check(
        anchor.shape == gt.shape and anchor.shape[-1] == 4,
        "npu_bounding_box_encode",
        f"anchor_box and ground_truth_box must both be [N, 4], got {tuple(anchor.shape)} and {tuple(gt.shape)}",
    )
    px, py, pw, ph = _centre_size(anchor.float())
    gx, gy, gw, gh = _centre_size(gt.float())
    if get_soc_version() < _ASCEND910B:  # the Ascend910A kernel takes the sizes' magnitudes (its test: -5.4922)
        gw, gh, pw, ph = gw.abs(), gh.abs(), pw.abs(), ph.abs()
    # a negative size makes the log NaN on Ascend910B and later (their test and the documented example)
    deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], -1)
    half = torch.float16
    means = deltas.new_tensor([means0, means1, means2, means3]).to(half)
    inverse_stds = (1.0 / deltas.new_tensor([stds0, stds1, stds2, stds3])).to(half)
    # each step rounded to float16 as the card computes: deltas, minus means, times the reciprocal stds
    centred = (deltas.to(half).float() - means.float()).to(half)
    return (centred.float() * inverse_stds.float()).to(half).to(anchor.dtype)


@npu_op(
    "npu_bounding_box_decode(Tensor rois, Tensor deltas, float means0, float means1, float means2, "
    "float means3, float stds0, float stds1, float stds2, float stds3, int[1] max_shape, "
    "float wh_ratio_clip) -> Tensor",
    dtypes={"rois": FLOATS, "deltas": FLOATS},
    api="aclnnBoundingBoxDecode",
)
def npu_bounding_box_decode(
    rois, deltas, means0, means1, means2, means3, stds0, stds1, stds2, stds3, max_shape, wh_ratio_clip
):
    """Inverse of the encoder (inclusive sizes: corners at centre -/+ (size - 1) / 2): dw, dh clipped to
    |log(wh_ratio_clip)|, corners clipped to [0, max_shape - 1] (h, w; a single value clips both axes, 0 none)."""
    d = (
        deltas.float() * deltas.new_tensor([stds0, stds1, stds2, stds3]).float()
        + deltas.new_tensor([means0, means1, means2, means3]).float()
    )
    dx, dy, dw, dh = d.unbind(-1)
    ratio = abs(math.log(wh_ratio_clip))
    dw, dh = dw.clamp(-ratio, ratio), dh.clamp(-ratio, ratio)
    px, py, pw, ph = _centre_size(rois.float())
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * dx, py + ph * dy
    x1, y1 = gx - gw * 0.5 + 0.5, gy - gh * 0.5 + 0.5
    x2, y2 = gx + gw * 0.5 - 0.5, gy + gh * 0.5 - 0.5
    if max_shape and max(max_shape) > 0:
        h, w = (max_shape[0], max_shape[-1]) if len(max_shape) > 1 else (max_shape[0], max_shape[0])
        x1, x2 = x1.clamp(0, w - 1), x2.clamp(0, w - 1)
        y1, y2 = y1.clamp(0, h - 1), y2.clamp(0, h - 1)
    return torch.stack([x1, y1, x2, y2], -1).to(rois.dtype)


@npu_op(
    "npu_anchor_response_flags(Tensor self, int[2] featmap_size, int[2] stride, int num_base_anchors) -> Tensor",
    dtypes={"self": FLOATS},
    api="AnchorResponseFlags",
)
def npu_anchor_response_flags(gt_bboxes, featmap_size, stride, num_base_anchors):
    """The anchors responsible for the ground-truth boxes [N, 4] (x1, y1, x2, y2): the feature-map cell
    holding each box's centre (centre // stride) flags its num_base_anchors anchors; a uint8 tensor of
    feat_h * feat_w * num_base_anchors flags."""
    op = "npu_anchor_response_flags"
    check(
        gt_bboxes.dim() == 2 and gt_bboxes.shape[1] == 4, op, f"self must be [N, 4] boxes, got {tuple(gt_bboxes.shape)}"
    )
    feat_h, feat_w = featmap_size
    centre_x = torch.floor((gt_bboxes[:, 0] + gt_bboxes[:, 2]) * 0.5 / stride[0]).long()
    centre_y = torch.floor((gt_bboxes[:, 1] + gt_bboxes[:, 3]) * 0.5 / stride[1]).long()
    flags = torch.zeros(feat_h * feat_w, dtype=torch.uint8, device=gt_bboxes.device)
    flags[centre_y * feat_w + centre_x] = 1
    return flags[:, None].expand(feat_h * feat_w, num_base_anchors).reshape(-1)


@npu_op(
    "npu_yolo_boxes_encode(Tensor self, Tensor gt_bboxes, Tensor stride, bool performance_mode=False) -> Tensor",
    dtypes={"self": HALF_AND_FLOAT, "gt_bboxes": HALF_AND_FLOAT},
    api="YoloBoxesEncode",
)
def npu_yolo_boxes_encode(anchors, gt_bboxes, stride, performance_mode=False):
    """YOLO's box encoding of gt_bboxes [N, 4] against anchors [N, 4] (x1, y1, x2, y2) with per-box stride [N]:
    the centre offset within the cell ((gt centre - anchor centre) / stride + 0.5, clamped to [eps, 1 - eps]) and
    log(gt size / anchor size), eps = 1e-6 (mmdetection's YOLOBBoxCoder.encode)."""
    op = "npu_yolo_boxes_encode"
    check(anchors.dim() == 2 and anchors.shape[1] == 4, op, f"self must be [N, 4], got {tuple(anchors.shape)}")
    check(
        gt_bboxes.shape == anchors.shape,
        op,
        f"gt_bboxes must have the shape of self {tuple(anchors.shape)}, got {tuple(gt_bboxes.shape)}",
    )
    check(
        stride.dim() == 1 and stride.shape[0] == anchors.shape[0],
        op,
        f"stride must be [N] with N={anchors.shape[0]}, got {tuple(stride.shape)}",
    )
    eps = 1e-6
    a, g, s = anchors.float(), gt_bboxes.float(), stride.float()
    centre_a, size_a = (a[:, :2] + a[:, 2:]) * 0.5, a[:, 2:] - a[:, :2]
    centre_g, size_g = (g[:, :2] + g[:, 2:]) * 0.5, g[:, 2:] - g[:, :2]
    offset = ((centre_g - centre_a) / s[:, None] + 0.5).clamp(eps, 1 - eps)
    scale = torch.log((size_g / size_a).clamp(min=eps))
    return torch.cat([offset, scale], dim=1).to(anchors.dtype)


@npu_op(
    "npu_grid_assign_positive(Tensor self, Tensor overlaps, Tensor box_responsible_flags, Tensor max_overlaps, "
    "Tensor argmax_overlaps, Tensor gt_max_overlaps, Tensor gt_argmax_overlaps, int num_gts, float pos_iou_thr, "
    "float min_pos_iou, bool gt_max_assign_all) -> Tensor",
    fake=lambda assigned_gt_inds, *args: torch.empty_like(assigned_gt_inds),
    dtypes={"self": HALF_AND_FLOAT, "overlaps": HALF_AND_FLOAT},
    api="GridAssignPositive",
)
def npu_grid_assign_positive(
    assigned_gt_inds,
    overlaps,
    box_responsible_flags,
    max_overlaps,
    argmax_overlaps,
    gt_max_overlaps,
    gt_argmax_overlaps,
    num_gts,
    pos_iou_thr,
    min_pos_iou,
    gt_max_assign_all,
):
    """The positive step of a grid assigner (mmdetection's GridAssigner): boxes of responsible cells whose best
    IoU exceeds pos_iou_thr get their best gt (1-based); then each gt whose best IoU exceeds min_pos_iou takes
    its best responsible box (all boxes tied at that IoU with gt_max_assign_all). Returns the new assignment."""
    op = "npu_grid_assign_positive"
    n = assigned_gt_inds.shape[0]
    check(
        overlaps.dim() == 2 and overlaps.shape[1] == n,
        op,
        f"overlaps must be [k, {n}] (k gt rows, the first num_gts real), got {tuple(overlaps.shape)}",
    )
    # num_gts is the real number of gts among overlaps' k rows (k may be padded); torch_npu's own example
    # passes 128 with 2 rows, so the rows that exist bound it
    real_gts = min(num_gts, overlaps.shape[0])
    responsible = box_responsible_flags.bool()
    result = assigned_gt_inds.clone()
    positive = (max_overlaps > pos_iou_thr) & responsible
    result = torch.where(positive, (argmax_overlaps + 1).to(result.dtype), result)
    for i in range(real_gts):
        if gt_max_overlaps[i] <= min_pos_iou:
            continue
        if gt_max_assign_all:
            tied = (overlaps[i] == gt_max_overlaps[i]) & responsible
            result = torch.where(tied, torch.full_like(result, i + 1), result)
        elif responsible[gt_argmax_overlaps[i]]:
            result[gt_argmax_overlaps[i]] = i + 1
    return result
