"""npu_fused_attention_layernorm_qkv_fwd against LayerNorm + three Linear layers (weights = the kernels
transposed) split into heads, as BERT writes it; statistics against torch's (in the kernels' dtype); float16 within rounding."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error


def inputs(dtype, rows=8, hidden=12, bias=True, seed=3):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(rows, hidden, generator=g) * 12 - 6).to(dtype)
    kernels = [(torch.rand(hidden, hidden, generator=g) * 0.2 - 0.1).to(dtype) for _ in range(3)]
    gamma, beta = (torch.rand(hidden, generator=g).to(dtype) for _ in range(2))
    biases = [torch.rand(hidden, generator=g).to(dtype) if bias else None for _ in range(3)]
    return x, kernels, gamma, beta, biases


def bert(x, kernels, gamma, beta, biases, seq_len, num_heads):
    xf = x.float()
    norm = F.layer_norm(xf, (x.shape[1],), gamma.float(), beta.float(), eps=1e-5)
    layers = []
    for kernel, bias in zip(kernels, biases):
        y = F.linear(norm.to(x.dtype).float(), kernel.float().t(), None if bias is None else bias.float())
        b = x.shape[0] // seq_len
        layers.append(y.to(x.dtype).view(b, seq_len, num_heads, -1).permute(0, 2, 1, 3))
    stats = (xf.mean(-1).to(kernels[0].dtype), xf.var(-1, unbiased=False).to(kernels[0].dtype))
    return norm.to(x.dtype), layers, *stats


@pytest.mark.parametrize("dtype, bias", [(torch.float32, True), (torch.float32, False), (torch.float16, True)])
def test_matches_layernorm_and_linear_layers(dtype, bias):
    x, kernels, gamma, beta, biases = inputs(dtype, bias=bias)
    got = torch_npu.npu_fused_attention_layernorm_qkv_fwd(
        x.npu(), *(k.npu() for k in kernels), gamma.npu(), beta.npu(),
        *(None if b is None else b.npu() for b in biases), seq_len=4, num_heads=3,
    )  # fmt: skip
    norm, layers, mean, variance = bert(x, kernels, gamma, beta, biases, 4, 3)
    assert len(got) == 6 and [tuple(t.shape) for t in got[1:4]] == [(2, 3, 4, 4)] * 3
    tol = {"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(got[0].cpu(), norm, **tol)
    for have, want in zip(got[1:4], layers):
        torch.testing.assert_close(have.cpu(), want, **tol)
    assert got[4].dtype == got[5].dtype == dtype
    assert torch.equal(got[4].cpu(), mean) and torch.equal(got[5].cpu(), variance)


def test_under_compile_matches_eager():
    x, kernels, gamma, beta, biases = inputs(torch.float32)
    args = (x.npu(), *(k.npu() for k in kernels), gamma.npu(), beta.npu(), *(b.npu() for b in biases), 4, 3)
    eager = torch_npu.npu_fused_attention_layernorm_qkv_fwd(*args)
    compiled = torch.compile(torch_npu.npu_fused_attention_layernorm_qkv_fwd, backend="aot_eager", fullgraph=True)
    for have, want in zip(compiled(*args), eager):
        assert torch.equal(have.cpu(), want.cpu())


def test_refuses_shapes_that_do_not_split():
    x, kernels, gamma, beta, biases = inputs(torch.float32)
    raises_operator_error(
        lambda: torch_npu.npu_fused_attention_layernorm_qkv_fwd(
            x.npu(), *(k.npu() for k in kernels), gamma.npu(), beta.npu(), seq_len=3, num_heads=3
        ),
        "npu_fused_attention_layernorm_qkv_fwd: x.size(0) should be divisible by seq_len and x.size(1) should be "
        "divisible by num_heads.",
    )
    raises_operator_error(
        lambda: torch_npu.npu_fused_attention_layernorm_qkv_fwd(
            x.npu(),
            kernels[0].npu()[:6],
            kernels[1].npu(),
            kernels[2].npu(),
            gamma.npu(),
            beta.npu(),
            seq_len=4,
            num_heads=3,
        ),
        "npu_fused_attention_layernorm_qkv_fwd: kernel_query must be [12, 12], got (6, 12)",
    )
