"""torch_npu.atb.npu_mla_preprocess (ATB's fused MLA input pipeline) against a reference written here one token
and one head at a time from ATB's formulas: both quantisation modes, the three cache modes, fp16's int64
descales, weights in NZ block order, the out form, fake shapes and its argument errors."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

TOKENS, HIDDEN, Q_LORA, HEADS, NOPE, LATENT, ROPE = 3, 256, 64, 2, 16, 512, 64
BLOCKS, BLOCK_SIZE, EPS = 3, 16, 1e-5
SLOTS = torch.tensor([5, -1, 33], dtype=torch.int32)


def _inputs(dtype, per_tensor=True):
    g = torch.Generator().manual_seed(11)

    def rand(*shape, low=-1.0, high=1.0):
        return (torch.rand(*shape, generator=g) * (high - low) + low).to(dtype)

    def ints(*shape, low=-8, high=8, kind=torch.int8):
        return torch.randint(low, high, shape, generator=g).to(kind)

    rows = LATENT + ROPE + Q_LORA
    args = {
        "input": rand(TOKENS, HIDDEN, low=-2, high=2), "gamma0": rand(HIDDEN), "beta0": rand(HIDDEN, low=-0.5, high=0.5),
        "wdqkv": ints(rows, HIDDEN), "descale0": torch.rand(rows, generator=g) / 100,
        "gamma1": rand(Q_LORA), "beta1": rand(Q_LORA, low=-0.5, high=0.5),
        "wuq": ints(HEADS * (NOPE + ROPE), Q_LORA), "descale1": torch.rand(HEADS * (NOPE + ROPE), generator=g) / 100,
        "gamma2": rand(LATENT), "cos": rand(TOKENS, ROPE), "sin": rand(TOKENS, ROPE), "wuk": rand(HEADS, NOPE, LATENT),
        "kv_cache": rand(BLOCKS, BLOCK_SIZE, 1, LATENT), "kv_cache_rope": rand(BLOCKS, BLOCK_SIZE, 1, ROPE),
        "slotmapping": SLOTS,
    }  # fmt: skip
    options = {"quant_mode": "per_tensor_quant_asymm" if per_tensor else "per_token_quant_symm"}
    if per_tensor:
        options |= {"quant_scale0": torch.tensor([0.05]).to(dtype), "quant_offset0": torch.tensor([3], dtype=torch.int8),
                    "bias0": ints(rows, kind=torch.int32), "quant_scale1": torch.tensor([0.04]).to(dtype),
                    "quant_offset1": torch.tensor([-2], dtype=torch.int8),
                    "bias1": ints(HEADS * (NOPE + ROPE), kind=torch.int32)}  # fmt: skip
    return args, options


def _quant_stage(row, gamma, beta, scale, offset, dtype):
    """One token's RmsNormQuant: (int8 values as float, per-token descale or None)."""
    y = row.float() * torch.rsqrt(row.float().pow(2).mean() + EPS) * gamma.float() + beta.float()
    if scale is None:
        y = y.to(dtype).float()
        token_scale = 127.0 / y.abs().max()
        return torch.round(y * token_scale).clamp(-128, 127), 1.0 / token_scale
    return torch.round(y * (1.0 / scale.float()) + offset.float()).clamp(-128, 127), None


def _dequant(x, weight, descale, bias, token_descale, dtype):
    acc = (x.double() @ weight.double().t()).to(torch.int64)
    if token_descale is None:
        return ((acc + bias.long()).float() * descale).to(dtype)
    return (acc.float() * descale * token_descale).to(dtype)


def _rope(x, cos, sin):
    first, second = x.float().chunk(2)
    return x.float() * cos.float() + torch.cat([-second, first]) * sin.float()


