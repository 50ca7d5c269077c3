"""Dynamic quantisation beyond the per-row int8 case: npu_dynamic_quant_asymmetric, MoE smooth scales
chosen by group_index, per-tensor mode and int4 outputs packed in int32, each against the formulas of
torch_npu's documentation written here."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu
from torch_npu.ops.quant import unpack_int4

torch.manual_seed(0)


def int_round(v, low, high):
    return v.round().clamp(low, high)


def asymmetric_reference(x, low, high, per_tensor=False):
    xf = x.float()
    top = xf.amax() if per_tensor else xf.amax(-1, keepdim=True)
    bottom = xf.amin() if per_tensor else xf.amin(-1, keepdim=True)
    scale = (top - bottom) / (high - low)
    offset = high - top / scale
    return int_round(xf / scale + offset, low, high), scale, offset


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_asymmetric_per_token_int8(dtype):
    x = (torch.randn(3, 5, 32) * 4 + 1).to(dtype)

    def ref(x):
        y, scale, offset = asymmetric_reference(x, -128, 127)
        return y.to(torch.int8), scale.squeeze(-1), offset.squeeze(-1)

    y, scale, offset = check_op(torch_npu.npu_dynamic_quant_asymmetric, (x,), ref, atol=1, rtol=1e-6)
    # every row uses the whole int8 range: its maximum maps to 127 and its minimum to -128
    assert (y.cpu().amax(-1) == 127).all() and (y.cpu().amin(-1) == -128).all()
    back = (y.cpu().float() - offset.cpu().unsqueeze(-1)) * scale.cpu().unsqueeze(-1)
    torch.testing.assert_close(back, x.float(), atol=float(scale.max()), rtol=0)


def test_asymmetric_per_tensor_and_int4():
    x = torch.randn(4, 16, dtype=torch.float16)
    y, scale, offset = torch_npu.npu_dynamic_quant_asymmetric(x.npu(), quant_mode="pertensor")
    want, want_scale, want_offset = asymmetric_reference(x, -128, 127, per_tensor=True)
    assert scale.shape == (1,) and offset.shape == (1,)
    assert (y.cpu().int() - want.int()).abs().max() <= 1
    torch.testing.assert_close(scale.cpu(), want_scale.reshape(1))
    packed, scale4, _ = torch_npu.npu_dynamic_quant_asymmetric(x.npu(), dst_type=torch.quint4x2)
    assert packed.dtype == torch.int32 and packed.shape == (4, 2) and scale4.shape == (4,)
    want4, _, _ = asymmetric_reference(x, -8, 7)
    assert (unpack_int4(packed.cpu()).int() - want4.int()).abs().max() <= 1


def test_moe_group_index_picks_each_experts_smooth_scales():
    x = torch.randn(10, 16, dtype=torch.float16)
    smooth = torch.rand(3, 16, dtype=torch.float16) + 0.5
    group_index = torch.tensor([4, 7, 10], dtype=torch.int32)  # tokens 0-3, 4-6, 7-9

    def ref(x, smooth_scales, group_index):
        expert = torch.tensor([0] * 4 + [1] * 3 + [2] * 3)
        xs = x.float() * smooth_scales.float()[expert]
        scale = xs.abs().amax(-1) / 127
        return int_round(xs / scale[:, None], -128, 127).to(torch.int8), scale

    check_op(
        lambda x, s, g: torch_npu.npu_dynamic_quant(x, smooth_scales=s, group_index=g),
        (x, smooth, group_index),
        ref,
        atol=1,
        rtol=1e-6,
    )


def test_symmetric_int4_per_token():
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    packed, scale = torch_npu.npu_dynamic_quant(x.npu(), dst_type=torch.quint4x2)
    assert packed.dtype == torch.int32 and packed.shape == (3, 2)
    want_scale = x.float().abs().amax(-1) / 7
    torch.testing.assert_close(scale.cpu(), want_scale)
    want = int_round(x.float() / want_scale[:, None], -8, 7)
    assert (unpack_int4(packed.cpu()).int() - want.int()).abs().max() <= 1


DYNAMIC_QUANT_ERRORS = [
    (
        lambda: torch_npu.npu_dynamic_quant_asymmetric(torch.randn(8, device="npu", dtype=torch.float16)),
        "npu_dynamic_quant_asymmetric: The dimension of input x must be greater than 1, got 1",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant_asymmetric(torch.randn(2, 8, device="npu").half(), quant_mode="perchannel"),
        "npu_dynamic_quant_asymmetric: quant_mode must be 'pertoken' or 'pertensor', got 'perchannel'",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(
            torch.randn(4, 8, device="npu"),
            smooth_scales=torch.ones(2, 8, device="npu"),
            group_index=torch.tensor([1, 3], dtype=torch.int32, device="npu"),
        ),
        "npu_dynamic_quant: group_index must end at the number of tokens (4), got [1, 3]",
    ),
]


@pytest.mark.parametrize("call,message", DYNAMIC_QUANT_ERRORS, ids=[c[1][:60] for c in DYNAMIC_QUANT_ERRORS])
def test_dynamic_quant_invalid_arguments(call, message):
    raises_operator_error(call, message)


def block_reference(x, rows, cols, limit, to):
    m, n = x.shape[-2:]
    scale = torch.zeros(*x.shape[:-2], -(-m // rows), -(-n // cols))
    y = torch.zeros(x.shape)
    for i in range(scale.shape[-2]):
        for j in range(scale.shape[-1]):
            block = x.float()[..., i * rows : (i + 1) * rows, j * cols : (j + 1) * cols]
            s = block.abs().amax(dim=(-2, -1)) / limit
            scale[..., i, j] = s
            y[..., i * rows : (i + 1) * rows, j * cols : (j + 1) * cols] = block / s[..., None, None]
    return to(y), scale


@pytest.mark.parametrize("shape,rows,cols", [((5, 300), 1, 128), ((2, 7, 40), 4, 16)])
def test_block_quant_int8_scales_each_block_to_127(shape, rows, cols):
    x = torch.randn(shape, dtype=torch.bfloat16)
    y, scale = torch_npu.npu_dynamic_block_quant(x.npu(), row_block_size=rows, col_block_size=cols)
    want_y, want_scale = block_reference(x, rows, cols, 127.0, lambda v: int_round(v, -128, 127).to(torch.int8))
    torch.testing.assert_close(scale.cpu(), want_scale)
    assert y.dtype == torch.int8 and (y.cpu().int() - want_y.int()).abs().max() <= 1


def test_block_quant_to_float8_and_half_away_rounding():
    x = torch.randn(4, 64, dtype=torch.float16)
    y, scale = torch_npu.npu_dynamic_block_quant(x.npu(), dst_type=24, col_block_size=32)
    want_y, want_scale = block_reference(x, 1, 32, 448.0, lambda v: v.to(torch.float8_e4m3fn))
    assert y.dtype == torch.float8_e4m3fn and torch.equal(y.cpu().float(), want_y.float())
    halves = torch.tensor([[0.5, 1.5, -2.5, 127.0]], dtype=torch.float16)  # the block max maps to 127 exactly
    rint = torch_npu.npu_dynamic_block_quant(halves.npu())[0].cpu().tolist()
    away = torch_npu.npu_dynamic_block_quant(halves.npu(), round_mode="round")[0].cpu().tolist()
    assert rint == [[0, 2, -2, 127]] and away == [[1, 2, -3, 127]]
