"""npu_kronecker_quant against FlatQuant's per-token int4 formula written out (unpacking the nibbles here),
the fake kernel and compile through check_op, and its argument checks."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def unpack(packed):
    shifts = torch.arange(0, 32, 4)
    nibbles = (packed.to(torch.int64)[..., None] >> shifts) & 0xF
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).reshape(*packed.shape[:-1], -1)


def reference(x, p1, p2, clip_ratio=None):
    y = torch.einsum("mi,kij,jn->kmn", p1.double(), x.double(), p2.double()).float()
    scale = y.abs().flatten(1).max(1).values * (1.0 if clip_ratio is None else clip_ratio) / 7
    return y, scale


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("clip", [None, 0.6])
def test_matches_the_formula(dtype, clip):
    g = torch.Generator().manual_seed(4)
    x = (torch.rand(5, 3, 16, generator=g) - 0.5).to(dtype)
    p1, p2 = (torch.rand(3, 3, generator=g) - 0.5).to(dtype), (torch.rand(16, 16, generator=g) - 0.5).to(dtype)
    out, scale = torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), clip)
    y, want_scale = reference(x, p1, p2, clip)
    torch.testing.assert_close(scale.cpu(), want_scale, rtol=1e-5, atol=1e-7)
    values = unpack(out.cpu())
    assert values.shape == x.shape and values.min() >= -8 and values.max() <= 7
    ideal = (y / want_scale[:, None, None]).clamp(-8, 7)
    assert (values - ideal).abs().max() <= 0.5 + 1e-3  # rounded to the nearest integer (float32 products)
    if clip is None:
        assert values.abs().flatten(1).max(1).values.eq(7).all()  # each token's largest value reaches 7


def pack(values):
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], -1, 8)
    word = sum(nibbles[..., i] << (4 * i) for i in range(8))
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)


def test_compiles_and_traces():
    # identity transforms keep x exact, so the packed output is known without the float32 products' rounding
    x, p1, p2 = torch.randn(2, 4, 8).half(), torch.eye(4).half(), torch.eye(8).half()

    def ref(x, p1, p2):
        y, scale = reference(x, p1, p2)
        return pack(torch.round(y / scale[:, None, None]).clamp(-8, 7)), scale

    check_op(torch_npu.npu_kronecker_quant, (x, p1, p2), ref, atol=1e-6, rtol=1e-5)


def test_bad_arguments():
    x, p1, p2 = torch.randn(2, 4, 8).half().npu(), torch.eye(4).half().npu(), torch.eye(8).half().npu()
    raises_operator_error(
        lambda: torch_npu.npu_kronecker_quant(x.float(), p1.float(), p2.float()),
        "npu_kronecker_quant: x must be float16 or bfloat16, got torch.float32",
    )
    raises_operator_error(
        lambda: torch_npu.npu_kronecker_quant(x, p2, p2),
        "npu_kronecker_quant: kronecker_p1 must be [M, M] = [4, 4], got (8, 8)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_kronecker_quant(x[..., :6], p1, p2[:6, :6]),
        "npu_kronecker_quant: x's last dim N must be a multiple of 8, got 6",
    )
    raises_operator_error(
        lambda: torch_npu.npu_kronecker_quant(x, p1, p2, 1.5),
        "npu_kronecker_quant: clip_ratio must be in (0, 1], got 1.5",
    )
    raises_operator_error(
        lambda: torch_npu.npu_kronecker_quant(x, p1, p2, dst_type_max=6.0),
        "npu_kronecker_quant: dst_type_max selects the per-group float4_e2m1 output, which vnpu does not compute",
    )
