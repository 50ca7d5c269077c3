"""npu_masked_fill_range and npu_normalize_batch against element-by-element references written here
(the loops op-plugin's own tests use to define them)."""

import itertools

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def fill_range_reference(x, start, end, value, axis):
    out, dim = x.clone(), x.dim()
    axis %= dim
    for i, j in itertools.product(range(start.shape[0]), range(start.shape[1])):
        for k in range(int(start[i, j]), int(end[i, j])):
            if dim == 1 or axis == 0:
                out[k] = value[i]
            elif dim == 2 or axis == 2:
                out[j, ..., k] = value[i]
            else:
                out[:, k] = value[i]
    return out


@pytest.mark.parametrize(
    "shape,axis", [((8,), 0), ((4, 6), 0), ((4, 6), -1), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_masked_fill_range_fills_each_range_in_order(shape, axis, dtype):
    x = (torch.rand(shape) * 50).to(dtype)
    length, rows = shape[axis], shape[0]
    start = torch.randint(0, length, (3, rows), dtype=torch.int32)
    end = (start + torch.randint(0, 4, (3, rows), dtype=torch.int32)).clamp(max=length)
    value = torch.tensor([7, -3, 11]).to(dtype)  # overlapping ranges: the later (i, j) wins
    check_op(
        torch_npu.npu_masked_fill_range,
        (x, start, end, value, axis),
        fill_range_reference,
        atol=0,
        rtol=0,
        compile=False,
    )


def normalize_reference(x, seq_len, normalize_type):
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        valid = x[i, :, : int(seq_len[i])]
        if normalize_type == 0:
            mean, std = valid.mean(1, keepdim=True), valid.std(1, keepdim=True)
        else:
            mean, std = valid.mean(), valid.std()
        out[i] = (x[i] - mean) / (std + 1e-5)
    return out


@pytest.mark.parametrize("normalize_type", [0, 1])
def test_normalize_batch_uses_the_statistics_of_each_samples_first_steps(normalize_type):
    x = torch.rand(5, 3, 9) * 9 + 1
    seq_len = torch.randint(3, 9, (5,), dtype=torch.int32)
    check_op(torch_npu.npu_normalize_batch, (x, seq_len, normalize_type), normalize_reference, atol=1e-4, rtol=1e-4)


FILL_NORMALIZE_ERRORS = [
    (
        lambda: torch_npu.npu_normalize_batch(
            torch.rand(2, 3, 4, device="npu"), torch.ones(2, 1, dtype=torch.int32, device="npu")
        ),
        "Non-empty 1D seq_len tensor expected but got a tensor with sizes [2, 1]",
    ),
    (
        lambda: torch_npu.npu_normalize_batch(
            torch.rand(2, 3, 4, device="npu"), torch.ones(3, dtype=torch.int32, device="npu")
        ),
        "seq_len's length should be equal self' num, but got seq_len length 3self num 2",
    ),
    (
        lambda: torch_npu.npu_normalize_batch(
            torch.rand(2, 3, 4, device="npu"), torch.ones(2, dtype=torch.int32, device="npu"), 2
        ),
        "normalize_type expected to be in range [0, 1], but got 2",
    ),
    (
        lambda: torch_npu.npu_masked_fill_range(
            torch.rand(2, 4, device="npu"),
            torch.zeros(1, 2, dtype=torch.int32, device="npu"),
            torch.ones(1, 2, dtype=torch.int32, device="npu"),
            torch.ones(2, device="npu"),
        ),
        "npu_masked_fill_range: value must hold num=1 values, got 2",
    ),
]


@pytest.mark.parametrize("call,message", FILL_NORMALIZE_ERRORS, ids=[c[1][:48] for c in FILL_NORMALIZE_ERRORS])
def test_fill_normalize_invalid_arguments(call, message):
    raises_operator_error(call, message)
