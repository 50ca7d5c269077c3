"""npu_moe_gating_top_k_backward against autograd through npu_moe_gating_top_k's routing weights."""

import pytest
import torch

import torch_npu


@pytest.mark.parametrize("norm_type, groups", [(0, 1), (1, 1), (1, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_matches_autograd_of_the_forward(norm_type, groups, dtype):
    g = torch.Generator().manual_seed(norm_type * 10 + groups)
    logits = torch.randn(6, 16, generator=g).to(dtype)
    grad_y = torch.randn(6, 4, generator=g).to(dtype)
    kwargs = {"norm_type": norm_type, "routed_scaling_factor": 2.5, "group_count": groups, "k_group": min(2, groups)}
    x = logits.npu().requires_grad_()
    weights, idx, scores = torch_npu.npu_moe_gating_top_k(x, 4, out_flag=True, **kwargs)
    (want,) = torch.autograd.grad(weights, x, grad_y.npu())
    got = torch_npu.npu_moe_gating_top_k_backward(
        scores.detach(), grad_y.npu(), idx, norm_type=norm_type, routed_scaling_factor=2.5
    )
    assert got.dtype == dtype and got.shape == logits.shape
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(got.cpu().float(), want.cpu().float(), **tolerance)


def test_backward_errors():
    scores = torch.rand(2, 8, device="npu")
    idx = torch.zeros(2, 2, dtype=torch.int32, device="npu")
    with pytest.raises(RuntimeError, match="^npu_moe_gating_top_k_backward: renorm must be 0"):
        torch_npu.npu_moe_gating_top_k_backward(scores, torch.ones(2, 2, device="npu"), idx, renorm=1)
    with pytest.raises(RuntimeError, match=r"grad_y and expertIdx must both be \[tokens=2, k\]"):
        torch_npu.npu_moe_gating_top_k_backward(scores, torch.ones(2, 3, device="npu"), idx)
