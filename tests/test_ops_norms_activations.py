"""torch_npu operators: normalisations, activations, softmax variants, rotary embeddings, layout
operators — each against an independent composition written here."""

import math

import pytest
import torch
import torch.nn.functional as F
from error_cases import raises_operator_error, t
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def rms_ref(x, gamma, eps=1e-6):
    xf = x.float()
    rstd = 1.0 / torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps)
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_npu_rms_norm(dtype):
    x, g = torch.randn(2, 5, 16).to(dtype), torch.randn(16).to(dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    check_op(torch_npu.npu_rms_norm, (x, g), rms_ref, grad=(0, 1) if dtype == torch.float32 else (), atol=tol, rtol=tol)


def test_npu_rms_norm_over_two_dims_and_bad_gamma():
    x, g = torch.randn(3, 4, 8), torch.randn(4, 8)

    def ref(x, g):
        rstd = 1.0 / torch.sqrt(x.pow(2).mean((-2, -1), keepdim=True) + 1e-6)
        return x * rstd * g, rstd

    check_op(torch_npu.npu_rms_norm, (x, g), ref, grad=(0, 1))
    with pytest.raises(RuntimeError, match="gamma shape"):
        torch_npu.npu_rms_norm(x.npu(), torch.ones(5, device="npu"))


def test_npu_add_rms_norm_and_gemma():
    x1, x2, g = torch.randn(4, 32), torch.randn(4, 32), torch.randn(32)

    def add_ref(a, b, g, epsilon=1e-6):
        y, rstd = rms_ref(a + b, g, epsilon)
        return y, rstd, a + b

    check_op(torch_npu.npu_add_rms_norm, (x1, x2, g), add_ref, kwargs={"epsilon": 1e-5})

    def gemma_ref(x, g, eps=1e-6):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return x * rstd * (1 + g), rstd

    check_op(torch_npu.npu_gemma_rms_norm, (x1, g), gemma_ref)


def test_npu_deep_norm():
    x, gx, beta, gamma = torch.randn(2, 3, 16), torch.randn(2, 3, 16), torch.randn(16), torch.randn(16)

    def ref(x, gx, beta, gamma, alpha=0.3, epsilon=1e-6):
        z = alpha * x + gx
        mean = z.mean(-1, keepdim=True)
        rstd = 1 / torch.sqrt(((z - mean) ** 2).mean(-1, keepdim=True) + epsilon)
        return mean, rstd, (z - mean) * rstd * gamma + beta

    check_op(torch_npu.npu_deep_norm, (x, gx, beta, gamma), ref, kwargs={"alpha": 0.5}, grad=(0, 1, 2, 3))


@pytest.mark.parametrize("additional_output", [True, False])
def test_npu_add_layer_norm(additional_output):
    x1, x2, g, b = torch.randn(3, 16), torch.randn(3, 16), torch.randn(16), torch.randn(16)

    def ref(x1, x2, g, b, epsilon=1e-5, additional_output=False):
        x = x1 + x2
        mean = x.mean(-1, keepdim=True)
        rstd = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + epsilon)
        return F.layer_norm(x, (16,), g, b, epsilon), mean, rstd, (x if additional_output else x.new_empty(0))

    check_op(
        torch_npu.npu_add_layer_norm,
        (x1, x2, g, b),
        ref,
        kwargs={"additional_output": additional_output},
        grad=(0, 1, 2, 3),
        atol=1e-5,
        rtol=1e-4,
    )


def test_npu_add_layer_norm_mixed_dtypes_compute_in_the_wider():
    # fp16 x1 + fp32 x2: the sum, y, mean and rstd are float32, as Ascend's golden test expects.
    x1, x2 = torch.randn(4, 32).half(), torch.randn(4, 32)
    g, b = torch.rand(32), torch.rand(32)
    y, mean, rstd, x = torch_npu.npu_add_layer_norm(x1.npu(), x2.npu(), g.npu(), b.npu(), 1e-5, True)
    ref_x = x1.float() + x2
    assert (y.dtype, mean.dtype, rstd.dtype, x.dtype) == (torch.float32,) * 4
    torch.testing.assert_close(x.cpu(), ref_x)
    torch.testing.assert_close(y.cpu(), F.layer_norm(ref_x, (32,), g, b, 1e-5), atol=1e-5, rtol=1e-4)


