"""npu_mla_prolog (+ _v2, _v3, _v3_functional) against the baseline of op-plugin's own test written out here
(down-projection, RmsNorm, up-projections, DeepSeek's interleaved RoPE, cache scatter), non-quantised and with an
int8 W_uq_qr quantised per token, over PA_BSND and PA_NZ caches."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S, HE, HCQ, HCKV, N, D, DR, BLOCKS, BLOCK = 2, 2, 32, 16, 32, 2, 8, 16, 3, 4


def _inputs(seed, int8_uq=False):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: (torch.rand(*s, generator=g) - 0.5).to(torch.bfloat16)  # noqa: E731
    w_uq = torch.randint(-100, 100, (HCQ, N * (D + DR)), generator=g, dtype=torch.int8) if int8_uq else r(HCQ, N * (D + DR))  # fmt: skip
    return dict(
        token_x=r(B, S, HE), weight_dq=r(HE, HCQ), weight_uq_qr=w_uq, weight_uk=r(N, D, HCKV),
        weight_dkv_kr=r(HE, HCKV + DR), rmsnorm_gamma_cq=r(HCQ) + 1, rmsnorm_gamma_ckv=r(HCKV) + 1,
        rope_sin=r(B, S, DR), rope_cos=r(B, S, DR),
    )  # fmt: skip


def baseline(inp, cache_index, deq=None, smooth=None, eps=1e-5):
    t = B * S
    x = inp["token_x"].float().reshape(t, HE)
    rms = lambda v, g: v / torch.sqrt((v**2).mean(-1, keepdim=True) + eps) * g.float()  # noqa: E731
    cq = rms(x @ inp["weight_dq"].float(), inp["rmsnorm_gamma_cq"])
    if deq is not None:
        scale = (cq * smooth).abs().amax(-1, keepdim=True) / 127
        qcqr = torch.round(cq * smooth / scale) @ inp["weight_uq_qr"].float() * scale * deq
    else:
        qcqr = cq @ inp["weight_uq_qr"].float()
    qcqr = qcqr.reshape(t, N, D + DR)
    query = torch.einsum("tnd,ndh->tnh", qcqr[..., :D], inp["weight_uk"].float())
    cos, sin = inp["rope_cos"].float().reshape(t, 1, DR), inp["rope_sin"].float().reshape(t, 1, DR)

    def rope(v):
        v = v.reshape(*v.shape[:-1], DR // 2, 2).transpose(-1, -2).reshape(v.shape)
        return v * cos + torch.cat([-v[..., DR // 2 :], v[..., : DR // 2]], -1) * sin

    kv = x @ inp["weight_dkv_kr"].float()
    kv_rows, kr_rows = rms(kv[:, :HCKV], inp["rmsnorm_gamma_ckv"]), rope(kv[:, None, HCKV:])[:, 0]
    return query, rope(qcqr[..., D:]), kv_rows, kr_rows, cq


def _paged(rows, cache_index, width, nz):
    flat = torch.zeros(BLOCKS * BLOCK, width)
    flat[cache_index.reshape(-1)] = rows
    cache = flat.reshape(BLOCKS, BLOCK, 1, width).to(torch.bfloat16)
    return cache.reshape(BLOCKS, BLOCK, width // 16, 16).permute(0, 2, 1, 3).contiguous() if nz else cache


@pytest.mark.parametrize("int8_uq, mode", [(False, "PA_BSND"), (True, "PA_BSND"), (False, "PA_NZ")])
def test_v1_and_v2_against_the_baseline(int8_uq, mode):
    inp = _inputs(1, int8_uq)
    cache_index = torch.tensor([5, 0, 9, 2])
    g = torch.Generator().manual_seed(2)
    deq, smooth = (torch.rand(1, N * (D + DR), generator=g) / 100, torch.rand(1, HCQ, generator=g) + 0.5) if int8_uq else (None, None)  # fmt: skip
    query, query_rope, kv_rows, kr_rows, _ = baseline(inp, cache_index, deq, smooth)
    nz = mode == "PA_NZ"
    shape = (lambda w: (BLOCKS, w // 16, BLOCK, 16)) if nz else (lambda w: (BLOCKS, BLOCK, 1, w))
    kv_cache, kr_cache = (torch.zeros(shape(w), dtype=torch.bfloat16).npu() for w in (HCKV, DR))
    kw = {k: v.npu() for k, v in inp.items()}
    extra = dict(dequant_scale_w_uq_qr=deq.npu(), smooth_scales_cq=smooth.npu()) if int8_uq else {}
    args = [kw[k] for k in ("token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq", "rmsnorm_gamma_ckv", "rope_sin", "rope_cos")]  # fmt: skip
    out = torch_npu.npu_mla_prolog_v2(*args, cache_index.npu(), kv_cache, kr_cache, cache_mode=mode, **extra)
    assert out[2] is kv_cache and out[3] is kr_cache and out[4].shape == (1,)  # op-plugin's placeholder
    tol = dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(out[0].cpu().float(), query.reshape(B, S, N, HCKV), **tol)
    torch.testing.assert_close(out[1].cpu().float(), query_rope.reshape(B, S, N, DR), **tol)
    torch.testing.assert_close(kv_cache.cpu().float(), _paged(kv_rows, cache_index, HCKV, nz).float(), **tol)
    torch.testing.assert_close(kr_cache.cpu().float(), _paged(kr_rows, cache_index, DR, nz).float(), **tol)


def test_v3_and_functional_and_compile():
    inp = _inputs(3)
    cache_index = torch.tensor([1, 2, 3, 4])
    query, query_rope, kv_rows, _, cq = baseline(inp, cache_index)
    args = [inp[k].npu() for k in ("token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq", "rmsnorm_gamma_ckv", "rope_sin", "rope_cos")]  # fmt: skip
    caches = (torch.zeros(BLOCKS, BLOCK, 1, HCKV, dtype=torch.bfloat16), torch.zeros(BLOCKS, BLOCK, 1, DR, dtype=torch.bfloat16))  # fmt: skip
    kv, kr = (c.npu() for c in caches)
    out = torch_npu.npu_mla_prolog_v3(*args, kv, kr, cache_index=cache_index.npu(), query_norm_flag=True)
    torch.testing.assert_close(out[3].cpu().float(), cq.reshape(B, S, HCQ), atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(kv.cpu().float(), _paged(kv_rows, cache_index, HCKV, False).float(), atol=3e-2, rtol=3e-2)  # fmt: skip
    functional = torch_npu.npu_mla_prolog_v3_functional(*args, *(c.npu() for c in caches), cache_index=cache_index.npu())  # fmt: skip
    assert torch.equal(functional[0], out[0]) and torch.equal(functional[5], kv) and torch.equal(functional[6], kr)

    def step(kv_cache, kr_cache):
        return torch_npu.npu_mla_prolog_v3(*args, kv_cache, kr_cache, cache_index=cache_index.npu())[0]

    torch._dynamo.reset()
    compiled_caches = tuple(c.npu() for c in caches)
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(*compiled_caches)
    assert torch.equal(got, out[0]) and torch.equal(compiled_caches[0], kv)
    raises_operator_error(
        lambda: torch_npu.npu_mla_prolog_v3(*args, kv, kr, cache_index=cache_index.npu(), kv_cache_quant_mode=1),
        "npu_mla_prolog_v3: kv_cache_quant_mode is not computed by vnpu",
    )
