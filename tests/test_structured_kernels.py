"""Element-wise operators that run on the npu tensors themselves (csrc/aten/StructuredKernels.cpp):
bit-identical to the CPU, and every call they cannot take goes through the redirect unchanged."""

import functools

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
    "pow 2": lambda a, b: a.pow(2),
    "pow 3": lambda a, b: a**3,
    "add.Scalar": lambda a, b: torch.ops.aten.add.Scalar(a, 2, alpha=3),
    "sub.Scalar": lambda a, b: torch.ops.aten.sub.Scalar(a, 0.25),
    "mul.Scalar": lambda a, b: torch.ops.aten.mul.Scalar(a, 0.1),
    "div.Scalar": lambda a, b: torch.ops.aten.div.Scalar(a, 3),
    "clone": lambda a, b: a.transpose(0, -1).clone(),
    "clone contiguous": lambda a, b: a.transpose(0, -1).clone(memory_format=torch.contiguous_format),
    "_unsafe_view": lambda a, b: torch.ops.aten._unsafe_view(a.contiguous(), (a.numel(),)),
    "reciprocal": lambda a, b: a.reciprocal(),
    "log": lambda a, b: (a * a + 1).log(),
    "cos": lambda a, b: a.cos(),
    "sin": lambda a, b: a.sin(),
    "silu": lambda a, b: torch.nn.functional.silu(a),
    "silu_backward": lambda a, b: torch.ops.aten.silu_backward(b, a),
    "sigmoid_backward": lambda a, b: torch.ops.aten.sigmoid_backward(b, a.sigmoid()),
    "tanh_backward": lambda a, b: torch.ops.aten.tanh_backward(b, a.tanh()),
}
# Tensor lists: cat (memcpy, the CPU's cat kernel or copy_stub as the layout asks) and stack, cat's composite.
LISTS = {
    "cat": lambda a, b: torch.cat([a, b, a]),
    "cat dim 1": lambda a, b: torch.cat([a, b[:, :5]], 1),
    "cat of transposed tensors": lambda a, b: torch.cat([a.t(), b.t()], 1),
    "cat of strided slices": lambda a, b: torch.cat([a[::2, 1::3], b[1::2, ::3]], 0),
    "cat channels_last": lambda a, b: torch.cat(
        [a[:6].reshape(2, 3, 1, 33).to(memory_format=torch.channels_last)] * 2, 1
    ),  # fmt: skip
    "cat with an empty tensor": lambda a, b: torch.cat([a, b[:0], torch.empty(0, dtype=a.dtype, device=a.device)]),
    "stack": lambda a, b: torch.stack([a, b]),
    "stack last dim": lambda a, b: torch.stack([a, b], 2),
}
# Where the CPU branches on the device for 16-bit floats, only float32 and float64 run here.
FULL_PRECISION = {
    "mm": lambda a, b: a @ b.t(),
    "addmm": lambda a, b: torch.addmm(b[:, 0], a, b.t(), beta=0.5, alpha=2),
    "linear": lambda a, b: torch.nn.functional.linear(a, b, a[:, 1]),
    "sum": lambda a, b: a.sum(0),
    "sum keepdim": lambda a, b: a.sum((0, 1), keepdim=True),
    "sum of all": lambda a, b: a.sum(),
    "mean": lambda a, b: a.mean(1),
    "mean keepdim": lambda a, b: a.mean((0, 1), keepdim=True),
    "mean of all": lambda a, b: a.mean(),
}


@functools.cache
def indices_on(device):
    """Class indices for the 7 rows of the tests' (7, 33) tensors, one of them ignored: contiguous, and the
    same values as every other element of a longer tensor."""
    values = torch.tensor([3, 0, 32, -100, 7, 7, 20])
    return values.to(device), torch.stack([values, values], 1).flatten().to(device)[::2]


def class_indices(like, strided=False):
    return indices_on(like.device)[strided]


def nll_loss_backward(a, b, reduction, weighted):
    log_probs, weight = a.log_softmax(1), (b[0] * b[0] if weighted else None)
    _, total_weight = torch.ops.aten.nll_loss_forward(log_probs, class_indices(a), weight, reduction, -100)
    grad = b[0, :7] if reduction == 0 else b[0, 0]
    return torch.ops.aten.nll_loss_backward(grad, log_probs, class_indices(a), weight, reduction, -100, total_weight)


