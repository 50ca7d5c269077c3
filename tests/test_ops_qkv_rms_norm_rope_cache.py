"""npu_qkv_rms_norm_rope_cache (+ _functional) against the golden of torch_npu's own test written out here:
per-head RmsNorm and rotate-half RoPE of q and k, q into q_out, k / v (int8-quantised with a scale, or not)
scattered into PA_NZ / PA caches, padding slots skipped."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

B, S, NQ, NK, NV, D = 2, 3, 2, 1, 1, 32


def _inputs(seed, quant):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(B * S, (NQ + NK + NV) * D, generator=g).half()
    q_gamma, k_gamma = torch.rand(D, generator=g).half() + 0.5, torch.rand(D, generator=g).half() + 0.5
    cos, sin = torch.randn(B * S, D, generator=g).half(), torch.randn(B * S, D, generator=g).half()
    scales = (torch.rand(NK, D, generator=g) * 0.05 + 0.01, torch.rand(NV, D, generator=g) * 0.05 + 0.01) if quant else (None, None)  # fmt: skip
    return qkv, q_gamma, k_gamma, cos, sin, scales


def golden(qkv, q_gamma, k_gamma, cos, sin, scales, eps=1e-6):
    q, k, v = qkv.float().reshape(B, S, NQ + NK + NV, D).split([NQ, NK, NV], 2)
    c, s = cos.float().reshape(B, S, 1, D), sin.float().reshape(B, S, 1, D)

    def norm_rope(x, gamma):
        x = x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps) * gamma.float()
        return x * c + torch.cat([-x[..., D // 2 :], x[..., : D // 2]], -1) * s

    q, k = norm_rope(q, q_gamma), norm_rope(k, k_gamma)
    quant = lambda x, sc: x if sc is None else torch.round(x / sc).clamp(-128, 127)  # noqa: E731
    return q.reshape(B * S, -1), k, v, quant(k, scales[0]), quant(v, scales[1])


@pytest.mark.parametrize("mode, quant", [("PA_NZ", True), ("PA_NZ", False), ("PA", True)])
def test_against_golden(mode, quant):
    qkv, q_gamma, k_gamma, cos, sin, scales = _inputs(7, quant)
    q_want, k_before, v_before, k_vals, v_vals = golden(qkv, q_gamma, k_gamma, cos, sin, scales)
    dtype = torch.int8 if quant else torch.float16
    index = torch.tensor([5, -1, 0, 9, 3, 12], dtype=torch.int64)
    if mode == "PA_NZ":
        k_cache, v_cache = (
            torch.zeros(4, NK * D // 16, 4, 16, dtype=dtype),
            torch.zeros(4, NV * D // 16, 4, 16, dtype=dtype),
        )
    else:
        k_cache, v_cache = torch.zeros(4, 4, NK, D, dtype=dtype), torch.zeros(4, 4, NV, D, dtype=dtype)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    for t, slot in enumerate(index.tolist()):
        if slot < 0:
            continue
        blk, off = divmod(slot, 4)
        for cache, vals in ((want_k, k_vals), (want_v, v_vals)):
            row = vals.reshape(B * S, -1, D)[t].to(dtype)
            if mode == "PA_NZ":
                cache[blk, :, off] = row.reshape(-1, 16)
            else:
                cache[blk, off] = row
    q_out = torch.zeros(B * S, NQ * D).half().npu()
    kc, vc = k_cache.npu(), v_cache.npu()
    scale_args = {} if not quant else {"k_scale": scales[0].npu(), "v_scale": scales[1].npu()}
    before = torch_npu.npu_qkv_rms_norm_rope_cache(
        qkv.npu(), q_gamma.npu(), k_gamma.npu(), cos.npu(), sin.npu(), index.npu(), q_out, kc, vc,
        [B, S, NQ + NK + NV, D], [NQ, NK, NV], cache_mode=mode, is_output_qkv=True, **scale_args,
    )  # fmt: skip
    torch.testing.assert_close(q_out.cpu(), q_want.half(), atol=1e-3, rtol=1e-3)
    tol = dict(atol=1, rtol=0) if quant else dict(atol=1e-3, rtol=1e-3)  # rounding at a .5 boundary may differ by 1
    torch.testing.assert_close(kc.cpu().float(), want_k.float(), **tol)
    assert torch.equal(vc.cpu(), want_v)
    torch.testing.assert_close(before[1].cpu(), k_before.reshape(B * S, -1).half(), atol=1e-3, rtol=1e-3)
    functional = torch_npu.npu_qkv_rms_norm_rope_cache_functional(
        qkv.npu(), q_gamma.npu(), k_gamma.npu(), cos.npu(), sin.npu(), index.npu(), torch.zeros_like(q_out),
        k_cache.npu(), v_cache.npu(), [B, S, NQ + NK + NV, D], [NQ, NK, NV], cache_mode=mode, **scale_args,
    )  # fmt: skip
    assert torch.equal(functional[0], q_out) and torch.equal(functional[1], kc) and torch.equal(functional[2], vc)
    assert functional[3].numel() == 0


def test_size_error():
    qkv, q_gamma, k_gamma, cos, sin, _ = _inputs(1, False)
    raises_operator_error(
        lambda: torch_npu.npu_qkv_rms_norm_rope_cache(
            qkv.npu(),
            q_gamma.npu(),
            k_gamma.npu(),
            cos.npu(),
            sin.npu(),
            torch.zeros(6, dtype=torch.int64).npu(),
            torch.zeros(6, 64).half().npu(),
            torch.zeros(1, 2, 4, 16).half().npu(),
            torch.zeros(1, 2, 4, 16).half().npu(),
            [B, S, 5, D],
            [NQ, NK, NV],
        ),  # fmt: skip
        "npu_qkv_rms_norm_rope_cache: qkv must be [6, 160] with head_nums [2, 1, 1] summing to 5, got (6, 128)",
    )
