"""torch_npu's float-status operators (npu_alloc_float_status, npu_get_float_status,
npu_clear_float_status): the status reads the overflow flag that npu operators set when they produce
inf or NaN, in the layout each SoC's kernel returns."""

import pytest
import torch
from error_cases import raises_operator_error
from subprocess_helpers import run_python

import torch_npu


def test_status_reports_an_overflow_until_cleared_on_inf_nan_socs():
    # in a child process: the first float-status call arms an inf/NaN watch on every operator
    out = run_python(
        """
        import torch, torch_npu
        buffer = torch_npu.npu_alloc_float_status(torch.zeros(1, device="npu"))
        print(buffer.device.type, buffer.dtype, int(buffer.cpu().any()))
        status = torch_npu.npu_get_float_status(buffer)
        print(status.dtype, tuple(status.shape), int(status.cpu().any()))
        b = torch.tensor([60000.0], device="npu", dtype=torch.float16) * 4
        print(int(torch.isinf(b.cpu()).all()), torch_npu.npu_get_float_status(buffer).cpu().tolist())
        print(torch_npu.npu_get_float_status(buffer, 1)[0].item())  # debug mode reads the same register
        cleared = torch_npu.npu_clear_float_status(buffer)
        print(tuple(cleared.shape), cleared.dtype, int(cleared.cpu().any()))
        print(int(torch_npu.npu_get_float_status(buffer).cpu().any()))
        torch.ones(3, device="npu").sum().item()  # finite results, and a copy to the host, leave it clear
        print(int(torch_npu.npu_get_float_status(buffer).cpu().any()))
    """
    )
    assert out.stdout.splitlines() == [
        "npu torch.float32 0",
        "torch.int32 (8,) 0",
        "1 [1, 0, 0, 0, 0, 0, 0, 0]",
        "1",
        "(8,) torch.float32 0",
        "0",
        "0",
    ]


def test_status_is_read_into_the_buffer_on_saturation_mode_socs():
    out = run_python(
        """
        import torch, torch_npu
        buffer = torch_npu.npu_alloc_float_status(torch.zeros(1, device="npu"))
        torch_npu.npu_clear_float_status(buffer)
        b = torch.tensor([60000.0], device="npu", dtype=torch.float16) * 4
        status = torch_npu.npu_get_float_status(buffer)
        print(status.dtype, buffer.cpu()[0].item(), status.cpu()[0].item(), torch.npu.get_npu_overflow_flag())
        torch_npu.npu_clear_float_status(buffer)
        print(torch.npu.get_npu_overflow_flag())
    """,
        env={"VNPU_SOC": "Ascend910A"},
    )
    assert out.stdout.split() == ["torch.float32", "1.0", "1.0", "True", "False"]


@pytest.mark.parametrize("op", [torch_npu.npu_get_float_status, torch_npu.npu_clear_float_status])
def test_status_modes_other_than_original_and_debug_are_refused(op):
    raises_operator_error(
        lambda: op(torch.zeros(8, device="npu"), 2),
        "mode only supported for ORIGINAL_MODE(0) DEBUG_MODE(1), but got mode:2",
    )
