"""npu_rms_norm_dynamic_mx_quant / npu_add_rms_norm_dynamic_mx_quant against RmsNorm written here followed by
npu_dynamic_mx_quant (the unfused sequence vLLM-Ascend's fusion pass replaces), for FP8 and FP4 outputs. The normalised
values are quantised from x's dtype, as Ascend 950's kernel stores them before its MX quantisation."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def rms(x, gamma, beta, eps=1e-6):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf * rstd * gamma.float() + beta.float(), rstd


@pytest.mark.parametrize("dst_type, round_mode", [(292, "rint"), (291, "rint"), (296, "round"), (297, "floor")])
def test_rms_norm_then_mx_quant(dst_type, round_mode):
    g = torch.Generator().manual_seed(dst_type)
    x, gamma, beta = torch.randn(32, 256, generator=g).bfloat16(), torch.randn(256, generator=g).bfloat16(), torch.randn(256, generator=g).bfloat16()  # fmt: skip
    y, rstd_want = rms(x, gamma, beta)
    want_q, want_s = torch_npu.npu_dynamic_mx_quant(y.bfloat16().npu(), dst_type=dst_type, round_mode=round_mode)
    from_float32 = torch_npu.npu_dynamic_mx_quant(y.npu(), dst_type=dst_type, round_mode=round_mode)[0]
    assert not torch.equal(from_float32.view(torch.uint8), want_q.view(torch.uint8))  # the rounding to x's dtype shows
    leaf = x.npu().requires_grad_(True)
    q, s, rstd = torch_npu.npu_rms_norm_dynamic_mx_quant(leaf, gamma.npu(), beta=beta.npu(), dst_type=dst_type, round_mode=round_mode)  # fmt: skip
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(s, want_s)
    torch.testing.assert_close(rstd.cpu(), rstd_want)
    x2 = torch.randn(32, 256, generator=g).bfloat16()
    summed = x + x2
    y2, _ = rms(summed, gamma, beta)
    want_q2, want_s2 = torch_npu.npu_dynamic_mx_quant(y2.bfloat16().npu(), dst_type=dst_type, round_mode=round_mode)
    q2, xo, s2, rstd2 = torch_npu.npu_add_rms_norm_dynamic_mx_quant(x.npu(), x2.npu(), gamma.npu(), beta=beta.npu(), dst_type=dst_type, round_mode=round_mode)  # fmt: skip
    assert torch.equal(q2.view(torch.uint8), want_q2.view(torch.uint8)) and torch.equal(s2, want_s2)
    assert torch.equal(xo.cpu(), summed) and rstd2.numel() == 0


def test_errors():
    x = torch.randn(2, 64).bfloat16().npu()
    raises_operator_error(
        lambda: torch_npu.npu_add_rms_norm_dynamic_mx_quant(
            x, torch.randn(2, 32).bfloat16().npu(), torch.ones(64).bfloat16().npu()
        ),  # fmt: skip
        "npu_add_rms_norm_dynamic_mx_quant: The shape of x1 and x2 must be the same",
    )
    with pytest.raises(RuntimeError, match="npu_rms_norm_dynamic_mx_quant: dst_type must be 291, 292, 296 or 297"):
        torch_npu.npu_rms_norm_dynamic_mx_quant(x, torch.ones(64).bfloat16().npu(), dst_type=1)
