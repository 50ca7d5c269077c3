"""Sparse COO tensors on npu, as torch_npu has them: built there (copied from the CPU, from npu members,
empty, or as an operator's sparse result) and taken apart again; any operator that would compute on one
raises torch_npu's CAUTION error naming the operator."""

import pytest
import torch

import torch_npu  # noqa: F401


def caution(op):
    return f"CAUTION: The operator '{op}' is not currently supported on the NPU backend."


def test_a_coo_tensor_copied_to_npu_keeps_its_members_and_comes_back_equal():
    on_cpu = torch.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]]).to_sparse()
    on_npu = on_cpu.npu()
    assert on_npu.layout == torch.sparse_coo and on_npu.device.type == "npu"
    assert (on_npu._nnz(), on_npu.sparse_dim(), on_npu.dense_dim(), on_npu.is_coalesced()) == (3, 2, 0, True)
    for member in ("_indices", "_values", "indices", "values"):
        got = getattr(on_npu, member)()
        assert got.device.type == "npu" and torch.equal(got.cpu(), getattr(on_cpu, member)())
    back = on_npu.cpu()
    assert back.layout == torch.sparse_coo and torch.equal(back.to_dense(), on_cpu.to_dense())


def test_coo_tensors_built_on_npu():
    indices = torch.tensor([[2, 0, 2]], device="npu")
    built = torch.sparse_coo_tensor(indices, torch.ones(3, 2, device="npu"), (4, 2), check_invariants=True)
    assert built.device.type == "npu" and not built.is_coalesced() and built.dense_dim() == 1
    assert torch.equal(
        built.cpu().to_dense(), torch.sparse_coo_tensor(indices.cpu(), torch.ones(3, 2), (4, 2)).to_dense()
    )
    empty = torch.empty(2, 3, layout=torch.sparse_coo, device="npu")
    assert empty.shape == (2, 3) and empty._nnz() == 0 and empty.device.type == "npu"
    result = torch.eye(3, device="npu").to_sparse()  # an operator's sparse result, copied to npu
    assert result.device.type == "npu" and torch.equal(result.cpu().to_dense(), torch.eye(3))
    copy = torch.empty(0, layout=torch.sparse_coo, device="npu").copy_(result)
    assert torch.equal(copy.cpu().to_dense(), torch.eye(3)) and copy._values().device.type == "npu"
    grad_of = torch.nn.Embedding(5, 2, sparse=True).npu()
    grad_of(torch.tensor([1, 3, 1], device="npu")).sum().backward()
    grad = grad_of.weight.grad
    assert grad.layout == torch.sparse_coo and grad.device.type == "npu"
    assert torch.equal(grad.cpu().to_dense()[:, 0], torch.tensor([0.0, 2.0, 0.0, 1.0, 0.0]))


@pytest.mark.parametrize(
    ("compute", "op"),
    [
        (lambda s: s + s, "aten::add.Tensor"),
        (lambda s: s.coalesce(), "aten::_coalesce"),
        (lambda s: s.to_dense(), "aten::_to_dense"),
    ],
)
def test_computing_on_a_coo_npu_tensor_raises_torch_npus_error(compute, op):
    s = torch.sparse_coo_tensor(torch.tensor([[1, 0]]), torch.ones(2), (3,)).npu()
    with pytest.raises(RuntimeError) as info:
        compute(s)
    lines = str(info.value).splitlines()
    assert lines[0] == caution(op) and lines[1].endswith("ERR01007 OPS feature not supported")


def test_compressed_accessors_of_a_coo_npu_tensor_raise_pytorchs_layout_error():
    s = torch.eye(2).to_sparse().npu()
    for accessor in ("crow_indices", "col_indices", "ccol_indices", "row_indices"):
        with pytest.raises(RuntimeError, match=f"^{accessor} expected sparse .* layout but got Sparse"):
            getattr(s, accessor)()
    with pytest.raises(
        RuntimeError, match=r"backend of indices \(PrivateUseOne\) must match backend of values \(CPU\)"
    ):
        torch.sparse_coo_tensor(torch.tensor([[0, 1]], device="npu"), torch.ones(2), (3,))
