"""Element-wise operators that run on the npu tensors themselves (csrc/aten/StructuredKernels.cpp):
bit-identical to the CPU, and every call they cannot take goes through the redirect unchanged."""

import pytest
import torch

import torch_npu
from tests.error_cases import NPU

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def same(npu_result, cpu_result):
    assert npu_result.device.type == NPU
    assert npu_result.dtype == cpu_result.dtype and npu_result.shape == cpu_result.shape
    assert npu_result.stride() == cpu_result.stride()
    torch.testing.assert_close(npu_result.cpu(), cpu_result, rtol=0, atol=0, equal_nan=True)


def redirected(fn):
    """How many operators `fn` ran through the redirect."""
    before = torch_npu._C._redirect_calls()
    fn()
    return torch_npu._C._redirect_calls() - before


FUNCTIONAL = {
    "add": lambda a, b: torch.add(a, b, alpha=0.7),
    "add number": lambda a, b: a + 3,
    "sub": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "mul number": lambda a, b: a * 0.1,
    "div": lambda a, b: a / b,
    "div number": lambda a, b: a / 7,
    "neg": lambda a, b: -a,
    "exp": lambda a, b: a.exp(),
    "sqrt": lambda a, b: a.sqrt(),
    "rsqrt": lambda a, b: a.rsqrt(),
    "sigmoid": lambda a, b: a.sigmoid(),
    "tanh": lambda a, b: a.tanh(),
    "threshold_backward": lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.1),
    "clamp_min": lambda a, b: a.clamp_min(-0.2),
    "relu": lambda a, b: torch.relu(a),
}
# Where the CPU branches on the device for 16-bit floats, only float32 and float64 run here.
FULL_PRECISION = {
    "mm": lambda a, b: a @ b.t(),
    "sum": lambda a, b: a.sum(0),
    "sum keepdim": lambda a, b: a.sum((0, 1), keepdim=True),
}
IN_PLACE = {
    "add_": lambda a, b: a.add_(b, alpha=-1.5),
    "add_ number": lambda a, b: a.add_(1e-8),
    "sub_": lambda a, b: a.sub_(b),
    "mul_": lambda a, b: a.mul_(b),
    "mul_ number": lambda a, b: a.mul_(0.999),
    "div_": lambda a, b: a.div_(b),
    "lerp_": lambda a, b: a.lerp_(b, 0.1),
    "addcmul_": lambda a, b: a.addcmul_(b, b, value=0.001),
    "addcdiv_": lambda a, b: a.addcdiv_(b, b * b + 1, value=-0.01),
    "clamp_min_": lambda a, b: a.clamp_min_(0.3),
    "relu_": lambda a, b: a.relu_(),
    "fill_": lambda a, b: a.fill_(-2.5),
    "zero_": lambda a, b: a.zero_(),
    "fill_ one element": lambda a, b: (a[3:4, 5:6].fill_(7), a)[1],
}


