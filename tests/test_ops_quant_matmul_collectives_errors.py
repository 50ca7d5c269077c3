"""npu_all_gather_quant_mm / npu_quant_mm_reduce_scatter refuse bad arguments by name before any communication
(the multi-rank results are in test_distributed.py)."""

import torch

import torch_npu
from tests.error_cases import raises_operator_error

X1, X2 = torch.randint(-8, 8, (4, 16), dtype=torch.int8).npu(), torch.randint(-8, 8, (16, 8), dtype=torch.int8).npu()


def test_float8_e8m0_scales_are_refused_with_their_dtype():
    scale = torch.ones(4, 1).to(torch.float8_e8m0fnu).npu()
    for op in (torch_npu.npu_all_gather_quant_mm, torch_npu.npu_quant_mm_reduce_scatter):
        raises_operator_error(
            lambda op=op: op(X1, X2, "hccl_0", 2, x1_scale=scale, x2_scale=torch.ones(1, 8).npu()),
            f"{op.__name__}: scales must be float32 (MX float8_e8m0 scales are not computed by vnpu), got "
            "torch.float8_e8m0fnu",
        )


def test_quantised_operands_need_both_scales():
    raises_operator_error(
        lambda: torch_npu.npu_all_gather_quant_mm(X1, X2, "hccl_0", 2, x1_scale=torch.ones(4, 1).npu()),
        "npu_all_gather_quant_mm: x1_scale and x2_scale go together",
    )
    raises_operator_error(
        lambda: torch_npu.npu_quant_mm_reduce_scatter(X1, X2, "hccl_0", 2),
        "npu_quant_mm_reduce_scatter: quantised self and x2 need x1_scale and x2_scale",
    )