def test_npu_group_norm_silu():
    x, w, b = torch.randn(2, 8, 4, 4), torch.randn(8), torch.randn(8)

    def ref(x, w, b, group, eps=1e-5):
        g = x.reshape(2, group, -1)
        return (F.silu(F.group_norm(x, group, w, b, eps)), g.mean(-1), 1 / torch.sqrt(g.var(-1, unbiased=False) + eps))

    check_op(torch_npu.npu_group_norm_silu, (x, w, b, 4), ref, atol=1e-5, rtol=1e-4)
    with pytest.raises(RuntimeError, match="group=3 must divide"):
        torch_npu.npu_group_norm_silu(x.npu(), w.npu(), b.npu(), 3)


@pytest.mark.parametrize("dim", [-1, 1])
def test_npu_swiglu(dim):
    x = torch.randn(4, 6, 8)

    def ref(x, dim=-1):
        a, b = x.chunk(2, dim)
        return a * torch.sigmoid(a) * b

    check_op(torch_npu.npu_swiglu, (x,), ref, kwargs={"dim": dim}, grad=(0,))
    with pytest.raises(RuntimeError, match="must be even"):
        torch_npu.npu_swiglu(torch.randn(3, 5, device="npu"))


@pytest.mark.parametrize("approximate,activate_left", [(0, False), (1, False), (1, True)])
def test_npu_geglu(approximate, activate_left):
    x = torch.randn(3, 10)

    def ref(x, dim=-1, approximate=1, activate_left=False):
        a, b = x.chunk(2, -1)

        def gelu_fn(t):
            if approximate == 1:
                return 0.5 * t * (1 + torch.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t**3)))
            return 0.5 * t * (1 + torch.erf(t / math.sqrt(2)))

        gelu = gelu_fn(a) if activate_left else gelu_fn(b)
        return (gelu * b, gelu) if activate_left else (a * gelu, gelu)

    check_op(
        torch_npu.npu_geglu, (x,), ref, kwargs={"approximate": approximate, "activate_left": activate_left}, grad=(0,)
    )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_npu_gelu(approximate):
    x = torch.randn(50)
    check_op(
        torch_npu.npu_gelu,
        (x,),
        lambda x, approximate: F.gelu(x, approximate=approximate),
        kwargs={"approximate": approximate},
        grad=(0,),
    )


@pytest.mark.parametrize("op", ["fast_gelu", "npu_fast_gelu"])
def test_fast_gelu_a2_formula(op):
    x = torch.randn(64)
    check_op(getattr(torch_npu, op), (x,), lambda x: x / (1 + torch.exp(-1.702 * x)), grad=(0,))


def test_npu_mish():
    x = torch.randn(40)
    check_op(torch_npu.npu_mish, (x,), lambda x: x * torch.tanh(F.softplus(x)), grad=(0,))


@pytest.mark.parametrize("fixed_triu_mask", [False, True])
def test_npu_scaled_masked_softmax(fixed_triu_mask):
    x = torch.randn(2, 2, 8, 8)
    mask = torch.rand(2, 1, 8, 8) > 0.7

    def ref(x, mask, scale=1.0, fixed_triu_mask=False):
        if fixed_triu_mask:
            mask = torch.ones(8, 8, dtype=torch.bool).triu(1)
        return torch.softmax((x * scale).masked_fill(mask, -10000.0), -1)

    check_op(
        torch_npu.npu_scaled_masked_softmax,
        (x, mask),
        ref,
        kwargs={"scale": 0.5, "fixed_triu_mask": fixed_triu_mask},
        grad=(0,),
    )


