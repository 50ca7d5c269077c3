"""npu_swiglu_group_quant against op-plugin's golden for the HiFloat8 modes (per-group amax / dst_type_max) and the
documented block FP8 / MX rules written out; the backward against autograd of the clamped, weighted SwiGLU."""

import math

import pytest
import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error
from torch_npu.utils import hifloat8


def swiglu(x, weight=None, limit=-1.0):
    x0, x1 = x.float().chunk(2, -1)
    if limit > 0:
        x0, x1 = torch.clamp(x0, max=limit), torch.clamp(x1, -limit, limit)
    y = F.silu(x0) * x1
    return y if weight is None else y * weight.reshape(*y.shape[:-1], 1)


def inputs(tokens=8, d=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tokens, d, generator=g) * 3, torch.rand(tokens, 1, generator=g)


@pytest.mark.parametrize("grouped", [False, True])
def test_hifloat8_dynamic_matches_the_golden(grouped):
    x, weight = inputs()
    counts = torch.tensor([3, 4]) if grouped else None
    y, scale, origin = torch_npu.npu_swiglu_group_quant(
        x.npu(), weight=weight.npu(), group_index=None if counts is None else counts.npu(), quant_mode=3,
        clamp_limit=2.0, dst_type_max=15.0, output_origin=True,
    )  # fmt: skip
    act = swiglu(x, weight, 2.0)
    real = 7 if grouped else 8
    torch.testing.assert_close(origin.cpu()[:real], act[:real])
    bounds = [(0, 3), (3, 7)] if grouped else [(0, 8)]
    for g, (lo, hi) in enumerate(bounds):
        s = act[lo:hi].abs().max().clamp(min=1e-8) / 15.0
        assert torch.equal(scale.cpu()[g], s)
        assert torch.equal(y.cpu()[lo:hi], hifloat8.encode(act[lo:hi] / s))
    if grouped:  # row 7 is past the groups' total
        assert not y.cpu()[7:].any() and not origin.cpu()[7:].any()


def test_hifloat8_static_multiplies_by_each_groups_scale():
    x, _ = inputs()
    inv = torch.tensor([0.5, 4.0])
    y, scale, origin = torch_npu.npu_swiglu_group_quant(
        x.npu(), group_index=torch.tensor([5, 3]).npu(), scale=inv.npu(), quant_mode=2
    )
    act = swiglu(x)
    want = torch.cat([hifloat8.encode(act[:5] * 0.5), hifloat8.encode(act[5:] * 4.0)])
    assert torch.equal(y.cpu(), want) and torch.equal(scale.cpu(), inv) and origin.numel() == 0


@pytest.mark.parametrize("round_scale", [False, True])
def test_block_fp8_per_128(round_scale):
    x, _ = inputs()
    y, scale, _ = torch_npu.npu_swiglu_group_quant(x.npu(), dst_type=292, quant_mode=0, round_scale=round_scale)
    act = swiglu(x).reshape(8, 2, 128)
    amax = act.abs().amax(-1).clamp(min=1e-4)
    if round_scale:
        want_scale = torch.tensor([[2.0 ** math.ceil(math.log2(a / 448.0)) for a in row] for row in amax.tolist()])
        inverse = 1 / want_scale
    else:
        want_scale, inverse = amax / 448.0, 448.0 / amax
    torch.testing.assert_close(scale.cpu(), want_scale, rtol=0, atol=0)
    want = (act * inverse[..., None]).reshape(8, 256).to(torch.float8_e4m3fn)
    assert torch.equal(y.cpu().view(torch.uint8), want.view(torch.uint8))


def test_mx_mode_uses_the_rounded_up_power_of_two():
    x, _ = inputs(tokens=4)
    y, scale, _ = torch_npu.npu_swiglu_group_quant(x.npu(), dst_type=291, quant_mode=1, round_scale=True)
    act = swiglu(x).reshape(4, 8, 32)
    exps = torch.tensor(
        [[math.ceil(math.log2(max(a, 1e-4) / 57344.0)) for a in row] for row in act.abs().amax(-1).tolist()]
    )
    assert torch.equal(scale.cpu().reshape(4, -1).long() - 127, exps)
    want = (act / torch.exp2(exps.float())[..., None]).reshape(4, 256).to(torch.float8_e5m2)
    assert torch.equal(y.cpu().view(torch.uint8), want.view(torch.uint8))


@pytest.mark.parametrize("limit", [0.0, 1.5])
def test_backward_matches_autograd(limit):
    x, weight = inputs(tokens=6, d=64, seed=3)
    xr, wr = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    out = swiglu(xr, wr, limit)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(4))
    out.backward(grad)
    gx, gw = torch_npu.npu_swiglu_group_quant_backward(
        grad.npu(), x.npu(), weight=weight.npu(), group_index=torch.tensor([6]).npu(), clamp_limit=limit
    )
    torch.testing.assert_close(gx.cpu(), xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gw.cpu(), wr.grad.reshape(-1), rtol=1e-5, atol=1e-5)


def test_refuses_invalid_modes():
    x, _ = inputs()
    raises_operator_error(
        lambda: torch_npu.npu_swiglu_group_quant(x.npu(), quant_mode=1, dst_type=292),
        "npu_swiglu_group_quant: quant_mode 1 needs round_scale=True",
    )
    raises_operator_error(
        lambda: torch_npu.npu_swiglu_group_quant(x.npu(), quant_mode=0, dst_type=296),
        "npu_swiglu_group_quant: quant_mode 0 quantises to FP8 (dst_type 291 / 292), got 296",
    )
