"""RmsNorm fused with a cast or a quantisation (npu_rms_norm_quant, npu_add_rms_norm_cast,
npu_add_rms_norm_quant, npu_add_rms_norm_dynamic_quant), each against the formula of CANN's
documentation written here, and against torch_npu's own unfused operators."""

import pytest
import torch
from error_cases import raises_operator_error, raises_unsupported_dtype, t
from op_check import check_op

import torch_npu
from torch_npu.ops.quant import unpack_int4

torch.manual_seed(0)
HALF = [torch.float16, torch.bfloat16]


def rms_f32(x, gamma, eps=1e-6):
    xf = x.float()
    return xf / torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps) * gamma.float()


def int8(v):
    return v.round().clamp(-128, 127).to(torch.int8)


def h(*shape):
    return t(*shape, dtype=torch.float16)


def inputs(dtype, rows=6, n=32):
    x1, x2 = torch.randn(rows, n).to(dtype), torch.randn(rows, n).to(dtype)
    gamma, beta = torch.randn(n).to(dtype), (torch.randn(n) * 0.1).to(dtype)
    return x1, x2, gamma, beta


@pytest.mark.parametrize("dtype", HALF)
def test_rms_norm_quant_multiplies_by_scale_and_adds_offset(dtype):
    x, _, gamma, beta = inputs(dtype)
    scale, offset = torch.rand(32) * 20 + 5, torch.randint(-4, 4, (32,)).float()

    def ref(x, gamma, beta, scale, offset):
        return int8((rms_f32(x, gamma) + beta.float()) * scale + offset)

    check_op(torch_npu.npu_rms_norm_quant, (x, gamma, beta, scale, offset), ref, atol=1, rtol=0)


@pytest.mark.parametrize("x_shape", [(16,), (1, 16), (1, 1, 1, 16), (3, 16)])
def test_rms_norm_quant_takes_gamma_and_beta_as_one_row(x_shape):
    # RmsNormQuant's gamma / beta are [D] or [1, D]; the [1, D] form gives the [D] form's values, in x's shape
    x, gamma, beta = torch.randn(x_shape).half(), torch.randn(1, 16).half(), torch.randn(1, 16).half()
    scale, offset = torch.tensor([0.7]).half(), torch.tensor([2], dtype=torch.int8)
    rows = torch_npu.npu_rms_norm_quant(*(v.npu() for v in (x, gamma, beta, scale, offset)))
    flat = torch_npu.npu_rms_norm_quant(*(v.npu() for v in (x, gamma[0], beta[0], scale, offset)))
    assert rows.shape == x.shape and torch.equal(rows.cpu(), flat.cpu())
    assert torch.equal(rows.cpu(), int8((rms_f32(x, gamma[0]) + beta[0].float()) * scale.float() + offset.float()))


def test_rms_norm_quant_to_int4_packs_eight_values_per_int32():
    x, _, gamma, beta = inputs(torch.float16)
    scale, offset = torch.tensor([3.0]), torch.tensor([0.0])
    packed = torch_npu.npu_rms_norm_quant(*(v.npu() for v in (x, gamma, beta, scale, offset)), dst_dtype=torch.quint4x2)
    assert packed.dtype == torch.int32 and packed.shape == (6, 4)
    want = ((rms_f32(x, gamma) + beta.float()) * 3.0).round().clamp(-8, 7).to(torch.int8)
    assert (unpack_int4(packed.cpu()).int() - want.int()).abs().max() <= 1


@pytest.mark.parametrize("dtype", HALF)
def test_add_rms_norm_cast_returns_float32_and_input_dtype_results(dtype):
    x1, x2, gamma, _ = inputs(dtype)

    def ref(x1, x2, gamma):
        x = x1 + x2
        xf = x.float()
        rstd = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6)
        y2 = (xf * rstd * gamma.float()).to(dtype)
        return y2.float(), y2, rstd, x

    y1, y2, rstd, x = check_op(torch_npu.npu_add_rms_norm_cast, (x1, x2, gamma), ref, atol=1e-2, rtol=1e-2)
    y_unfused, rstd_unfused, x_unfused = torch_npu.npu_add_rms_norm(x1.npu(), x2.npu(), gamma.npu())
    for fused, unfused in ((y2, y_unfused), (rstd, rstd_unfused), (x, x_unfused)):
        assert torch.equal(fused.cpu(), unfused.cpu())
    assert torch.equal(y1.cpu(), y2.cpu().float())


@pytest.mark.parametrize("div_mode", [True, False])
@pytest.mark.parametrize("with_beta", [True, False])
def test_add_rms_norm_quant_quantises_once_or_twice(div_mode, with_beta):
    x1, x2, gamma, beta = inputs(torch.bfloat16)
    s1, s2 = torch.rand(32) + 0.02, torch.rand(32) + 0.02
    z1, z2 = torch.randint(-3, 3, (32,)).float(), torch.randint(-3, 3, (32,)).float()
    beta = beta if with_beta else None

    def ref(x1, x2, gamma, s1, z1, beta, s2, z2, div_mode):
        y = rms_f32(x1 + x2, gamma) + (beta.float() if beta is not None else 0.0)
        q = (lambda s, z: int8(y / s + z)) if div_mode else (lambda s, z: int8(y * s + z))
        return q(s1, z1), q(s2, z2), x1 + x2

    args = (x1, x2, gamma, s1, z1, beta, s2, z2)
    check_op(torch_npu.npu_add_rms_norm_quant, args, ref, {"div_mode": div_mode}, atol=1, rtol=0)


