"""npu_swiglu_mx_quant: each swiglu_mode's activation written out (halves, even/odd columns, clamps, alpha and
bias), then compared through npu_dynamic_mx_quant of that float32 activation; group_index rows; errors. The
dual-axis backward quantises the SwiGLU gradient written out here."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def silu(t):
    return t / (1 + torch.exp(-t))


def reference(x, mode, left, limit=7.0, alpha=1.702, bias=1.0):
    xf = x.float()
    h = xf.shape[-1] // 2
    if mode == 1:
        gated, linear = xf[..., ::2], xf[..., 1::2]
    else:
        gated, linear = (xf[..., :h], xf[..., h:]) if left else (xf[..., h:], xf[..., :h])
    if mode == 0:
        return silu(gated) * linear
    if mode == 3:
        return torch.minimum(silu(gated), torch.tensor(limit)) * linear.clamp(-limit, limit)
    gated = torch.minimum(gated, torch.tensor(limit))
    return gated / (1 + torch.exp(-alpha * gated)) * (linear.clamp(-limit, limit) + bias)


def same(got, want):
    return torch.equal(got.cpu().view(torch.uint8), want.cpu().view(torch.uint8))


@pytest.mark.parametrize("mode, left", [(0, True), (0, False), (1, False), (2, True), (3, True)])
@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, 296])
def test_each_mode_then_mx_quantisation(mode, left, dst):
    x = (torch.randn(4, 128, generator=torch.Generator().manual_seed(mode)) * 4).to(torch.bfloat16)
    y, scale = torch_npu.npu_swiglu_mx_quant(x.npu(), activate_left=left, swiglu_mode=mode, dst_type=dst)
    act = reference(x, mode, left)
    want_y, want_scale = torch_npu.npu_dynamic_mx_quant(act.npu(), dst_type=dst)
    assert same(y, want_y) and same(scale, want_scale)


def test_quantisation_along_rows_and_activation_along_rows():
    x = torch.randn(64, 96, generator=torch.Generator().manual_seed(3)).to(torch.float16)
    y, scale = torch_npu.npu_swiglu_mx_quant(x.npu(), activate_dim=-2, activate_left=True, axis=-2, dst_type=292)
    act = silu(x.float()[:32]) * x.float()[32:]
    want_y, want_scale = torch_npu.npu_dynamic_mx_quant(act.npu(), axis=-2, dst_type=292)
    assert same(y, want_y) and same(scale, want_scale)


@pytest.mark.parametrize("group_mode, index", [(0, [2, 1]), (1, [1, 3])])
def test_group_index_limits_the_rows(group_mode, index):
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    y, _ = torch_npu.npu_swiglu_mx_quant(
        x.npu(), group_index=torch.tensor(index).npu(), group_mode=group_mode, activate_left=True, dst_type=292
    )
    full, _ = torch_npu.npu_swiglu_mx_quant(x.npu(), activate_left=True, dst_type=292)
    assert same(y[:3], full[:3]) and not y[3:].cpu().float().any()


def test_refuses_what_the_operator_refuses():
    x = torch.randn(4, 64).to(torch.bfloat16).npu()
    raises_operator_error(
        lambda: torch_npu.npu_swiglu_mx_quant(x, swiglu_mode=2, axis=-2),
        "npu_swiglu_mx_quant: axis must be -1 when swiglu_mode is 2 or 3",
    )
    raises_operator_error(
        lambda: torch_npu.npu_swiglu_mx_quant(x, activate_dim=-2, swiglu_mode=1),
        "npu_swiglu_mx_quant: swiglu_mode must be 0 when activate_dim is not the last dim",
    )


def test_dual_axis_quantises_the_activation_both_ways():
    x = (torch.randn(70, 64, generator=torch.Generator().manual_seed(6)) * 3).to(torch.bfloat16)
    y1, s1, y2, s2 = torch_npu.npu_swiglu_mx_quant_with_dual_axis(x.npu())
    act = reference(x, 0, True)
    for axis, y, s in ((-1, y1, s1), (-2, y2, s2)):
        want_y, want_s = torch_npu.npu_dynamic_mx_quant(act.npu(), axis=axis, dst_type=24, scale_alg=1)
        assert same(y, want_y) and same(s, want_s)


def test_dual_axis_restarts_row_blocks_at_each_group():
    """op-plugin's case: x all ones [4, 8], group_index [2, 4]: every block scale is 118 (2^-9, the cuBLAS rule for
    silu(1) / 448), one block per group, so mxscale2 is [2, 4, 2] with a zero pad beside each."""
    x = torch.ones(4, 8, dtype=torch.bfloat16)
    y1, s1, y2, s2 = torch_npu.npu_swiglu_mx_quant_with_dual_axis(x.npu(), group_index=torch.tensor([2, 4]).npu())
    pair = torch.tensor([118, 0], dtype=torch.uint8)
    assert torch.equal(s1.cpu(), pair.expand(4, 1, 2)) and torch.equal(s2.cpu(), pair.expand(2, 4, 2))
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(100, 32, generator=g) * 2).to(torch.float16)
    _, _, y2, s2 = torch_npu.npu_swiglu_mx_quant_with_dual_axis(x.npu(), group_index=torch.tensor([30, 100]).npu())
    act = reference(x, 0, True)
    want = torch_npu.npu_grouped_dynamic_mx_quant(act.npu(), torch.tensor([30, 100]).npu(), dst_type=24, scale_alg=1)
    assert same(y2, want[0]) and same(s2, want[1])


@pytest.mark.parametrize("left", [True, False])
def test_dual_axis_backward_quantises_the_swiglu_gradient_both_ways(left):
    g = torch.Generator().manual_seed(8)
    x = (torch.randn(70, 64, generator=g) * 2).to(torch.bfloat16)
    y_grad = torch.randn(70, 32, generator=g).to(torch.bfloat16)
    xf, dy = x.float(), y_grad.float()
    first, second = xf[:, :32], xf[:, 32:]
    gated, linear = (first, second) if left else (second, first)
    sig = torch.sigmoid(gated)
    d_gated, d_linear = dy * linear * sig * (1 + gated * (1 - sig)), dy * gated * sig  # d silu(g) * l
    dx = torch.cat([d_gated, d_linear] if left else [d_linear, d_gated], dim=1)
    outs = torch_npu._npu_swiglu_backward_mx_quant_with_dual_axis(x.npu(), y_grad.npu(), activate_left=left)
    for axis, y, s in ((-1, outs[0], outs[1]), (-2, outs[2], outs[3])):
        want_y, want_s = torch_npu.npu_dynamic_mx_quant(dx.npu(), axis=axis, dst_type=24, scale_alg=1)
        assert same(s, want_s) and same(y, want_y)
    raises_operator_error(
        lambda: torch_npu._npu_swiglu_backward_mx_quant_with_dual_axis(x.npu(), y_grad[:, :16].npu()),
        "_npu_swiglu_backward_mx_quant_with_dual_axis: y_grad must be [70, 32], got (70, 16)",
    )