# Normalisation, softmax and the loss on contiguous operands (any other takes the redirect).
LOSSES = {
    "log_softmax": lambda a, b: a.log_softmax(1),
    "log_softmax dim 0": lambda a, b: a.log_softmax(0),
    "log_softmax backward": lambda a, b: torch.ops.aten._log_softmax_backward_data(b, a.log_softmax(1), 1, a.dtype),
    "softmax": lambda a, b: a.softmax(1),
    "softmax dim 0": lambda a, b: a.softmax(0),
    "softmax backward": lambda a, b: torch.ops.aten._softmax_backward_data(b, a.softmax(1), 1, a.dtype),
    "layer_norm": lambda a, b: torch.nn.functional.layer_norm(a, (33,), b[0], b[1], eps=1e-3),
    "layer_norm without affine": lambda a, b: torch.nn.functional.layer_norm(a, (33,)),
    "nll_loss mean": lambda a, b: torch.nn.functional.nll_loss(a.log_softmax(1), class_indices(a)),
    "nll_loss sum weighted": lambda a, b: torch.nn.functional.nll_loss(
        a, class_indices(a), b[0] * b[0], reduction="sum"
    ),
    "nll_loss none": lambda a, b: torch.nn.functional.nll_loss(a, class_indices(a), reduction="none"),
    "nll_loss backward mean": lambda a, b: nll_loss_backward(a, b, 1, False),
    "nll_loss backward sum weighted": lambda a, b: nll_loss_backward(a, b, 2, True),
    "nll_loss backward none": lambda a, b: nll_loss_backward(a, b, 0, False),
}
# New tensors on the argument's device, and conversions and copies that stay there.
ON_DEVICE = {
    "ones_like": lambda a, b: torch.ones_like(a),
    "zeros_like": lambda a, b: torch.zeros_like(a, dtype=torch.int16),
    "empty_like's geometry": lambda a, b: torch.empty_like(a.t()).zero_(),
    "to bfloat16": lambda a, b: a.to(torch.bfloat16),
    "to float32": lambda a, b: a[:, ::2].to(torch.float32),
    "to int32": lambda a, b: (a * 10).to(torch.int32),
    "to channels_last": lambda a, b: a.view(7, 1, 3, 11).to(memory_format=torch.channels_last),
    "copy_": lambda a, b: a.copy_(b),
    "copy_ converting": lambda a, b: a.copy_(b.to(torch.int64)),
    "copy_ broadcast": lambda a, b: a.copy_(b[0]),
    "copy_ transposed": lambda a, b: a[:, :7].copy_(b[:, :7].t()),
}
IN_PLACE = {
    "add_": lambda a, b: a.add_(b, alpha=-1.5),
    "add_ number": lambda a, b: a.add_(1e-8),
    "sub_": lambda a, b: a.sub_(b),
    "mul_": lambda a, b: a.mul_(b),
    "mul_ number": lambda a, b: a.mul_(0.999),
    "add_.Scalar": lambda a, b: torch.ops.aten.add_.Scalar(a, 0.3, alpha=2),
    "sub_.Scalar": lambda a, b: torch.ops.aten.sub_.Scalar(a, 0.3),
    "div_.Scalar": lambda a, b: torch.ops.aten.div_.Scalar(a, 0.7),
    "div_": lambda a, b: a.div_(b),
    "lerp_": lambda a, b: a.lerp_(b, 0.1),
    "addcmul_": lambda a, b: a.addcmul_(b, b, value=0.001),
    "addcdiv_": lambda a, b: a.addcdiv_(b, b * b + 1, value=-0.01),
    "clamp_min_": lambda a, b: a.clamp_min_(0.3),
    "relu_": lambda a, b: a.relu_(),
    "neg_": lambda a, b: a.neg_(),
    "exp_": lambda a, b: a.exp_(),
    "sqrt_": lambda a, b: a.sqrt_(),
    "rsqrt_": lambda a, b: a.rsqrt_(),
    "sigmoid_": lambda a, b: a.sigmoid_(),
    "tanh_": lambda a, b: a.tanh_(),
    "silu_": lambda a, b: torch.nn.functional.silu(a, inplace=True),
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


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", LISTS)
def test_tensor_lists_match_the_cpu_and_skip_the_redirect(name, dtype):
    a, b, _, result, _ = run_without_the_redirect(LISTS[name], dtype)
    same(result, LISTS[name](a, b))


def test_cat_of_mixed_dtypes_takes_the_redirect_and_promotes_as_the_cpu():
    a, b = torch.randn(3, 4), torch.arange(8).reshape(2, 4)
    an, bn, result = a.npu(), b.npu(), []
    assert redirected(lambda: result.append(torch.cat([an, bn]))) == 1
    same(result[0], torch.cat([a, b]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", FULL_PRECISION)
def test_matmuls_and_reductions_in_full_precision_match_the_cpu(name, dtype):
    a, b, _, result, _ = run_without_the_redirect(FULL_PRECISION[name], dtype)
    same(result, FULL_PRECISION[name](a, b))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", LOSSES)
def test_softmax_and_loss_match_the_cpu(name, dtype):
    indices_on(torch.device(NPU, 0))  # made before the calls counted
    a, b, _, result, _ = run_without_the_redirect(LOSSES[name], dtype)
    expected = LOSSES[name](a, b)
    for got, want in zip(result, expected) if isinstance(expected, tuple) else [(result, expected)]:
        same(got, want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ON_DEVICE)
def test_new_tensors_and_copies_on_the_device_match_the_cpu(name, dtype):
    a, b, _, result, _ = run_without_the_redirect(ON_DEVICE[name], dtype)
    expected = ON_DEVICE[name](a, b)
    if name == "empty_like's geometry":
        assert result.stride() == expected.stride()
    same(result, expected)


# Calls for which the CPU's code takes another way than its kernel on the npu tensors would.
REDIRECTED = {
    "log_softmax of a transposed tensor": lambda a: a.t().log_softmax(1),
    "softmax of a transposed tensor": lambda a: a.t().softmax(1),
    "layer_norm of a transposed tensor": lambda a: torch.nn.functional.layer_norm(a.t(), (7,)),
    "nll_loss with a strided target": lambda a: torch.nn.functional.nll_loss(a, class_indices(a, strided=True)),
    "float to half (FBGEMM on the CPU)": lambda a: a.half(),
    "to another device": lambda a: a.to("cpu"),
    "ones_like on another device": lambda a: torch.ones_like(a, device="cpu"),
    "complex into real": lambda a: a.copy_(a.to(torch.complex64)),
}


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("name", REDIRECTED)
def test_calls_the_cpu_runs_another_way_take_the_redirect(name):
    indices_on(torch.device(NPU, 0))  # made before the calls counted
    a = torch.randn(7, 33, generator=torch.Generator().manual_seed(2))
    an = a.npu()
    result = []
    assert redirected(lambda: result.append(REDIRECTED[name](an))) == 1
    expected = REDIRECTED[name](a)
    assert result[0].dtype == expected.dtype and result[0].stride() == expected.stride()
    torch.testing.assert_close(result[0].cpu(), expected, rtol=0, atol=0)


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
        pytest.param(
            lambda d: torch.nn.functional.nll_loss(torch.randn(2, 3, device=d), torch.tensor([0, 5], device=d)),
            "Target 5 is out of bounds.",
            id="nll_loss target out of bounds",
        ),
        pytest.param(
            lambda d: torch.addmm(torch.ones(2, device=d), torch.ones(2, 3, device=d), torch.ones(4, 2, device=d)),
            "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)",
            id="addmm shapes",
        ),
        pytest.param(
            lambda d: torch.ones(1, device=d).expand(3).copy_(torch.ones(3, device=d)),
            "unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.",
            id="copy_ into overlapping memory",
        ),
        pytest.param(
            lambda d: torch.ones(2, 3, device=d).log_softmax(2),
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
            id="log_softmax dim",
        ),
        pytest.param(lambda d: storage_resized_away(d) * 2, FREED, id="storage resized to nothing"),
        pytest.param(lambda d: torch.ones(4, device=d).copy_(storage_resized_away(d)), FREED, id="copy_ from freed"),
        pytest.param(
            lambda d: torch.ones(4, device=d).add_(storage_resized_away(d)), FREED, id="in-place, freed other"
        ),
    ],
)
def test_refused_calls_raise_the_redirects_error(case, message):
    with pytest.raises((RuntimeError, NotImplementedError, IndexError)) as direct:
        case(NPU)
    with observed(), pytest.raises(direct.type) as boxed:
        case(NPU)
    assert str(direct.value).splitlines()[0] == str(boxed.value).splitlines()[0] == message


def test_a_tensor_on_the_cpu_beside_an_npu_tensor_raises_torch_npus_device_error():
    # add is `device_check: NoCheck` in native_functions.yaml: torch_npu's kernel refuses the CPU tensor itself
    for call in (
        lambda: torch.ones(3, device=NPU) + torch.ones(3),
        lambda: torch.add(torch.rand(2), torch.rand(2).npu()),
    ):
        with pytest.raises(RuntimeError) as error:
            call()
        assert str(error.value).splitlines()[0] == (
            "Expected all tensors to be on the same device. Expected NPU tensor, please check whether the input "
            "tensor device is correct."
        )
        assert "ERR01002 OPS invalid type" in str(error.value)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: a * 2, id="mul"),
        pytest.param(lambda a: a.to(torch.bfloat16), id="to bfloat16"),
        pytest.param(lambda a: torch.ones_like(a), id="ones_like"),
        pytest.param(lambda a: a.view(32, 32).log_softmax(1), id="log_softmax"),
    ],
)
def test_results_are_counted_in_the_npu_pool_as_the_redirects_are(make):
    a = torch.ones(1024, device=NPU)
    before = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    direct = make(a)
    by_direct = torch.npu.memory_allocated() - before
    direct_peak = torch.npu.max_memory_allocated()
    del direct
    torch.npu.reset_peak_memory_stats()
    with observed():
        redirected_result = make(a)
    by_redirect = torch.npu.memory_allocated() - before
    assert by_direct == by_redirect >= 2048
    assert direct_peak == torch.npu.max_memory_allocated()
    del redirected_result
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
    assert redirected(lambda: an.contiguous() @ bn) == 0  # a copy first, then both run on the npu tensors
