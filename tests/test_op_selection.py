"""Which kernel serves each aten operator on npu (the rules in torch_npu/_op_selection.py)."""

import pytest
import torch

from torch_npu import _op_selection


def npu_kernel(qualified):
    for line in torch._C._dispatch_dump(qualified).splitlines():
        if line.startswith("PrivateUse1:"):
            return line
    return None


@pytest.mark.parametrize(
    "op",
    [
        "aten::mse_loss",
        "aten::_to_copy",
        "aten::native_batch_norm",
        "aten::addr",
        "aten::convolution",
        "aten::uniform_",
        "aten::gelu_backward",
        "aten::zeros",
    ],
)
def test_cpu_and_explicit_composite_operators_are_redirected(op):
    kernel = npu_kernel(op)
    assert kernel is not None and ("Redirect.cpp" in kernel or "UnboxedRedirect.cpp" in kernel), kernel


@pytest.mark.parametrize(
    "op",
    [
        "aten::empty.memory_format",
        "aten::view",
        "aten::as_strided",
        "aten::resize_",
        "aten::set_.source_Storage",
        "aten::native_dropout",
        "aten::_copy_from",
    ],
)
def test_backend_owned_operators_are_native(op):
    assert "NativeKernels.cpp" in npu_kernel(op)


@pytest.mark.parametrize(
    ("op", "source"),
    [
        ("aten::bmm", "UnboxedRedirect.cpp"),
        ("aten::mm", "StructuredKernels.cpp"),
        ("aten::copy_", "UnboxedRedirect.cpp"),
        ("aten::add.Tensor", "StructuredKernels.cpp"),
        ("aten::addcdiv_", "StructuredKernels.cpp"),
        ("aten::addmm", "StructuredKernels.cpp"),
        ("aten::nll_loss_forward", "StructuredKernels.cpp"),
        ("aten::ones_like", "StructuredKernels.cpp"),
        ("aten::native_layer_norm", "StructuredKernels.cpp"),
        ("aten::cat", "StructuredKernels.cpp"),
        ("aten::mean.dim", "StructuredKernels.cpp"),
        ("aten::_softmax", "StructuredKernels.cpp"),
        ("aten::_softmax_backward_data", "StructuredKernels.cpp"),
        ("aten::sigmoid_", "StructuredKernels.cpp"),
        ("aten::silu_backward", "StructuredKernels.cpp"),
    ],
)
def test_hot_operators_have_typed_kernels(op, source):
    assert source in npu_kernel(op)


@pytest.mark.parametrize("op", ["aten::transpose.int", "aten::select.int", "aten::expand", "aten::permute"])
def test_pure_views_keep_their_composite_kernels(op):
    assert npu_kernel(op) is None
    name, _, overload = op.partition(".")
    assert _op_selection.is_pure_view(torch._C._get_schema(name, overload))


@pytest.mark.parametrize("op", ["aten::randn", "aten::rand_like", "aten::randperm"])
def test_random_operators_without_a_generator_keep_their_composite_kernels(op):
    assert npu_kernel(op) is None
    assert _op_selection.is_unrouted_random(op, torch._C._get_schema(op, ""))


def test_composite_implicit_operators_decompose():
    assert npu_kernel("aten::linear") is None  # decomposes into redirected operators
    assert npu_kernel("aten::layer_norm") is None


def test_the_kernel_table_agrees_with_the_dispatcher_for_every_aten_operator():
    table = _op_selection.aten_kernels()
    names = [q[len("aten::") :] for q in torch._C._dispatch_get_all_op_names() if q.startswith("aten::")]
    assert sorted(table) == sorted(names)
    keys = ["PrivateUse1", "CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd"]
    keys.append("CompositeExplicitAutogradNonFunctional")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for short in names[::7]:  # every seventh operator: ~500 of them, each against five keys
        expected = sum(1 << i for i, key in enumerate(keys) if has("aten::" + short, key))
        assert table[short] == expected, short
    assert table["add.Tensor"] & _op_selection.NPU and table["add.Tensor"] & _op_selection.CPU
    assert table["linear"] & _op_selection.IMPLICIT and not table["linear"] & _op_selection.NPU


@pytest.mark.parametrize(("op", "callee"), [("stack", "cat"), ("mean", "mean.dim")])
def test_device_generic_composites_run_as_on_the_cpu_and_their_callees_take_their_npu_kernels(op, callee):
    assert op in _op_selection.DEVICE_GENERIC_COMPOSITES
    assert npu_kernel(f"aten::{op}") is None and not torch._C._dispatch_has_kernel_for_dispatch_key(
        f"aten::{op}", "CPU"
    )
    assert "StructuredKernels.cpp" in npu_kernel(f"aten::{callee}")
