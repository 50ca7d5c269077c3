"""npu_grouped_matmul_add(_): per-expert x.T @ dy accumulated in float32 — checked as what it is used for,
the weight gradient of a grouped (MoE expert) matmul, against autograd of the per-expert products."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

torch.manual_seed(0)


def expert_weight_grads(x, dy, counts):
    """Autograd's gradient of sum_g <x_g @ W_g, dy_g> with respect to each W_g, in float32."""
    weights = torch.zeros(len(counts), x.shape[1], dy.shape[1], requires_grad=True)
    out, start = [], 0
    for g, n in enumerate(counts):
        out.append(x[start : start + n].float() @ weights[g])
        start += n
    (torch.cat(out) * dy.float()).sum().backward()
    return weights.grad


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_accumulates_each_experts_weight_gradient(group_list_type):
    counts = [4, 0, 5, 3]
    x, dy = torch.randn(12, 6).bfloat16(), torch.randn(12, 5).bfloat16()
    group_list = torch.tensor(counts).cumsum(0) if group_list_type == 0 else torch.tensor(counts)
    start = torch.randn(4, 6, 5)
    out = torch_npu.npu_grouped_matmul_add_(
        start.npu(), x.npu(), dy.npu(), group_list.npu(), group_list_type=group_list_type
    )
    torch.testing.assert_close(out.cpu(), start + expert_weight_grads(x, dy, counts), atol=1e-5, rtol=1e-5)


def test_functional_form_leaves_self_and_accepts_a_flat_output():
    x, dy = torch.randn(7, 3).half(), torch.randn(7, 2).half()
    y = torch.zeros(2 * 3, 2, device="npu")
    out = torch_npu.npu_grouped_matmul_add(y, x.npu(), dy.npu(), torch.tensor([2, 7]).npu())
    assert not y.cpu().any() and out.shape == (6, 2)
    torch.testing.assert_close(out.cpu().view(2, 3, 2), expert_weight_grads(x, dy, [2, 5]), atol=1e-5, rtol=1e-5)


def test_grouped_matmul_add_groups_along_k_only():
    raises_operator_error(
        lambda: torch_npu.npu_grouped_matmul_add(
            torch.zeros(1, 2, 2, device="npu"),
            torch.randn(3, 2, device="npu").half(),
            torch.randn(3, 2, device="npu").half(),
            torch.tensor([3], device="npu"),
            group_type=0,
        ),
        "npu_grouped_matmul_add: group_type must be 2 (groups along K), got 0",
    )
