"""npu_group_quant against GroupQuant's formula applied group by group in a loop (int8 and packed int4, with
offset, rows past the last group), fake / compile through check_op, and its argument checks."""

import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def reference(x, scale, group_index, *, offset=None, dst_dtype=None):
    out, start = torch.zeros(x.shape, dtype=torch.float64), 0
    for g, end in enumerate(group_index.tolist()):
        out[start:end] = x[start:end].double() * scale[g].double() + (0 if offset is None else offset.double())
        start = end
    if dst_dtype == torch.quint4x2:
        q = torch.round(out).clamp(-8, 7).to(torch.int64)
        nibbles = (q & 0xF).reshape(x.shape[0], -1, 8)
        word = sum(nibbles[..., i] << (4 * i) for i in range(8))
        return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)
    return torch.round(out).clamp(-128, 127).to(torch.int8)


def test_int8_and_int4_groups():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(10, 16, generator=g) * 4
    scale = torch.rand(3, 16, generator=g) * 20
    groups = torch.tensor([3, 3, 8])  # an empty group; rows 8 and 9 belong to none
    offset = torch.tensor([1.5])
    check_op(lambda *a: torch_npu.npu_group_quant(*a, offset=offset.npu()), (x, scale, groups),
             lambda *a: reference(*a, offset=offset), atol=0, rtol=0)  # fmt: skip
    check_op(lambda *a: torch_npu.npu_group_quant(*a, dst_dtype=torch.quint4x2), (x / 8, scale, groups),
             lambda *a: reference(*a, dst_dtype=torch.quint4x2), atol=0, rtol=0)  # fmt: skip


def test_qint8_means_int8():
    # op-plugin reads dst_dtype=torch.qint8 as int8 (its golden test passes torch.qint8)
    g = torch.Generator().manual_seed(5)
    x, scale, groups = torch.randn(6, 8, generator=g) * 3, torch.rand(2, 8, generator=g) * 9, torch.tensor([2, 6])
    out = check_op(lambda *a: torch_npu.npu_group_quant(*a, dst_dtype=torch.qint8), (x, scale, groups), reference,
                   atol=0, rtol=0)  # fmt: skip
    assert out.dtype == torch.int8


def test_bad_arguments():
    x, scale = torch.randn(4, 8).npu(), torch.ones(2, 8).npu()
    raises_operator_error(
        lambda: torch_npu.npu_group_quant(x, scale, torch.tensor([3, 2]).npu()),
        "npu_group_quant: group_index must be non-decreasing row ends within x's 4 rows, got [3, 2]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_group_quant(x, scale[:, :4], torch.tensor([1, 4]).npu()),
        "npu_group_quant: scale must be [E, H=8], got (2, 4)",
    )
