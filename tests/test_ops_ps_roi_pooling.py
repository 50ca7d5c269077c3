"""npu_ps_roi_pooling against a pixel-by-pixel reference written here, the example of torch_npu's
documentation, and PSROIPool running on it."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu
from torch_npu.contrib.module import PSROIPool

torch.manual_seed(0)


def reference(x, rois, scale, gs, dim):
    out = []
    height, width = x.shape[-2:]
    for b in range(rois.shape[0]):
        for r in range(rois.shape[2]):
            batch, x1, y1, x2, y2 = (float(v) for v in rois[b, :, r])
            sw, sh = round(x1) * scale, round(y1) * scale
            bw, bh = max((round(x2) + 1) * scale - sw, 0.1) / gs, max((round(y2) + 1) * scale - sh, 0.1) / gs
            pooled = torch.zeros(dim, gs, gs, dtype=x.dtype)
            for c in range(dim):
                for i in range(gs):
                    for j in range(gs):
                        h0, h1 = (min(max(f(k * bh + sh), 0), height) for f, k in ((math.floor, i), (math.ceil, i + 1)))
                        w0, w1 = (min(max(f(k * bw + sw), 0), width) for f, k in ((math.floor, j), (math.ceil, j + 1)))
                        if h1 > h0 and w1 > w0:
                            pooled[c, i, j] = x[int(batch), (c * gs + i) * gs + j, h0:h1, w0:w1].mean()
            out.append(pooled)
    return torch.stack(out)


@pytest.mark.parametrize("gs,dim", [(2, 3), (3, 2)])
def test_ps_roi_pooling_averages_each_bin_from_its_own_channel(gs, dim):
    x = torch.randn(2, dim * gs * gs, 12, 10)
    corners = torch.rand(2, 4, 4) * 9
    rois = torch.cat(
        [
            torch.tensor([[0.0] * 4, [1.0] * 4]).unsqueeze(1),
            corners.min(1, keepdim=True)[0].expand(2, 2, 4),
            corners.max(1, keepdim=True)[0].expand(2, 2, 4) + 2,
        ],
        1,
    )
    check_op(
        torch_npu.npu_ps_roi_pooling,
        (x, rois, 0.75, gs, dim),
        reference,
        atol=1e-5,
        rtol=1e-5,
        grad=(0,),
        compile=False,
    )


def test_documented_example_pools_empty_regions_to_zero():
    roi = torch.tensor([[[1], [2], [3], [4], [5]], [[6], [7], [8], [9], [10]]], dtype=torch.float16)
    x = torch.arange(1, 17, dtype=torch.float16).view(2, 8, 1, 1)
    out = torch_npu.npu_ps_roi_pooling(x.npu(), roi.npu(), 0.5, 2, 2)
    assert out.shape == (2, 2, 2, 2) and out.dtype == torch.float16 and not out.cpu().any()


def test_psroipool_module_runs_the_operator():
    x = torch.randn(1, 2 * 3 * 3, 8, 8)
    rois = torch.tensor([[0.0, 1.0, 1.0, 6.0, 5.0], [0.0, 0.0, 2.0, 7.0, 7.0]])
    module = PSROIPool(pooled_height=3, pooled_width=3, spatial_scale=1.0, group_size=3, output_dim=2)
    got = module(x.npu(), rois.npu()).cpu()
    torch.testing.assert_close(got, reference(x, rois.t().unsqueeze(0), 1.0, 3, 2))


def test_psroipool_module_takes_torch_npus_roi_layout():
    """torch_npu's PSROIPool passes rois [batch, 5, rois_num] to the operator unchanged."""
    x = torch.randn(2, 2 * 3 * 3, 8, 8)
    rois = torch.tensor(
        [
            [[0.0, 0.0], [1.0, 0.0], [1.0, 2.0], [6.0, 7.0], [5.0, 7.0]],
            [[1.0, 1.0], [0.0, 2.0], [0.0, 1.0], [5.0, 6.0], [6.0, 7.0]],
        ]
    )
    module = PSROIPool(pooled_height=3, pooled_width=3, spatial_scale=1.0, group_size=3, output_dim=2)
    got = module(x.npu(), rois.npu()).cpu()
    assert got.shape == (4, 2, 3, 3)
    torch.testing.assert_close(got, reference(x, rois, 1.0, 3, 2))


PS_ROI_ERRORS = [
    (
        lambda: torch_npu.npu_ps_roi_pooling(
            torch.rand(1, 8, 4, 4, device="npu"), torch.rand(1, 5, 2, device="npu"), 1.0, 2, 3
        ),
        "npu_ps_roi_pooling: x must be [batch, output_dim * group_size^2 = 12, H, W], got (1, 8, 4, 4)",
    ),
    (
        lambda: torch_npu.npu_ps_roi_pooling(
            torch.rand(1, 8, 4, 4, device="npu"), torch.rand(1, 4, 2, device="npu"), 1.0, 2, 2
        ),
        "npu_ps_roi_pooling: rois must be [batch, 5, rois_num], got (1, 4, 2)",
    ),
    (
        lambda: torch_npu.npu_ps_roi_pooling(
            torch.rand(1, 8, 4, 4, device="npu"), torch.rand(1, 5, 2, device="npu"), 1.0, 128, 2
        ),
        "npu_ps_roi_pooling: group_size must be in (0, 128), got 128",
    ),
    (
        lambda: torch_npu.npu_ps_roi_pooling(
            torch.rand(1, 8, 4, 4, device="npu"),
            torch.tensor([[[3.0], [0.0], [0.0], [3.0], [3.0]]], device="npu"),
            1.0,
            2,
            2,
        ),
        "npu_ps_roi_pooling: RoI 0 names batch 3, but the input holds 1",
    ),
]


@pytest.mark.parametrize("call,message", PS_ROI_ERRORS, ids=[c[1][20:70] for c in PS_ROI_ERRORS])
def test_ps_roi_pooling_invalid_arguments(call, message):
    raises_operator_error(call, message)
