"""The named box backward operators against autograd of the box metrics and of the pixel-by-pixel PS-ROI pooling
written out in the forward operators' tests."""

import pytest
import torch
from op_check import check_op
from test_ops_boxes import _pair_metric, rand_boxes
from test_ops_ps_roi_pooling import reference as ps_roi_pooling_reference

import torch_npu


def metric(name, boxes, gt, is_cross):
    n, m = boxes.shape[1], gt.shape[1]
    if is_cross:
        return torch.stack(
            [torch.stack([_pair_metric(name, boxes[:, j], gt[:, i]) for j in range(n)]) for i in range(m)]
        )  # noqa: E501
    pairs = torch.stack([_pair_metric(name, boxes[:, j], gt[:, j]) for j in range(n)])
    return pairs[:, None] if name == "npu_giou" else pairs[None, :]


@pytest.mark.parametrize("name", ["npu_giou", "npu_diou", "npu_ciou"])
@pytest.mark.parametrize("is_cross", [False, True])
def test_iou_backward(name, is_cross):
    boxes, gt = rand_boxes(4, 5).t().contiguous(), rand_boxes(3 if is_cross else 4, 6).t().contiguous()
    dy = torch.randn(metric(name, boxes, gt, is_cross).shape)

    def reference(dy, boxes, gt):
        leaves = [boxes.clone().requires_grad_(True), gt.clone().requires_grad_(True)]
        return torch.autograd.grad(metric(name, *leaves, is_cross), leaves, dy)

    op = getattr(torch_npu, f"{name}_backward")
    if name == "npu_ciou":
        call = lambda dy, b, g: op(dy, b, g, None, False, is_cross, 0)  # noqa: E731
    else:
        call = lambda dy, b, g: op(dy, b, g, False, is_cross, 0)  # noqa: E731
    check_op(call, (dy, boxes, gt), reference, atol=1e-4, rtol=1e-4)


def test_ps_roi_pooling_backward():
    gs, dim = 2, 3
    x = torch.randn(2, dim * gs * gs, 8, 7)
    rois = torch.tensor([[[0.0, 0.0], [1.0, 0.5], [0.5, 2.0], [5.0, 6.0], [6.0, 5.5]],
                         [[1.0, 1.0], [0.0, 2.0], [1.0, 0.0], [4.0, 6.5], [7.0, 4.0]]])  # fmt: skip
    dy = torch.randn(4, dim, gs, gs)

    def reference(dy, rois):
        leaf = x.clone().requires_grad_(True)
        return torch.autograd.grad(ps_roi_pooling_reference(leaf, rois, 0.75, gs, dim), leaf, dy)[0]

    check_op(
        lambda dy, rois: torch_npu.npu_ps_roi_pooling_backward(dy, rois, 0.75, gs, dim, [8, 7]),
        (dy, rois),
        reference,
        compile=False,
    )
