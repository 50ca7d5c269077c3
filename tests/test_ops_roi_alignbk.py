"""npu_roi_alignbk: the feature gradient of RoIAlign against torchvision's roi_align backward (its CPU kernel),
for the roi_end_mode torchvision has (aligned False / True), and the shape errors."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

ops = pytest.importorskip("torchvision.ops", reason="torchvision is a test dependency")


@pytest.mark.parametrize("roi_end_mode, aligned", [(0, False), (3, True)])
def test_matches_torchvision_backward(roi_end_mode, aligned):
    g = torch.Generator().manual_seed(roi_end_mode)
    features = torch.randn(2, 3, 12, 10, generator=g, requires_grad=True)
    rois = torch.tensor([[0, 1.0, 2.0, 8.5, 9.0], [1, 0.0, 0.0, 9.0, 11.0], [1, 3.2, 4.1, 6.0, 7.7]])
    out = ops.roi_align(features, rois, (4, 5), spatial_scale=0.5, sampling_ratio=2, aligned=aligned)
    upstream = torch.randn(out.shape, generator=g)
    out.backward(upstream)
    got = torch_npu.npu_roi_alignbk(upstream.npu(), rois.npu(), [2, 3, 12, 10], 5, 4, 0.5, 2, roi_end_mode)
    torch.testing.assert_close(got.cpu(), features.grad, atol=1e-5, rtol=1e-5)


def test_shape_errors():
    rois = torch.tensor([[0, 1.0, 2.0, 8.5, 9.0]]).npu()
    raises_operator_error(
        lambda: torch_npu.npu_roi_alignbk(torch.zeros(1, 3, 4, 5).npu(), rois, [1, 3, 12], 5, 4, 0.5, 2),
        "npu_roi_alignbk: xdiff_shape must be [N, C, H, W], got [1, 3, 12]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_roi_alignbk(torch.zeros(1, 3, 5, 4).npu(), rois, [1, 3, 12, 10], 5, 4, 0.5, 2),
        "npu_roi_alignbk: self must be the output gradient (1, 3, 4, 5), got (1, 3, 5, 4)",
    )
