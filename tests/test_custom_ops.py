"""Users' own NPU operators: the Python API (torch_npu.ops.npu_op) and C++ kernels built with
torch_npu.utils.cpp_extension.NpuExtension — with seed 000's ReLU6 example."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from subprocess_helpers import run_python

from torch_npu.ops import npu_op


@npu_op("vnpu_test::relu6(Tensor x) -> Tensor", differentiable=True)
def relu6(x):
    return x.clamp(0, 6)


def test_python_operator_runs_on_npu_with_fake_and_autograd():
    x = torch.tensor([-2.0, 1.0, 5.0, 8.0], device="npu", requires_grad=True)
    y = torch.ops.vnpu_test.relu6(x)
    y.sum().backward()
    assert y.detach().cpu().tolist() == [0.0, 1.0, 5.0, 6.0]
    assert x.grad.cpu().tolist() == [0.0, 1.0, 1.0, 0.0]
    compiled = torch.compile(lambda t: torch.ops.vnpu_test.relu6(t) * 2, backend="aot_eager", fullgraph=True)
    assert compiled(x.detach()).cpu().tolist() == [0.0, 2.0, 10.0, 12.0]
    with pytest.raises(NotImplementedError):
        torch.ops.vnpu_test.relu6(torch.ones(2))  # registered for npu only


def test_seed_000_custom_relu6_function_over_a_user_operator():
    # seed 000 §4.1, with the operator defined through npu_op instead of the article's non-existent API
    class CustomReLU6(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return torch.ops.vnpu_test.relu6(input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * (input > 0) * (input < 6)

    x = torch.linspace(-3, 9, 7, device="npu", requires_grad=True)
    CustomReLU6.apply(x).sum().backward()
    assert x.grad.cpu().tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]  # x = -3, -1, 1, 3, 5, 7, 9


def test_npu_namespace_operators_are_exported_and_torch_alias_deprecated():
    out = run_python("""
        import torch, torch_npu
        from torch_npu.ops import npu_op

        @npu_op("npu_my_scale(Tensor x, float factor=2.0) -> Tensor", differentiable=True)
        def npu_my_scale(x, factor=2.0):
            return x * factor

        print(torch_npu.npu_my_scale(torch.ones(2, device="npu"), 3.0).cpu().tolist())
        try:
            torch.npu_my_scale(torch.ones(1))
        except RuntimeError as e:
            print(str(e).splitlines()[0])
    """)
    lines = out.stdout.strip().splitlines()
    assert lines == [
        "[3.0, 3.0]",
        "torch.npu_my_scale is deprecated and will be removed in future version. "
        "Use torch_npu.npu_my_scale instead.",
    ]


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="needs a C++ compiler")
@pytest.mark.long
def test_cpp_kernel_built_with_npu_extension(tmp_path):
    (tmp_path / "relu6.cpp").write_text(
        textwrap.dedent("""
        // PyTorch's custom-operator layout: the operator is called through torch.ops, so the module
        // needs no pybind11 (torch/extension.h would triple the compile time for nothing), and the one ATen
        // operator it calls is included alone (ATen/ATen.h would add half again).
        #include <Python.h>
        #include <ATen/core/Tensor.h>
        #include <ATen/ops/clamp.h>
        #include <torch/library.h>

        // seed 000's ReLU6, as a C++ kernel for npu tensors
        at::Tensor relu6(const at::Tensor& input) { return at::clamp(input, 0, 6); }

        TORCH_LIBRARY(custom, m) { m.def("relu6(Tensor input) -> Tensor"); }
        TORCH_LIBRARY_IMPL(custom, PrivateUse1, m) { m.impl("relu6", &relu6); }

        extern "C" PyObject* PyInit_relu6_ext(void) {
          static PyModuleDef module = {PyModuleDef_HEAD_INIT, "relu6_ext", nullptr, -1, nullptr};
          return PyModule_Create(&module);
        }
    """)
    )
    (tmp_path / "setup.py").write_text(
        textwrap.dedent("""
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension
        from torch_npu.utils.cpp_extension import NpuExtension

        setup(name="relu6_ext", ext_modules=[NpuExtension("relu6_ext", ["relu6.cpp"])],
              cmdclass={"build_ext": BuildExtension})
    """)
    )
    env = dict(os.environ, MAX_JOBS="2")
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    out = run_python(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        import torch, torch_npu, relu6_ext
        x = torch.tensor([-1.0, 3.0, 7.0], device="npu")
        print(torch.ops.custom.relu6(x).cpu().tolist(), torch.ops.custom.relu6(x).device)
    """)
    assert out.stdout.strip() == "[0.0, 3.0, 6.0] npu:0"


def test_dtypes_naming_an_argument_the_schema_lacks_is_refused():
    from torch_npu.ops import npu_op

    with pytest.raises(ValueError, match=r"^dtypes names arguments the schema does not have: \['gama'\]$"):

        @npu_op("vnpu_dtype_check::scale(Tensor x, Tensor gamma) -> Tensor", dtypes={"gama": (torch.float32,)})
        def scale(x, gamma):
            return x * gamma
