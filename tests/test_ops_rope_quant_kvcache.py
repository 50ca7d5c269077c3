"""npu_rope_quant_kvcache / npu_dequant_rope_quant_kvcache against the golden of torch_npu's own test written
out here (split, rotate-half RoPE, round(x * scale + offset) into int8 caches at indices), contiguous and paged
caches."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S, D, NQ, NKV = 2, 3, 16, 2, 1


def _inputs(seed, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, S, (NQ + 2 * NKV) * D, generator=g).to(dtype)
    angle = torch.rand(B, S, 1, D // 2, generator=g) * 3
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(dtype), torch.cat([angle.sin()] * 2, -1).to(dtype)
    scale_k, scale_v = torch.rand(D, generator=g) * 20, torch.rand(D, generator=g) * 20
    offset_k, offset_v = torch.randn(D, generator=g), torch.randn(D, generator=g)
    return x, cos, sin, scale_k, scale_v, offset_k, offset_v


def golden(x, cos, sin, scale_k, scale_v, offset_k, offset_v):
    q, k, v = x.float().split([NQ * D, NKV * D, NKV * D], -1)
    q, k, v = q.reshape(B, S, NQ, D), k.reshape(B, S, NKV, D), v.reshape(B, S, NKV, D)

    def rope(t):
        return t * cos.float() + torch.cat([-t[..., D // 2 :], t[..., : D // 2]], -1) * sin.float()

    quant = lambda t, s, o: torch.round(t * s + o).clamp(-128, 127).to(torch.int8)  # noqa: E731
    return rope(q), rope(k), v, quant(rope(k), scale_k, offset_k), quant(v, scale_v, offset_v)


@pytest.mark.parametrize("cache_mode", ["contiguous", "page"])
def test_rope_quant_kvcache(cache_mode):
    x, cos, sin, sk, sv, ok, ov = _inputs(1)
    q_want, k_want, v_want, kq, vq = golden(x, cos, sin, sk, sv, ok, ov)
    if cache_mode == "contiguous":
        indices = torch.tensor([1, 4], dtype=torch.int32)
        k_cache, v_cache = torch.zeros(B, 8, NKV, D, dtype=torch.int8), torch.zeros(B, 8, NKV, D, dtype=torch.int8)
        want_k, want_v = k_cache.clone(), v_cache.clone()
        for b in range(B):
            want_k[b, indices[b] : indices[b] + S], want_v[b, indices[b] : indices[b] + S] = kq[b], vq[b]
    else:
        indices = torch.tensor([7, 0, 3, 9, 2, 5], dtype=torch.int32)
        k_cache, v_cache = torch.zeros(3, 4, NKV, D, dtype=torch.int8), torch.zeros(3, 4, NKV, D, dtype=torch.int8)
        want_k, want_v = k_cache.clone().view(-1, NKV, D), v_cache.clone().view(-1, NKV, D)
        want_k[indices.long()], want_v[indices.long()] = kq.reshape(-1, NKV, D), vq.reshape(-1, NKV, D)
        want_k, want_v = want_k.view(3, 4, NKV, D), want_v.view(3, 4, NKV, D)
    npu_k, npu_v = k_cache.npu(), v_cache.npu()
    q, k, v, kc, vc = torch_npu.npu_rope_quant_kvcache(
        x.npu(), cos.npu(), sin.npu(), npu_k, npu_v, indices.npu(), sk.npu(), sv.npu(), [NQ * D, NKV * D, NKV * D],
        offset_k=ok.npu(), offset_v=ov.npu(), kv_output=True, cache_mode=cache_mode,
    )  # fmt: skip
    assert kc is npu_k and vc is npu_v
    torch.testing.assert_close(q.cpu(), q_want.half())
    torch.testing.assert_close(k.cpu(), k_want.half())
    assert torch.equal(v.cpu(), v_want.half())
    assert torch.equal(npu_k.cpu(), want_k) and torch.equal(npu_v.cpu(), want_v)


def test_dequant_variant_and_errors():
    x, cos, sin, sk, sv, ok, ov = _inputs(2)
    g = torch.Generator().manual_seed(3)
    raw = torch.randint(-500, 500, x.shape, generator=g, dtype=torch.int32)
    weight_scale = torch.rand(x.shape[-1], generator=g) / 100
    act = torch.rand(B, S, generator=g) + 0.5
    dequant = (raw.float() * weight_scale * act[..., None]).half()
    caches = [torch.zeros(B, 8, NKV, D, dtype=torch.int8).npu() for _ in range(4)]
    idx = torch.tensor([0, 2], dtype=torch.int32).npu()
    args = (cos.npu(), sin.npu())
    splits = [NQ * D, NKV * D, NKV * D]
    q1 = torch_npu.npu_dequant_rope_quant_kvcache(
        raw.npu(), *args, caches[0], caches[1], idx, sk.npu(), sv.npu(), splits, weight_scale=weight_scale.npu(),
        activation_scale=act.npu(), quant_mode=1,
    )[0]  # fmt: skip
    q2 = torch_npu.npu_rope_quant_kvcache(dequant.npu(), *args, caches[2], caches[3], idx, sk.npu(), sv.npu(), splits)[0]  # fmt: skip
    torch.testing.assert_close(q1.cpu(), q2.cpu(), atol=2e-3, rtol=2e-3)
    raises_operator_error(
        lambda: torch_npu.npu_rope_quant_kvcache(
            x.npu(), *args, caches[0], caches[1], idx, sk.npu(), sv.npu(), [16, 16, 16]
        ),  # fmt: skip
        "npu_rope_quant_kvcache: size_splits [16, 16, 16] must sum to x's last dim 64",
    )
