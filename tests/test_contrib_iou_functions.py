"""torch_npu.contrib.function's npu_iou / npu_ptiou / npu_giou / npu_diou / npu_ciou: torch_npu's box-overlap
operators behind detection code's argument conventions, importable from the package as in torch_npu."""

import pytest
import torch
from error_cases import raises_exactly

import torch_npu
from torch_npu.contrib.function import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou

BOXES1 = torch.tensor([[10.0, 55, 85, 160], [0, 0, 10, 10], [32, 32, 38, 42]])
BOXES2 = torch.tensor([[18.0, 45, 80, 130], [38, 85, 70, 230]])


def test_npu_iou_is_every_pair_of_the_two_lists():
    b1, b2 = BOXES1.npu(), BOXES2.npu()
    iou = npu_iou(b1, b2, mode="iou")
    assert iou.shape == (3, 2) and iou.dtype == torch.float32
    assert torch.equal(iou.cpu(), torch_npu.npu_iou(b2, b1).cpu())
    assert torch.equal(npu_iou(b1, b2).cpu(), torch_npu.npu_ptiou(b2, b1).cpu())  # ptiou is the default
    assert npu_ptiou is npu_iou
    assert abs(float(iou[0, 0]) - 4650 / 8495) < 2e-3 and float(iou[1, 1]) == 0.0


def test_normalized_boxes_are_scaled_back_and_half_boxes_computed_in_float():
    b1, b2 = BOXES1.npu(), BOXES2.npu()
    scaled = npu_iou(b1 / 100.0, b2 / 100.0, mode="iou", is_normalized=True, normalized_scale=100.0)
    assert torch.equal(scaled.cpu(), npu_iou(b1 / 100.0 * 100.0, b2 / 100.0 * 100.0, mode="iou").cpu())
    half = npu_iou(b1.half(), b2.half(), mode="iou")
    assert half.dtype == torch.float32 and torch.equal(half.cpu(), npu_iou(b1, b2, mode="iou").cpu())


def test_giou_pairs_xywh_boxes_and_is_differentiable():
    b1 = torch.tensor([[5.0, 5, 10, 10], [15, 15, 10, 10], [35, 37, 6, 10]], device="npu", requires_grad=True)
    b2 = torch.tensor([[5.0, 10, 10, 20], [5, 10, 10, 1], [15, 15, 10, 10]], device="npu")
    giou = npu_giou(b1, b2)
    want = torch_npu.npu_giou(b1.detach().t(), b2.t(), trans=True, is_cross=False)
    assert giou.shape == (3, 1) and torch.equal(giou.detach().cpu(), want.cpu())
    assert float(giou[0, 0].detach()) == pytest.approx(0.5, abs=1e-3)
    giou.sum().backward()
    assert b1.grad.shape == b1.shape and bool(torch.isfinite(b1.grad).all())


def test_diou_and_ciou_are_the_operators_with_xywh_boxes():
    b1 = torch.tensor([[0.0, 10, 32, 8], [0, 10, 32, 8], [10, 20, 38, 4], [10, 20, 42, 4]], device="npu")
    b2 = torch.tensor([[0.0, 0, 10, 8], [0, 10, 10, 8], [10, 10, 20, 4], [20, 10, 20, 4]], device="npu")
    assert torch.equal(npu_diou(b1, b2).cpu(), torch_npu.npu_diou(b1, b2, True, False, 0).cpu())
    assert npu_diou(b1, b2).shape == (1, 4)
    assert torch.equal(npu_ciou(b1, b2).cpu(), torch_npu.npu_ciou(b1, b2, True, False, 0, True).cpu())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: npu_iou(BOXES1.npu(), BOXES2.npu(), mode="giou"), "Expected mode in [iou, ptiou]"),
        (lambda: npu_giou(BOXES1.npu(), BOXES2.npu()), "Expected boxes1.shape == boxes2.shape"),
    ],
)
def test_bad_arguments_get_torch_npus_errors(call, message):
    raises_exactly(call, ValueError, message)