def test_npu_dropout_with_add_softmax_statistics_and_gradients():
    torch.manual_seed(0)
    a, x1 = torch.randn(2, 4, 16, 16, device="npu", requires_grad=True), torch.randn(2, 4, 16, 16, device="npu")
    mask, soft, drop = torch_npu.npu_dropout_with_add_softmax(a, x1, 0.5, 0.25, -1)
    expected_soft = torch.softmax(x1.cpu() + 0.5 * a.detach().cpu(), -1)
    torch.testing.assert_close(soft.detach().cpu(), expected_soft)
    assert mask.dtype == torch.uint8 and 0.2 < 1 - mask.float().mean().item() < 0.3
    torch.testing.assert_close(drop.detach().cpu(), expected_soft * mask.cpu() / 0.75)
    w = torch.randn_like(drop)
    (drop * w).sum().backward()
    a_ref = a.detach().cpu().requires_grad_(True)
    s = torch.softmax(x1.cpu() + 0.5 * a_ref, -1)
    (s * mask.cpu() / 0.75 * w.cpu()).sum().backward()
    torch.testing.assert_close(a.grad.cpu(), a_ref.grad, atol=1e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="prob must be in"):
        torch_npu.npu_dropout_with_add_softmax(a, x1, 1.0, 1.5, -1)


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


def rotate_interleave(x):
    out = torch.empty_like(x)
    out[..., 0::2] = -x[..., 1::2]
    out[..., 1::2] = x[..., 0::2]
    return out


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_npu_rotary_mul(mode):
    x, r1, r2 = torch.randn(2, 6, 4, 16), torch.randn(1, 6, 1, 16), torch.randn(1, 6, 1, 16)
    rot = rotate_half if mode == "half" else rotate_interleave
    check_op(
        torch_npu.npu_rotary_mul,
        (x, r1, r2),
        lambda x, r1, r2, rotary_mode: x * r1 + rot(x) * r2,
        kwargs={"rotary_mode": mode},
        grad=(0, 1, 2),
    )
    raises_operator_error(
        lambda: torch_npu.npu_rotary_mul(x.npu(), r1.npu(), r2.npu(), "quarter"),
        "The rotary_mode of npu_rotary_mul should be half or interleave, but got quarter",
    )


@pytest.mark.parametrize(
    "layout,shape,cshape",
    [("BSND", (2, 5, 4, 8), (2, 5, 1, 8)), ("BNSD", (2, 4, 5, 8), (2, 1, 5, 8)), ("TND", (7, 4, 8), (7, 1, 8))],
)
def test_npu_apply_rotary_pos_emb_writes_in_place(layout, shape, cshape):
    q, k = torch.randn(shape), torch.randn(shape)
    cos, sin = torch.randn(cshape), torch.randn(cshape)
    qn, kn = q.npu(), k.npu()
    oq, ok = torch_npu.npu_apply_rotary_pos_emb(qn, kn, cos.npu(), sin.npu(), layout)
    torch.testing.assert_close(oq.cpu(), q * cos + rotate_half(q) * sin)
    torch.testing.assert_close(ok.cpu(), k * cos + rotate_half(k) * sin)
    assert torch.equal(qn.cpu(), oq.cpu()) and torch.equal(kn.cpu(), ok.cpu())


