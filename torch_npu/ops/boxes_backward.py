"""The box backward operators torch_npu exposes by name: npu_giou_backward, npu_diou_backward, npu_ciou_backward
(d boxes, d gtboxes) and npu_ps_roi_pooling_backward — the vector-Jacobian products of their forwards."""

import torch

from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_NPU = torch.ops.npu
_IOU_ARGS = "bool trans=False, bool is_cross=False, int mode=0) -> (Tensor, Tensor)"


def _iou_grads(forward, grad, bboxes, gtboxes, trans, is_cross, mode):
    return tuple(vjp(lambda b, g: forward(b, g, trans, is_cross, mode), [bboxes, gtboxes], [0, 1], [grad]))


def _iou_fake(grad, bboxes, gtboxes, *args, **kwargs):
    return torch.empty_like(bboxes), torch.empty_like(gtboxes)


@npu_op("npu_giou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, " + _IOU_ARGS, fake=_iou_fake)
def npu_giou_backward(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
    """(d bboxes, d gtboxes) of npu_giou."""
    return _iou_grads(_NPU.npu_giou, grad, bboxes, gtboxes, trans, is_cross, mode)


@npu_op("npu_diou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, " + _IOU_ARGS, fake=_iou_fake)
def npu_diou_backward(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
    """(d bboxes, d gtboxes) of npu_diou."""
    return _iou_grads(_NPU.npu_diou, grad, bboxes, gtboxes, trans, is_cross, mode)


@npu_op(
    "npu_ciou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, Tensor? atan_sub, bool trans=False, "
    "bool is_cross=True, int mode=0) -> (Tensor, Tensor)",
    fake=_iou_fake,
)
def npu_ciou_backward(grad, bboxes, gtboxes, atan_sub, trans=False, is_cross=True, mode=0):
    """(d bboxes, d gtboxes) of npu_ciou (the atan difference is recomputed; atan_sub is not needed)."""
    return _iou_grads(_NPU.npu_ciou, grad, bboxes, gtboxes, trans, is_cross, mode)


@npu_op(
    "npu_ps_roi_pooling_backward(Tensor output_grad, Tensor rois, float spatial_scale, int group_size, "
    "int output_dim, SymInt[] input_size) -> Tensor",
    fake=lambda output_grad, rois, spatial_scale, group_size, output_dim, input_size: output_grad.new_empty(
        (rois.shape[0], output_dim * group_size * group_size, *input_size)
    ),
)
def npu_ps_roi_pooling_backward(output_grad, rois, spatial_scale, group_size, output_dim, input_size):
    """d self of npu_ps_roi_pooling (linear in self, so taken at zeros) for a feature map of input_size [H, W]."""
    channels = output_dim * group_size * group_size
    features = output_grad.new_zeros((rois.shape[0], channels, *input_size))
    forward = lambda x: _NPU.npu_ps_roi_pooling(x, rois, spatial_scale, group_size, output_dim)  # noqa: E731
    return vjp(forward, [features], [0], [output_grad])[0]
