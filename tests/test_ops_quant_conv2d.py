"""npu_quant_conv2d against the int8 convolution written out (float64 exact accumulation), dequantised by a
float32 scale or npu_trans_quant_param's packed int64 words."""

import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error


def test_matches_the_dequantised_int8_convolution():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (2, 4, 7, 6), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (6, 2, 3, 3), generator=g, dtype=torch.int8)
    bias = torch.randint(-1000, 1000, (6,), generator=g, dtype=torch.int32)
    scale = torch.rand(6, generator=g) / 1000
    acc = F.conv2d(x.double(), w.double(), bias.double(), (2, 1), (1, 1), (1, 1), 2)  # exact on the CPU
    want = (acc * scale.double().reshape(1, -1, 1, 1)).half()
    args = ([2, 1], [1, 1], [1, 1], 2, 0, "rint", torch.float16)
    got = torch_npu.npu_quant_conv2d(x.npu(), w.npu(), scale.npu(), *args, bias=bias.npu())
    assert got.dtype == torch.float16 and torch.equal(got.cpu(), want)
    packed = torch_npu.npu_trans_quant_param(scale.npu())
    fp19 = (scale.view(torch.int32) & -8192).view(torch.float32)  # the packed word keeps 19 bits of the scale
    want19 = (acc * fp19.double().reshape(1, -1, 1, 1)).half()
    assert torch.equal(torch_npu.npu_quant_conv2d(x.npu(), w.npu(), packed, *args, bias=bias.npu()).cpu(), want19)
    raises_operator_error(
        lambda: torch_npu.npu_quant_conv2d(x.float().npu(), w.npu(), scale.npu()),
        "npu_quant_conv2d: input and weight must be int8, got torch.float32 and torch.int8",
    )


def test_many_input_channels_stay_exact():
    g = torch.Generator().manual_seed(1)
    x = torch.full((1, 300, 3, 3), 127, dtype=torch.int8)  # 2700 products of 127 * 127: past float32's exact range
    w = torch.full((1, 300, 3, 3), 127, dtype=torch.int8)
    w[0, 0, 0, 0] = torch.randint(-128, 127, (1,), generator=g, dtype=torch.int8)
    want = x.to(torch.int64).mul(w.to(torch.int64)).sum()
    got = torch_npu.npu_quant_conv2d(x.npu(), w.npu(), torch.ones(1).npu(), output_dtype=torch.float32)
    assert got.item() == want.to(torch.float32).item()  # the int sum exact, rounded once to float32
