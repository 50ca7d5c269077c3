"""npu_quant_fusion_attention against op-plugin's golden (per-block dequantisation, exp(s - max) rounded through
float8_e4m3fn, the sum of the rounded probabilities), GQA and layouts; the backward against autograd of the
dequantised attention."""

import math

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def block_scales(t, block):
    """1 / (448 / max|block|) per block of rows of t [B, N, S, D] -> [B, N, ceil(S / block), 1]."""
    b, n, s, _ = t.shape
    out = torch.empty(b, n, math.ceil(s / block), 1)
    for i in range(out.shape[2]):
        out[:, :, i, 0] = t[:, :, i * block : (i + 1) * block].abs().amax((-1, -2)) / 448.0
    return out


def quantised(t, d_scale, block):
    factor = d_scale.repeat_interleave(block, 2)[:, :, : t.shape[2]]
    return (t / factor).to(torch.float8_e4m3fn), factor


def golden(q8, k8, v8, fq, fk, fv, scale):
    q, k, v = q8.float() * fq, k8.float() * fk, v8.float() * fv
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(2, 3) * scale
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m).to(torch.float8_e4m3fn).float()
    return (p @ v) / p.sum(-1, keepdim=True), m, p.sum(-1, keepdim=True)


def inputs(n1=4, n2=2, s=300, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(1, n1, s, d, generator=g), torch.randn(1, n2, s, d, generator=g), torch.randn(1, n2, s, d, generator=g)  # fmt: skip
    dq, dk, dv = block_scales(q, 128), block_scales(k, 256), block_scales(v, 256)
    (q8, fq), (k8, fk), (v8, fv) = quantised(q, dq, 128), quantised(k, dk, 256), quantised(v, dv, 256)
    return (q8, k8, v8), (dq, dk, dv), (fq, fk, fv)


@pytest.mark.parametrize("layout", ["BNSD", "BSND"])
def test_forward_matches_the_golden(layout):
    (q8, k8, v8), (dq, dk, dv), factors = inputs()
    want, m, total = golden(q8, k8, v8, *factors, 0.088)
    to = (lambda t: t.transpose(1, 2).contiguous()) if layout == "BSND" else (lambda t: t)
    out, smax, ssum, empty, seed, offset, numels = torch_npu.npu_quant_fusion_attention(
        to(q8).npu(), to(k8).npu(), to(v8).npu(), 4, layout, d_scale_q=dq.npu(), d_scale_k=dk.npu(),
        d_scale_v=dv.npu(), scale=0.088,
    )  # fmt: skip
    assert out.dtype == torch.float16 and empty.numel() == 0 and (seed, offset, numels) == (0, 0, 0)
    torch.testing.assert_close(out.cpu().float(), to(want).half().float(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(smax.cpu(), m.expand(*m.shape[:-1], 8), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ssum.cpu(), total.expand(*total.shape[:-1], 8), rtol=1e-5, atol=1e-5)


def test_backward_is_the_gradient_of_the_dequantised_attention():
    (q8, k8, v8), (dq, dk, dv), (fq, fk, fv) = inputs(s=200, seed=1)
    dy = torch.randn(1, 4, 200, 32, generator=torch.Generator().manual_seed(2))
    d_scale_dy = block_scales(dy, 128)
    dy8, fdy = quantised(dy, d_scale_dy, 128)
    leaves = [(t8.float() * f).requires_grad_(True) for t8, f in ((q8, fq), (k8, fk), (v8, fv))]
    k, v = (t.repeat_interleave(2, 1) for t in leaves[1:])
    (torch.softmax(leaves[0] @ k.transpose(2, 3) * 0.1, -1) @ v).backward(dy8.float() * fdy)
    grads = torch_npu.npu_quant_fusion_attention_backward(
        q8.npu(), k8.npu(), v8.npu(), dy8.npu(), 4, "BNSD", dq.npu(), dk.npu(), dv.npu(), d_scale_dy.npu(),
        scale_value=0.1,
    )  # fmt: skip
    for got, leaf in zip(grads[:3], leaves):
        torch.testing.assert_close(got.cpu().float(), leaf.grad.half().float(), rtol=2e-3, atol=2e-3)
    assert all(t.numel() == 0 for t in grads[3:])


def test_refuses_scales_of_the_wrong_block_count():
    (q8, k8, v8), (dq, dk, dv), _ = inputs()
    raises_operator_error(
        lambda: torch_npu.npu_quant_fusion_attention(
            q8.npu(), k8.npu(), v8.npu(), 4, "BNSD", d_scale_q=dk.npu(), d_scale_k=dk.npu(), d_scale_v=dv.npu()
        ),  # fmt: skip
        "npu_quant_fusion_attention: d_scale_q must be [1, 4, blocks, 1], got (1, 2, 2, 1)",
    )
