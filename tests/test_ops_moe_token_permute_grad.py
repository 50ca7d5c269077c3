"""The MoE token permute / unpermute backward operators (and the forms _v2 take) against autograd of the
forwards written here with index arithmetic; npu_moe_token_unpermute is differentiable through them."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

T, H, TOPK, E = 6, 4, 2, 3


def _routing(seed):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randperm(E, generator=g)[:TOPK] for _ in range(T)]).to(torch.int32)
    return g, indices


def permute_reference(tokens, indices, num_out):
    order = torch.argsort(indices.reshape(-1), stable=True)
    return tokens[order[:num_out] // TOPK], torch.argsort(order).to(torch.int32)


@pytest.mark.parametrize("num_out", [T * TOPK, T * TOPK - 3])
def test_permute_grads(num_out):
    g, indices = _routing(num_out)
    tokens = torch.randn(T, H, generator=g, requires_grad=True)
    permuted, sorted_indices = permute_reference(tokens, indices, num_out)
    upstream = torch.randn(permuted.shape, generator=g)
    permuted.backward(upstream)
    v1 = torch_npu.npu_moe_token_permute_grad(tokens.detach().npu(), upstream.npu(), indices.npu(), sorted_indices.npu())  # fmt: skip
    v2 = torch_npu.npu_moe_token_permute_grad_v2(upstream.npu(), sorted_indices.npu(), T, torch.float32, TOPK)
    torch.testing.assert_close(v1.cpu(), tokens.grad)
    assert torch.equal(v1, v2)


@pytest.mark.parametrize("num_out", [T * TOPK, T * TOPK - 3])
def test_unpermute_grads_and_autograd(num_out):
    g, indices = _routing(10 + num_out)
    permuted = torch.randn(num_out, H, generator=g, requires_grad=True)
    probs = torch.rand(T, TOPK, generator=g, requires_grad=True)
    sorted_indices = permute_reference(torch.zeros(T, H), indices, num_out)[1]
    rows = torch.cat([permuted, torch.zeros(1, H)])[sorted_indices.long().clamp(max=num_out)]
    want = (rows.view(T, TOPK, H) * probs.unsqueeze(-1)).sum(1)
    upstream = torch.randn(T, H, generator=g)
    want.backward(upstream)
    dp, dprobs = torch_npu.npu_moe_token_unpermute_grad(
        permuted.detach().npu(), upstream.npu(), sorted_indices.npu(), probs.detach().npu()
    )
    torch.testing.assert_close(dp.cpu(), permuted.grad)
    torch.testing.assert_close(dprobs.cpu(), probs.grad)
    v2 = torch_npu.npu_moe_token_unpermute_grad_v2(
        upstream.npu(), sorted_indices.npu(), num_out, torch.float32, probs=probs.detach().npu(),
        permuted_tokens=permuted.detach().npu(),
    )  # fmt: skip
    assert torch.equal(v2[0], dp) and torch.equal(v2[1], dprobs)
    leaves = [permuted.detach().npu().requires_grad_(True), probs.detach().npu().requires_grad_(True)]
    out = torch_npu.npu_moe_token_unpermute(leaves[0], sorted_indices.npu(), leaves[1])
    torch.testing.assert_close(out.detach().cpu(), want.detach())
    out.backward(upstream.npu())
    torch.testing.assert_close(leaves[0].grad.cpu(), permuted.grad)
    torch.testing.assert_close(leaves[1].grad.cpu(), probs.grad)


def test_errors():
    g, indices = _routing(0)
    raises_operator_error(
        lambda: torch_npu.npu_moe_token_permute_grad_v2(
            torch.zeros(12, H).npu(), torch.zeros(10, dtype=torch.int32).npu(), T, torch.float32, TOPK
        ),  # fmt: skip
        "npu_moe_token_permute_grad_v2: sorted_indices holds 10 routes, 6 tokens x top-2 need 12",
    )
    raises_operator_error(
        lambda: torch_npu.npu_moe_token_unpermute_grad_v2(
            torch.zeros(T, H).npu(),
            torch.zeros(12, dtype=torch.int32).npu(),
            12,
            torch.float32,
            probs=torch.ones(T, TOPK).npu(),
        ),  # fmt: skip
        "npu_moe_token_unpermute_grad_v2: the gradient of probs needs permuted_tokens",
    )
