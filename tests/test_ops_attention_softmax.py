"""npu_attn_softmax_ / npu_attn_softmax_backward_ against softmax and autograd of softmax(x) @ v (the reference
torch_npu's own test uses), in place, compiled, and fp16 rounded once."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_softmax_and_its_backward_in_place(dtype):
    g = torch.Generator().manual_seed(5)
    logits, dy, v = torch.randn(3, 6, 8, generator=g), torch.randn(3, 6, 4, generator=g), torch.randn(3, 8, 4, generator=g)  # fmt: skip
    leaf = logits.to(dtype).float().requires_grad_(True)
    probs = torch.softmax(leaf, -1)
    (probs @ v.to(dtype).float()).backward(dy.to(dtype).float())
    buffer = logits.to(dtype).npu()
    assert torch_npu.npu_attn_softmax_(buffer) is buffer
    assert torch.equal(buffer.cpu(), probs.detach().to(dtype))
    out = torch_npu.npu_attn_softmax_backward_(buffer, dy.to(dtype).npu(), v.to(dtype).npu())
    assert out is buffer
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(buffer.cpu().float(), leaf.grad, **tol)


def test_compiled_in_place_calls_equal_eager():
    x = torch.randn(2, 5, 7).npu()
    dy, v = torch.randn(2, 5, 3).npu(), torch.randn(2, 7, 3).npu()

    def step(t):
        torch_npu.npu_attn_softmax_(t)
        torch_npu.npu_attn_softmax_backward_(t, dy, v)
        return t

    torch._dynamo.reset()
    eager, compiled = step(x.clone()), torch.compile(step, backend="aot_eager", fullgraph=True)(x.clone())
    assert torch.equal(eager.cpu(), compiled.cpu())


def test_backward_shape_error():
    raises_operator_error(
        lambda: torch_npu.npu_attn_softmax_backward_(
            torch.randn(2, 5, 7).npu(), torch.randn(2, 4, 3).npu(), torch.randn(2, 7, 3).npu()
        ),  # fmt: skip
        "npu_attn_softmax_backward_: grad_output (2, 4, 3) and values (2, 7, 3) do not fit self (2, 5, 7)",
    )
