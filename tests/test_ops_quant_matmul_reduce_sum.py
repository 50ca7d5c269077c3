"""npu_quant_matmul_reduce_sum against a loop written here (exact int32 products, float32 dequantisation summed
in batch order, bfloat16 out), and npu_quant_matmul on int4 packed eight to an int32 (A4W4)."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

B, M, K, N = 3, 5, 64, 7


def reference(x1, x2, *, x1_scale, x2_scale):
    out = torch.zeros(M, N)
    for b in range(x1.shape[0]):
        product = torch.matmul(x1[b].to(torch.int32), x2[b].to(torch.int32)).float()
        out += product * x1_scale[b].view(-1, 1) * x2_scale.float().view(1, -1)
    return out.to(torch.bfloat16)


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randint(-128, 128, (B, M, K), generator=g).to(torch.int8)
    x2 = torch.randint(-128, 128, (B, K, N), generator=g).to(torch.int8)
    return x1, x2, torch.rand(B, M, generator=g) * 0.01, (torch.rand(N, generator=g) * 0.01).bfloat16()


@pytest.mark.parametrize("seed", [0, 1])
def test_sum_of_dequantised_batch_products(seed):
    x1, x2, s1, s2 = inputs(seed)
    out = check_op(
        torch_npu.npu_quant_matmul_reduce_sum, (x1, x2), reference, {"x1_scale": s1, "x2_scale": s2}, atol=0, rtol=0
    )
    assert out.dtype == torch.bfloat16 and out.shape == (M, N)


def test_x2_in_nz_format_gives_the_same_result():
    x1, x2, s1, s2 = inputs(2)
    nz = torch_npu.npu_format_cast(x2.npu(), 29)
    out = torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), nz, x1_scale=s1.npu(), x2_scale=s2.npu())
    assert torch.equal(out.cpu(), reference(x1, x2, x1_scale=s1, x2_scale=s2))


BAD_INPUTS = [
    ({"x1_scale": None}, "x1_scale and x2_scale are required"),
    ({"x1": torch.zeros(B, M, K)}, "x1 and x2 must be int8, got torch.float32, torch.int8"),
    (
        {"x2": torch.zeros(B, K + 1, N, dtype=torch.int8)},
        rf"x2 must be \[batch={B}, k={K}, n\], got \({B}, {K + 1}, {N}\)",
    ),
    ({"x2_scale": torch.zeros(N)}, "x2_scale must be bfloat16, got torch.float32"),
    ({"x1_scale": torch.zeros(M)}, rf"x1_scale must be \[batch={B}, m={M}\], got \({M},\)"),
]


@pytest.mark.parametrize("change, message", BAD_INPUTS)
def test_bad_inputs(change, message):
    x1, x2, s1, s2 = inputs(3)
    args = {"x1": x1, "x2": x2, "x1_scale": s1, "x2_scale": s2, **change}
    args = {k: v.npu() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    with pytest.raises(RuntimeError, match=f"^npu_quant_matmul_reduce_sum: {message}"):
        torch_npu.npu_quant_matmul_reduce_sum(args.pop("x1"), args.pop("x2"), **args)


def pack_int4(values):
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], -1, 8)
    packed = sum(nibbles[..., i] << (4 * i) for i in range(8))
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def test_quant_matmul_reads_int32_as_eight_packed_int4():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randint(-8, 8, (M, K), generator=g), torch.randint(-8, 8, (K, 16), generator=g)
    scale = torch.rand(16, generator=g) * 0.01
    out = torch_npu.npu_quant_matmul(pack_int4(a).npu(), pack_int4(b).npu(), scale.npu(), output_dtype=torch.float16)
    want = (torch.matmul(a.float(), b.float()) * scale).to(torch.float16)
    assert out.shape == (M, 16) and torch.equal(out.cpu(), want)
    with pytest.raises(RuntimeError, match="x1 and x2 must have the same dtype, got torch.int32 and torch.int8"):
        torch_npu.npu_quant_matmul(pack_int4(a).npu(), b.to(torch.int8).npu(), scale.npu())


def test_a4w4_weight_given_transposed_is_unpacked_along_its_memory():
    g = torch.Generator().manual_seed(5)
    a, w = torch.randint(-8, 8, (M, K), generator=g), torch.randint(-8, 8, (16, K), generator=g)  # weight [n, k]
    scale = torch.rand(16, generator=g) * 0.01
    out = torch_npu.npu_quant_matmul(
        pack_int4(a).npu(), pack_int4(w).npu().t(), scale.npu(), output_dtype=torch.float16
    )
    assert torch.equal(out.cpu(), (torch.matmul(a.float(), w.float().t()) * scale).to(torch.float16))


L = torch.long


def n(*shape, **kwargs):
    return torch.zeros(*shape, **kwargs).npu()


EXACT_ERRORS = [
    (
        lambda: torch_npu.npu_quant_matmul_reduce_sum(
            n(2, 3, dtype=torch.int8),
            n(2, 3, 4, dtype=torch.int8),
            x1_scale=n(2, 2),
            x2_scale=n(4, dtype=torch.bfloat16),
        ),
        "npu_quant_matmul_reduce_sum: x1 and x2 must be 3-D, got (2, 3) and (2, 3, 4)",
    ),
    (
        lambda: torch_npu.npu_quant_matmul_reduce_sum(
            n(2, 3, 4, dtype=torch.int8),
            n(2, 4, 5, dtype=torch.int8),
            x1_scale=n(2, 3, dtype=torch.float16),
            x2_scale=n(5, dtype=torch.bfloat16),
        ),
        "npu_quant_matmul_reduce_sum: x1_scale must be float32, got torch.float16",
    ),
    (
        lambda: torch_npu.npu_quant_matmul_reduce_sum(
            n(2, 3, 4, dtype=torch.int8),
            n(2, 4, 5, dtype=torch.int8),
            x1_scale=n(2, 3),
            x2_scale=n(4, dtype=torch.bfloat16),
        ),
        "npu_quant_matmul_reduce_sum: x2_scale must be [n=5], got (4,)",
    ),
    (
        lambda: torch_npu.npu_quant_matmul_reduce_sum(
            n(2, 0, 4, dtype=torch.int8),
            n(2, 4, 5, dtype=torch.int8),
            x1_scale=n(2, 0),
            x2_scale=n(5, dtype=torch.bfloat16),
        ),
        "npu_quant_matmul_reduce_sum: x1 and x2 must not be empty",
    ),
]


@pytest.mark.parametrize("call, message", EXACT_ERRORS)
def test_bad_inputs_give_torch_npus_error_text(call, message):
    raises_operator_error(call, message)
