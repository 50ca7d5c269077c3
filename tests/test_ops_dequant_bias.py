"""npu_dequant_bias against DequantBias's three formulas written out in float64 (no bias, int32 bias before the
scales, float bias after), output dtypes, compile through check_op, and its argument checks."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def reference(x, ws, act, bias, *, output_dtype=None):
    scale = ws.double() * (1 if act is None else act.double()[:, None])
    if bias is not None and bias.dtype == torch.int32:
        y = (x.double() + bias.double()) * scale
    else:
        y = x.double() * scale + (0 if bias is None else bias.double())
    return y.to(output_dtype or torch.float16)


@pytest.mark.parametrize("bias_dtype", [None, torch.int32, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("output_dtype", [None, torch.bfloat16])
def test_formulas(bias_dtype, output_dtype):
    g = torch.Generator().manual_seed(6)
    x = torch.randint(-5000, 5000, (5, 8), generator=g, dtype=torch.int32)
    ws, act = torch.rand(8, generator=g) * 1e-3, torch.rand(5, generator=g)
    bias = None if bias_dtype is None else (torch.randn(8, generator=g) * 50).to(bias_dtype)
    check_op(lambda *a: torch_npu.npu_dequant_bias(*a, output_dtype=output_dtype), (x, ws, act, bias),
             lambda *a: reference(*a, output_dtype=output_dtype), atol=1e-3, rtol=1e-2)  # fmt: skip


def test_without_activation_scale():
    x, ws = torch.tensor([[100, -200]], dtype=torch.int32), torch.tensor([0.5, 0.25])
    got = torch_npu.npu_dequant_bias(x.npu(), ws.npu(), None, None)
    assert got.dtype == torch.float16 and got.cpu().tolist() == [[50.0, -50.0]]


def test_bad_arguments():
    x, ws = torch.zeros(2, 4, dtype=torch.int32).npu(), torch.ones(4).npu()
    raises_operator_error(
        lambda: torch_npu.npu_dequant_bias(x.float(), ws, None, None),
        "npu_dequant_bias: x must be a 2-D int32 tensor, got 2-D torch.float32",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dequant_bias(x, ws[:3], None, None),
        "npu_dequant_bias: weight_scale must be [N=4], got (3,)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dequant_bias(x, ws, None, None, output_dtype=torch.float32),
        "npu_dequant_bias: output_dtype must be torch.float16 or torch.bfloat16, got torch.float32",
    )
