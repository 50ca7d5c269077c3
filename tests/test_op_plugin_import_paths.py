"""op-plugin's import paths that programs use: torch_npu.op_plugin.atb._atb_ops (vllm-ascend's worker registers
the ATB operators through it before building a model) and the Meta library of torch_npu.op_plugin.meta
._meta_registrations (extensions register meta kernels of their own npu operators through it)."""

import torch
from subprocess_helpers import run_python

import torch_npu
from torch_npu.op_plugin.atb import _atb_ops


def test_registering_the_atb_operators_puts_each_where_torch_npu_has_it():
    _atb_ops._register_atb_extensions()
    _atb_ops._register_atb_extensions()  # once is enough; again does nothing
    assert "_npu_paged_attention" in _atb_ops.API_LIST and "npu_ring_mla" in _atb_ops.ATB_API_LIST
    for name in _atb_ops.API_LIST:
        assert getattr(torch_npu, name) is getattr(torch.ops.atb, name), name
    for name in _atb_ops.ATB_API_LIST:
        assert hasattr(torch_npu.atb, name), name


def test_the_module_functions_call_the_operators():
    x, w = torch.randn(8, 4).half(), torch.randn(8, 16).half()  # C += x^T w, accumulated in float32
    c = torch.randn(4, 16)
    expected = c + x.float().T @ w.float()
    out = c.npu()
    _atb_ops._npu_matmul_add_fp32(x.npu(), w.npu(), out)
    reference = c.npu()
    torch.ops.atb._npu_matmul_add_fp32(x.npu(), w.npu(), reference)
    assert torch.equal(out, reference)
    torch.testing.assert_close(out.cpu(), expected)
    assert _atb_ops._npu_matmul_add_fp32.__name__ == "_npu_matmul_add_fp32"


def test_an_extensions_npu_operator_gets_its_meta_kernel_through_torch_npus_library():
    # in a fresh interpreter: the operator joins the npu namespace, which other tests enumerate
    out = run_python(
        """
        import torch, torch_npu
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch_npu.op_plugin.meta._meta_registrations import m

        lib = torch.library.Library("npu", "FRAGMENT")
        lib.define("extension_twice(Tensor x) -> Tensor")
        torch.library.impl(lib, "extension_twice", "PrivateUse1")(lambda x: x * 2)

        @torch.library.impl(m, "extension_twice", "Meta")
        def twice_meta(x):
            return torch.empty_like(x)

        with FakeTensorMode():
            fake = torch.ops.npu.extension_twice(torch.empty(3, 2, device="npu"))
        print(tuple(fake.shape), fake.device.type, torch.ops.npu.extension_twice(torch.ones(3, device="npu")).tolist())
        """
    )
    assert out.stdout.strip() == "(3, 2) npu [2.0, 2.0, 2.0]"