def test_npu_apply_rotary_pos_emb_layout_names_and_quarter_mode():
    # op-plugin maps BNSD / SBND / TND and reads every other layout string ('BSH', the older name) as BSND.
    q, k = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 4, 8)
    cos, sin = torch.randn(2, 5, 1, 8), torch.randn(2, 5, 1, 8)
    oq, _ = torch_npu.npu_apply_rotary_pos_emb(q.npu(), k.npu(), cos.npu(), sin.npu(), "BSH")
    torch.testing.assert_close(oq.cpu(), q * cos + rotate_half(q) * sin)
    # 'quarter': each half rotated on its own, [x1, x2, x3, x4] -> [-x2, x1, -x4, x3].
    x1, x2, x3, x4 = q.chunk(4, -1)
    quarter = torch.cat((-x2, x1, -x4, x3), -1)
    oq, _ = torch_npu.npu_apply_rotary_pos_emb(q.npu(), k.npu(), cos.npu(), sin.npu(), rotary_mode="quarter")
    torch.testing.assert_close(oq.cpu(), q * cos + quarter * sin)
    raises_operator_error(
        lambda: torch_npu.npu_apply_rotary_pos_emb(q.npu(), k.npu(), cos.npu(), sin.npu(), rotary_mode="full"),
        "The layout should be half/quarter/interleave, but got full",
    )


def test_npu_interleave_rope():
    x, cos, sin = torch.randn(2, 3, 5, 8), torch.randn(2, 1, 5, 8), torch.randn(2, 1, 5, 8)

    def ref(x, cos, sin):
        b, n, s, d = x.shape
        de = x.view(b, n, s, d // 2, 2).transpose(-1, -2).reshape(b, n, s, d)
        return de * cos + rotate_half(de) * sin

    check_op(torch_npu.npu_interleave_rope, (x, cos, sin), ref)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_npu_interleave_rope_16bit_rounds_once(dtype):
    # op-plugin's reference computes 16-bit inputs in float32 and rounds the result once
    x, cos, sin = (torch.randn(shape).to(dtype) for shape in ((4, 4, 1, 64), (4, 1, 1, 64), (4, 1, 1, 64)))
    de = x.float().view(4, 4, 1, 32, 2).transpose(-1, -2).reshape(4, 4, 1, 64)
    want = (de * cos.float() + rotate_half(de) * sin.float()).to(dtype)
    got = torch_npu.npu_interleave_rope(x.npu(), cos.npu(), sin.npu())
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_npu_mrope_vllm_rotary(mode):
    t, nq, nk, hs, rot = 6, 4, 2, 16, 8
    positions = torch.tensor([0, 3, 1, 7, 2, 9])
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2).float() / rot))
    freqs = torch.outer(torch.arange(16).float(), inv)
    cache = torch.cat([freqs.cos(), freqs.sin()], -1)
    q, k = torch.randn(t, nq * hs), torch.randn(t, nk * hs)

    def ref(positions, q, k, cache, head_size, rotary_mode):
        cos, sin = cache[positions].chunk(2, -1)

        def apply(x):
            h = x.view(t, -1, head_size)
            r, rest = h[..., :rot], h[..., rot:]
            c, s = cos[:, None], sin[:, None]
            if rotary_mode == "half":
                out = torch.cat(
                    [r[..., : rot // 2] * c - r[..., rot // 2 :] * s, r[..., rot // 2 :] * c + r[..., : rot // 2] * s],
                    -1,
                )
            else:
                out = torch.empty_like(r)
                out[..., 0::2] = r[..., 0::2] * c - r[..., 1::2] * s
                out[..., 1::2] = r[..., 1::2] * c + r[..., 0::2] * s
            return torch.cat([out, rest], -1).reshape(x.shape)

        return apply(q), apply(k)

    check_op(
        lambda *a, rotary_mode: torch_npu.npu_mrope(*a, rotary_mode=rotary_mode),
        (positions, q, k, cache, hs),
        ref,
        kwargs={"rotary_mode": mode},
    )


def test_npu_mrope_multimodal_sections():
    t, hs = 4, 8
    positions = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1], [0, 1, 0, 1]])
    cache = torch.randn(8, 8)
    q, k = torch.randn(t, 2 * hs), torch.randn(t, hs)
    out_q, out_k = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), hs, mrope_section=[2, 1, 1])
    cos_all, sin_all = cache[positions].chunk(2, -1)  # [3, T, 4]
    cos = torch.cat([cos_all[0, :, :2], cos_all[1, :, 2:3], cos_all[2, :, 3:4]], -1)
    sin = torch.cat([sin_all[0, :, :2], sin_all[1, :, 2:3], sin_all[2, :, 3:4]], -1)
    h = k.view(t, 1, hs)
    want = torch.cat(
        [h[..., :4] * cos[:, None] - h[..., 4:] * sin[:, None], h[..., 4:] * cos[:, None] + h[..., :4] * sin[:, None]],
        -1,
    ).reshape(t, hs)
    torch.testing.assert_close(out_k.cpu(), want)
    with pytest.raises(RuntimeError, match="mrope_section"):
        torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), hs, mrope_section=[1, 1, 1])


