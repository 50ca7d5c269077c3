"""Tensor semantics on npu match the CPU's: views share memory, in-place and out= (with resizes)
behave the same, results never silently mix devices, unsupported layouts fail clearly."""

import pytest
import torch
from subprocess_helpers import run_python

import torch_npu


def npu_and_cpu(make):
    return make("npu"), make("cpu")


def test_views_share_storage_and_writes_reach_the_base():
    x = torch.arange(12.0, device="npu").reshape(3, 4)
    views = [x.t(), x.select(0, 1), x.unfold(1, 2, 1), x.diagonal(), x[1:, ::2], x.view(-1), x.expand(2, 3, 4)]
    for v in views:
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert v.device == x.device
    views[2][0, 0, 0] = 100.0
    views[1][0] = 200.0
    assert x[0, 0].item() == 100.0 and x[1, 0].item() == 200.0
    z = torch.zeros(2, dtype=torch.complex64, device="npu")
    r = torch.view_as_real(z)
    r[0, 1] = 5.0
    assert z[0].item() == 5j


def test_views_of_redirected_ops_stay_valid_in_inference_mode():
    with torch.inference_mode():
        x = torch.arange(8.0, device="npu")
        u = x.unfold(0, 2, 1)  # a CPU kernel that returns a view
        del x
        assert u[:, 0].cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_in_place_ops_return_the_same_tensor():
    a = torch.ones(4, device="npu")
    b = torch.full((4,), 2.0, device="npu")
    assert a.add_(b) is a
    assert a.mul_(2).clamp_(max=5) is a
    assert a.cpu().tolist() == [5.0] * 4
    view = a[:2]
    view.zero_()
    assert a.cpu().tolist() == [0.0, 0.0, 5.0, 5.0]


def test_out_variants_resize_and_keep_identity():
    for device in ("npu", "cpu"):
        x = torch.tensor([-1.0, 2.0, -3.0], device=device)
        out = torch.empty(0, device=device)
        res = torch.abs(x, out=out)
        assert res is out and out.shape == (3,)
        assert out.cpu().tolist() == [1.0, 2.0, 3.0]
    out = torch.empty(0, device="npu")
    torch.mm(torch.ones(2, 3, device="npu"), torch.ones(3, 4, device="npu"), out=out)
    assert out.shape == (2, 4) and out.cpu().eq(3).all()
    values, indices = torch.empty(0, device="npu"), torch.empty(0, dtype=torch.long, device="npu")
    torch.max(torch.tensor([[1.0, 5.0], [7.0, 2.0]], device="npu"), 1, out=(values, indices))
    assert values.cpu().tolist() == [5.0, 7.0] and indices.cpu().tolist() == [1, 0]


def test_out_resize_is_seen_by_views_of_the_same_storage():
    out = torch.empty(1, device="npu")
    alias = out.view(1)
    torch.add(torch.ones(5, device="npu"), 1, out=out)
    assert out.shape == (5,)
    assert alias.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()


def test_mse_loss_through_composite_kernels_is_exact():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    for reduction in ("mean", "sum", "none"):
        cpu = torch.nn.functional.mse_loss(a, b, reduction=reduction)
        npu = torch.nn.functional.mse_loss(a.npu(), b.npu(), reduction=reduction)
        assert torch.equal(npu.cpu(), cpu)


def test_set_and_resize():
    a = torch.arange(6.0, device="npu")
    b = torch.empty(0, device="npu")
    b.set_(a.untyped_storage(), 2, (2, 2), (2, 1))
    assert b.cpu().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    b.resize_(10)
    assert b.shape == (10,) and b.device == torch.device("npu", 0)
    with pytest.raises(RuntimeError, match="Attempted to set the storage of a tensor on device"):
        torch.empty(0, device="npu").set_(torch.ones(2).untyped_storage())


def test_storage_round_trip_and_copies_between_devices():
    x = torch.arange(5.0, device="npu:1")
    assert x.untyped_storage().cpu().tolist() == list(torch.arange(5.0).untyped_storage().tolist())
    y = x.to("npu:3")
    assert y.device.index == 3 and torch.equal(y.cpu(), x.cpu())
    cpu = torch.zeros(5)
    cpu.copy_(x)
    assert cpu.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    x.copy_(torch.ones(5))
    assert x.cpu().eq(1).all()


