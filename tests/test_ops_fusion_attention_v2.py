"""npu_fusion_attention_v2 against an autograd reference written here: rotary parts joined head by head,
the position bias before (pse_type 1) or after (pse_type 0) the scale, gradients for every tensor input
(the rope parts and pse included), and dropout matching npu_fusion_attention's for the same seed."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

torch.manual_seed(0)
B, S, N, D, DR, SCALE = 2, 6, 2, 8, 4, 0.3


def heads(x, layout, width):
    return x.view(B, S, N, width).transpose(1, 2) if layout == "BSH" else x


def reference(q, k, v, qr, kr, pse, pse_type, layout):
    qq = torch.cat([heads(q, layout, D), heads(qr, layout, DR)], -1)
    kk = torch.cat([heads(k, layout, D), heads(kr, layout, DR)], -1)
    scores = qq @ kk.transpose(-1, -2)
    scores = SCALE * (scores + pse) if pse_type == 1 else SCALE * scores + pse
    out = torch.softmax(scores, -1) @ heads(v, layout, D)
    return out.transpose(1, 2).reshape(B, S, N * D) if layout == "BSH" else out


@pytest.mark.parametrize("layout", ["BSH", "BNSD"])
@pytest.mark.parametrize("pse_type", [0, 1])
def test_v2_forward_and_gradients(layout, pse_type):
    shape = (lambda w: (B, S, N * w)) if layout == "BSH" else (lambda w: (B, N, S, w))
    tensors = [
        torch.randn(shape(D)),
        torch.randn(shape(D)),
        torch.randn(shape(D)),
        torch.randn(shape(DR)),
        torch.randn(shape(DR)),
    ]
    tensors.append(torch.randn(B, N, S, S))
    cpu = [t.clone().requires_grad_() for t in tensors]
    npu = [t.npu().requires_grad_() for t in tensors]
    want = reference(*cpu, pse_type, layout)
    got = torch_npu.npu_fusion_attention_v2(
        *npu[:3], N, layout, query_rope=npu[3], key_rope=npu[4], pse=npu[5], pse_type=pse_type, scale=SCALE
    )[0]
    torch.testing.assert_close(got.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    weight = torch.randn(want.shape)
    (want * weight).sum().backward()
    (got * weight.npu()).sum().backward()
    for name, c, n in zip(("query", "key", "value", "query_rope", "key_rope", "pse"), cpu, npu):
        assert n.grad is not None, name
        torch.testing.assert_close(n.grad.cpu(), c.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_v2_dropout_is_npu_fusion_attentions_for_the_same_seed():
    q, k, v = (torch.randn(B, S, N * D).npu().requires_grad_() for _ in range(3))
    v2 = torch_npu.npu_fusion_attention_v2(q, k, v, N, "BSH", scale=SCALE, keep_prob=0.7, seed=1234)
    v2[0].sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    v1 = torch_npu.npu_fusion_attention(q, k, v, N, "BSH", scale=SCALE, keep_prob=0.7, seed=1234)
    v1[0].sum().backward()
    assert torch.equal(v2[0].cpu(), v1[0].cpu())
    for g, t in zip(grads, (q, k, v)):
        assert torch.equal(g.cpu(), t.grad.cpu())


def test_v2_refuses_kernel_generated_alibi():
    q = torch.randn(B, S, N * D, device="npu")
    raises_operator_error(
        lambda: torch_npu.npu_fusion_attention_v2(q, q, q, N, "BSH", pse=torch.ones(N, device="npu"), pse_type=2),
        "npu_fusion_attention_v2: pse_type=2: ALiBi biases generated inside the kernel (pse_type 2, 3) are not "
        "supported on vnpu; pass the bias itself with pse_type 0 or 1",
    )
