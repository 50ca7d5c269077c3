"""npu_ffn (FFN and MoeFFN, plain and gated activations, int8 antiquant weights) and npu_fused_matmul against
their formulas written out in float32 here."""

import math

import pytest
import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error
from tests.op_check import check_op

ACTIVATIONS = {
    "fastgelu": lambda h: h / (1 + torch.exp(-1.702 * h)),
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": lambda h: h * torch.sigmoid(h),
    "geglu": lambda h: F.gelu(h[..., : h.shape[-1] // 2]) * h[..., h.shape[-1] // 2 :],
    "swiglu": lambda h: F.silu(h[..., : h.shape[-1] // 2]) * h[..., h.shape[-1] // 2 :],
    "reglu": lambda h: F.relu(h[..., : h.shape[-1] // 2]) * h[..., h.shape[-1] // 2 :],
}


def ffn_reference(x, w1, w2, activation, b1=None, b2=None):
    h = x.float() @ w1.float() + (0 if b1 is None else b1.float())
    h = ACTIVATIONS[activation](h).to(x.dtype).float()
    return (h @ w2.float() + (0 if b2 is None else b2.float())).to(x.dtype)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_ffn_without_experts(activation):
    g = torch.Generator().manual_seed(1)
    gated = activation in ("geglu", "swiglu", "reglu")
    x, w1 = torch.randn(2, 3, 16, generator=g).half(), (torch.randn(16, 24, generator=g) / 4).half()
    w2 = (torch.randn(12 if gated else 24, 8, generator=g) / 4).half()
    b1, b2 = torch.randn(24, generator=g).half(), torch.randn(8, generator=g).half()
    want = ffn_reference(x, w1, w2, activation, b1, b2)
    op = lambda *a: torch_npu.npu_ffn(*a[:3], activation, bias1=a[3], bias2=a[4])  # noqa: E731
    check_op(op, (x, w1, w2, b1, b2), lambda *a: want, atol=2e-3, rtol=2e-3)


def test_moe_ffn_groups_rows_by_expert_and_antiquant_weights():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(7, 16, generator=g).to(torch.bfloat16)
    w1 = torch.randint(-8, 8, (3, 16, 12), generator=g, dtype=torch.int8)
    w2 = torch.randint(-8, 8, (3, 12, 8), generator=g, dtype=torch.int8)
    s1, o1 = torch.rand(3, 12, generator=g) / 8, torch.randn(3, 12, generator=g)
    s2, o2 = torch.rand(3, 8, generator=g) / 8, torch.randn(3, 8, generator=g)
    counts = [2, 0, 4]
    want, start = torch.zeros(7, 8, dtype=torch.bfloat16), 0
    for e, n in enumerate(counts):
        rows = slice(start, start + n)
        want[rows] = ffn_reference(x[rows], (w1[e].float() + o1[e]) * s1[e], (w2[e].float() + o2[e]) * s2[e], "relu")
        start += n
    kwargs = dict(antiquant_scale1=s1, antiquant_offset1=o1, antiquant_scale2=s2, antiquant_offset2=o2)
    for tokens in (dict(expert_tokens=counts), dict(expert_tokens_index=[2, 2, 6])):
        got = torch_npu.npu_ffn(
            x.npu(), w1.npu(), w2.npu(), "relu", **tokens, **{k: v.npu() for k, v in kwargs.items()}
        )
        torch.testing.assert_close(got.cpu(), want, atol=1e-2, rtol=1e-2)
        assert not got[6:].cpu().any(), "rows after the last expert group stay zero"


def test_ffn_errors():
    x, w1, w2 = torch.randn(2, 4).half().npu(), torch.randn(4, 6).half().npu(), torch.randn(6, 4).half().npu()
    raises_operator_error(
        lambda: torch_npu.npu_ffn(x, w1, w2, "tanh"),
        "npu_ffn: activation must be one of ['fastgelu', 'geglu', 'gelu', 'reglu', 'relu', 'silu', 'swiglu'], got 'tanh'",
    )
    raises_operator_error(
        lambda: torch_npu.npu_ffn(x, w1, w2, "geglu"),
        "npu_ffn: the activation gives 3 channels, weight2 expects K2 = 6",
    )
    with pytest.raises(RuntimeError, match="npu_ffn: the quantised FFN"):
        torch_npu.npu_ffn(x, w1, w2, "relu", deq_scale1=torch.ones(6).npu())


@pytest.mark.parametrize("kind", ["", "add", "mul", "gelu_erf", "gelu_tanh"])
def test_fused_matmul(kind):
    g = torch.Generator().manual_seed(4)
    x1, x2 = torch.randn(6, 10, generator=g).half(), torch.randn(10, 5, generator=g).half()
    bias, x3 = torch.randn(5, generator=g).half(), torch.randn(6, 5, generator=g).half()
    y = x1.float() @ x2.float() + bias.float()
    want = {
        "": y,
        "add": y + x3.float(),
        "mul": y * x3.float(),
        "gelu_erf": 0.5 * y * (1 + torch.erf(y / math.sqrt(2))),
        "gelu_tanh": 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3))),
    }[kind].half()
    op = lambda a, b, c, d: torch_npu.npu_fused_matmul(a, b, bias=c, x3=d, fused_op_type=kind)  # noqa: E731
    check_op(op, (x1, x2, bias, x3), lambda *a: want, atol=2e-3, rtol=2e-3)
    raises_operator_error(
        lambda: torch_npu.npu_fused_matmul(x1.npu(), x2.npu(), fused_op_type="add"),
        "npu_fused_matmul: fused_op_type 'add' needs x3",
    )
