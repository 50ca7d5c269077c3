"""npu_sub_sample (balanced positive / negative sampling; counts as torch_npu's own test states them) and
npu_scatter_list(_) (one slice write per tensor of a list, against the loop torch_npu's test writes)."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


@pytest.mark.parametrize("seed", range(6))
def test_sub_sample_keeps_the_documented_counts(seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(-1, 2, (40,), generator=g, dtype=torch.int32)
    per_images, fraction = 12, 0.25
    torch.npu.manual_seed(seed)
    out = torch_npu.npu_sub_sample(labels.npu(), per_images, fraction).cpu()
    pos, neg = int((labels == 1).sum()), int((labels == 0).sum())
    want_pos = min(pos, int(per_images * fraction))
    assert int((out == 1).sum()) == want_pos
    assert int((out == 0).sum()) == min(neg, per_images - want_pos)
    kept = out != -1
    assert torch.equal(out[kept], labels[kept]) and out.dtype == torch.int32


def test_sub_sample_draws_from_the_device_generator():
    labels = torch.randint(0, 2, (64,), dtype=torch.int32).npu()
    torch.npu.manual_seed(3)
    first = torch_npu.npu_sub_sample(labels, 16, 0.5)
    torch.npu.manual_seed(3)
    assert torch.equal(torch_npu.npu_sub_sample(labels, 16, 0.5), first)


def loop_reference(tensors, indices, updates, mask, axis):
    out = [t.clone() for t in tensors]
    for i, t in enumerate(out):
        if mask is not None and int(mask[i]) == 0:
            continue
        start, count = int(indices[i]), updates.shape[axis]
        t.narrow(t.dim() + axis, start, count).copy_(updates[i])
    return out


@pytest.mark.parametrize("axis", [-2, -1])
def test_scatter_list_against_the_loop(axis):
    g = torch.Generator().manual_seed(8)
    tensors = [torch.randn(2, 10, 12, generator=g, dtype=torch.float16) for _ in range(4)]
    indices = torch.tensor([0, 3, 7, 4], dtype=torch.int32)
    update_shape = (4, 2, 3, 12) if axis == -2 else (4, 2, 10, 2)
    updates = torch.randn(update_shape, generator=g).half()
    mask = torch.tensor([1, 0, 1, 1], dtype=torch.uint8)
    want = loop_reference(tensors, indices, updates, mask, axis)
    npu_tensors = [t.npu() for t in tensors]
    got = torch_npu.npu_scatter_list(npu_tensors, indices.npu(), updates.npu(), mask.npu(), "update", axis)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got, want))
    assert all(torch.equal(a.cpu(), b) for a, b in zip(npu_tensors, tensors)), "the functional form copies"
    torch_npu.npu_scatter_list_(npu_tensors, indices.npu(), updates.npu(), mask.npu(), "update", axis)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(npu_tensors, want))


def test_scatter_list_compiles_and_refuses_bad_arguments():
    tensors = [torch.zeros(2, 8, 4).npu() for _ in range(2)]
    indices, updates = torch.tensor([1, 5], dtype=torch.int32).npu(), torch.ones(2, 2, 1, 4).npu()

    def write(a, b):
        torch_npu.npu_scatter_list_([a, b], indices, updates)
        return a + b

    torch._dynamo.reset()
    compiled = torch.compile(write, backend="aot_eager", fullgraph=True)(*[t.clone() for t in tensors])
    assert torch.equal(compiled.cpu(), write(*tensors).cpu())
    raises_operator_error(
        lambda: torch_npu.npu_scatter_list(tensors, indices, updates, reduce="add"),
        "npu_scatter_list: reduce must be 'update', got 'add'",
    )
    raises_operator_error(
        lambda: torch_npu.npu_scatter_list(tensors, indices, updates, axis=0),
        "npu_scatter_list: axis must be -1 or -2, got 0",
    )