def test_npu_mrope_rotates_16_bit_inputs_in_float32_and_rounds_once():
    t, hs = 8, 16
    positions = torch.arange(t).repeat(3, 1)
    q, k, cache = torch.randn(t, 2 * hs), torch.rand(t, hs), torch.rand(t, hs)
    want_q, want_k = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), hs, mrope_section=[4, 2, 2])
    for dtype in (torch.bfloat16, torch.float16):
        args = [x.to(dtype) for x in (q, k, cache)]
        exact = torch_npu.npu_mrope(positions.npu(), *(x.float().npu() for x in args), hs, mrope_section=[4, 2, 2])
        got = torch_npu.npu_mrope(positions.npu(), *(x.npu() for x in args), hs, mrope_section=[4, 2, 2])
        for g, e in zip(got, exact):
            assert g.dtype == dtype and torch.equal(g.cpu(), e.cpu().to(dtype))
    assert not torch.equal(want_q.cpu(), q)  # rotated


def test_npu_mrope_interleaved_cache_mode_takes_height_and_width_channels_in_turn():
    t, hs = 3, 16  # rotary_dim 16: 8 channels of cos / sin, sections [2, 3, 3]
    positions = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    cache = torch.randn(9, hs)
    q, k = torch.randn(t, hs), torch.randn(t, hs)
    out_q, _ = torch_npu.npu_mrope(
        positions.npu(), q.npu(), k.npu(), cache.npu(), hs, mrope_section=[2, 3, 3], cache_mode="interleave"
    )
    cos_all, sin_all = cache[positions].chunk(2, -1)  # [3, T, 8]
    rows = [0, 1, 2, 0, 1, 2, 0, 1]  # channel c from height if c % 3 == 1 (c < 9), width if c % 3 == 2 (c < 9)
    cos = torch.stack([cos_all[r, :, c] for c, r in enumerate(rows)], -1)
    sin = torch.stack([sin_all[r, :, c] for c, r in enumerate(rows)], -1)
    want = torch.cat([q[:, :8] * cos - q[:, 8:] * sin, q[:, 8:] * cos + q[:, :8] * sin], -1)
    torch.testing.assert_close(out_q.cpu(), want)


def test_npu_one_hot_and_pad():
    idx = torch.tensor([0, 2, 4, 7])

    def one_hot_ref(x, num_classes=-1, depth=1, on_value=1, off_value=0):
        out = torch.full((x.numel(), depth), float(off_value))
        for i, v in enumerate(x.tolist()):
            if 0 <= v < depth:
                out[i, v] = float(on_value)
        return out

    check_op(torch_npu.npu_one_hot, (idx,), one_hot_ref, kwargs={"depth": 5, "on_value": 3, "off_value": -1})
    x = torch.randn(2, 3)
    check_op(
        torch_npu.npu_pad,
        (x, [1, 0, 2, 3]),
        lambda x, p: torch.cat([torch.zeros(1, 8), torch.cat([torch.zeros(2, 2), x, torch.zeros(2, 3)], 1)], 0),
    )
    with pytest.raises(RuntimeError, match="paddings needs"):
        torch_npu.npu_pad(x.npu(), [1, 1])


