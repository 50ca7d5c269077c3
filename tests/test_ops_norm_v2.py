"""npu_add_rms_norm_v2 (+ _functional): results written over x1 / x2 as torch_npu's own test expects; and
npu_rms_norm_quant_v2 against the golden formula of op-plugin's test (int8, int4, float8, HiFloat8; rstd)."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error
from torch_npu.utils import hifloat8


def add_rms_norm_reference(x1, x2, gamma, eps):
    x = x1 + x2
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return rstd, (xf * rstd * gamma.float()).to(x1.dtype), x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_add_rms_norm_v2_writes_its_inputs(dtype):
    g = torch.Generator().manual_seed(6)
    x1, x2, gamma = (torch.randn(*s, generator=g).to(dtype) for s in ((4, 3, 32), (4, 3, 32), (32,)))
    rstd_want, y_want, x_want = add_rms_norm_reference(x1, x2, gamma, 1e-6)
    a, b = x1.npu(), x2.npu()
    rstd = torch_npu.npu_add_rms_norm_v2(a, b, gamma.npu())
    torch.testing.assert_close(rstd.cpu(), rstd_want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.cpu(), y_want, atol=1e-5, rtol=1e-5)
    assert torch.equal(b.cpu(), x_want)
    functional = torch_npu.npu_add_rms_norm_v2_functional(x1.npu(), x2.npu(), gamma.npu())
    assert torch.equal(functional[0], rstd) and torch.equal(functional[1], a) and torch.equal(functional[2], b)


def test_add_rms_norm_v2_compiles():
    x1, x2, gamma = torch.randn(2, 16).npu(), torch.randn(2, 16).npu(), torch.randn(16).npu()

    def step(a, b):
        rstd = torch_npu.npu_add_rms_norm_v2(a, b, gamma)
        return a * 2, b + 1, rstd

    torch._dynamo.reset()
    eager = step(x1.clone(), x2.clone())
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)(x1.clone(), x2.clone())
    assert all(torch.equal(e, c) for e, c in zip(eager, compiled))


def quant_v2_reference(x, gamma, scale, offset, beta, eps, div_mode):
    xf = x.float()
    rstd = 1 / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = xf * rstd * gamma.float().reshape(-1) + beta.float().reshape(-1)
    y = y / scale.float() if div_mode else y * scale.float()
    return y + offset.float(), rstd


@pytest.mark.parametrize("dst", [1, 16, 290, 291, 292])
@pytest.mark.parametrize("div_mode", [True, False])
def test_rms_norm_quant_v2(dst, div_mode):
    g = torch.Generator().manual_seed(dst)
    x, gamma, beta = torch.randn(4, 32, generator=g).half(), torch.randn(1, 32, generator=g).half(), torch.randn(32, generator=g).half()  # fmt: skip
    scale, offset = (torch.rand(1, generator=g) * 0.8 + 0.2).half(), torch.tensor([3.0]).half()
    value, rstd_want = quant_v2_reference(x, gamma, scale, offset, beta, 1e-6, div_mode)
    leaf = x.npu().requires_grad_(True)
    y, rstd = torch_npu.npu_rms_norm_quant_v2(leaf, gamma.npu(), scale.npu(), offset=offset.npu(), beta=beta.npu(), div_mode=div_mode, dst_dtype=dst)  # fmt: skip
    torch.testing.assert_close(rstd.cpu(), rstd_want, atol=1e-6, rtol=1e-5)
    if dst == 1:
        want = torch.round(value).clamp(-128, 127).to(torch.int8)
    elif dst == 16:
        nibbles = torch.round(value).clamp(-8, 7).to(torch.int32) & 0xF
        want = sum(nibbles.reshape(4, 4, 8)[..., i] << (4 * i) for i in range(8)).to(torch.int32)
    elif dst == 290:
        want = hifloat8.encode(value)
    else:
        want = value.to({291: torch.float8_e5m2, 292: torch.float8_e4m3fn}[dst])
    assert y.dtype == want.dtype and torch.equal(y.cpu().view(torch.uint8) if y.element_size() == 1 else y.cpu(), want.view(torch.uint8) if want.element_size() == 1 else want)  # fmt: skip
    without_grad = torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), scale.npu(), dst_dtype=dst)[1]
    assert without_grad.shape == (0,)


def test_rms_norm_quant_v2_errors():
    x, gamma, scale = torch.randn(2, 8).half().npu(), torch.randn(8).half().npu(), torch.ones(1).half().npu()
    with pytest.raises(RuntimeError, match="npu_rms_norm_quant_v2: dst_dtype must be torch.int8"):
        torch_npu.npu_rms_norm_quant_v2(x, gamma, scale, dst_dtype=5)
    raises_operator_error(
        lambda: torch_npu.npu_rms_norm_quant_v2(x, torch.ones(4).half().npu(), scale),
        "npu_rms_norm_quant_v2: gamma must hold one value per element of x's last dim (8), got (4,)",
    )
