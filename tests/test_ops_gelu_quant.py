"""npu_gelu_quant against GeluQuant's formulas written out (GELU by erf or tanh in float64, static and dynamic
quantisation to int8 / float8 / HiFloat8), fake / compile through check_op, and its argument checks."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu
from torch_npu.utils import hifloat8


def gelu(x, approximate):
    x = x.double()
    if approximate == "tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def reference(x, *, input_scale=None, input_offset=None, approximate="none", quant_mode="dynamic", dst_type=None,
              round_mode="rint"):  # fmt: skip
    g = gelu(x, approximate).float()
    limit = {None: 127.0, torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}.get(dst_type, 32768.0)

    def cast(v):
        if dst_type is None:
            return torch.round(v).clamp(-128, 127).to(torch.int8)
        if dst_type in (torch.float8_e4m3fn, torch.float8_e5m2):
            return v.clamp(-limit, limit).to(dst_type)
        return hifloat8.encode(v)

    if quant_mode == "static":
        return cast(g * input_scale + (0 if input_offset is None else input_offset)), torch.empty(0)
    if input_scale is not None:
        g = g * input_scale
    scale = g.abs().amax(-1) / limit
    return cast(g / scale[..., None]), scale


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dst, mode", [(None, "rint"), (torch.float8_e4m3fn, "rint"), (torch.float8_e5m2, "rint")])
def test_dynamic(approximate, dst, mode):
    x = torch.rand(6, 32) * 5.5 - 2.5  # away from GELU's far negative tail, where float32 rounds it to 0
    smooth = torch.rand(32) + 0.5

    def op(t, s):  # the quantised values as floats (equal exactly) beside the scales (equal within float32 rounding)
        y, scale = torch_npu.npu_gelu_quant(t, input_scale=s, approximate=approximate, dst_type=dst)
        return y.float(), scale

    def ref(t, s):
        y, scale = reference(t, input_scale=s, approximate=approximate, dst_type=dst)
        return y.float(), scale

    check_op(op, (x, smooth), ref, atol=1e-7, rtol=1e-6)


def test_static_and_hifloat8():
    x = torch.randn(5, 16) * 2
    scale, offset = torch.rand(16) * 40, torch.tensor([3.0])
    check_op(lambda t, s, o: torch_npu.npu_gelu_quant(t, input_scale=s, input_offset=o, quant_mode="static"),
             (x, scale, offset), lambda t, s, o: reference(t, input_scale=s, input_offset=o, quant_mode="static"),
             atol=0, rtol=0)  # fmt: skip
    y, out_scale = torch_npu.npu_gelu_quant(x.npu(), dst_type=torch_npu.hifloat8, round_mode="round")
    want_y, want_scale = reference(x, dst_type="hifloat8")
    assert y.dtype == torch.uint8 and torch.equal(y.cpu(), want_y)
    torch.testing.assert_close(out_scale.cpu(), want_scale)


def test_bad_arguments():
    x = torch.randn(2, 8).npu()
    raises_operator_error(
        lambda: torch_npu.npu_gelu_quant(x, quant_mode="static"),
        "npu_gelu_quant: quant_mode 'static' needs input_scale",
    )
    raises_operator_error(
        lambda: torch_npu.npu_gelu_quant(x, dst_type=torch_npu.hifloat8),
        "npu_gelu_quant: round_mode 'rint' is not supported with this dst_type (round)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_gelu_quant(x, input_scale=torch.ones(3).npu()),
        "npu_gelu_quant: input_scale must hold one value or one per column (8)",
    )
