"""The _foreach_ operators on npu tensor lists (those optimizers, gradient clipping and zero_grad call) give the
CPU's results bit for bit, in place through the lists and as new npu tensors; lists of one shape per position
run on the npu tensors themselves, the others through the redirect."""

import pytest
import torch

import torch_npu

SHAPES = [(16, 8), (16,), (3, 4, 5), (1,)]


def _lists(device, count=3, offset=0.0):
    torch.manual_seed(0)
    return [[torch.rand(s) + offset for s in SHAPES] for _ in range(count)]


CASES = {
    "add_.Scalar": lambda a, b, c: torch._foreach_add_(a, 0.25),
    "add_.List": lambda a, b, c: torch._foreach_add_(a, b, alpha=-0.5),
    "add_.Tensor": lambda a, b, c: torch._foreach_add_(a, torch.tensor(1.5), alpha=2),
    "sub_.Scalar": lambda a, b, c: torch._foreach_sub_(a, 0.75),
    "mul_.Scalar": lambda a, b, c: torch._foreach_mul_(a, 0.999),
    "mul_.Tensor": lambda a, b, c: torch._foreach_mul_(a, torch.tensor(0.5)),
    "div_.Scalar": lambda a, b, c: torch._foreach_div_(a, 3.0),
    "div_.ScalarList": lambda a, b, c: torch._foreach_div_(a, [0.5, 2.0, 3.0, 7.0]),
    "lerp_.Scalar": lambda a, b, c: torch._foreach_lerp_(a, b, 0.1),
    "addcmul_.Scalar": lambda a, b, c: torch._foreach_addcmul_(a, b, c, 0.001),
    "addcdiv_.Scalar": lambda a, b, c: torch._foreach_addcdiv_(a, b, c, value=-0.01),
    "addcdiv_.ScalarList": lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [-0.1, -0.2, -0.3, -0.4]),
    "sqrt": lambda a, b, c: torch._foreach_sqrt(c),
    "norm.Scalar": lambda a, b, c: torch._foreach_norm(b, 2),
    "zero_": lambda a, b, c: torch._foreach_zero_(a),
}


@pytest.mark.parametrize("name", list(CASES))
def test_foreach_operator_matches_the_cpu(name):
    cpu = _lists("cpu", offset=0.5)
    npu = [[t.npu() for t in lst] for lst in cpu]
    got, want = CASES[name](*npu), CASES[name](*cpu)
    if want is None:  # in place: the first list changed
        got, want = npu[0], cpu[0]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == "npu" and g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.cpu(), w)


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True),
        lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, foreach=True),
    ],
    ids=["Adam", "AdamW", "SGD-momentum"],
)
def test_foreach_optimizer_steps_and_clipping_match_the_cpu(make):
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).to(device)
        opt = make(model.parameters())
        x, y = torch.randn(4, 8).to(device), torch.randn(4, 2).to(device)
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    for got, want in zip(train("npu"), train("cpu")):
        assert torch.equal(got, want)


_REDIRECTED = {"norm.Scalar", "mul_.Scalar"}  # the redirect's typed kernels (see ForeachKernels.cpp)


@pytest.mark.parametrize("name", sorted(set(CASES) - _REDIRECTED))
def test_lists_of_one_shape_per_position_run_on_the_npu_tensors(name):
    npu = [[t.npu() for t in lst] for lst in _lists("cpu", offset=0.5)]
    before = torch_npu._C._redirect_calls()
    CASES[name](*npu)
    assert torch_npu._C._redirect_calls() == before


def test_lists_whose_shapes_differ_take_the_redirect_and_still_match_the_cpu():
    a, b = ([torch.rand(16, 8), torch.rand(16)] for _ in range(2))
    b[1] = torch.rand(1)  # broadcast into a[1]
    na, nb = [t.npu() for t in a], [t.npu() for t in b]
    before = torch_npu._C._redirect_calls()
    torch._foreach_add_(na, nb, alpha=0.5)
    assert torch_npu._C._redirect_calls() == before + 1
    torch._foreach_add_(a, b, alpha=0.5)
    for got, want in zip(na, a):
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda a, b: torch._foreach_lerp_(a, b, 0.5), NotImplementedError, '"lerp_kernel_scalar" not implemented'),
        (lambda a, b: torch._foreach_div_(a, 2.0), RuntimeError, "result type Float can't be cast"),
    ],
)
def test_integer_lists_raise_the_cpus_error_and_keep_their_values(call, error, message):
    npu = [[torch.arange(4).npu(), torch.arange(3).npu()] for _ in range(2)]
    with pytest.raises(error, match=message):
        call(*npu)
    assert [t.cpu().tolist() for t in npu[0]] == [[0, 1, 2, 3], [0, 1, 2]]
