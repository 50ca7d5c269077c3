"""npu_transpose_batchmatmul against the compositions op-plugin's tests define it by: the permuted batched
product in float32, the int8 path with a per-column scale, and the batch split."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)
M, B, K, N = 6, 3, 8, 5


def product(x1, x2):
    return torch.matmul(x1.transpose(0, 1).float(), x2.float()).transpose(0, 1)


PERM_X1 = {"perm_x1": [1, 0, 2]}  # x1 is [M, B, K]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_m_b_k_input_gives_m_b_n(dtype):
    x1, x2 = torch.randn(M, B, K).to(dtype), torch.randn(B, K, N).to(dtype)
    check_op(torch_npu.npu_transpose_batchmatmul, (x1, x2), lambda a, b, **kw: product(a, b).to(dtype), PERM_X1,
             atol=0, rtol=0)  # fmt: skip


def test_default_perm_x1_reads_b_m_k():
    # op-plugin's default perm_x1 is [0, 1, 2]: x1 is already batch-major
    x1, x2 = torch.randn(B, M, K), torch.randn(B, K, N)
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu())
    assert torch.equal(out.cpu(), torch.matmul(x1, x2).transpose(0, 1))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"perm_x1": [1, 1, 2]}, "perm_x1 should be [0, 1, 2] or [1, 0, 2]"),
        ({"perm_x2": [0, 2, 1]}, "perm_x2 should be [0, 1, 2]"),
        ({"perm_y": [0, 1, 2]}, "perm_y should be [1, 0, 2]"),
    ],
)
def test_permutations_op_plugin_refuses(kwargs, message):
    x1, x2 = torch.randn(B, M, K, device="npu"), torch.randn(B, K, N, device="npu")
    raises_operator_error(lambda: torch_npu.npu_transpose_batchmatmul(x1, x2, **kwargs), message)


@pytest.mark.parametrize("which", ["input", "weight"])
def test_integer_operands_get_op_plugin_text(which):
    x1, x2 = torch.randn(B, M, K, device="npu"), torch.randn(B, K, N, device="npu")
    if which == "input":
        x1 = x1.long()
    else:
        x2 = x2.long()
    raises_operator_error(
        lambda: torch_npu.npu_transpose_batchmatmul(x1, x2),
        f"{which}'s type supported for float16, float32 and bfloat16.",
    )


def test_scale_gives_int8_truncated_and_saturated():
    x1, x2 = torch.randn(M, B, K).half(), torch.randn(B, K, N).half()
    scale = torch.rand(B * N) * 40
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), scale=scale.npu(), **PERM_X1)
    want = torch.clip((product(x1, x2).reshape(M, 1, B * N) * scale).to(torch.int), -128, 127).to(torch.int8)
    assert out.dtype == torch.int8 and torch.equal(out.cpu(), want)
    # the int64 scale npu_trans_quant_param makes (float32 bits in the low word) gives the same result
    packed = torch_npu.npu_trans_quant_param(scale.npu())  # round_mode 0: truncated to FP19
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), scale=packed, **PERM_X1)
    rounded = (scale.view(torch.int32) & -8192).view(torch.float32)  # trans_quant_param keeps 19 high bits
    want = torch.clip((product(x1, x2).reshape(M, 1, B * N) * rounded).to(torch.int), -128, 127).to(torch.int8)
    assert torch.equal(out.cpu(), want)


def test_batch_split_factor_splits_the_flattened_columns():
    x1, x2 = torch.randn(M, B, K).half(), torch.randn(B, K, N + 1).half()
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), batch_split_factor=2, **PERM_X1)
    want = product(x1, x2).reshape(M, 2, -1).transpose(0, 1).half()
    assert out.shape == (2, M, B * (N + 1) // 2) and torch.equal(out.cpu(), want)


def test_transpose_batchmatmul_refuses_mismatched_operands():
    raises_operator_error(
        lambda: torch_npu.npu_transpose_batchmatmul(
            torch.randn(M, B, K, device="npu"), torch.randn(B, K + 1, N, device="npu"), **PERM_X1
        ),
        f"npu_transpose_batchmatmul: cannot multiply ({B}, {M}, {K}) by ({B}, {K + 1}, {N})",
    )


def test_operand_ranks_get_op_plugin_text():
    x1, x2 = torch.randn(B, M, K, 1, device="npu"), torch.randn(B, K, N, device="npu")
    # op-plugin's text, its missing spaces included
    raises_operator_error(
        lambda: torch_npu.npu_transpose_batchmatmul(x1, x2),
        "input dim is 4but expected is 3weight dim is 3but expected is 3",
    )