@pytest.mark.parametrize("transpose_first", [True, False])
def test_npu_confusion_transpose(transpose_first):
    x = torch.randn(2, 3, 4, 5) if transpose_first else torch.randn(2, 3, 20)
    perm, shape = ([0, 2, 1, 3], [2, 4, 15]) if transpose_first else ([0, 2, 1, 3], [2, 3, 4, 5])

    def ref(x, perm, shape, transpose_first):
        return x.permute(perm).reshape(shape) if transpose_first else x.reshape(shape).permute(perm).contiguous()

    check_op(torch_npu.npu_confusion_transpose, (x, perm, shape, transpose_first), ref, grad=(0,))


def test_npu_transpose_and_dtype_cast():
    x = torch.randn(2, 3, 4)
    out = check_op(torch_npu.npu_transpose, (x, [2, 0, 1]), lambda x, p: x.permute(p).contiguous())
    assert out.is_contiguous()
    with pytest.raises(RuntimeError, match="not a permutation"):
        torch_npu.npu_transpose(x.npu(), [0, 0, 1])
    check_op(torch_npu.npu_dtype_cast, (x, torch.float16), lambda x, d: x.to(d), grad=(0,), atol=1e-3, rtol=1e-3)


def test_npu_scatter_nd_update_and_inplace():
    x = torch.zeros(4, 3)
    indices = torch.tensor([[0], [2]])
    updates = torch.tensor([[1.0, 2, 3], [4, 5, 6]])

    def ref(x, i, u):
        out = x.clone()
        out[0], out[2] = u[0], u[1]
        return out

    check_op(torch_npu.npu_scatter_nd_update, (x, indices, updates), ref)
    xn = x.npu()
    torch_npu.npu_scatter_nd_update_(xn, indices.npu(), updates.npu())
    assert torch.equal(xn.cpu(), ref(x, indices, updates))
    with pytest.raises(RuntimeError, match="updates"):
        torch_npu.npu_scatter_nd_update(xn, indices.npu(), torch.ones(3, 3, device="npu"))


def test_npu_linear_and_bmmv2():
    x, w, b = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6)
    check_op(torch_npu.npu_linear, (x, w, b), lambda x, w, b: x @ w.t() + b, grad=(0, 1, 2))
    a, m = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    check_op(torch_npu.npu_bmmV2, (a, m, []), lambda a, m, s: torch.bmm(a, m), grad=(0, 1))
    with pytest.raises(RuntimeError, match="in_features"):
        torch_npu.npu_linear(x.npu(), torch.randn(6, 7, device="npu"))


