"""npu_rotated_box_encode / npu_rotated_box_decode against torch_npu's documented examples and op-plugin's
expected values, an independent float64 composition of the box coding, the round trip, and bad input."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def _box(values, dtype=torch.float32):
    return torch.tensor([[[v] for v in values]], dtype=dtype)


# (anchor, other, expected output, dtype): torch_npu's documentation and op-plugin's tests
ENCODE = [
    ([44.2877, 9.1412, 88.7575, 25.8879, 64.8047], [39.1763, 0.9838, 78.1028, 29.5997, 51.5907],
     [-0.1773, -0.1327, -0.1331, 0.5358, -0.8643], torch.float32),
    ([30.69, 32.6, 45.94, 59.88, -44.53], [30.44, 18.72, 33.22, 45.56, 8.5],
     [-0.4253, -0.5166, -1.7021, -0.0162, 1.1328], torch.float16),
]  # fmt: skip
DECODE = [
    ([32.1855, 41.9922, 64.1435, 62.5325, 34.607], [1.8725, -1.8915, 0.2395, -0.4622, -34.6539],
     [87.70366, 6.9412346, 128.31055, 19.879467, -88.313515], torch.float32),
    ([4.137, 33.72, 29.4, 54.06, 41.28], [0.0244, -1.992, 0.2109, 0.315, -37.25],
     [1.7861, -10.5781, 33.0, 17.2969, -88.4375], torch.float16),
]  # fmt: skip


@pytest.mark.parametrize("anchor, gt, want, dtype", ENCODE)
def test_encode_matches_the_published_values(anchor, gt, want, dtype):
    weight = torch.ones(5, dtype=dtype).npu()
    got = torch_npu.npu_rotated_box_encode(_box(anchor, dtype).npu(), _box(gt, dtype).npu(), weight)
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu(), _box(want, dtype), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("anchor, deltas, want, dtype", DECODE)
def test_decode_matches_the_published_values(anchor, deltas, want, dtype):
    weight = torch.ones(5, dtype=dtype).npu()
    got = torch_npu.npu_rotated_box_decode(_box(anchor, dtype).npu(), _box(deltas, dtype).npu(), weight)
    torch.testing.assert_close(got.cpu(), _box(want, dtype), rtol=1e-3, atol=2e-3)


def _boxes(seed, b=2, n=7):
    g = torch.Generator().manual_seed(seed)
    x0, y0 = torch.rand(b, n, generator=g) * 50, torch.rand(b, n, generator=g) * 50
    w, h = torch.rand(b, n, generator=g) * 40 + 0.5, torch.rand(b, n, generator=g) * 40 + 0.5  # some below 1
    angle = torch.rand(b, n, generator=g) * 170 - 85
    return torch.stack([x0, y0, x0 + w, y0 + h, angle], 1)


def _extent(boxes):
    x0, y0, x1, y1, angle = boxes.double().unbind(1)
    w, h = (x1 - x0).clamp(min=1), (y1 - y0).clamp(min=1)
    return x0 + w / 2, y0 + h / 2, w, h, torch.deg2rad(angle)


def encode_reference(anchor, gt, weight):
    (cxa, cya, wa, ha, ta), (cxg, cyg, wg, hg, tg) = _extent(anchor), _extent(gt)
    w = weight.double()
    out = [(cxg - cxa) / wa * w[0], (cyg - cya) / ha * w[1], torch.log(wg / wa) * w[2], torch.log(hg / ha) * w[3],
           (torch.tan(tg) - torch.tan(ta)) * w[4]]  # fmt: skip
    return torch.stack(out, 1).to(anchor.dtype)


def decode_reference(anchor, deltas, weight):
    cxa, cya, wa, ha, ta = _extent(anchor)
    d, w = deltas.double().unbind(1), weight.double()
    cx, cy = d[0] / w[0] * wa + cxa, d[1] / w[1] * ha + cya
    bw, bh = torch.exp(d[2] / w[2]) * wa, torch.exp(d[3] / w[3]) * ha
    angle = torch.rad2deg(torch.atan(torch.tan(ta) + d[4] / w[4]))
    return torch.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2, angle], 1).to(anchor.dtype)


def test_encode_and_decode_against_the_composition_and_each_other():
    anchor, gt = _boxes(1), _boxes(2)
    weight = torch.tensor([1.0, 2.0, 0.5, 1.5, 1.0])
    check_op(torch_npu.npu_rotated_box_encode, (anchor, gt, weight), encode_reference, atol=1e-4, rtol=1e-4)
    deltas = encode_reference(anchor, gt, weight)
    check_op(torch_npu.npu_rotated_box_decode, (anchor, deltas, weight), decode_reference, atol=1e-3, rtol=1e-4)
    back = torch_npu.npu_rotated_box_decode(anchor.npu(), deltas.npu(), weight.npu()).cpu()
    x0, y0, x1, y1, angle = gt.unbind(1)
    wide = ((x1 - x0) >= 1) & ((y1 - y0) >= 1)  # boxes narrower than 1 are widened by the coding
    per_box, gt_per_box = back.transpose(1, 2)[wide], gt.transpose(1, 2)[wide]  # [boxes, 5]
    torch.testing.assert_close(per_box[:, :4], gt_per_box[:, :4], atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(back[:, 4], angle, atol=1e-3, rtol=1e-4)
    assert math.isclose(
        float(torch_npu.npu_rotated_box_encode(anchor.npu(), anchor.npu(), weight.npu()).abs().max()), 0.0
    )


def test_bad_input_is_refused():
    box, weight = _boxes(3).npu(), torch.ones(5).npu()
    raises_operator_error(
        lambda: torch_npu.npu_rotated_box_encode(box[:, :4], box[:, :4], weight),
        "npu_rotated_box_encode: anchor_box must be [B, 5, N], got (2, 4, 7)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_rotated_box_decode(box, box[:1], weight),
        "npu_rotated_box_decode: deltas must have anchor_box's shape (2, 5, 7)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_rotated_box_encode(box, box, torch.ones(4).npu()),
        "npu_rotated_box_encode: weight must hold 5 values (x, y, w, h, angle), got 4",
    )