def _reference(args, options):
    """(q_nope [tokens, heads, 512], q_rope [tokens, heads, 64], latent rows [tokens, 512], rope rows [tokens, 64])."""
    dtype, o = args["input"].dtype, options
    q_nope, q_rope = torch.zeros(TOKENS, HEADS, LATENT, dtype=dtype), torch.zeros(TOKENS, HEADS, ROPE, dtype=dtype)
    latent, k_rope = torch.zeros(TOKENS, LATENT, dtype=dtype), torch.zeros(TOKENS, ROPE, dtype=dtype)
    for t in range(TOKENS):
        x0, d0 = _quant_stage(args["input"][t], args["gamma0"], args["beta0"], o.get("quant_scale0"), o.get("quant_offset0"), dtype)  # fmt: skip
        h = _dequant(x0, args["wdqkv"], args["descale0"], o.get("bias0"), d0, dtype)
        x1, d1 = _quant_stage(h[LATENT + ROPE :], args["gamma1"], args["beta1"], o.get("quant_scale1"), o.get("quant_offset1"), dtype)  # fmt: skip
        q = _dequant(x1, args["wuq"], args["descale1"], o.get("bias1"), d1, dtype).view(HEADS, NOPE + ROPE)
        for head in range(HEADS):
            q_nope[t, head] = (q[head, :NOPE].float() @ args["wuk"][head].float()).to(dtype)
            q_rope[t, head] = _rope(q[head, NOPE:], args["cos"][t], args["sin"][t]).to(dtype)
        kv = h[:LATENT].float()
        latent[t] = (kv * torch.rsqrt(kv.pow(2).mean() + EPS) * args["gamma2"].float()).to(dtype)
        k_rope[t] = _rope(h[LATENT : LATENT + ROPE], args["cos"][t], args["sin"][t]).to(dtype)
    return q_nope, q_rope, latent, k_rope


def _npu(args, options):
    return {k: v.npu() for k, v in args.items()}, {k: v.npu() if torch.is_tensor(v) else v for k, v in options.items()}


def _call(args, options):
    a, o = _npu(args, options)
    return torch_npu.atb.npu_mla_preprocess(*a.values(), **o)


def _slot_rows(cache):
    """The cache rows of SLOTS' non-negative slots, [n, width], and the other rows."""
    rows = cache.reshape(BLOCKS * BLOCK_SIZE, -1)
    written = SLOTS[SLOTS >= 0].long()
    others = torch.ones(rows.shape[0], dtype=torch.bool)
    others[written] = False
    return rows[written], rows[others]


