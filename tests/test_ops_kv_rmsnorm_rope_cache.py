"""npu_kv_rmsnorm_rope_cache (+ _v2, _v2_functional): MLA's latent KV normalised and rotated (RmsNorm and
DeepSeek's interleaved RoPE written out here) and written token by token into Norm, PA and PA_NZ caches (the
loops here); int8 caches with a scale; padding slots; the v2 forms under torch.compile."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S, DC, DR = 3, 2, 32, 16


def reference(kv, gamma, cos, sin, eps=1e-5):
    latent, rope = kv[..., :DC].float(), kv[..., DC:].float()
    c_kv = (latent * torch.rsqrt(latent.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(kv.dtype)
    x = torch.cat([rope[..., 0::2], rope[..., 1::2]], -1)
    rotated = torch.cat([-x[..., DR // 2 :], x[..., : DR // 2]], -1)
    return (x * cos.float() + rotated * sin.float()).to(kv.dtype), c_kv


def _inputs(seed, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(B, 1, S, DC + DR, generator=g).to(dtype)
    gamma = torch.rand(DC, generator=g).to(dtype) + 0.5
    angle = torch.rand(B, 1, S, DR // 2, generator=g) * 3
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(dtype), torch.cat([angle.sin()] * 2, -1).to(dtype)
    return kv, gamma, cos, sin


def test_norm_mode_writes_positions_and_outputs_kv():
    kv, gamma, cos, sin = _inputs(1)
    k_rope, c_kv = reference(kv, gamma, cos, sin)
    index = torch.tensor([[0, 3], [5, -1], [2, 1]], dtype=torch.int64)
    k_cache, ckv_cache = torch.zeros(B, 1, 8, DR, dtype=kv.dtype), torch.zeros(B, 1, 8, DC, dtype=kv.dtype)
    want_k, want_c = k_cache.clone(), ckv_cache.clone()
    for b in range(B):
        for s in range(S):
            if index[b, s] >= 0:
                want_k[b, :, index[b, s]] = k_rope[b, :, s]
                want_c[b, :, index[b, s]] = c_kv[b, :, s]
    npu_k, npu_c = k_cache.npu(), ckv_cache.npu()
    out = torch_npu.npu_kv_rmsnorm_rope_cache(
        kv.npu(), gamma.npu(), cos.npu(), sin.npu(), index.npu(), npu_k, npu_c, is_output_kv=True
    )
    assert out[0] is npu_k and out[1] is npu_c, "the caches are written in place and returned"
    assert torch.equal(npu_k.cpu(), want_k) and torch.equal(npu_c.cpu(), want_c)
    torch.testing.assert_close(out[2].cpu(), k_rope)
    assert torch.equal(out[3].cpu(), c_kv)


@pytest.mark.parametrize("mode", ["PA", "PA_BNSD", "PA_NZ"])
def test_paged_modes(mode):
    kv, gamma, cos, sin = _inputs(2)
    k_rope, c_kv = reference(kv, gamma, cos, sin)
    slots = torch.tensor([9, 0, 4, -1, 13, 7], dtype=torch.int64)
    blocks, block_size = 4, 4
    if mode == "PA_NZ":
        k_cache, ckv_cache = (
            torch.zeros(blocks, DR // 16, block_size, 16),
            torch.zeros(blocks, DC // 16, block_size, 16),
        )
    else:
        k_cache, ckv_cache = torch.zeros(blocks, block_size, 1, DR), torch.zeros(blocks, block_size, 1, DC)
    k_cache, ckv_cache = k_cache.to(kv.dtype), ckv_cache.to(kv.dtype)
    want_k, want_c = k_cache.clone(), ckv_cache.clone()
    tokens_k, tokens_c = k_rope.permute(0, 2, 1, 3).reshape(B * S, -1), c_kv.permute(0, 2, 1, 3).reshape(B * S, -1)
    for t, slot in enumerate(slots.tolist()):
        if slot < 0:
            continue
        blk, off = divmod(slot, block_size)
        if mode == "PA_NZ":
            want_k[blk, :, off] = tokens_k[t].view(-1, 16)
            want_c[blk, :, off] = tokens_c[t].view(-1, 16)
        else:
            want_k[blk, off, 0] = tokens_k[t]
            want_c[blk, off, 0] = tokens_c[t]
    npu_k, npu_c = k_cache.npu(), ckv_cache.npu()
    torch_npu.npu_kv_rmsnorm_rope_cache_v2(kv.npu(), gamma.npu(), cos.npu(), sin.npu(), slots.npu(), npu_k, npu_c, cache_mode=mode)  # fmt: skip
    torch.testing.assert_close(npu_k.cpu(), want_k)
    assert torch.equal(npu_c.cpu(), want_c)


def test_int8_cache_and_functional_and_compile():
    kv, gamma, cos, sin = _inputs(3)
    _, c_kv = reference(kv, gamma, cos, sin)
    slots = torch.arange(B * S, dtype=torch.int64)
    k_cache, ckv_cache = torch.zeros(2, 4, 1, DR, dtype=kv.dtype), torch.zeros(2, 4, 1, DC, dtype=torch.int8)
    scale = torch.full((DC,), 20.0)
    args = (kv.npu(), gamma.npu(), cos.npu(), sin.npu(), slots.npu())
    out = torch_npu.npu_kv_rmsnorm_rope_cache_v2_functional(*args, k_cache.npu(), ckv_cache.npu(), c_kv_scale=scale.npu(), cache_mode="PA")  # fmt: skip
    want = torch.round(c_kv.float() * 20.0).clamp(-128, 127).to(torch.int8).permute(0, 2, 1, 3).reshape(B * S, DC)
    assert torch.equal(out[1].cpu().reshape(8, DC)[: B * S], want)
    assert not ckv_cache.any(), "the functional form leaves the caches alone"

    def step(kc, cc):
        return torch_npu.npu_kv_rmsnorm_rope_cache_v2(*args, kc, cc, cache_mode="PA", is_output_kv=True)

    torch._dynamo.reset()
    eager_caches = (k_cache.npu(), torch.zeros(2, 4, 1, DC, dtype=kv.dtype).npu())
    compiled_caches = tuple(c.clone() for c in eager_caches)
    eager = step(*eager_caches)
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)(*compiled_caches)
    assert all(torch.equal(a, b) for a, b in zip((*eager, *eager_caches), (*compiled, *compiled_caches)))


def test_errors():
    kv, gamma, cos, sin = _inputs(4)
    caches = (torch.zeros(2, 4, 1, DR).bfloat16().npu(), torch.zeros(2, 4, 1, DC).bfloat16().npu())
    args = (kv.npu(), gamma.npu(), cos.npu(), sin.npu(), torch.arange(B * S).npu(), *caches)
    raises_operator_error(
        lambda: torch_npu.npu_kv_rmsnorm_rope_cache(*args, cache_mode="PA_BLK_NZ"),
        "npu_kv_rmsnorm_rope_cache: cache_mode must be one of ['Norm', 'PA', 'PA_BNSD', 'PA_NZ'], got 'PA_BLK_NZ'",
    )
    raises_operator_error(
        lambda: torch_npu.npu_kv_rmsnorm_rope_cache(*args, v=kv.npu()),
        "npu_kv_rmsnorm_rope_cache: v (the value write of the K-norm variant) is not computed by vnpu",
    )
