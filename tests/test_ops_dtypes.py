"""The torch_npu operators in float16 and bfloat16: the result equals the float32 composition computed
on the CPU and rounded to the low-precision dtype, within that dtype's rounding."""

import pytest
import torch
import torch.nn.functional as F
from error_cases import FLOATS, I32, ez1001, raises_unsupported_dtype, t

import torch_npu

TOL = {torch.float16: dict(atol=2e-3, rtol=2e-3), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


CASES = {
    "npu_rms_norm": (
        lambda x: (x, torch.randn(16)),
        lambda x, g: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g,
        0,
    ),
    "npu_gemma_rms_norm": (
        lambda x: (x, torch.randn(16)),
        lambda x, g: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + g),
        0,
    ),
    "npu_add_rms_norm": (
        lambda x: (x, x.flip(0), torch.randn(16)),
        lambda a, b, g: (a + b) * torch.rsqrt((a + b).pow(2).mean(-1, keepdim=True) + 1e-6) * g,
        0,
    ),
    "npu_swiglu": (lambda x: (x,), lambda x: F.silu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1], None),
    "npu_geglu": (lambda x: (x,), lambda x: x.chunk(2, -1)[0] * F.gelu(x.chunk(2, -1)[1], approximate="tanh"), 0),
    "npu_gelu": (lambda x: (x,), lambda x: F.gelu(x), None),
    "npu_fast_gelu": (lambda x: (x,), lambda x: x / (1 + torch.exp(-1.702 * x)), None),
    "npu_mish": (lambda x: (x,), lambda x: x * torch.tanh(F.softplus(x)), None),
    "npu_rotary_mul": (
        lambda x: (x.view(2, 4, 2, 16), torch.randn(1, 4, 1, 16), torch.randn(1, 4, 1, 16)),
        lambda x, c, s: x * c + rotate_half(x) * s,
        None,
    ),
    "npu_linear": (lambda x: (x, torch.randn(8, 16) / 4), lambda x, w: x @ w.t(), None),
    "npu_scaled_masked_softmax": (
        lambda x: (x.view(2, 2, 4, 4), torch.rand(2, 2, 4, 4) > 0.7),
        lambda x, m: torch.softmax(x.masked_fill(m, -10000.0), -1),
        None,
    ),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_low_precision(name, dtype):
    torch.manual_seed(0)
    make, reference, pick = CASES[name]
    args = make(torch.randn(16, 16) if name != "npu_scaled_masked_softmax" else torch.randn(64))
    low = [a.to(dtype) if a.is_floating_point() else a for a in args]
    out = getattr(torch_npu, name)(*[a.npu() for a in low])
    out = out[pick] if pick is not None else out
    want = reference(*[a.float() if a.is_floating_point() else a for a in low])
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu().float(), want.to(dtype).float(), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fusion_attention_low_precision(dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16).to(dtype) for _ in range(3))
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 4, "BNSD", scale=0.25)[0]
    want = torch.softmax(q.float() @ k.float().transpose(-1, -2) * 0.25, -1) @ v.float()
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu().float(), want.to(dtype).float(), **TOL[dtype])


# Inputs of a dtype the Ascend kernel does not take: refused before any work, in CANN's words (ERR01100)
UNSUPPORTED_DTYPE_ERRORS = [
    (
        lambda: torch_npu.npu_rms_norm(t(2, 4, dtype=I32), t(4, dtype=I32)),
        ez1001("aclnnRmsNorm", "self", "DT_INT32", FLOATS),
    ),
    (
        lambda: torch_npu.npu_rms_norm(t(2, 4), t(4, dtype=torch.float64)),
        ez1001("aclnnRmsNorm", "gamma", "DT_DOUBLE", FLOATS),
    ),
    (
        lambda: torch_npu.npu_add_rms_norm(t(2, 4), t(2, 4, dtype=torch.int64), t(4)),
        ez1001("aclnnAddRmsNorm", "x2", "DT_INT64", FLOATS),
    ),
    (
        lambda: torch_npu.npu_gemma_rms_norm(t(2, 4, dtype=torch.bool), t(4)),
        ez1001("aclnnGemmaRmsNorm", "self", "DT_BOOL", FLOATS),
    ),
    (
        lambda: torch_npu.npu_add_layer_norm(t(2, 4), t(2, 4), t(4, dtype=torch.int8), t(4)),
        ez1001("aclnnAddLayerNorm", "gamma", "DT_INT8", FLOATS),
    ),
    (lambda: torch_npu.npu_swiglu(t(2, 4, dtype=I32)), ez1001("aclnnSwiGlu", "self", "DT_INT32", FLOATS)),
    (lambda: torch_npu.npu_gelu(t(4, dtype=torch.int64)), ez1001("aclnnGeluV2", "self", "DT_INT64", FLOATS)),
    (lambda: torch_npu.npu_mish(t(4, dtype=torch.float64)), ez1001("aclnnMish", "self", "DT_DOUBLE", FLOATS)),
    (
        lambda: torch_npu.npu_scaled_masked_softmax(t(1, 1, 2, 2), t(1, 1, 2, 2)),
        ez1001("aclnnScaledMaskedSoftmax", "mask", "DT_FLOAT", "DT_BOOL,"),
    ),
    (
        lambda: torch_npu.npu_rotary_mul(t(1, 2, 1, 4, dtype=I32), t(1, 2, 1, 4), t(1, 2, 1, 4)),
        ez1001("aclnnRotaryPositionEmbedding", "self", "DT_INT32", FLOATS),
    ),
    (
        lambda: torch_npu.npu_one_hot(t(3), depth=4),
        ez1001("aclnnOneHot", "self", "DT_FLOAT", "DT_UINT8,DT_INT32,DT_INT64,"),
    ),
    (
        lambda: torch_npu.npu_convert_weight_to_int4pack(t(2, 8)),
        ez1001("aclnnConvertWeightToINT4Pack", "weight", "DT_FLOAT", "DT_INT32,"),
    ),
    (
        lambda: torch_npu.npu_moe_compute_expert_tokens(t(4, dtype=torch.int64), 2),
        ez1001("aclnnMoeComputeExpertTokens", "sorted_expert_for_source_row", "DT_INT64", "DT_INT32,"),
    ),
    (
        lambda: torch_npu.npu_moe_gating_top_k_softmax(t(2, 4, dtype=I32), k=1),
        ez1001("aclnnMoeGatingTopKSoftmax", "x", "DT_INT32", FLOATS),
    ),
    (
        lambda: torch_npu.npu_linear(t(2, 4, dtype=I32), t(3, 4, dtype=I32)),
        ez1001("aclnnMatmul", "input", "DT_INT32", FLOATS),
    ),
    (
        lambda: torch_npu.npu_giou(t(4, 2, dtype=torch.int64), t(4, 2)),
        ez1001("aclnnGIoU", "self", "DT_INT64", FLOATS),
    ),
    (
        lambda: torch_npu.npu_scatter_nd_update(t(4), t(1, 1), t(1)),
        ez1001("aclnnScatterNdUpdate", "indices", "DT_FLOAT", "DT_INT32,DT_INT64,"),
    ),
]


@pytest.mark.parametrize("call,message", UNSUPPORTED_DTYPE_ERRORS, ids=[c[1][5:60] for c in UNSUPPORTED_DTYPE_ERRORS])
def test_unsupported_dtype_is_refused_in_canns_words(call, message):
    raises_unsupported_dtype(call, message)
