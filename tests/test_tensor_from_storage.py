"""torch_npu._C._tensor_construct_from_storage: the tensor an npu storage was made for (its storage
descriptor's base sizes and dtype), as torch_npu's storage helpers and NZ-weight loaders read it."""

import copy
import io
import warnings

import pytest
import torch

import torch_npu

C = torch_npu._C


def _nz(shape, dtype=torch.float16):
    return torch_npu.npu_format_cast(torch.randn(*shape, device="npu").to(dtype), 29)


def test_a_formatted_storage_gives_its_base_tensor():
    w = _nz((48, 40))
    t = C._tensor_construct_from_storage(w.untyped_storage())
    assert (t.shape, t.dtype, t.device) == (torch.Size([48, 40]), torch.float16, w.device)
    assert t.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
    assert torch.equal(t.cpu(), w.cpu())
    # a view shares the storage, so the descriptor is the base's
    assert C._tensor_construct_from_storage(w.reshape(-1)[5:].untyped_storage()).shape == (48, 40)


def test_the_base_survives_clone_deepcopy_and_save_load():
    w = _nz((32, 16), torch.float32)
    buffer = io.BytesIO()
    torch.save(w, buffer)
    buffer.seek(0)
    for copied in (w.clone(), copy.deepcopy(w), torch.load(buffer)):
        t = C._tensor_construct_from_storage(copied.untyped_storage())
        assert (t.shape, t.dtype) == (torch.Size([32, 16]), torch.float32)
        assert torch.equal(t.cpu(), w.cpu()) and torch_npu.get_npu_format(copied) == 29


def test_a_storage_without_a_descriptor_gives_its_elements():
    x = torch.arange(6.0, device="npu").view(2, 3)
    raw = C._tensor_construct_from_storage(x.untyped_storage())
    assert (raw.shape, raw.dtype) == (torch.Size([24]), torch.uint8)
    assert raw.cpu().numpy().tobytes() == x.cpu().numpy().tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated
        typed = C._tensor_construct_from_storage(x.storage())
    assert (typed.shape, typed.dtype) == (torch.Size([6]), torch.float32) and torch.equal(typed.cpu(), x.cpu().view(-1))


def test_a_storage_made_on_its_own_gives_its_bytes_or_its_typed_elements():
    raw = C._tensor_construct_from_storage(torch.UntypedStorage(24, device="npu"))
    assert (raw.shape, raw.dtype) == (torch.Size([24]), torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated
        typed = C._tensor_construct_from_storage(torch.TypedStorage(6, dtype=torch.float32, device="npu"))
    assert (typed.shape, typed.dtype) == (torch.Size([6]), torch.float32)


def test_reused_memory_forgets_the_old_base():
    w = _nz((64, 64))
    address = w.untyped_storage().data_ptr()
    del w
    held = []  # same-sized allocations until one gets the cached block back (others may be cached too)
    while not held or held[-1].untyped_storage().data_ptr() != address:
        assert len(held) < 256, "the freed block was not handed out again"
        held.append(torch.empty(64 * 64, dtype=torch.float16, device="npu"))
    assert C._tensor_construct_from_storage(held[-1].untyped_storage()).shape == (64 * 64 * 2,)


def test_bad_sources_raise():
    with pytest.raises(RuntimeError, match="^_tensor_construct_from_storage expects an npu storage, got one on cpu"):
        C._tensor_construct_from_storage(torch.ones(2).untyped_storage())
    with pytest.raises(
        TypeError, match="^_tensor_construct_from_storage\\(\\): argument 'source' must be Storage, not int"
    ):
        C._tensor_construct_from_storage(3)
