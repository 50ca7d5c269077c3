"""npu_rotate_quant: int8 / int4 against the rotation and the per-row symmetric quantisation written out; MX outputs
against npu_dynamic_mx_quant of the rotated x, as op-plugin's own golden does; the alpha clamp by groups of 32."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def inputs(m=4, n=64, k=32, blocks=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g).to(torch.bfloat16)
    shape = (k, k) if blocks is None else (blocks, k, k)
    rotation = torch.randn(*shape, generator=g)
    return x, (rotation / rotation.norm(dim=-1, keepdim=True)).to(torch.bfloat16)


def rotated(x, rotation):
    k = rotation.shape[-1]
    parts = []
    for b in range(x.shape[1] // k):
        r = rotation if rotation.dim() == 2 else rotation[b]
        parts.append(x[:, b * k : (b + 1) * k].float() @ r.float())
    return torch.cat(parts, 1).to(x.dtype)


def per_row_int(y, limit):
    scale = y.float().abs().amax(-1) / limit
    return torch.round(y.float() / scale[:, None]).clamp(-limit - 1, limit), scale


@pytest.mark.parametrize("blocks", [None, 2])
def test_int8_matches_rotation_then_per_row_quantisation(blocks):
    x, rotation = inputs(blocks=blocks)
    y, scale = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=torch.int8)
    want, want_scale = per_row_int(rotated(x, rotation), 127)
    assert y.dtype == torch.int8 and scale.dtype == torch.float32
    torch.testing.assert_close(scale.cpu(), want_scale)
    assert torch.equal(y.cpu().float(), want)


def test_int4_packs_eight_values_to_an_int32():
    x, rotation = inputs()
    y, scale = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=torch.quint4x2)
    want, _ = per_row_int(rotated(x, rotation), 7)
    assert y.dtype == torch.int32 and tuple(y.shape) == (4, 8)
    nibbles = torch.stack([(y.cpu() >> (4 * i)) & 0xF for i in range(8)], -1).reshape(4, 64)
    assert torch.equal(torch.where(nibbles >= 8, nibbles - 16, nibbles).float(), want)


@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, torch.float8_e5m2, 296])
def test_mx_outputs_match_dynamic_mx_quant_of_the_rotation(dst):
    x, rotation = inputs()
    y, scale = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=dst)
    want_y, want_scale = torch_npu.npu_dynamic_mx_quant(rotated(x, rotation).npu(), dst_type=dst)
    assert torch.equal(y.cpu().view(torch.uint8), want_y.cpu().view(torch.uint8))
    assert torch.equal(scale.cpu().view(torch.uint8), want_scale.cpu().view(torch.uint8))


def test_alpha_clamps_each_group_of_32():
    x, rotation = inputs()
    alpha = torch.tensor([0.5])
    y, _ = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), alpha=alpha.npu(), dst_dtype=torch.float8_e4m3fn)
    r = rotated(x, rotation).float().reshape(-1, 32)
    limit = 0.5 * r.abs().amax(-1, keepdim=True)
    clamped = torch.maximum(torch.minimum(r, limit), -limit).reshape(4, 64).to(torch.bfloat16)
    want, _ = torch_npu.npu_dynamic_mx_quant(clamped.npu(), dst_type=torch.float8_e4m3fn)
    assert torch.equal(y.cpu().view(torch.uint8), want.cpu().view(torch.uint8))
    unclamped, _ = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), alpha=torch.tensor([1.0]).npu(), dst_dtype=24)
    plain, _ = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=24)
    assert torch.equal(unclamped.cpu().view(torch.uint8), plain.cpu().view(torch.uint8))


def test_refuses_what_the_operator_refuses():
    x, rotation = inputs()
    raises_operator_error(
        lambda: torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), transpose_y=True),
        "npu_rotate_quant: In the current CANN version, for aclnnRotateQuant, the parameter transpose_y only supports "
        "False. Please set transpose_y=False.",
    )
    raises_operator_error(
        lambda: torch_npu.npu_rotate_quant(x.npu()[:, :48], rotation.npu()),
        "npu_rotate_quant: x's last dim 48 must be a multiple of rotation's size 32",
    )