def test_printing_and_python_values():
    x = torch.tensor([0.0, 1.0, 2.0], device="npu")
    assert repr(x) == "tensor([0., 1., 2.], device='npu:0')"
    assert repr(torch.ones(2, dtype=torch.complex64, device="npu:2") * 1j) == "tensor([0.+1.j, 0.+1.j], device='npu:2')"
    assert x.tolist() == [0.0, 1.0, 2.0]
    assert torch.tensor(2.5, device="npu").item() == 2.5
    assert bool(torch.tensor(True, device="npu"))


def test_numpy_on_npu_is_refused_with_pytorchs_message():
    with pytest.raises(TypeError) as info:
        torch.ones(2, device="npu").numpy()
    assert str(info.value) == (
        "can't convert npu:0 device type tensor to numpy. Use Tensor.cpu() to copy the " "tensor to host memory first."
    )


def test_mixed_devices_raise_pytorchs_error():
    with pytest.raises(RuntimeError) as info:
        torch.ones(2, device="npu:0") + torch.ones(2, device="npu:1")
    assert str(info.value).splitlines()[0] == (
        "Expected all tensors to be on the same device, but got other is on npu:1, different from other tensors "
        "on npu:0 (when checking argument in method aten::add.Tensor)"
    )
    with pytest.raises(RuntimeError) as info:
        torch.mm(torch.ones(2, 2, device="npu"), torch.ones(2, 2))
    assert str(info.value).splitlines()[0] == (
        "Expected all tensors to be on the same device, but got mat2 is on cpu, different from other tensors on "
        "npu:0 (when checking argument in method aten::mm)"
    )
    with pytest.raises(RuntimeError, match="but got tensors is on cpu"):
        torch.cat([torch.ones(2, device="npu"), torch.ones(2)])


def test_cpu_scalars_and_cpu_indices_are_allowed():
    x = torch.arange(6.0, device="npu")
    assert (x + torch.tensor(1.0)).device == x.device
    assert x.mul(torch.tensor(2.0)).cpu()[-1].item() == 10.0
    idx = torch.tensor([0, 5])
    assert x[idx].cpu().tolist() == [0.0, 5.0]
    x[idx] = torch.tensor([9.0, 9.0], device="npu")
    assert x.cpu().tolist() == [9.0, 1.0, 2.0, 3.0, 4.0, 9.0]


def test_quantized_and_nested_are_refused_clearly():
    with pytest.raises(NotImplementedError, match="quantized tensors are not supported on npu"):
        torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8).to("npu")
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device="npu")
    with pytest.raises(NotImplementedError) as info:
        nested + 1
    assert str(info.value).splitlines()[0] == (
        "The operator 'aten::add.Tensor' is not currently supported on the NPU backend: nested tensors are not "
        "supported on npu (only strided, dense tensors are)"
    )


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float16,
        torch.bfloat16,
        torch.float64,
        torch.int8,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.complex64,
        torch.uint8,
    ],
)
def test_dtypes_compute_like_cpu(dtype):
    torch.manual_seed(0)
    base = torch.randn(64) * 10
    a = base.to(dtype) if not dtype.is_complex else torch.complex(base, base.flip(0)).to(dtype)
    b = a.flip(0)
    ops = [
        lambda x, y: x + y,
        lambda x, y: x * y,
        lambda x, y: torch.maximum(x, y) if not x.is_complex() else x,
        lambda x, y: x.sum(),
        lambda x, y: (x == y),
    ]
    for op in ops:
        assert torch.equal(op(a.npu(), b.npu()).cpu(), op(a, b))


def test_zero_tensors_from_autograd():
    x = torch.randn(3, device="npu", requires_grad=True)
    (torch.sgn(x) * 0).sum().backward()
    assert x.grad.device == x.device


def test_redirect_serves_operators_from_cpp():
    before = torch_npu._C._redirect_calls()
    torch.ones(3, device="npu").erf().abs()
    assert torch_npu._C._redirect_calls() - before >= 3


@pytest.mark.parametrize("dtype", [None, torch.float16])
def test_non_blocking_copy_to_the_host_lands_in_pinned_memory(dtype):
    x = torch.randn(5, device="npu")
    host = x.to("cpu", dtype, non_blocking=True) if dtype else x.to("cpu", non_blocking=True)
    assert host.is_pinned() and host.device.type == "cpu"
    assert torch.equal(host, x.cpu().to(dtype or x.dtype))
    assert not x.to("cpu").is_pinned()


