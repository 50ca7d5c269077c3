"""npu_trans_quant_param packs the quant-matmul scale and offset into CANN's int64 word (checked bit by bit
against struct-packed float32 here), and npu_quant_matmul reads the packed word as the scale it holds."""

import struct

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu


def float_bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


@pytest.mark.parametrize("round_mode", [0, 1])
def test_scale_becomes_fp19_with_the_flag_bit(round_mode):
    scales = [0.3, 1.5, 2.0**-7, 1234.5678]
    packed = torch_npu.npu_trans_quant_param(torch.tensor(scales).npu(), round_mode=round_mode).cpu().tolist()
    for value, word in zip(scales, packed):
        bits = float_bits(value)
        if round_mode == 1:
            bits += 0xFFF + ((bits >> 13) & 1)
        assert word == (bits & 0xFFFFE000) | (1 << 46), value


def test_offset_is_rounded_clamped_and_stored_in_nine_bits():
    offsets = torch.tensor([-3.4, 2.6, 300.0, -400.0])
    words = torch_npu.npu_trans_quant_param(torch.full((4,), 0.5).npu(), offsets.npu()).cpu().tolist()
    for offset, word in zip([-3, 3, 255, -256], words):
        assert (word >> 37) & 0x1FF == offset & 0x1FF and word & 0xFFFFFFFF == float_bits(0.5) and word >> 46 == 1


def test_quant_matmul_reads_the_packed_scale_and_offset():
    x1 = torch.randint(-20, 20, (4, 32), dtype=torch.int8).npu()
    x2 = torch.randint(-20, 20, (32, 6), dtype=torch.int8).npu()
    scale = torch.tensor([2.0**-i for i in range(6)])  # exact in FP19
    as_float = torch_npu.npu_quant_matmul(x1, x2, scale.npu(), output_dtype=torch.float16)
    as_word = torch_npu.npu_quant_matmul(
        x1, x2, torch_npu.npu_trans_quant_param(scale.npu()), output_dtype=torch.float16
    )
    assert torch.equal(as_word.cpu(), as_float.cpu())
    offset = torch.full((6,), -5.0)
    with_offset = torch_npu.npu_quant_matmul(x1, x2, torch_npu.npu_trans_quant_param(scale.npu(), offset.npu()))
    assert torch.equal(with_offset.cpu(), torch_npu.npu_quant_matmul(x1, x2, scale.npu(), offset=offset.npu()).cpu())


def test_trans_quant_param_round_mode_must_be_0_or_1():
    raises_operator_error(
        lambda: torch_npu.npu_trans_quant_param(torch.ones(2, device="npu"), round_mode=2),
        "npu_trans_quant_param: round_mode must be 0 or 1, got 2",
    )
