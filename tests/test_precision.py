"""Precision knobs with real numerics: HF32 and FP16 rounding of matmul/convolution operands.

Every case runs in a fresh interpreter: the knobs are process-wide and, once set, keep precision
emulation on. The HF32 value is computed by hand: float32 keeps 11 of its 23 mantissa bits,
rounding to nearest with ties to even."""

import pytest
import torch
from subprocess_helpers import run_python

ONE_ULP11 = 2.0**-11
TIE_ODD = 1.0 + 2.0**-11 + 2.0**-12  # halfway, kept part odd  -> rounds up to 1 + 2^-10
TIE_EVEN = 1.0 + 2.0**-12  # halfway, kept part even -> rounds down to 1
ABOVE = 1.0 + 2.0**-12 + 2.0**-20  # above halfway           -> 1 + 2^-11


def _matmul_results(setup, env=None):
    out = run_python(
        f"""
        import torch, torch_npu
        {setup}
        x = torch.tensor([[{TIE_ODD!r}, {TIE_EVEN!r}, {ABOVE!r}]], device="npu")
        w = torch.eye(3, device="npu")
        print(*(repr(v) for v in (x @ w).cpu().double().flatten().tolist()))
    """,
        env=env,
    )
    return [float(v) for v in out.stdout.split()]


def test_defaults_are_bit_identical_to_cpu():
    assert _matmul_results("pass") == [TIE_ODD, TIE_EVEN, ABOVE]


def test_matmul_allow_hf32_rounds_operands_to_hf32():
    expected = [1.0 + 2.0**-10, 1.0, 1.0 + ONE_ULP11]  # computed by hand, see module docstring
    assert _matmul_results("torch.npu.matmul.allow_hf32 = True") == expected


def test_cube_math_type_use_fp16_and_hf32():
    fp16 = [float(torch.tensor(v).half()) for v in (TIE_ODD, TIE_EVEN, ABOVE)]
    setup = "torch.npu.matmul.cube_math_type = torch_npu.npu.CubeMathType.USE_FP16"
    assert _matmul_results(setup) == fp16
    setup = "torch.npu.matmul.cube_math_type = torch_npu.npu.CubeMathType.USE_HF32"
    assert _matmul_results(setup) == [1.0 + 2.0**-10, 1.0, 1.0 + ONE_ULP11]


def test_precision_mode_allow_fp32_to_fp16():
    fp16 = [float(torch.tensor(v).half()) for v in (TIE_ODD, TIE_EVEN, ABOVE)]
    assert _matmul_results('torch.npu.set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16"})') == fp16


def test_env_emulation_applies_torch_npu_defaults():
    # Emulation on, torch_npu's defaults: matmul keeps float32, convolutions use HF32.
    assert _matmul_results("pass", env={"VNPU_PRECISION_EMULATION": "1"}) == [TIE_ODD, TIE_EVEN, ABOVE]
    out = run_python(
        f"""
        import torch, torch_npu
        x = torch.tensor([{TIE_ODD!r}, {TIE_EVEN!r}, {ABOVE!r}], device="npu").view(1, 1, 3)
        w = torch.ones(1, 1, 1, device="npu")
        print(*(repr(v) for v in torch.nn.functional.conv1d(x, w).cpu().double().flatten().tolist()))
        torch.npu.conv.allow_hf32 = False
        print(*(repr(v) for v in torch.nn.functional.conv1d(x, w).cpu().double().flatten().tolist()))
    """,
        env={"VNPU_PRECISION_EMULATION": "1"},
    )
    hf32_line, fp32_line = out.stdout.strip().splitlines()
    assert [float(v) for v in hf32_line.split()] == [1.0 + 2.0**-10, 1.0, 1.0 + ONE_ULP11]
    assert [float(v) for v in fp32_line.split()] == [TIE_ODD, TIE_EVEN, ABOVE]


def test_hf32_keeps_inf_nan_and_rounds_to_inf_past_max():
    out = run_python("""
        import torch, torch_npu
        f = torch_npu._C._round_to_hf32
        big = torch.finfo(torch.float32).max
        print(f(float("inf")), f(float("nan")), f(big), f(-0.0))
    """)
    assert out.stdout.split() == ["inf", "nan", "inf", "-0.0"]


def test_emulated_matmul_equals_cpu_matmul_of_rounded_inputs():
    out = run_python("""
        import torch, torch_npu
        torch.manual_seed(0)
        a, b = torch.randn(16, 32), torch.randn(32, 8)
        f = torch_npu._C._round_to_hf32
        ra = a.clone().apply_(f); rb = b.clone().apply_(f)
        torch.npu.matmul.allow_hf32 = True
        got = (a.npu() @ b.npu()).cpu()
        print(torch.equal(got, ra @ rb), torch.equal(got, a @ b))
    """)
    assert out.stdout.split() == ["True", "False"]


@pytest.mark.parametrize("value", [1, "True", None])
def test_allow_hf32_needs_a_bool(value):
    with pytest.raises(TypeError, match="allow_hf32 must be a bool, but got"):
        torch.npu.matmul.allow_hf32 = value
    with pytest.raises(TypeError, match="allow_hf32 must be a bool, but got"):
        torch.npu.conv.allow_hf32 = value


def test_defaults_of_the_knobs():
    assert torch.npu.matmul.allow_hf32 is False
    assert torch.npu.conv.allow_hf32 is True

    assert torch.npu.matmul.cube_math_type is None  # until set, as torch_npu reports it
    with pytest.raises(ValueError, match="cube_math_type must be one of"):
        torch.npu.matmul.cube_math_type = 9


def test_cube_math_type_names_its_members_as_torch_npu_does():
    out = run_python(
        """
        import torch, torch_npu
        from torch_npu.npu.npu_config import _CubeMathType
        print(torch.npu.matmul.cube_math_type)
        torch.npu.matmul.cube_math_type = torch_npu.npu.CubeMathType.USE_HF32
        print(repr(torch.npu.matmul.cube_math_type))
        torch.npu.matmul.cube_math_type = _CubeMathType.KEEP_DTYPE
        print(repr(torch.npu.matmul.cube_math_type), int(torch.npu.matmul.cube_math_type))
        print([int(m) for m in (_CubeMathType.ALLOW_FP32_DOWN_PRECISION, _CubeMathType.USE_FP16, _CubeMathType.USE_FP32_ADD)])
        """,
        env={"VNPU_PRECISION_EMULATION": "1"},
    )
    assert out.stdout.splitlines() == [
        "None",
        "<_CubeMathType.USE_HF32: 3>",
        "<_CubeMathType.KEEP_DTYPE: 0> 0",
        "[1, 2, 4]",
    ]