def test_add_rms_norm_quant_without_scales2_gives_zeros_for_y2_and_agrees_with_npu_quantize():
    x1, x2, gamma, _ = inputs(torch.float16)
    scales = torch.rand(32) + 0.05
    y1, y2, x = torch_npu.npu_add_rms_norm_quant(x1.npu(), x2.npu(), gamma.npu(), scales.npu(), None)
    assert y1.dtype == torch.int8 and not y2.any()
    # the unfused path: float32 rms_norm (npu_rms_norm on float32 input), then npu_quantize along the last dim
    y, _ = torch_npu.npu_rms_norm((x1 + x2).float().npu(), gamma.float().npu())
    unfused = torch_npu.npu_quantize(y, scales.npu(), None, torch.qint8, axis=-1)
    assert torch.equal(y1.cpu(), unfused.cpu()) and torch.equal(x.cpu(), (x1 + x2))


@pytest.mark.parametrize("smooth", ["none", "one", "both"])
def test_add_rms_norm_dynamic_quant_scales_each_row_to_127(smooth):
    x1, x2, gamma, beta = inputs(torch.float16)
    s1, s2 = torch.rand(32) + 0.5, torch.rand(32) + 0.5
    kwargs = {"beta": beta}
    if smooth in ("one", "both"):
        kwargs["smooth_scale1"] = s1
    if smooth == "both":
        kwargs["smooth_scale2"] = s2

    def ref(x1, x2, gamma, beta, smooth_scale1=None, smooth_scale2=None):
        y = rms_f32(x1 + x2, gamma) + beta.float()

        def dynamic(s):
            v = y * s if s is not None else y
            scale = v.abs().amax(-1) / 127
            return int8(v / scale[:, None]), scale

        y1, scale1 = dynamic(smooth_scale1)
        if smooth == "both":
            y2, scale2 = dynamic(smooth_scale2)
        else:
            y2, scale2 = torch.zeros((), dtype=torch.int8), torch.zeros(())
        return y1, y2, x1 + x2, scale1, scale2

    y1, _, _, scale1, _ = check_op(
        lambda a, b, g, **kw: torch_npu.npu_add_rms_norm_dynamic_quant(a, b, g, **kw),
        (x1, x2, gamma),
        lambda a, b, g, **kw: ref(a, b, g, **kw),
        kwargs,
        atol=1e-5,
        rtol=1e-5,
    )
    assert (y1.abs().amax(-1) == 127).all()
    # the unfused path: the same float32 y through npu_dynamic_quant
    y = torch_npu.npu_rms_norm((x1 + x2).float().npu(), gamma.float().npu())[0] + beta.float().npu()
    smooth1 = kwargs.get("smooth_scale1")
    unfused_y, unfused_scale = torch_npu.npu_dynamic_quant(y, smooth_scales=None if smooth1 is None else smooth1.npu())
    assert torch.equal(y1.cpu(), unfused_y.cpu()) and torch.equal(scale1.cpu(), unfused_scale.cpu())


def test_add_rms_norm_dynamic_quant_output_mask_picks_the_quantisations():
    x1, x2, gamma, _ = (v.npu() for v in inputs(torch.float16))
    y1, y2, _, scale1, scale2 = torch_npu.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, output_mask=[False, True])
    assert y1.shape == () and scale1.shape == () and y2.shape == (6, 32) and scale2.shape == (6,)
    packed = torch_npu.npu_add_rms_norm_dynamic_quant(x1, x2, gamma, y_dtype=torch.quint4x2)[0]
    assert packed.dtype == torch.int32 and packed.shape == (6, 4)


NORM_QUANT_ERRORS = [
    (
        lambda: torch_npu.npu_add_rms_norm_quant(h(2, 8), h(2, 8), h(8), h(8), None, axis=0),
        "npu_add_rms_norm_quant: axis only support -1.",
    ),
    (
        lambda: torch_npu.npu_add_rms_norm_cast(h(2, 8), h(2, 4), h(8)),
        "npu_add_rms_norm_cast: The shape of x1 (2, 8) and x2 (2, 4) must be the same",
    ),
    (
        lambda: torch_npu.npu_add_rms_norm_dynamic_quant(h(8), h(8), h(8)),
        "npu_add_rms_norm_dynamic_quant: The x1 should be in 2~8D",
    ),
    (
        lambda: torch_npu.npu_add_rms_norm_dynamic_quant(h(2, 8), h(2, 8), h(8), output_mask=[False, False]),
        "npu_add_rms_norm_dynamic_quant: When the output_mask is not empty, at least one of y1 and y2 must be output.",
    ),
    (
        lambda: torch_npu.npu_add_rms_norm_dynamic_quant(h(2, 4), h(2, 4), h(4), y_dtype=torch.quint4x2),
        "npu_add_rms_norm_dynamic_quant: The last dim input shape must be divisible by 8 if y dtype is "
        "torch.quint4x2, got 4",
    ),
    (
        lambda: torch_npu.npu_rms_norm_quant(h(2, 8), h(8), h(8), h(1), h(1), dst_dtype=torch.float16),
        "npu_rms_norm_quant: dst_dtype=5: vnpu quantises to torch.int8 or torch.quint4x2 (int4 packed in int32)",
    ),
]


@pytest.mark.parametrize("call,message", NORM_QUANT_ERRORS, ids=[c[1][:60] for c in NORM_QUANT_ERRORS])
def test_norm_quant_invalid_arguments(call, message):
    raises_operator_error(call, message)


def test_norm_quant_refuses_float32_inputs_as_cann_does():
    raises_unsupported_dtype(
        lambda: torch_npu.npu_add_rms_norm_cast(t(2, 8), t(2, 8), t(8)),
        "call aclnnAddRmsNormCast failed, detail:EZ1001: Tensor x1 not implemented for DT_FLOAT, should be in dtype "
        "support list [DT_FLOAT16,DT_BFLOAT16,].",
    )
