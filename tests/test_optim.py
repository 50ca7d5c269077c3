"""torch_npu.optim: fused optimizers give exactly the results of the matching torch optimizers, and
really work on combined buffers."""

import copy
import math

import pytest
import torch
import torch.nn as nn
from error_cases import (
    raises_exactly,
    raises_operator_error,
    t,
)

import torch_npu
from torch_npu.optim import (
    NpuFusedAdadelta,
    NpuFusedAdam,
    NpuFusedAdamP,
    NpuFusedAdamW,
    NpuFusedBertAdam,
    NpuFusedLamb,
    NpuFusedRMSprop,
    NpuFusedRMSpropTF,
    NpuFusedSGD,
)
from torch_npu.utils import is_combined_tensor_valid


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 3)).npu()


def _train(model, opt, steps=5, seed=1):
    torch.manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(4, 7, device="npu")
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()


PAIRS = [
    (NpuFusedSGD, dict(lr=0.1), torch.optim.SGD, dict(lr=0.1)),
    (
        NpuFusedSGD,
        dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
        torch.optim.SGD,
        dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    ),
    (
        NpuFusedSGD,
        dict(lr=0.1, momentum=0.9, nesterov=True),
        torch.optim.SGD,
        dict(lr=0.1, momentum=0.9, nesterov=True),
    ),
    (NpuFusedAdam, dict(lr=0.01), torch.optim.Adam, dict(lr=0.01)),
    (
        NpuFusedAdam,
        dict(lr=0.01, weight_decay=0.1, amsgrad=True),
        torch.optim.Adam,
        dict(lr=0.01, weight_decay=0.1, amsgrad=True),
    ),
    (NpuFusedAdamW, dict(lr=0.01), torch.optim.AdamW, dict(lr=0.01)),
    (NpuFusedAdadelta, dict(weight_decay=0.1), torch.optim.Adadelta, dict(weight_decay=0.1)),
    (NpuFusedRMSprop, dict(lr=0.01), torch.optim.RMSprop, dict(lr=0.01)),
    (
        NpuFusedRMSprop,
        dict(momentum=0.5, centered=True, weight_decay=0.1),
        torch.optim.RMSprop,
        dict(momentum=0.5, centered=True, weight_decay=0.1),
    ),
]


@pytest.mark.parametrize("fused,kw,ref,ref_kw", PAIRS, ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("foreach", [False, None])
def test_fused_optimizer_equals_torch_optimizer_bitwise(fused, kw, ref, ref_kw, foreach):
    a, b = _model(), _model()
    _train(a, fused(a.parameters(), **kw))
    _train(b, ref(b.parameters(), foreach=foreach, **ref_kw))
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.cpu(), q.cpu())


def test_parameters_become_views_of_one_combined_buffer():
    model = _model()
    opt = NpuFusedAdam(model.parameters(), lr=0.01)
    _train(model, opt, steps=1)
    (combined,) = opt.get_combined_params()
    params = list(model.parameters())
    assert combined.numel() == sum(p.numel() for p in params)
    assert is_combined_tensor_valid(combined, params)
    (grads,) = opt.get_combined_grads()
    assert is_combined_tensor_valid(grads, [p.grad for p in params])
    combined.zero_()
    assert all(float(p.abs().sum()) == 0.0 for p in params)


def test_state_dict_round_trip_and_continued_training_match_torch():
    a, b = _model(), _model()
    oa = NpuFusedAdam(a.parameters(), lr=0.01)
    ob = torch.optim.Adam(b.parameters(), lr=0.01)
    _train(a, oa, steps=2)
    _train(b, ob, steps=2)
    state = copy.deepcopy(oa.state_dict())
    assert set(state["state"][0]) >= {"exp_avg", "exp_avg_sq", "step"}
    assert torch.equal(state["state"][0]["exp_avg"].cpu(), ob.state_dict()["state"][0]["exp_avg"].cpu())
    _train(a, oa, steps=2, seed=7)
    _train(b, ob, steps=2, seed=7)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.cpu(), q.cpu())


