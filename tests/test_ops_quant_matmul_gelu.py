"""npu_quant_matmul_gelu against the composition op-plugin's test defines (int32 matmul, per-token and
per-channel scales, bias, GELU erf or tanh), A8W8 and A4W4 (int4 packed in int32)."""

import math

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)
M, K, N = 8, 32, 16


def reference(x1, x2, x1_scale, x2_scale, bias=None, approximate="gelu_erf"):
    out = (
        torch.matmul(x1.to(torch.int32), x2.to(torch.int32)).float()
        * x1_scale.view(-1, 1)
        * x2_scale.float().view(1, -1)
    )
    if bias is not None:
        out = out + bias.float().view(1, -1)
    if approximate == "gelu_tanh":
        out = 0.5 * out * (1 + torch.tanh(math.sqrt(2 / math.pi) * (out + 0.044715 * out**3)))
    else:
        out = out * 0.5 * (1 + torch.erf(out / math.sqrt(2)))
    return out.to(torch.bfloat16 if x2_scale.dtype == torch.bfloat16 else torch.float16)


@pytest.mark.parametrize("approximate", ["gelu_erf", "gelu_tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_a8w8(approximate, with_bias):
    x1, x2 = torch.randint(-5, 5, (M, K), dtype=torch.int8), torch.randint(-5, 5, (K, N), dtype=torch.int8)
    x1_scale, x2_scale = torch.rand(M) * 0.05, torch.rand(N) * 0.05
    kwargs = {"approximate": approximate, "bias": torch.randn(N) * 0.1 if with_bias else None}
    check_op(
        lambda a, b, s1, s2, **kw: torch_npu.npu_quant_matmul_gelu(a, b, s1, s2, **kw),
        (x1, x2, x1_scale, x2_scale),
        reference,
        kwargs,
        atol=1e-3,
        rtol=1e-3,
    )


def test_bf16_x2_scale_gives_bf16():
    x1, x2 = torch.randint(-5, 5, (M, K), dtype=torch.int8), torch.randint(-5, 5, (K, N), dtype=torch.int8)
    out = torch_npu.npu_quant_matmul_gelu(
        x1.npu(), x2.npu(), (torch.rand(M) * 0.05).npu(), (torch.rand(N) * 0.05).bfloat16().npu()
    )
    assert out.dtype == torch.bfloat16


def pack(values):
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], -1, 8)
    packed = sum(nibbles[..., i] << (4 * i) for i in range(8))
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def test_a4w4_packed_in_int32():
    a, b = torch.randint(-8, 8, (M, K)), torch.randint(-8, 8, (K, N))
    x1_scale, x2_scale = torch.rand(M) * 0.05, torch.rand(1) * 0.05  # a per-tensor x2 scale
    out = torch_npu.npu_quant_matmul_gelu(pack(a).npu(), pack(b).npu(), x1_scale.npu(), x2_scale.npu())
    assert out.shape == (M, N)
    torch.testing.assert_close(out.cpu(), reference(a, b, x1_scale, x2_scale.expand(N)), atol=1e-3, rtol=1e-3)


def test_quant_matmul_gelu_refuses_float_operands():
    raises_operator_error(
        lambda: torch_npu.npu_quant_matmul_gelu(
            torch.randn(2, 4, device="npu"),
            torch.randn(4, 2, device="npu"),
            torch.ones(2, device="npu"),
            torch.ones(2, device="npu"),
        ),
        "npu_quant_matmul_gelu: x1 and x2 must be int8 (A8W8) or int32 holding int4 (A4W4), got torch.float32",
    )
