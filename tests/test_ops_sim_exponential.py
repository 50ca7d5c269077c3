"""npu_sim_exponential_: exponential draws from the npu generator (seeded, reproducible, the CPU's
distribution), lambd = inf giving zeros, and torch_npu's error for lambd <= 0."""

import math

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu


def test_draws_follow_the_exponential_distribution_and_the_npu_seed():
    x = torch.empty(200_000, device="npu")
    torch.npu.manual_seed(7)
    first = torch_npu.npu_sim_exponential_(x, 2.5).cpu().clone()
    assert first.min() >= 0
    # mean 1/lambda, and P(X > t) = exp(-lambda t)
    assert abs(first.mean().item() - 0.4) < 0.01
    assert abs((first > 0.5).float().mean().item() - math.exp(-1.25)) < 0.01
    torch.npu.manual_seed(7)
    again = torch_npu.npu_sim_exponential_(torch.empty(200_000, device="npu"), 2.5).cpu()
    assert torch.equal(first, again)


def test_a_generator_argument_is_used_and_advanced():
    gen = torch.Generator(device="npu")
    gen.manual_seed(3)
    a = torch_npu.npu_sim_exponential_(torch.empty(16, device="npu"), generator=gen).cpu()
    b = torch_npu.npu_sim_exponential_(torch.empty(16, device="npu"), generator=gen).cpu()
    gen.manual_seed(3)
    assert torch.equal(torch_npu.npu_sim_exponential_(torch.empty(16, device="npu"), generator=gen).cpu(), a)
    assert not torch.equal(a, b)


def test_infinite_rate_gives_zeros_in_place():
    x = torch.ones(4, dtype=torch.float16, device="npu")
    out = torch_npu.npu_sim_exponential_(x, float("inf"))
    assert out.data_ptr() == x.data_ptr() and not x.cpu().any()


@pytest.mark.parametrize("lambd", [0.0, -1.0])
def test_non_positive_rate_is_refused(lambd):
    raises_operator_error(
        lambda: torch_npu.npu_sim_exponential_(torch.ones(3, device="npu"), lambd),
        f"npu_sim_exponential_ expects lambd > 0.0, but found lambd={lambd}",
    )
