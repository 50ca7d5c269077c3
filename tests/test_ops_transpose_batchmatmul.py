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


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_default_permutations_give_m_b_n(dtype):
    x1, x2 = torch.randn(M, B, K).to(dtype), torch.randn(B, K, N).to(dtype)
    check_op(torch_npu.npu_transpose_batchmatmul, (x1, x2), lambda a, b: product(a, b).to(dtype), atol=0, rtol=0)


def test_explicit_permutations():
    x1, x2 = torch.randn(B, M, K), torch.randn(B, N, K)
    out = torch_npu.npu_transpose_batchmatmul(
        x1.npu(), x2.npu(), perm_x1=[0, 1, 2], perm_x2=[0, 2, 1], perm_y=[0, 1, 2]
    )
    torch.testing.assert_close(out.cpu(), torch.matmul(x1, x2.transpose(1, 2)))


def test_scale_gives_int8_truncated_and_saturated():
    x1, x2 = torch.randn(M, B, K).half(), torch.randn(B, K, N).half()
    scale = torch.rand(B * N) * 40
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), scale=scale.npu())
    want = torch.clip((product(x1, x2).reshape(M, 1, B * N) * scale).to(torch.int), -128, 127).to(torch.int8)
    assert out.dtype == torch.int8 and torch.equal(out.cpu(), want)


def test_batch_split_factor_splits_the_flattened_columns():
    x1, x2 = torch.randn(M, B, K).half(), torch.randn(B, K, N + 1).half()
    out = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), batch_split_factor=2)
    want = product(x1, x2).reshape(M, 2, -1).transpose(0, 1).half()
    assert out.shape == (2, M, B * (N + 1) // 2) and torch.equal(out.cpu(), want)


def test_transpose_batchmatmul_refuses_mismatched_operands():
    raises_operator_error(
        lambda: torch_npu.npu_transpose_batchmatmul(
            torch.randn(M, B, K, device="npu"), torch.randn(B, K + 1, N, device="npu")
        ),
        f"npu_transpose_batchmatmul: cannot multiply ({B}, {M}, {K}) by ({B}, {K + 1}, {N})",
    )
