"""batch_norm_reduce against per-channel sums written here, and copy_memory_ (operator and Tensor method)."""

import pytest
import torch

import torch_npu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
def test_batch_norm_reduce_sums_every_channel_in_float32(dtype, shape):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    total, squares = torch_npu.batch_norm_reduce(x.npu(), 1e-5)
    channels = x.float().transpose(0, 1).reshape(x.shape[1], -1)
    assert total.dtype == squares.dtype == torch.float32 and total.shape == (x.shape[1],)
    torch.testing.assert_close(total.cpu(), channels.sum(1), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(squares.cpu(), (channels * channels).sum(1), rtol=1e-6, atol=1e-4)


def test_batch_norm_reduce_needs_a_channel_dimension():
    with pytest.raises(RuntimeError, match="^batch_norm_reduce: input must have a channel dimension"):
        torch_npu.batch_norm_reduce(torch.ones(4, device="npu"), 1e-5)


def test_copy_memory_copies_elements_and_is_a_tensor_method():
    dst = torch.zeros(3, 4, device="npu")
    src = torch.arange(12.0, device="npu")
    assert torch_npu.copy_memory_(dst, src) is dst
    assert torch.equal(dst.cpu(), torch.arange(12.0).view(3, 4))
    other = torch.zeros(12, device="npu")
    assert other.copy_memory_(src.flip(0)) is other and torch.equal(other.cpu(), torch.arange(11.0, -1, -1))


@pytest.mark.parametrize(
    "dst, src, message",
    [
        (torch.zeros(3), torch.zeros(3), r"copy_memory_ only supports npu tensors, got cpu and npu:0"),
        ("npu", torch.zeros(3, dtype=torch.int32), "self and src must have one dtype"),
        ("npu", torch.zeros(4), "self has 3 elements, src has 4"),
    ],
)
def test_copy_memory_refuses_mismatches(dst, src, message):
    target = torch.zeros(3, device="npu") if isinstance(dst, str) else dst
    before = target.clone()
    with pytest.raises(RuntimeError, match=f"^copy_memory_: {message}"):
        torch_npu.copy_memory_(target, src.npu())
    assert torch.equal(target.cpu(), before.cpu())