def test_parameters_without_gradients_are_left_alone_like_torch():
    a, b = _model(), _model()
    oa = NpuFusedAdam(a.parameters(), lr=0.01)
    ob = torch.optim.Adam(b.parameters(), lr=0.01)
    for model, opt in ((a, oa), (b, ob)):
        torch.manual_seed(3)
        for step in range(3):
            opt.zero_grad(set_to_none=True)
            x = torch.randn(4, 7, device="npu")
            out = model[0](x) if step == 1 else model(x)  # step 1 leaves the second layer without grads
            out.pow(2).sum().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.cpu(), q.cpu())


def test_clip_grad_norm_fused_matches_torch():
    a, b = _model(), _model()
    oa = NpuFusedSGD(a.parameters(), lr=0.1)
    x = torch.randn(4, 7, device="npu")
    for m in (a, b):
        m(x).pow(2).sum().backward()
    oa.get_combined_grads()
    total = oa.clip_grad_norm_fused_(0.5)
    expected = torch.nn.utils.clip_grad_norm_(b.parameters(), 0.5)
    assert torch.allclose(total.cpu(), expected.cpu())
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p.grad.cpu(), q.grad.cpu(), rtol=1e-6, atol=1e-7)


def test_zero_grad_keeps_combined_gradients():
    model = _model()
    opt = NpuFusedSGD(model.parameters(), lr=0.1)
    _train(model, opt, steps=1)
    (grads,) = opt.get_combined_grads()
    opt.zero_grad()
    assert float(grads.abs().sum()) == 0.0
    assert is_combined_tensor_valid(grads, [p.grad for p in model.parameters()])


def _lamb_reference(p, g, m, v, lr, b1, b2, eps, wd):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (v.sqrt() + eps) + wd * p
    wn, un = p.norm().clamp(0, 10), u.norm()
    trust = 1.0 if wn == 0 or un == 0 else float(wn / un)
    return p - lr * trust * u, m, v


def test_lamb_follows_its_formula():
    torch.manual_seed(0)
    p0 = torch.randn(6, 4)
    grads = [torch.randn(6, 4) for _ in range(3)]
    param = nn.Parameter(p0.clone().npu())
    opt = NpuFusedLamb([param], lr=0.05, weight_decay=0.01)
    ref, m, v = p0.double(), torch.zeros_like(p0).double(), torch.zeros_like(p0).double()
    for g in grads:
        param.grad = g.npu()
        opt.step()
        ref, m, v = _lamb_reference(ref, g.double(), m, v, 0.05, 0.9, 0.999, 1e-6, 0.01)
    assert torch.allclose(param.detach().cpu().double(), ref, rtol=1e-5, atol=1e-6)


def test_lamb_adam_mode_and_global_norm():
    torch.manual_seed(0)
    param = nn.Parameter(torch.randn(5, device="npu"))
    param.grad = torch.full((5,), 10.0, device="npu")
    before = param.detach().clone()
    NpuFusedLamb([param], lr=0.1, adam=True, use_global_grad_norm=True).step()
    # global norm sqrt(500) > 1 scales the grad to unit norm; first Adam-like step moves by lr*m/sqrt(v)
    g = 10.0 / math.sqrt(500.0)
    step = 0.1 * (0.1 * g) / (math.sqrt(0.001 * g * g) + 1e-6)
    assert torch.allclose((before - param.detach()).cpu(), torch.full((5,), step), rtol=1e-5)


def test_adamp_projects_scale_invariant_weights():
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(4, 8, device="npu"))
    # gradient orthogonal to the weight rows: AdamP removes the radial component of the update
    g = torch.randn(4, 8, device="npu")
    g = g - (g * w.detach()).sum(1, keepdim=True) / w.detach().pow(2).sum(1, keepdim=True) * w.detach()
    w.grad = g
    norms_before = w.detach().norm(dim=1)
    NpuFusedAdamP([w], lr=1e-3, weight_decay=0.0).step()
    assert torch.allclose(w.detach().norm(dim=1).cpu(), norms_before.cpu(), rtol=1e-4)


