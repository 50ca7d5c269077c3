"""HiFloat8: the codec against a scalar reference written from the format's definition (exponent from
log2, mantissa width by exponent range, rounding half away from zero), every code's round trip, the special
values; and torch_npu.HiFloat8Tensor (lazy, codes kept through views, decoded compute, gradients through)."""

import io
import math

import pytest
import torch
from error_cases import first_line

import torch_npu
from torch_npu.utils import hifloat8


def _reference(value):
    """HiF8 code of a float: the format written out for one value."""
    if math.isnan(value):
        return 0x80
    sign = 0x80 if value < 0 else 0
    magnitude = abs(value)
    if magnitude >= 1.25 * 2.0**15:
        return sign | 0x6F
    if magnitude < 2.0**-23:
        return 0
    exponent = math.floor(math.log2(magnitude))
    if exponent <= -16:  # denormals: powers of two 2^-22 .. 2^-16, nearest with ties up
        if exponent == -23:  # between zero and 2^-22, at or above their midpoint
            return sign | 1
        upper = exponent + 1
        pick = upper if magnitude >= 1.5 * 2.0**exponent else exponent
        if pick == -15:
            return sign | _normal(-15, 0)
        return sign | (pick + 23)
    bits = 3 if abs(exponent) <= 3 else (2 if abs(exponent) <= 7 else 1)
    mantissa = math.floor((magnitude / 2.0**exponent - 1) * 2**bits + 0.5)
    if mantissa == 2**bits:
        exponent, mantissa = exponent + 1, 0
        bits = 3 if abs(exponent) <= 3 else (2 if abs(exponent) <= 7 else 1)
    if exponent > 15:
        return sign | 0x6F
    return sign | _normal(exponent, mantissa)


def _normal(exponent, mantissa):
    negative = 1 if exponent < 0 else 0
    size = abs(exponent)
    if size == 0:
        return 0x08 | mantissa
    if size == 1:
        return 0x10 | negative << 3 | mantissa
    if size <= 3:
        return 0x20 | (negative << 1 | (size - 2)) << 3 | mantissa
    if size <= 7:
        return 0x40 | (negative << 2 | (size - 4)) << 2 | mantissa
    return 0x60 | (negative << 3 | (size - 8)) << 1 | mantissa


def test_encoding_matches_the_reference_over_the_whole_range():
    g = torch.Generator().manual_seed(3)
    exponents = torch.randint(-26, 17, (4000,), generator=g).float()
    values = (
        (torch.rand(4000, generator=g) + 1)
        * torch.exp2(exponents)
        * torch.where(torch.rand(4000, generator=g) < 0.5, -1, 1)
    )
    edges = [0.0, -0.0, 2.0**-23, 1.4 * 2.0**-23, 1.5 * 2.0**-16, 1.0625, 1.1875, 40959.0, 40960.0, 1e30, -1e30]
    values = torch.cat([values, torch.tensor(edges)])
    got = hifloat8.encode(values.npu()).cpu().tolist()
    want = [_reference(v) for v in values.tolist()]
    assert got == want


def test_every_code_round_trips_and_specials():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    values = hifloat8.decode(codes)
    again = hifloat8.encode(values)
    assert torch.equal(again, codes)  # NaN's only code is 0x80; 0x00 is the only zero
    assert values[0x6E].item() == 2.0**15 and values[0x01].item() == 2.0**-22
    assert math.isinf(values[0x6F]) and values[0xEF].item() == -math.inf and math.isnan(values[0x80])
    assert hifloat8.encode(torch.tensor([float("inf"), float("-inf"), float("nan"), -1e-9])).tolist() == [
        0x6F,
        0xEF,
        0x80,
        0,
    ]


def test_hifloat8_tensor_is_lazy_and_keeps_codes_through_views():
    assert "HiFloat8Tensor" in torch_npu.__all__
    x = torch.tensor([[1.0, 0.1, -3.3], [100.0, 7.9, 2.0**-20]], device="npu", requires_grad=True)
    h = torch_npu.HiFloat8Tensor.to_hifloat8(x)
    assert h.dtype == torch.float32 and h.shape == (2, 3) and h._data.dtype == torch.uint8
    expected = hifloat8.decode(hifloat8.encode(x.detach().cpu()))
    assert torch.equal(h.float().cpu(), expected)
    for view, plain in ((h.view(6), expected.view(6)), (h.transpose(0, 1), expected.t()), (h[1:], expected[1:])):
        assert type(view).__name__ == "_HiFloat8Tensor" and view._data.data_ptr() >= h._data.data_ptr()
        assert torch.equal(view.float().cpu(), plain)
    assert torch.equal((h * 2 + 1).cpu(), expected * 2 + 1)  # computes on the decoded values
    weights = torch.arange(6.0).view(2, 3).npu()
    (h.from_hifloat8() * weights).sum().backward()
    assert torch.equal(x.grad.cpu(), weights.cpu())  # straight through the encoding
    assert h.half().dtype == torch.float16 and h.to_dtype(torch.bfloat16).dtype == torch.bfloat16


def test_hifloat8_tensor_in_place_copy_and_pickle():
    h = torch_npu.HiFloat8Tensor.to_hifloat8(torch.tensor([1.0, 3.0, -0.3], device="npu"))
    h.mul_(3)  # the result is encoded back
    assert h._data.cpu().tolist() == hifloat8.encode(torch.tensor([3.0, 9.0, -0.9375])).tolist()
    h.copy_(torch.tensor([0.1, 0.2, 0.3]))
    assert torch.equal(h._data.cpu(), hifloat8.encode(torch.tensor([0.1, 0.2, 0.3])))
    out = torch.zeros(3, device="npu")
    out.copy_(h)
    assert torch.equal(out.cpu(), h.float().cpu())
    buffer = io.BytesIO()
    torch.save(h, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert torch.equal(loaded._data.cpu(), h._data.cpu()) and loaded.dtype == h.dtype


def test_hifloat8_tensor_refuses_wide_or_differentiable_buffers():
    with pytest.raises(ValueError) as info:
        torch_npu.HiFloat8Tensor(data=torch.zeros(2, dtype=torch.float16))
    assert first_line(info.value) == "HiFloat8Tensor requires data buffer with 8-bit dtype (got dtype=torch.float16)"
    with pytest.raises(TypeError) as info:
        hifloat8.encode(torch.ones(2, dtype=torch.int32))
    assert first_line(info.value) == "HiFloat8 encodes floating-point tensors, got torch.int32"