def test_dtype_only_conversion_to_double_gives_float_as_on_the_card():
    proc = run_python(
        """
        import warnings, torch, torch_npu
        x = torch.randn(3, device="npu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            converted = [x.to(torch.float64), x.double(), x.to(dtype=torch.float64)]
        print([t.dtype for t in converted])
        print([str(w.message).split(" (Triggered")[0] for w in caught])
        # a device move keeps float64, and so do tensors made as float64
        print(x.to("npu", torch.float64).dtype, x.cpu().double().npu().dtype, torch.zeros(1, dtype=torch.float64, device="npu").dtype)
    """
    )
    dtypes, warned, kept = proc.stdout.strip().splitlines()[-3:]
    assert dtypes == "[torch.float32, torch.float32, torch.float32]"
    assert warned == "['Device do not support double dtype now, dtype cast replace with float.']"
    assert kept == "torch.float64 torch.float64 torch.float64"


def test_an_npu_tensor_prints_as_its_cpu_copy_without_a_double_conversion_warning():
    """torch_npu formats npu tensors from a host copy: no float64 conversion on the device, so no warning, and the
    digits are the CPU's (summarised, half precision, complex and autograd suffixes included)."""
    proc = run_python(
        """
        import warnings, torch, torch_npu
        torch.manual_seed(0)
        cases = [torch.tensor([1.5, 2.25e-7, float("nan"), -float("inf")]), torch.arange(2000.0).reshape(40, 50).half(),
                 torch.tensor([1 + 2j, 3.5 - 1j]), torch.randn(3, dtype=torch.bfloat16), torch.tensor([3, -7])]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            printed = [repr(t.npu()) for t in cases] + [repr(torch.randn(2, device="npu", requires_grad=True) * 2)]
        def on_npu(text):  # the CPU's text with the device suffix where PyTorch puts it
            if ", dtype=" in text:
                return text.replace(", dtype=", ", device='npu:0', dtype=")
            return text[:-1] + ", device='npu:0')"

        expected = [on_npu(repr(t)) for t in cases]
        print([p == e or (p, e) for p, e in zip(printed, expected)])
        print(printed[-1].endswith("device='npu:0', grad_fn=<MulBackward0>)"), [str(w.message) for w in caught])
    """
    )
    same, tail = proc.stdout.strip().splitlines()[-2:]
    assert same == "[True, True, True, True, True]", same
    assert tail == "True []", tail


@pytest.mark.parametrize(
    "memory_format,shape", [(torch.channels_last, (2, 3, 4, 5)), (torch.channels_last_3d, (2, 3, 4, 5, 6))]
)
def test_contiguous_in_a_channels_last_format_is_not_supported_on_npu(memory_format, shape):
    x = torch.randn(*shape, device="npu")
    with pytest.raises(RuntimeError) as info:
        x.contiguous(memory_format=memory_format)
    first, suffix = str(info.value).split("\n")[:2]
    assert first == "NPU contiguous operator only supported contiguous memory format."
    assert suffix.endswith("ERR01007 OPS feature not supported")
    # the contiguous format still works, with its gradient
    y = torch.randn(3, 4, device="npu", requires_grad=True)
    z = y.t().contiguous()
    assert z.is_contiguous() and y.t().contiguous().data_ptr() != y.data_ptr()
    z.sum().backward()
    assert torch.equal(y.grad.cpu(), torch.ones(3, 4))
    assert y.contiguous() is y


def test_an_unknown_rounding_mode_is_an_invalid_parameter():
    x = torch.randn(3, device="npu")
    with pytest.raises(RuntimeError) as info:
        torch.div(x, 2, rounding_mode="test")
    first, suffix = str(info.value).split("\n")[:2]
    assert first == "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'test'"
    assert suffix.endswith("ERR01001 OPS invalid parameter")


def test_a_cpu_tensors_data_can_be_set_to_an_npu_tensor():
    cpu, npu = torch.zeros(3), torch.arange(3.0, device="npu")
    cpu.data = npu  # torch_npu allows it
    assert cpu.device.type == "npu" and torch.equal(cpu.cpu(), torch.arange(3.0))


def test_foreach_copy_accepts_cpu_sources_and_matches_per_tensor_copies():
    sources = [torch.randn(3, 4), torch.randn(5).half(), torch.randn(2, 2).npu()]
    targets = [torch.empty(3, 4, device="npu"), torch.empty(5, device="npu"), torch.empty(2, 2, device="npu")]
    result = torch._foreach_copy_(targets, sources)
    assert len(result) == 3 and all(r is t for r, t in zip(result, targets))
    for target, source in zip(targets, sources):
        assert target.device.type == "npu" and torch.equal(target.cpu(), source.cpu().to(target.dtype))
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 1 and 2"):
        torch._foreach_copy_([torch.empty(1, device="npu")], [torch.ones(1), torch.ones(1)])