def test_bert_adam_warmup_linear_schedule():
    p = nn.Parameter(torch.zeros(3, device="npu"))
    opt = NpuFusedBertAdam([p], lr=1.0, warmup=0.5, t_total=4, max_grad_norm=-1, weight_decay=0.0)
    moves = []
    for _ in range(3):
        p.grad = torch.ones(3, device="npu")
        before = p.detach().clone()
        opt.step()
        moves.append(float((before - p.detach())[0]))
    # update m/(sqrt(v)+e) with no bias correction; lr schedule x/w for x < w = 0.5 then (x-1)/(w-1)
    updates = []
    m = v = 0.0
    for k in range(3):
        m, v = 0.9 * m + 0.1, 0.999 * v + 0.001
        x = k / 4
        sched = x / 0.5 if x < 0.5 else max((x - 1) / (0.5 - 1), 0.0)
        updates.append(sched * m / (math.sqrt(v) + 1e-6))
    assert moves == pytest.approx(updates, rel=1e-5)
    with pytest.raises(ValueError):
        NpuFusedBertAdam([p], lr=0.1, schedule="warmup_quadratic")


def test_rmsprop_tf_follows_tensorflow_semantics():
    p0 = torch.tensor([1.0, -2.0, 3.0])
    g = torch.tensor([0.5, 0.5, -1.0])
    p = nn.Parameter(p0.clone().npu())
    p.grad = g.npu()
    NpuFusedRMSpropTF([p], lr=0.1, alpha=0.9, eps=1e-10).step()
    square_avg = 1.0 + (g * g - 1.0) * 0.1  # starts at ones
    expected = p0 - 0.1 * g / (square_avg + 1e-10).sqrt()
    assert torch.allclose(p.detach().cpu(), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "cls,kw",
    [
        (NpuFusedAdam, dict(lr=-1)),
        (NpuFusedSGD, dict(lr=0.1, momentum=-1)),
        (NpuFusedAdadelta, dict(rho=2.0)),
        (NpuFusedRMSprop, dict(alpha=-1)),
        (NpuFusedLamb, dict(betas=(1.0, 0.9))),
    ],
)
def test_invalid_hyperparameters(cls, kw):
    with pytest.raises(ValueError):
        cls([nn.Parameter(torch.ones(1, device="npu"))], **kw)


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
OPTIM_ERRORS = [
    (
        lambda: torch_npu.optim.NpuFusedAdadelta([torch.nn.Parameter(t(1))], rho=2.0),
        ValueError,
        "Invalid rho value: 2.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedAdam([torch.nn.Parameter(t(1))], betas=(0.9, 1.0)),
        ValueError,
        "Invalid beta parameter at index 1: 1.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedSGD([torch.nn.Parameter(t(1))], lr=0.1, nesterov=True),
        ValueError,
        "Nesterov momentum requires a momentum and zero dampening",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=-1.0),
        ValueError,
        "Invalid learning rate: -1.0 - should be >= 0.0",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, schedule="cubic"),
        ValueError,
        "Invalid schedule parameter: cubic",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, warmup=1.5),
        ValueError,
        "Invalid warmup: 1.5 - should be in [0.0, 1.0[ or -1",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, b1=1.0),
        ValueError,
        "Invalid b1 parameter: 1.0 - should be in [0.0, 1.0[",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, b2=-0.1),
        ValueError,
        "Invalid b2 parameter: -0.1 - should be in [0.0, 1.0[",
    ),
    (
        lambda: torch_npu.optim.NpuFusedBertAdam([torch.nn.Parameter(t(1))], lr=0.1, e=-1.0),
        ValueError,
        "Invalid epsilon value: -1.0 - should be >= 0.0",
    ),
]


@pytest.mark.parametrize("call,kind,message", OPTIM_ERRORS, ids=[c[2][:48] for c in OPTIM_ERRORS])
def test_optim_error_message(call, kind, message):
    raises_exactly(call, kind, message)


# Invalid arguments: the exact first line, and torch_npu's ERR01001 (OPS invalid parameter) code
OPTIMIZER_OPERATOR_ERRORS = [
    (
        lambda: torch_npu.npu_apply_adam_w(0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, t(3), None, True, False),
        "if amsgrad is true, max_gard_norm input must be entered",  # op-plugin's text, its typo included
    ),
    (
        lambda: torch_npu.npu_apply_adam_w(
            0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, t(3), None, False, False, var=t(2), m=t(3), v=t(3)
        ),
        "npu_apply_adam_w: var, m, v and grad must have one shape, got (2,), (3,), (3,), (3,)",
    ),
]


@pytest.mark.parametrize("call,message", OPTIMIZER_OPERATOR_ERRORS, ids=[c[1][:56] for c in OPTIMIZER_OPERATOR_ERRORS])
def test_optimizer_operator_error_message(call, message):
    raises_operator_error(call, message)
