"""The _foreach_ operators on npu tensor lists (typed kernels for those optimizers, gradient clipping and
zero_grad call) give the CPU's results bit for bit, in place through the lists and as new npu tensors."""

import pytest
import torch

SHAPES = [(16, 8), (16,), (3, 4, 5), (1,)]


def _lists(device, count=3, offset=0.0):
    torch.manual_seed(0)
    return [[torch.rand(s) + offset for s in SHAPES] for _ in range(count)]


CASES = {
    "add_.Scalar": lambda a, b, c: torch._foreach_add_(a, 0.25),
    "add_.List": lambda a, b, c: torch._foreach_add_(a, b, alpha=-0.5),
    "add_.Tensor": lambda a, b, c: torch._foreach_add_(a, torch.tensor(1.5), alpha=2),
    "mul_.Scalar": lambda a, b, c: torch._foreach_mul_(a, 0.999),
    "mul_.Tensor": lambda a, b, c: torch._foreach_mul_(a, torch.tensor(0.5)),
    "div_.ScalarList": lambda a, b, c: torch._foreach_div_(a, [0.5, 2.0, 3.0, 7.0]),
    "lerp_.Scalar": lambda a, b, c: torch._foreach_lerp_(a, b, 0.1),
    "addcmul_.Scalar": lambda a, b, c: torch._foreach_addcmul_(a, b, c, 0.001),
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
