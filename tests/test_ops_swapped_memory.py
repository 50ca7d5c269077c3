"""empty_with_swapped_memory: npu tensors over host memory, outside the device's caching allocator."""

import gc

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu


def test_torch_npus_documented_example():
    swapped = torch_npu.empty_with_swapped_memory([2, 2], dtype=torch.float32, device=torch.device("npu:0"))
    tmp = swapped.fill_(3.14)
    out = torch.empty_like(swapped).fill_(1).mul_(tmp)
    assert out.device == torch.device("npu:0") and torch.equal(out.cpu(), torch.full((2, 2), 3.14))


def test_swapped_memory_takes_nothing_from_the_device():
    gc.collect()  # npu tensors of earlier tests in reference cycles are not freed between the two readings
    torch.npu.synchronize()
    before = (torch.npu.memory_allocated(), torch.npu.memory_reserved())
    big = torch_npu.empty_with_swapped_memory([256, 1024], dtype=torch.float16)
    assert (torch.npu.memory_allocated(), torch.npu.memory_reserved()) == before
    big.zero_()
    assert big.device.type == "npu" and big.dtype == torch.float16 and not big.cpu().any()
    del big


def test_survives_its_python_references_and_serves_operators():
    def make():
        return torch_npu.empty_with_swapped_memory((4,), device="npu").fill_(2.0)

    t = make()
    torch_npu.npu_apply_adam_w(0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, t, None, False, False)
    assert torch.equal((t * 3).cpu(), torch.full((4,), 6.0))


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: torch_npu.empty_with_swapped_memory([2], device="cpu"),
            "empty_with_swapped_memory makes npu tensors, got device cpu",
        ),
        (
            lambda: torch_npu.empty_with_swapped_memory([-1]),
            "empty_with_swapped_memory: sizes must be non-negative, got [-1]",
        ),
    ],
)
def test_bad_inputs(call, message):
    raises_operator_error(call, message)
