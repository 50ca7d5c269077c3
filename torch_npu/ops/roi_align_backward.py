"""npu_roi_alignbk: the gradient of npu_roi_align with respect to its feature map (ROIAlignGrad).

RoIAlign is linear in the features, so the gradient is its adjoint: every sample point's bilinear weights carry
its output bin's gradient (divided by the bin's sample count) back to the four pixels around it. xdiff_shape is
the feature map's [N, C, H, W]; note that pooled_width comes before pooled_height in this schema.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.boxes import npu_roi_align
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []


@npu_op(
    "npu_roi_alignbk(Tensor self, Tensor rois, int[] xdiff_shape, int pooled_width, int pooled_height, "
    "float spatial_scale, int sample_num, int? roi_end_mode=None) -> Tensor",
    fake=lambda grad, rois, xdiff_shape, *args, **kwargs: grad.new_empty(list(xdiff_shape)),
)
def npu_roi_alignbk(grad, rois, xdiff_shape, pooled_width, pooled_height, spatial_scale, sample_num,
                    roi_end_mode=None):  # fmt: skip
    """The feature-map gradient [N, C, H, W] of npu_roi_align's output gradient self [K, C, ph, pw]."""
    op = "npu_roi_alignbk"
    check(len(xdiff_shape) == 4, op, f"xdiff_shape must be [N, C, H, W], got {list(xdiff_shape)}")
    want = (rois.shape[0], xdiff_shape[1], pooled_height, pooled_width)
    check(tuple(grad.shape) == want, op, f"self must be the output gradient {want}, got {tuple(grad.shape)}")
    features = grad.new_zeros(list(xdiff_shape)).requires_grad_(True)
    mode = 1 if roi_end_mode is None else roi_end_mode
    with recording_gradients():
        out = npu_roi_align(features, rois, spatial_scale, pooled_height, pooled_width, sample_num, mode)
        (feature_grad,) = torch.autograd.grad(out, features, grad)
    return feature_grad
