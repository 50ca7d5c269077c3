"""npu_quant_max against its formula written out (per-group scaling, the 8-bit float cast, amax), the fake
kernel and compile through check_op, and its argument checks."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu
from torch_npu.utils import hifloat8


def reference(x, scale, *, round_mode="rint", dst_dtype=291, group_list=None, encode=None):
    rows = x.reshape(x.shape[0], -1).float()
    ends = [x.shape[0]] if group_list is None else group_list.tolist()
    pieces, amax, start = [], [], 0
    for g, end in enumerate(ends):
        pieces.append(rows[start:end] * scale[g])
        amax.append(rows[start:end].abs().amax() if end > start else torch.tensor(0.0))
        start = end
    pieces.append(torch.zeros_like(rows[start:]))
    scaled = torch.cat(pieces)
    y = encode(scaled) if encode else scaled.to(torch.float8_e5m2 if dst_dtype == 291 else dst_dtype)
    return y.reshape(x.shape), torch.stack(amax).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dst", [291, torch.float8_e4m3fn])
def test_float8_results_and_amax(dtype, dst):
    x = (torch.randn(6, 5, 8) * 40).to(dtype)
    check_op(lambda a, s: torch_npu.npu_quant_max(a, s, dst_dtype=dst), (x, torch.tensor([0.7])),
             lambda a, s: reference(a, s, dst_dtype=dst), atol=0, rtol=0)  # fmt: skip


def test_groups_and_hifloat8():
    x = torch.randn(10, 16) * 300
    scale, groups = torch.tensor([1.0, 0.25, 8.0]), torch.tensor([3, 3, 9])  # an empty group, one row left over
    y, amax = torch_npu.npu_quant_max(
        x.npu(), scale.npu(), round_mode="round", dst_dtype=torch_npu.hifloat8, group_list=groups.npu()
    )
    want_y, _ = reference(x, scale, group_list=groups, encode=hifloat8.encode)
    assert y.dtype == torch.uint8 and torch.equal(y.cpu(), want_y)
    assert torch.equal(amax.cpu(), torch.stack([x[:3].abs().max(), torch.tensor(0.0), x[3:9].abs().max()]))


def test_bad_arguments():
    x, s = torch.randn(4, 4).npu(), torch.ones(1).npu()
    raises_operator_error(
        lambda: torch_npu.npu_quant_max(x, s, round_mode="round"),
        "npu_quant_max: round_mode 'round' is not supported with this dst_dtype (supported: rint)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_quant_max(x, s, dst_dtype=torch.int8),
        "npu_quant_max: dst_dtype must be torch.float8_e5m2, torch.float8_e4m3fn or torch_npu.hifloat8, got torch.int8",
    )
    raises_operator_error(
        lambda: torch_npu.npu_quant_max(x, torch.ones(2).npu()),
        "npu_quant_max: scale must hold one value without group_list, got 2",
    )
    raises_operator_error(
        lambda: torch_npu.npu_quant_max(x, torch.ones(2).npu(), group_list=torch.tensor([3, 2]).npu()),
        "npu_quant_max: group_list must be non-decreasing cumulative row ends within x's 4 rows, got [3, 2]",
    )
