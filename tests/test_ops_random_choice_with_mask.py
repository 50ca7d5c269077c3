"""npu_random_choice_with_mask: a random order of the true elements' indices, padded and masked to count,
reproducible from its seeds or from the npu generator."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu


def test_returns_every_true_index_once_in_some_order():
    x = torch.rand(5, 6) > 0.4
    y, mask = torch_npu.npu_random_choice_with_mask(x.npu(), 0)
    want = torch.nonzero(x).tolist()
    assert y.dtype == torch.int32 and y.shape == (len(want), 2) and mask.cpu().all()
    assert sorted(y.cpu().tolist()) == sorted(want)


def test_pads_with_zero_rows_masked_out_when_count_exceeds_the_true_elements():
    x = torch.tensor([1, 0, 1, 0], dtype=torch.bool)
    y, mask = torch_npu.npu_random_choice_with_mask(x.npu(), 5)
    assert mask.cpu().tolist() == [True, True, False, False, False]
    assert sorted(y.cpu()[:2].flatten().tolist()) == [0, 2] and not y.cpu()[2:].any()


def test_seeds_fix_the_order_and_the_npu_generator_otherwise():
    x = (torch.rand(64) > 0.3).npu()
    first = torch_npu.npu_random_choice_with_mask(x, 16, 3, 1)[0].cpu()
    assert torch.equal(torch_npu.npu_random_choice_with_mask(x, 16, 3, 1)[0].cpu(), first)
    assert not torch.equal(torch_npu.npu_random_choice_with_mask(x, 16, 4, 1)[0].cpu(), first)
    torch.npu.manual_seed(11)
    a = torch_npu.npu_random_choice_with_mask(x, 16)[0].cpu()
    torch.npu.manual_seed(11)
    assert torch.equal(torch_npu.npu_random_choice_with_mask(x, 16)[0].cpu(), a)


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: torch_npu.npu_random_choice_with_mask(torch.ones(1, 1, 1, 1, 1, 1, dtype=torch.bool, device="npu")),
            "npu_random_choice_with_mask: x must have 1 to 5 dimensions, got 6",
        ),
        (
            lambda: torch_npu.npu_random_choice_with_mask(torch.ones(3, dtype=torch.bool, device="npu"), -1),
            "npu_random_choice_with_mask: count, seed and seed2 must be non-negative",
        ),
    ],
)
def test_random_choice_invalid_arguments(call, message):
    raises_operator_error(call, message)
