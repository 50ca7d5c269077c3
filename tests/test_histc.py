"""torch.histc on npu, as torch_npu's histc (aclnnHistc) computes it: integer tensors are counted (in their own
dtype; the CPU's kernel refuses them), floating tensors give the CPU's counts, and the arguments are checked with
torch_npu's messages."""

import pytest
import torch

import torch_npu  # noqa: F401

INTEGER_DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_integer_tensors_are_counted_in_their_dtype(dtype):
    ids = torch.randint(0, 8, (200,), generator=torch.Generator().manual_seed(0))
    counts = torch.histc(ids.to(dtype).npu(), bins=8, min=0, max=7)  # transformers' tokens-per-expert count
    assert counts.device.type == "npu" and counts.dtype == dtype
    assert torch.equal(counts.cpu(), torch.bincount(ids, minlength=8).to(dtype))


def test_integer_bins_follow_the_cpus_counting_of_the_same_values():
    values = torch.tensor([-3, 0, 1, 4, 5, 9, 10, 11, 2**40], dtype=torch.int64)
    for bins, low, high in [(4, 0, 10), (3, -3, 11), (2, 0, 2**40), (5, 0, 0)]:
        expected = torch.histc(values.double(), bins=bins, min=low, max=high).long()
        assert torch.equal(torch.histc(values.npu(), bins=bins, min=low, max=high).cpu(), expected)
    same = torch.full((3,), 3, dtype=torch.int32)
    assert torch.histc(same.npu(), bins=4).cpu().tolist() == [0, 0, 3, 0]  # an empty range widens by one each side


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_floating_tensors_give_the_cpus_counts(dtype):
    x = torch.randn(500, generator=torch.Generator().manual_seed(1)).to(dtype)
    for args in [(10,), (7, -1.0, 1.0), (3, 0.5, 0.5)]:
        assert torch.equal(torch.histc(x.npu(), *args).cpu(), torch.histc(x, *args))


def test_out_form_counts_integers_into_the_given_tensor():
    ids = torch.tensor([0, 1, 1, 3], dtype=torch.int32)
    out = torch.empty(0, dtype=torch.int32).npu()
    result = torch.histc(ids.npu(), bins=4, min=0, max=3, out=out)
    assert result.data_ptr() == out.data_ptr() and out.cpu().tolist() == [1, 2, 0, 1]
    with pytest.raises(RuntimeError) as raised:
        torch.histc(ids.npu(), bins=4, min=0, max=3, out=torch.empty(4).npu())
    assert str(raised.value).startswith(
        "torch.histc: input tensor and hist tensor should have the same dtype, but got input Int and hist Float"
    )


@pytest.mark.parametrize(
    ("call", "message", "tag"),
    [
        (lambda x: torch.histc(x.half(), 5), "HalfTensor is not supported", "ERR01002 OPS invalid type"),
        (lambda x: torch.histc(x, -1), "bins must be > 0", "ERR01003 OPS invalid value"),
        (lambda x: torch.histc(x, 5, 2, 1), "max must be larger than min", "ERR01003 OPS invalid value"),
        (lambda x: torch.histc(x, 5, 0, float("inf")), "range of [0, inf] is not finite", "ERR01003 OPS invalid value"),
    ],
)
def test_bad_arguments_get_torch_npus_errors(call, message, tag):
    with pytest.raises(RuntimeError) as raised:
        call(torch.randn(10).npu())
    assert str(raised.value).splitlines()[0] == message
    assert tag in str(raised.value)