def run_without_the_redirect(fn, dtype):
    """Runs `fn` on npu copies of two CPU tensors; returns the CPU tensors, the npu ones and the result."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(7, 33, generator=g).to(dtype) for _ in range(2))
    an, bn = a.npu(), b.npu()
    version = an._version
    result = []
    assert redirected(lambda: result.append(fn(an, bn))) == 0
    return a, b, an, result[0], an._version - version


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_operators_match_the_cpu_and_skip_the_redirect(name, dtype):
    a, b, _, result, _ = run_without_the_redirect(FUNCTIONAL[name], dtype)
    same(result, FUNCTIONAL[name](a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", FULL_PRECISION)
def test_matmuls_and_reductions_in_full_precision_match_the_cpu(name, dtype):
    a, b, _, result, _ = run_without_the_redirect(FULL_PRECISION[name], dtype)
    same(result, FULL_PRECISION[name](a, b))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", FULL_PRECISION)
def test_matmuls_and_reductions_of_16_bit_floats_take_the_redirect(name, dtype):
    a, b = (torch.randn(7, 33).to(dtype) for _ in range(2))
    an, bn = a.npu(), b.npu()
    result = []
    assert redirected(lambda: result.append(FULL_PRECISION[name](an, bn))) == 1
    same(result[0], FULL_PRECISION[name](a, b))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_operators_write_the_npu_tensor_as_the_cpu_writes_its_own(name, dtype):
    a, b, an, result, versions = run_without_the_redirect(IN_PLACE[name], dtype)
    assert result is an and versions == 1
    IN_PLACE[name](a, b)
    same(an, a)


@pytest.mark.parametrize(
    "layout",
    ["broadcast", "transposed", "sliced", "channels_last", "empty", "zero-dim"],
)
def test_shapes_and_strides_follow_the_cpu(layout):
    g = torch.Generator().manual_seed(1)
    if layout == "broadcast":
        a, b = torch.randn(4, 1, 5, generator=g), torch.randn(3, 1, generator=g)
    elif layout == "transposed":
        a, b = torch.randn(6, 4, generator=g).t(), torch.randn(4, 6, generator=g)
    elif layout == "sliced":
        a, b = torch.randn(8, 10, generator=g)[::2, 1::3], torch.randn(4, 3, generator=g)
    elif layout == "channels_last":
        a = torch.randn(2, 3, 4, 5, generator=g).to(memory_format=torch.channels_last)
        b = torch.randn(2, 3, 4, 5, generator=g)
    elif layout == "empty":
        a, b = torch.randn(0, 3, generator=g), torch.randn(0, 3, generator=g)
    else:
        a, b = torch.randn((), generator=g), torch.randn(5, generator=g)
    for fn in FUNCTIONAL.values():
        same(fn(a.npu(), b.npu()), fn(a, b))


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(lambda d: torch.arange(6, device=d) + 0.5, id="int tensor + float number"),
        pytest.param(lambda d: torch.arange(6, device=d) / 4, id="int true division"),
        pytest.param(lambda d: torch.arange(6, device=d).sqrt(), id="int sqrt"),
        pytest.param(lambda d: torch.ones(3, device=d, dtype=torch.half) * torch.ones(3, device=d), id="half * float"),
        pytest.param(lambda d: torch.ones(3, device=d) + torch.tensor(2.0, dtype=torch.float64), id="cpu 0-dim"),
        pytest.param(
            lambda d: torch.ones(3, device=d, dtype=torch.half).add_(torch.ones(3, device=d)), id="half += float"
        ),
        pytest.param(
            lambda d: torch.ones(2, 3, device=d).addcmul_(torch.ones(3, device=d), torch.tensor(3.0)),
            id="addcmul_ cpu scalar",
        ),
    ],
)
def test_calls_with_mixed_dtypes_or_devices_take_the_redirect_and_match_the_cpu(case):
    result = []
    assert redirected(lambda: result.append(case(NPU))) >= 1
    same(result[0], case("cpu"))


def storage_resized_away(d):
    t = torch.ones(4, device=d)
    t.untyped_storage().resize_(0)
    return t


def bool_ones(d):
    return torch.ones(3, device=d, dtype=torch.bool)


FREED = (
    "npu tensor with sizes [4], strides [1], storage offset 0, and itemsize 4 requiring a storage size of 16 is "
    "out of bounds for storage of size 0 (its storage was resized or freed under it)"
)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        pytest.param(
            lambda d: torch.ones(3, device=d, dtype=torch.int32).add_(1.5),
            "result type Float can't be cast to the desired output type Int",
            id="int += float",
        ),
        pytest.param(
            lambda d: -bool_ones(d),
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
            "the `~` or `logical_not()` operator instead.",
            id="neg bool",
        ),
        pytest.param(
            lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)),
            "output with shape [3] doesn't match the broadcast shape [2, 3]",
            id="in-place broadcast",
        ),
        pytest.param(
            lambda d: bool_ones(d).lerp_(bool_ones(d), 0.5),
            "\"lerp_kernel_scalar\" not implemented for 'Bool'",
            id="lerp_ bool",
        ),
        pytest.param(
            lambda d: bool_ones(d).addcmul_(bool_ones(d), bool_ones(d)),
            "\"addcmul__npu\" not implemented for 'Bool'",
            id="addcmul_ bool",
        ),
        pytest.param(lambda d: storage_resized_away(d) * 2, FREED, id="storage resized to nothing"),
        pytest.param(
            lambda d: torch.ones(4, device=d).add_(storage_resized_away(d)), FREED, id="in-place, freed other"
        ),
    ],
)
def test_refused_calls_raise_the_redirects_error(case, message):
    with pytest.raises((RuntimeError, NotImplementedError)) as direct:
        case(NPU)
    with observed(), pytest.raises(direct.type) as boxed:
        case(NPU)
    assert str(direct.value).splitlines()[0] == str(boxed.value).splitlines()[0] == message


def test_a_tensor_on_the_cpu_beside_an_npu_tensor_raises_torch_npus_device_error():
    with pytest.raises(RuntimeError) as error:
        torch.ones(3, device=NPU) + torch.ones(3)
    assert str(error.value).splitlines()[0] == (
        "Expected all tensors to be on the same device, but got other is on cpu, different from other tensors "
        "on npu:0 (when checking argument in method aten::add.Tensor)"
    )


def test_results_are_counted_in_the_npu_pool_as_the_redirects_are():
    a = torch.ones(1024, device=NPU)
    before = torch.npu.memory_allocated()
    direct = a * 2
    by_direct = torch.npu.memory_allocated() - before
    with observed():
        redirected_result = a * 2
    by_redirect = torch.npu.memory_allocated() - before - by_direct
    assert by_direct == by_redirect >= 4096
    del direct, redirected_result
    assert torch.npu.memory_allocated() == before


def test_a_tensor_on_another_device_runs_there():
    if torch.npu.device_count() < 2:
        pytest.skip("needs two npu devices")
    a = torch.randn(5, device="npu:1")
    result = []
    assert redirected(lambda: result.append(a * a)) == 1
    assert result[0].device == torch.device("npu:1")
    same(result[0], a.cpu() * a.cpu())


class observed:
    """An operator hook installed (as dumps, overflow checks and graph capture install one): operators
    take the boxed redirect, which calls it. Records the operators it saw."""

    def __enter__(self):
        self.seen = []
        self.hook = torch_npu._C._add_python_op_hook(lambda name, *rest: self.seen.append(name))
        return self

    def __exit__(self, *exc):
        torch_npu._C._remove_op_hook(self.hook)
        return False


def test_observed_relu_is_seen_as_relu_not_as_the_operator_it_calls():
    a = torch.randn(5, device=NPU)
    with observed() as hook:
        torch.relu(a)
    assert hook.seen == ["aten::relu"]
    assert redirected(lambda: torch.relu(a)) == 0


def test_observed_operators_take_the_redirect_and_hooks_see_them():
    a = torch.randn(5, device=NPU)
    result = []
    with observed() as hook:
        assert redirected(lambda: result.append(a * 2)) == 1
    assert hook.seen == ["aten::mul.Tensor"]
    same(result[0], a.cpu() * 2)
    assert redirected(lambda: a * 2) == 0


def test_a_matmul_whose_operand_the_cpu_would_copy_takes_the_redirect():
    whole, b = torch.randn(8, 12), torch.randn(4, 5)
    a, an, bn = whole[::2, ::3], whole.npu()[::2, ::3], b.npu()  # a is neither row- nor column-major
    result = []
    assert redirected(lambda: result.append(an @ bn)) == 1
    same(result[0], a @ b)
    assert redirected(lambda: an.contiguous() @ bn) == 1  # the copy only
