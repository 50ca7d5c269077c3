"""npu_weight_quant_preprocess: the documented data flows keep the values and take the documented formats
(FRACTAL_NZ_C0_16 for MX A8W4, FRACTAL_NZ_C0_8 for a non-transposed per-channel / per-group A16S4 weight, ND
otherwise), pass the parameters through, and refuse mismatched arguments."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def mx_inputs(groups=None, k=64, n=32):
    lead = () if groups is None else (groups,)
    weight = torch.randint(0, 255, (*lead, n, k // 2), dtype=torch.uint8).npu().transpose(-1, -2)
    scale = torch.randint(0, 255, (*lead, n, (k + 63) // 64, 2), dtype=torch.uint8).npu().transpose(-3, -2)
    return weight, scale


@pytest.mark.parametrize("groups", [None, 3])
def test_mx_a8w4_weight_becomes_nz_c0_16(groups):
    weight, scale = mx_inputs(groups)
    bias = torch.randn(32).npu()
    out_w, out_s, out_o, out_b = torch_npu.npu_weight_quant_preprocess(
        weight, scale, torch.float8_e4m3fn, torch_npu.float4_e2m1fn_x2, torch_npu.float8_e8m0fnu, bias=bias,
        x_scale_dtype=torch_npu.float8_e8m0fnu, k_group_size=32,
    )  # fmt: skip
    assert torch_npu.get_npu_format(out_w) == torch_npu.Format.FRACTAL_NZ_C0_16
    assert torch.equal(out_w.cpu(), weight.cpu()) and torch.equal(out_s.cpu(), scale.cpu())
    assert out_o.numel() == 0 and torch.equal(out_b.cpu(), bias.cpu())


@pytest.mark.parametrize("scale_shape, transposed, want", [
    ((1,), False, torch_npu.Format.ND), ((32,), False, torch_npu.Format.FRACTAL_NZ_C0_8),
    ((32,), True, torch_npu.Format.ND), ((4, 32), False, torch_npu.Format.FRACTAL_NZ_C0_8),
])  # fmt: skip
def test_a16s4_formats_follow_the_scale_and_the_layout(scale_shape, transposed, want):
    k, n = 64, 32
    if transposed:
        weight = torch.randint(0, 255, (n, k // 2), dtype=torch.uint8).npu().transpose(0, 1)
    else:
        weight = torch.randint(0, 255, (k, n // 2), dtype=torch.uint8).npu()
    scale = torch.randn(scale_shape).half().npu()
    offset = torch.randn(scale_shape).half().npu()
    out_w, out_s, out_o, out_b = torch_npu.npu_weight_quant_preprocess(
        weight, scale, torch.float16, torch_npu.int4, torch.float16, weight_offset=offset,
        k_group_size=16 if len(scale_shape) == 2 and scale_shape[0] > 1 else 0,
    )  # fmt: skip
    assert torch_npu.get_npu_format(out_w) == want
    assert torch.equal(out_w.cpu(), weight.cpu()) and torch.equal(out_o.cpu(), offset.cpu()) and out_b.numel() == 0


def test_refuses_mismatched_flows():
    weight, scale = mx_inputs()
    raises_operator_error(
        lambda: torch_npu.npu_weight_quant_preprocess(
            weight,
            scale,
            torch.float8_e4m3fn,
            torch_npu.float4_e2m1fn_x2,
            torch_npu.float8_e8m0fnu,
            x_scale_dtype=torch_npu.float8_e8m0fnu,
            k_group_size=16,
        ),  # fmt: skip
        "npu_weight_quant_preprocess: the MX A8W4 flow takes k_group_size 32, got 16",
    )