@pytest.mark.parametrize("per_tensor", [True, False], ids=["per_tensor_quant_asymm", "per_token_quant_symm"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_queries_and_cache_rows_follow_the_reference(dtype, per_tensor):
    args, options = _inputs(dtype, per_tensor)
    q_nope, kv_cache, q_rope, rope_cache = _call(args, options)
    want_nope, want_rope, latent, k_rope = _reference(args, options)
    tolerance = {"atol": 2e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {"atol": 2e-3, "rtol": 2e-3}
    torch.testing.assert_close(q_nope.cpu(), want_nope, **tolerance)
    torch.testing.assert_close(q_rope.cpu(), want_rope, **tolerance)
    written = SLOTS >= 0
    for cache, source, want in ((kv_cache, args["kv_cache"], latent), (rope_cache, args["kv_cache_rope"], k_rope)):
        rows, others = _slot_rows(cache.cpu())
        torch.testing.assert_close(rows, want[written], **tolerance)
        assert torch.equal(others, _slot_rows(source)[1])  # the padded token (slot -1) wrote nothing
    assert torch.equal(_npu(args, options)[0]["kv_cache"].cpu(), args["kv_cache"])  # the functional form copies


@pytest.mark.parametrize("in_place", [True, False], ids=["caches_themselves", "other_tensors"])
def test_out_form_writes_the_given_tensors_and_equals_the_functional_form(in_place):
    args, options = _inputs(torch.float16)
    a, o = _npu(args, options)
    caches = (a["kv_cache"], a["kv_cache_rope"]) if in_place else (torch.zeros_like(a["kv_cache"]), torch.ones_like(a["kv_cache_rope"]))  # fmt: skip
    outs = {"q_out0": torch.empty(TOKENS, HEADS, LATENT, dtype=torch.float16, device="npu"),
            "kv_cache_out0": caches[0], "q_out1": torch.empty(TOKENS, HEADS, ROPE, dtype=torch.float16, device="npu"),
            "kv_cache_out1": caches[1]}  # fmt: skip
    functional = _call(args, options)
    returned = torch_npu.atb.npu_mla_preprocess(*a.values(), **o, **outs)
    assert all(r is outs[name] for r, name in zip(returned, outs, strict=True))
    for written, expected in zip(returned, functional, strict=True):
        assert torch.equal(written.cpu(), expected.cpu())


def test_fp16_int64_descales_and_nz_block_weights_give_the_same_result():
    args, options = _inputs(torch.float16)
    want = _call(args, options)
    packed = dict(args)
    for name in ("descale0", "descale1"):  # ATB's form: the float32's bits in an int64
        packed[name] = args[name].view(torch.int32).to(torch.int64)
    for name in ("wdqkv", "wuq"):  # [rows, cols] -> [1, cols / 32, rows, 32]
        w = args[name]
        packed[name] = w.reshape(w.shape[0], -1, 32).permute(1, 0, 2).unsqueeze(0).contiguous()
    packed["wuk"] = args["wuk"].reshape(HEADS, NOPE, -1, 16).permute(0, 2, 1, 3).contiguous()
    for got, expected in zip(_call(packed, options), want, strict=True):
        assert torch.equal(got.cpu(), expected.cpu())


def _nz(cache, blocks=BLOCKS):
    """[blocks, block_size, 1, width] -> FRACTAL_NZ [blocks, width / c0, block_size, c0]."""
    c0 = 32 if cache.dtype == torch.int8 else 16
    nd = cache.reshape(blocks, BLOCK_SIZE, -1, c0).permute(0, 2, 1, 3).contiguous()
    return torch_npu.npu_format_cast(nd.npu(), 29)


def _nz_rows(cache):
    return cache.cpu().permute(0, 2, 1, 3).reshape(BLOCKS * BLOCK_SIZE, -1)


@pytest.mark.parametrize("tagged", [True, False], ids=["fractal_nz_tag", "nd_tag"])
def test_nzcache_writes_the_same_rows_in_fractal_nz(tagged):
    """The mode, not the format tag, says the layout (the card's kernel reads no tag either)."""
    args, options = _inputs(torch.float16)
    nd = _call(args, options)
    a, o = _npu(args, options)
    a["kv_cache"], a["kv_cache_rope"] = _nz(args["kv_cache"]), _nz(args["kv_cache_rope"])
    if not tagged:
        a["kv_cache"], a["kv_cache_rope"] = (torch_npu.npu_format_cast(a[name], 2) for name in ("kv_cache", "kv_cache_rope"))  # fmt: skip
    q_nope, kv_cache, q_rope, rope_cache = torch_npu.atb.npu_mla_preprocess(*a.values(), **o, cache_mode="nzcache")
    assert torch.equal(q_nope.cpu(), nd[0].cpu()) and torch.equal(q_rope.cpu(), nd[2].cpu())
    assert torch_npu.get_npu_format(kv_cache) == (29 if tagged else 2)
    assert torch.equal(_nz_rows(kv_cache), nd[1].cpu().reshape(BLOCKS * BLOCK_SIZE, -1))
    assert torch.equal(_nz_rows(rope_cache), nd[3].cpu().reshape(BLOCKS * BLOCK_SIZE, -1))


def test_nz_caches_sized_by_the_query_heads_are_addressed_as_consecutive_token_blocks():
    """op-plugin's samples size NZ caches [blocks, heads * 512 / 32, block_size, 32]: the kernel reads them as
    blocks of block_size * 512 values one after another, so they hold the rows of a cache of heads times more
    blocks."""
    args, options = _inputs(torch.float16)
    a, o = _npu(args, options)
    wide = {"kv_cache": torch.zeros(BLOCKS, HEADS * LATENT // 16, BLOCK_SIZE, 16, dtype=torch.float16),
            "kv_cache_rope": torch.zeros(BLOCKS, HEADS * ROPE // 16, BLOCK_SIZE, 16, dtype=torch.float16)}  # fmt: skip
    a |= {name: torch_npu.npu_format_cast(cache.npu(), 29) for name, cache in wide.items()}
    _, kv_cache, _, rope_cache = torch_npu.atb.npu_mla_preprocess(*a.values(), **o, cache_mode="nzcache")
    narrow = {name: torch.zeros(BLOCKS * HEADS, BLOCK_SIZE, 1, width, dtype=torch.float16)
              for name, width in (("kv_cache", LATENT), ("kv_cache_rope", ROPE))}  # fmt: skip
    a |= {name: _nz(cache, blocks=BLOCKS * HEADS) for name, cache in narrow.items()}
    _, want_kv, _, want_rope = torch_npu.atb.npu_mla_preprocess(*a.values(), **o, cache_mode="nzcache")
    assert kv_cache.shape == wide["kv_cache"].shape and torch.equal(kv_cache.cpu().flatten(), want_kv.cpu().flatten())
    assert torch.equal(rope_cache.cpu().flatten(), want_rope.cpu().flatten())
    assert want_kv.cpu().abs().sum() > 0  # (the rows were written)


def test_int8_nzcache_quantises_the_latent_and_the_query_per_head():
    args, options = _inputs(torch.float16)
    _, _, q_rope, _ = nd = _call(args, options)
    a, o = _npu(args, options)
    int8_cache = torch.zeros(BLOCKS, BLOCK_SIZE, 1, LATENT, dtype=torch.int8)
    a["kv_cache"], a["kv_cache_rope"] = _nz(int8_cache), _nz(args["kv_cache_rope"])
    ctkv_scale, q_nope_scale = torch.tensor([0.02], dtype=torch.float16), torch.tensor([3.0, -5.0], dtype=torch.float16)
    q_nope, kv_cache, rope, _ = torch_npu.atb.npu_mla_preprocess(
        *a.values(), **o, cache_mode="int8_nzcache", ctkv_scale=ctkv_scale.npu(), q_nope_scale=q_nope_scale.npu()
    )
    assert q_nope.dtype == kv_cache.dtype == torch.int8 and torch.equal(rope.cpu(), q_rope.cpu())
    scaled = (nd[0].cpu().float() * q_nope_scale.float()[:, None]).half().float()
    assert torch.equal(q_nope.cpu(), torch.round(scaled).clamp(-128, 127).to(torch.int8))
    latent_rows = _slot_rows(nd[1].cpu())[0].float()
    quotient = (latent_rows * (1 / ctkv_scale).float()).half().float()
    assert torch.equal(_slot_rows(_nz_rows(kv_cache))[0], torch.round(quotient).clamp(-128, 127).to(torch.int8))


def test_fake_tensors_give_op_plugins_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    args, options = _inputs(torch.bfloat16)
    with FakeTensorMode(allow_non_fake_inputs=True):
        a, o = _npu(args, options)
        q_nope, kv_cache, q_rope, rope_cache = torch_npu.atb.npu_mla_preprocess(*a.values(), **o)
    assert (q_nope.shape, q_nope.dtype) == ((TOKENS, HEADS, LATENT), torch.bfloat16)
    assert (q_rope.shape, kv_cache.shape, rope_cache.shape) == ((TOKENS, HEADS, ROPE), args["kv_cache"].shape, args["kv_cache_rope"].shape)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cache_mode": "kvcache"}, "Unsupported cache_mode value: 'kvcache'"),
        ({"quant_mode": "unquant"}, "Unsupported quant_mode value: 'unquant'"),
        ({"quant_scale1": None}, "quant_mode 'per_tensor_quant_asymm' needs quant_scale1 and quant_offset1"),
        (
            {"cache_mode": "nzcache"},
            "kv_cache must be a contiguous [blocks, 512 / 16, block_size, 16] cache for cache_mode 'nzcache', got (3, 16, 1, 512)",  # fmt: skip
        ),  # fmt: skip
        (
            {"cache_mode": "int8_nzcache", "ctkv_scale": None, "kv_cache": "nz", "kv_cache_rope": "nz"},
            "cache_mode 'int8_nzcache' needs ctkv_scale and q_nope_scale",
        ),  # fmt: skip
        ({"wuq": "short"}, "wuq must be [2 * (16 + 64), 64], got (150, 64)"),
        (
            {"kv_cache_rope": "wide"},
            "kv_cache_rope must be [blocks, block_size, 1, 64] for cache_mode 'krope_ctkv', got (3, 16, 1, 128)",
        ),  # fmt: skip
        ({"cos": "short"}, "cos must be [3, 64], got (2, 64)"),
        ({"slotmapping": "short"}, "slotmapping must hold 3 slots, got 2"),
        ({"wdqkv": "short"}, "wdqkv must be [576 + q_lora (64), 256], got (639, 256)"),
        ({"input": torch.float32}, "input must be float16 or bfloat16 [tokens, hidden], got torch.float32 (3, 256)"),
        ({"wuq": torch.float16}, "wuq must be int8, got torch.float16"),
        ({"wdqkv": lambda w: w[None]}, "wdqkv must be [rows, hidden] or [1, hidden / 32, rows, 32], got (1, 640, 256)"),
        ({"wuk": lambda w: w[0]}, "wuk must be [heads, nope, 512] or [heads, 32, nope, 16], got (16, 512)"),
    ],
)
def test_argument_errors_name_the_argument(change, message):
    args, options = _inputs(torch.float16)
    a, o = _npu(args, options)
    for name, value in change.items():
        if isinstance(value, torch.dtype):
            a[name] = a[name].to(value)
        elif callable(value):
            a[name] = value(a[name])
        elif value == "nz":
            a[name] = _nz(args[name])
        elif value == "wide":
            a[name] = torch.zeros(BLOCKS, BLOCK_SIZE, 1, 2 * ROPE, dtype=torch.float16).npu()
        elif value == "short":
            a[name] = a[name][:-10] if name == "wuq" else a[name][:-1]  # (wdqkv: one row short)
        elif name in a:
            a[name] = value
        else:
            o[name] = value
    raises_operator_error(lambda: torch_npu.atb.npu_mla_preprocess(*a.values(), **o), f"npu_mla_preprocess: {message}")
