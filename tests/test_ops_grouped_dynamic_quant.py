"""npu_grouped_dynamic_mx_quant / npu_grouped_dynamic_block_quant: each group quantised on its own (checked
against the ungrouped operators applied group by group) and the scales laid out group after group, the leftover
rows zero."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


@pytest.mark.parametrize("dst_type", [23, 292])
def test_grouped_mx_quant_is_per_group_mx_quant_along_m(dst_type):
    g = torch.Generator().manual_seed(dst_type)
    x = torch.randn(150, 8, generator=g).bfloat16()
    ends = [40, 40, 150]
    y, scale = torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), torch.tensor(ends, dtype=torch.int32).npu(), dst_type=dst_type)  # fmt: skip
    assert scale.shape == (150 // 64 + 3, 8, 2) and scale.dtype == torch.uint8
    row = 0
    for start, end in zip([0, *ends], ends):
        if end == start:
            continue
        want_y, want_s = torch_npu.npu_dynamic_mx_quant(x[start:end].npu(), axis=0, dst_type={23: 291, 292: 292}[dst_type])  # fmt: skip
        assert torch.equal(y[start:end].view(torch.uint8), want_y.view(torch.uint8))
        assert torch.equal(scale[row : row + want_s.shape[0]], want_s)
        row += want_s.shape[0]
    assert not scale[row:].cpu().any()


@pytest.mark.parametrize("dst_type, round_mode", [(291, "rint"), (290, "round")])
def test_grouped_block_quant_is_per_group_block_quant(dst_type, round_mode):
    g = torch.Generator().manual_seed(dst_type)
    x = torch.randn(2, 9, 200, generator=g).half()
    ends = [3, 3, 9]
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(
        x.npu(), torch.tensor(ends, dtype=torch.int32).npu(), dst_type=dst_type, round_mode=round_mode,
        row_block_size=2, col_block_size=128,
    )  # fmt: skip
    assert scale.shape == (2, 9 // 2 + 3, 2)
    row = 0
    for start, end in zip([0, *ends], ends):
        if end == start:
            continue
        want_y, want_s = torch_npu.npu_dynamic_block_quant(
            x[:, start:end].npu(), dst_type=dst_type, round_mode=round_mode, row_block_size=2, col_block_size=128
        )
        assert torch.equal(y[:, start:end].view(torch.uint8), want_y.view(torch.uint8))
        assert torch.equal(scale[:, row : row + want_s.shape[1]], want_s)
        row += want_s.shape[1]
    assert not scale[:, row:].cpu().any()


def test_block_quant_scale_formula_for_hifloat8():
    x = torch.randn(4, 256).half()
    y, scale = torch_npu.npu_dynamic_block_quant(x.npu(), dst_type=290, round_mode="round", col_block_size=128)
    want = x.float().abs().reshape(4, 2, 128).amax(-1) / 32768.0
    torch.testing.assert_close(scale.cpu(), want)
    assert y.dtype == torch.uint8


def test_errors():
    x = torch.randn(8, 4).bfloat16().npu()
    raises_operator_error(
        lambda: torch_npu.npu_grouped_dynamic_mx_quant(x, torch.tensor([3, 7], dtype=torch.int32).npu()),
        "npu_grouped_dynamic_mx_quant: group_index must be non-decreasing cumulative row ends ending at M = 8, got [3, 7]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_grouped_dynamic_mx_quant(x, torch.tensor([8], dtype=torch.int32).npu(), blocksize=64),
        "npu_grouped_dynamic_mx_quant: Parameter blocksize must be 32, got 64",
    )