def test_ops_are_npu_only_and_torch_aliases_are_deprecated():
    with pytest.raises(NotImplementedError, match="npu::npu_rms_norm"):
        torch_npu.npu_rms_norm(torch.ones(2, 4), torch.ones(4))
    with pytest.raises(
        RuntimeError,
        match="torch.npu_swiglu is deprecated and will be removed in future version. "
        "Use torch_npu.npu_swiglu instead.",
    ):
        torch.npu_swiglu(torch.ones(2))
    assert torch_npu.npu_rms_norm._qualified_op_name == torch.ops.npu.npu_rms_norm._qualified_op_name


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
INVALID_ARGUMENT_ERRORS = [
    (lambda: torch_npu.npu_swiglu(t(3, 5)), "npu_swiglu: the size of dim -1 (5) must be even"),
    (lambda: torch_npu.npu_swiglu(t(4), 3), "npu_swiglu: dim=3 is out of range for a 1-D input"),
    (lambda: torch_npu.npu_geglu(t(4), approximate=2), "npu_geglu: approximate must be 0 (erf) or 1 (tanh), got 2"),
    (
        lambda: torch_npu.npu_gelu(t(4), approximate="fast"),
        "npu_gelu: approximate must be 'none' or 'tanh', got 'fast'",
    ),
    (
        lambda: torch_npu.npu_scaled_masked_softmax(t(2, 2), t(2, 2) > 0),
        "npu_scaled_masked_softmax: x must be 4-D (N, C, H, W), got 2-D",
    ),
    (
        lambda: torch_npu.npu_dropout_with_add_softmax(t(2, 2), t(2, 3), 1.0, 0.1, -1),
        "npu_dropout_with_add_softmax: self (2, 2) and x1 (2, 3) differ",
    ),
    (
        lambda: torch_npu.npu_rms_norm(t(2, 8), t(4)),
        "npu_rms_norm: gamma shape (4,) must match the last dims of x (2, 8)",
    ),
    (lambda: torch_npu.npu_add_rms_norm(t(2, 8), t(3, 8), t(8)), "npu_add_rms_norm: x1 (2, 8) and x2 (3, 8) differ"),
    (lambda: torch_npu.npu_deep_norm(t(2, 8), t(3, 8), t(8), t(8)), "npu_deep_norm: x (2, 8) and gx (3, 8) differ"),
    (lambda: torch_npu.npu_rotary_mul(t(4, 4), t(4, 4), t(4, 4)), "npu_rotary_mul: self must be 3-D or 4-D, got 2-D"),
    (lambda: torch_npu.npu_rotary_mul(t(1, 2, 3), t(3), t(3)), "npu_rotary_mul: the last dim (3) must be even"),
    (
        lambda: torch_npu.npu_apply_rotary_pos_emb(t(2, 2, 2), t(2, 2, 2), t(2, 2, 2), t(2, 2, 2)),
        "npu_apply_rotary_pos_emb: query must be 4-D for layout BSND (read as BSND), got 3-D",
    ),
    (
        lambda: torch_npu.npu_apply_rotary_pos_emb(t(2, 2, 2), t(2, 2, 2), t(2, 2, 2), t(2, 2, 2), "BSH"),
        "npu_apply_rotary_pos_emb: query must be 4-D for layout BSH (read as BSND), got 3-D",
    ),
    (
        lambda: torch_npu.npu_interleave_rope(t(2, 2, 2), t(2, 2, 2), t(2, 2, 2)),
        "npu_interleave_rope: x must be 4-D [B, N, S, D], got 3-D",
    ),
    (
        lambda: torch_npu.npu_mrope(t(2).long(), t(2, 8), t(2, 8), t(4, 4), 3),
        "npu_mrope: head_size=3 must divide query (8) and key (8) widths",
    ),
    (
        lambda: torch_npu.npu_mrope(t(2).long(), t(2, 8), t(2, 8), t(4, 16), 8),
        "npu_mrope: rotary_dim (cos_sin_cache.shape[-1]) exceeds head_size",
    ),
    (
        lambda: torch_npu.npu_mrope(t(2).long(), t(2, 8), t(2, 8), t(4, 8), 8, cache_mode="invalid_mode"),
        "npu_mrope: cache_mode only support default or interleave, got 'invalid_mode'",
    ),
    (lambda: torch_npu.npu_one_hot(t(3).long(), depth=0), "npu_one_hot: depth must be >= 1, got 0"),
    (
        lambda: torch_npu.npu_one_hot(t(3).long(), num_classes=4, depth=5),
        "npu_one_hot: num_classes=4 must be -1 or equal depth=5",
    ),
    (lambda: torch_npu.npu_pad(t(2, 2), [1]), "npu_pad: paddings needs 2 values per dim (4), got 1"),
    (
        lambda: torch_npu.npu_confusion_transpose(t(2, 6), [1, 0], [2, 2, 3], False),
        "npu_confusion_transpose: perm [1, 0] and shape [2, 2, 3] differ in rank",
    ),
    (lambda: torch_npu.npu_transpose(t(2, 3), [0, 0]), "npu_transpose: perm [0, 0] is not a permutation of 2 dims"),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(2, 2), t(1, 3).long(), t(1)),
        "npu_scatter_nd_update: indices' last dim (3) exceeds self's rank (2)",
    ),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(4, 3), t(2, 1).long(), t(3, 3)),
        "npu_scatter_nd_update: updates (3, 3) must be indices.shape[:-1] + self.shape[K:] = (2, 3)",
    ),
    (
        lambda: torch_npu.npu_dtype_cast(t(2), 99),
        "npu_dtype_cast: dtype=99 is not a dtype vnpu supports (torch.uint8, "
        "torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64, torch.complex64, "
        "torch.complex128, torch.bool, torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fn)",
    ),
    (lambda: torch_npu.npu_bmmV2(t(2, 3), t(4, 5), []), "npu_bmmV2: self (2, 3) and mat2 (4, 5) do not chain"),
]


