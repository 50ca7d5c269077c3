"""torch_npu._C._empty_strided_npu, compiled code's allocation fast path: the tensor torch.empty_strided makes on
the current npu device (shape, strides, dtype, storage size), from the caching allocator."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

CASES = [
    ((2, 3), (3, 1), torch.float32),
    ((4, 5), (10, 1), torch.float16),  # rows padded
    ((3, 4), (0, 1), torch.int32),  # broadcast over rows
    ((0, 3, 0), (0, 0, 0), torch.float32),
    ((2, 2, 2), (4, 2, 1), torch.bool),
    ((), (), torch.int8),
]


@pytest.mark.parametrize("sizes,strides,dtype", CASES)
def test_the_tensor_is_the_one_empty_strided_makes(sizes, strides, dtype):
    fast = torch_npu._C._empty_strided_npu(sizes, strides, dtype)
    usual = torch.empty_strided(sizes, strides, dtype=dtype, device="npu")
    assert (fast.shape, fast.stride(), fast.dtype, fast.device) == (
        usual.shape,
        usual.stride(),
        usual.dtype,
        usual.device,
    )
    assert fast.untyped_storage().nbytes() == usual.untyped_storage().nbytes()
    assert fast.storage_offset() == 0


def test_memory_comes_from_the_caching_allocator_of_the_current_device():
    previous = torch.npu.current_device()
    try:
        torch.npu.set_device(1)
        before = torch.npu.memory_allocated(1)
        usual = torch.empty_strided((256, 256), (256, 1), device="npu:1")
        block = torch.npu.memory_allocated(1) - before  # the request rounded as the card's allocator rounds it
        t = torch_npu._C._empty_strided_npu((256, 256), (256, 1), torch.float32)
        assert t.device == torch.device("npu", 1)
        assert torch.npu.memory_allocated(1) - before == 2 * block >= 2 * 256 * 256 * 4
        del usual
        t.fill_(2.0)
        assert torch.equal(t.cpu(), torch.full((256, 256), 2.0))
        del t
        assert torch.npu.memory_allocated(1) == before
    finally:
        torch.npu.set_device(previous)


def test_bad_arguments():
    raises_operator_error(
        lambda: torch_npu._C._empty_strided_npu((2, 3), (1,), torch.float32),
        "_empty_strided_npu: 2 sizes but 1 strides",
    )
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative dimension -1: \[-1, 3\]$"):
        torch_npu._C._empty_strided_npu((-1, 3), (3, 1), torch.float32)