@pytest.mark.parametrize("call,message", INVALID_ARGUMENT_ERRORS, ids=[c[1][:56] for c in INVALID_ARGUMENT_ERRORS])
def test_invalid_argument_error_message(call, message):
    raises_operator_error(call, message)


def test_dtype_cast_has_torch_npus_grad_node_and_a_second_derivative():
    r = torch.randn(5, device="npu", requires_grad=True)
    z = torch_npu.npu_dtype_cast(r * r, torch.float16)
    assert type(z.grad_fn).__name__ == "NpuDtypeCastBackward"
    (g,) = torch.autograd.grad(z.float().sum(), r, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), r)
    assert torch.equal(gg.cpu(), torch.full((5,), 2.0))
    assert torch.allclose(g.detach().cpu(), 2 * r.detach().cpu())


def test_in_place_scatter_nd_update_functionalizes_to_the_out_of_place_operator_and_a_copy():
    from torch.fx.experimental.proxy_tensor import make_fx

    def update(x, indices, updates):
        torch_npu.npu_scatter_nd_update_(x, indices, updates)
        return x

    x = torch.zeros(4, 2, device="npu")
    indices, updates = torch.tensor([[1], [3]], dtype=torch.int32, device="npu"), torch.ones(2, 2, device="npu")
    graph = make_fx(torch.func.functionalize(update, remove="mutations"))(x.clone(), indices, updates)
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert "npu.npu_scatter_nd_update.default" in targets and targets[-1] == "aten.copy_.default"
    assert not any("npu_scatter_nd_update_" in t for t in targets)
    eager, compiled = x.clone(), x.clone()
    update(eager, indices, updates)
    torch.compile(update, backend="aot_eager")(compiled, indices, updates)
    assert torch.equal(eager.cpu(), compiled.cpu()) and eager.sum().item() == 4.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gated_activations_compute_in_float32_and_round_once(dtype):
    """The card's vector unit computes SwiGLU / GeGLU / GeluMul of half inputs in float32 and rounds the result
    once (Ascend's own test of npu_swiglu compares with exactly that)."""
    x = torch.randn(64, 32).to(dtype)
    a, b = x.float().chunk(2, -1)
    assert torch.equal(torch_npu.npu_swiglu(x.npu()).cpu(), (F.silu(a) * b).to(dtype))
    y, gelu = torch_npu.npu_geglu(x.npu(), -1, 1, False)
    want_gelu = F.gelu(b, approximate="tanh")
    assert torch.equal(y.cpu(), (a * want_gelu).to(dtype)) and torch.equal(gelu.cpu(), want_gelu.to(dtype))
    assert torch.equal(torch_npu.npu_gelu_mul(x.npu()).cpu(), (F.gelu(a) * b).to(dtype))


def test_dtype_cast_gradient_has_a_grad_fn_under_create_graph_as_torch_npus():
    # torch_npu's backward marks the cotangent as requiring grad before casting it back, so under create_graph the
    # gradient is itself a NpuDtypeCastBackward output even for a constant cotangent (plain x.to(dtype) gives None)
    x = torch.randn(3, 3, requires_grad=True).to("npu")
    y = torch_npu.npu_dtype_cast(x, torch.half)
    (plain,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert plain.grad_fn is None and plain.dtype == torch.float32
    (graphed,) = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)
    assert type(graphed.grad_fn).__name__ == "NpuDtypeCastBackward" and torch.equal(
        graphed.detach().cpu(), torch.ones(3, 3)
    )
